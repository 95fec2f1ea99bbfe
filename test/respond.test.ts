/**
 * The responses (src/core/respond.ts), alone: a `Visit` made into the view a held visitor is
 * shown, that view as JSON for programs, and the pass-through to the origin.
 */
import { describe, expect, it } from 'vitest';
import type { QueueState } from '../src/core/ports';
import { holdingJson, holdView, overView, pass, wantsJson } from '../src/core/respond';
import { contextRig, newTrace, siteRequest } from './support/context';

/** A queue state with only the figures a view reads set. */
function state(figures: Partial<QueueState> = {}): QueueState {
  const base: QueueState = { tail: 0, cursor: 0, paused: false, maxActive: 0, maxNewPerMinute: 0, active: 0, admittedLastMinute: 0, admittedLast5Minutes: 0, eventSize: 0, eventSeed: 0, waiting: 0, epoch: 0, generation: 1 };
  return { ...base, ...figures };
}

describe('holdView', () => {
  const r = contextRig();
  const now = r.clock.now();

  it('FIFO: the place is one more than those ahead; the draw shows how many are in it instead', () => {
    const inLine = holdView(r.ctx, { kind: 'waiting', ticket: 9, ahead: 3, front: false, draw: false, first: 6, state: state(), cookie: 'c' }, now);
    expect(inLine).toMatchObject({ state: 'waiting', ticket: 9, place: 4, ahead: 3, first: 6, inDraw: null });
    const inDraw = holdView(r.ctx, { kind: 'waiting', ticket: 9, ahead: 3, front: false, draw: true, first: 1, state: state(), cookie: 'c' }, now);
    expect(inDraw).toMatchObject({ state: 'waiting', place: null, ahead: null, first: null, inDraw: 4 });
  });

  it('paused or at the front: no estimate', () => {
    const paused = holdView(r.ctx, { kind: 'waiting', ticket: 2, ahead: 1, front: false, draw: false, first: 2, state: state({ paused: true }), cookie: 'c' }, now);
    expect(paused).toMatchObject({ paused: true, estimate: null });
    const front = holdView(r.ctx, { kind: 'waiting', ticket: 2, ahead: 0, front: true, draw: false, first: 1, state: state(), cookie: 'c' }, now);
    expect(front).toMatchObject({ front: true, estimate: null });
  });

  it('a store that did not answer: checking, with the ticket when one is known', () => {
    expect(holdView(r.ctx, { kind: 'unavailable', ticket: 5, cookie: undefined }, now)).toMatchObject({ state: 'checking', ticket: 5, place: null });
    expect(holdView(r.ctx, undefined, now)).toMatchObject({ state: 'checking', ticket: null });
  });
});

describe('holdingJson', () => {
  it('answers with the queue\'s hold status and Retry-After, and the cookie; "over" is final: 410, no Retry-After', async () => {
    const r = contextRig({ hold_status: '429' });
    const now = r.clock.now();
    const view = holdView(r.ctx, { kind: 'waiting', ticket: 4, ahead: 2, front: false, draw: false, first: 3, state: state(), cookie: 'c' }, now);
    const held = holdingJson(r.ctx, view, 'waiting_room=abc; Path=/', 'en');
    expect(held.status).toBe(429);
    expect(held.headers.get('retry-after')).toBe(String(r.config.refreshSeconds));
    expect(held.headers.get('set-cookie')).toContain('waiting_room=abc');
    expect(await held.json()).toMatchObject({ status: 'waiting', queue: 'default', ticket: 4, place: 3, ahead: 2 });

    const over = holdingJson(r.ctx, overView(r.ctx, now), undefined, 'en');
    expect(over.status).toBe(410);
    expect(over.headers.has('retry-after')).toBe(false);
    expect(await over.json()).toMatchObject({ status: 'over', message: 'This event has ended.' });
  });
});

describe('wantsJson', () => {
  it('JSON for a configured path, or a client that accepts JSON but not HTML', () => {
    const r = contextRig({ json_paths: '/api/*' });
    expect(wantsJson(r.ctx, siteRequest('/api/cart'), '/api/cart')).toBe(true);
    expect(wantsJson(r.ctx, siteRequest('/cart', [], { accept: 'application/json' }), '/cart')).toBe(true);
    expect(wantsJson(r.ctx, siteRequest('/cart', [], { accept: 'application/problem+json' }), '/cart')).toBe(true);
    expect(wantsJson(r.ctx, siteRequest('/cart', [], { accept: 'text/html, application/json' }), '/cart')).toBe(false);
    expect(wantsJson(r.ctx, siteRequest('/cart'), '/cart')).toBe(false);
  });
});

describe('pass', () => {
  it("returns the origin's response itself when there is nothing to add", async () => {
    const r = contextRig();
    const response = await pass(r.ctx, siteRequest('/shop'), undefined, newTrace());
    expect(await response.text()).toBe('origin saw /shop');
    expect(response.headers.get('x-origin')).toBe('yes');
    expect(response.headers.has('set-cookie')).toBe(false);
  });

  it("adds a renewed cookie; when the origin ends the session, clears it, frees the slot and drops the origin's signal", async () => {
    const r = contextRig();
    const renewed = await pass(r.ctx, siteRequest('/shop'), { kind: 'access', ticket: 3, slot: false, cookie: 'waiting_room=renewed', grant: { via: 'queue' } }, newTrace());
    expect(renewed.headers.get('set-cookie')).toBe('waiting_room=renewed');

    r.origin.forward = async () => new Response('bye', { status: 200, headers: { [r.config.endSessionHeader]: '1' } });
    const left: number[] = [];
    const leave = r.store.leave;
    r.store.leave = (queue, ticket, ...rest) => {
      left.push(ticket);
      return leave(queue, ticket, ...rest);
    };
    const trace = newTrace();
    const ended = await pass(r.ctx, siteRequest('/logout'), { kind: 'access', ticket: 3, slot: true, cookie: undefined, grant: { via: 'queue' } }, trace);
    expect(ended.headers.get('set-cookie')).toMatch(/^waiting_room=;.*Max-Age=0/i);
    expect(ended.headers.has(r.config.endSessionHeader)).toBe(false);
    expect(left).toEqual([3]);
    expect(trace.reason).toBe('origin_ended_session');
  });

  it('an origin that fails is a 502 naming no internals', async () => {
    const r = contextRig();
    r.origin.forward = async () => {
      throw new Error('connect ECONNREFUSED 10.0.0.1:443');
    };
    const trace = newTrace();
    const response = await pass(r.ctx, siteRequest('/shop'), undefined, trace);
    expect(response.status).toBe(502);
    expect(await response.text()).not.toContain('10.0.0.1');
    expect(trace.reason).toContain('ECONNREFUSED');
  });

  it('an origin that fails: a browser gets a page in its language that tries again, a program JSON; both say when', async () => {
    const r = contextRig();
    r.origin.forward = async () => {
      throw new Error('connect ECONNREFUSED 10.0.0.1:443');
    };
    const page = await pass(r.ctx, new Request('https://shop.example/shop', { headers: { accept: 'text/html', 'accept-language': 'de-DE' } }), undefined, newTrace());
    expect(page.status).toBe(502);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('retry-after')).toBe('10');
    expect(page.headers.get('refresh')).toBe('10');
    const html = await page.text();
    expect(html).toContain('Die Website antwortet nicht');
    expect(html).toContain('data-state="unreachable"');
    expect(html).not.toContain('10.0.0.1');
    const json = await pass(r.ctx, new Request('https://shop.example/shop', { headers: { accept: 'application/json' } }), undefined, newTrace());
    expect(json.status).toBe(502);
    expect(json.headers.get('retry-after')).toBe('10');
    expect(await json.json()).toEqual({ error: 'the site is not answering; please try again shortly' });
  });
});
