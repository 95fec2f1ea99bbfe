/**
 * The visit decision alone (src/core/visit.ts): a cookie in, a `Visit` out, on the in-memory store
 * with a manual clock, without a handler around it.
 */
import { describe, expect, it } from 'vitest';
import { admissionPolicy } from '../src/core/context';
import { payloadOf } from './support/fixtures';
import { readToken, visit } from '../src/core/visit';
import { contextRig, cookieValue, newTrace, siteRequest } from './support/context';

describe('visit', () => {
  it('without a cookie: no ticket and no store call when none is to be taken, else a ticket in line', async () => {
    const r = contextRig();
    expect(await visit(r.ctx, siteRequest(), newTrace(), false)).toEqual({ kind: 'none' });
    expect(r.store.calls).toBe(0);

    const first = await visit(r.ctx, siteRequest(), newTrace(), true);
    const trace = newTrace();
    const second = await visit(r.ctx, siteRequest(), trace, true);
    expect(first).toMatchObject({ kind: 'waiting', ticket: 1, ahead: 0, front: false });
    expect(second).toMatchObject({ kind: 'waiting', ticket: 2, ahead: 1, first: 2 });
    expect(trace).toMatchObject({ ticket: 2, cursor: 0, tail: 2 });
    expect(r.store.calls).toBe(2);
  });

  it("a waiting cookie keeps its ticket, and is admitted once the store calls it", async () => {
    const r = contextRig();
    const joined = await visit(r.ctx, siteRequest(), newTrace(), true);
    if (joined.kind !== 'waiting') throw new Error(`expected waiting, got ${joined.kind}`);
    const waiting = cookieValue(joined.cookie);
    expect(payloadOf(waiting)).toMatchObject({ k: 'w', t: 1 });

    const again = await visit(r.ctx, siteRequest('/', [waiting]), newTrace(), true);
    expect(again).toMatchObject({ kind: 'waiting', ticket: 1, ahead: 0 });

    await r.inner.admit('default', 1, r.clock.now(), admissionPolicy(r.config));
    const called = await visit(r.ctx, siteRequest('/', [waiting]), newTrace(), true);
    expect(called).toMatchObject({ kind: 'admitted', ticket: 1, slot: false });
    if (called.kind !== 'admitted') return;
    const access = cookieValue(called.cookie);
    expect(payloadOf(access)).toMatchObject({ k: 'a', t: 1 });

    // An access token passes without asking the store.
    const calls = r.store.calls;
    expect(await visit(r.ctx, siteRequest('/', [access]), newTrace(), true)).toMatchObject({ kind: 'access', ticket: 1 });
    expect(r.store.calls).toBe(calls);
  });

  it('a store that fails keeps the visitor\'s ticket alive and says why on the trace', async () => {
    const r = contextRig();
    const joined = await visit(r.ctx, siteRequest(), newTrace(), true);
    if (joined.kind !== 'waiting') throw new Error(`expected waiting, got ${joined.kind}`);
    r.store.mode = 'error';
    const trace = newTrace();
    const v = await visit(r.ctx, siteRequest('/', [cookieValue(joined.cookie)]), trace, true);
    expect(v).toMatchObject({ kind: 'unavailable', ticket: 1 });
    expect(trace.storeError).toContain('store is down');
  });

  it('past session_max_seconds an access token is no longer honoured, though the token itself is still valid', async () => {
    // The token is issued under no maximum (it lives session_seconds, 600 s); the queue's maximum
    // is then lowered to 120 s, as an operator may do.
    const issuer = contextRig();
    const r = contextRig({ session_seconds: '60', session_max_seconds: '120' });
    const access = cookieValue(await issuer.ctx.issue('a', 7, r.clock.now(), { s: Math.floor(r.clock.now() / 1000) }));
    r.clock.advance(119_000);
    expect(await visit(r.ctx, siteRequest('/', [access]), newTrace(), false)).toMatchObject({ kind: 'access', ticket: 7 });
    r.clock.advance(1_000);
    const trace = newTrace();
    expect(await visit(r.ctx, siteRequest('/', [access]), trace, false)).toEqual({ kind: 'none' });
    expect(trace.reason).toBe('session_max');
  });
});

describe('readToken', () => {
  it('prefers an access token, else the earliest ticket, and names the failure when none is valid', async () => {
    const r = contextRig();
    const now = r.clock.now();
    const w5 = cookieValue(await r.ctx.issue('w', 5, now, {}));
    const w3 = cookieValue(await r.ctx.issue('w', 3, now, {}));
    const a9 = cookieValue(await r.ctx.issue('a', 9, now, {}));
    expect((await readToken(r.ctx, siteRequest('/', [w5, w3]), now, newTrace()))?.t).toBe(3);
    expect(await readToken(r.ctx, siteRequest('/', [w5, a9, w3]), now, newTrace())).toMatchObject({ k: 'a', t: 9 });

    const trace = newTrace();
    expect(await readToken(r.ctx, siteRequest('/', ['not-a-token']), now, trace)).toBeUndefined();
    expect(trace.reason).toMatch(/^token_/);
    // A valid one among broken ones still counts, and then the broken ones are not blamed.
    const mixed = newTrace();
    expect((await readToken(r.ctx, siteRequest('/', ['not-a-token', w5]), now, mixed))?.t).toBe(5);
    expect(mixed.reason).toBeUndefined();
  });
});
