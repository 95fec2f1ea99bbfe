/**
 * The waiting room's own paths (src/core/own-paths.ts), alone: assets, status, the heartbeat
 * script's session calls, health, and the hand-off to the admin routes.
 */
import { describe, expect, it } from 'vitest';
import { admissionPolicy } from '../src/core/context';
import { ownPath } from '../src/core/own-paths';
import { visit } from '../src/core/visit';
import { contextRig, cookieValue, newTrace, siteRequest } from './support/context';

describe('ownPath', () => {
  it('serves health and the assets, and 404s a path that is not ours, without a store call', async () => {
    const r = contextRig();
    const health = await ownPath(r.ctx, siteRequest('/__wr/health'), 'health', newTrace());
    expect(await health.json()).toEqual({ ok: true });
    const css = await ownPath(r.ctx, siteRequest('/__wr/assets/style.css'), 'assets/style.css', newTrace());
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
    expect(css.headers.get('cache-control')).toBe('public, max-age=300');
    expect((await ownPath(r.ctx, siteRequest('/__wr/assets/nope.js'), 'assets/nope.js', newTrace())).status).toBe(404);
    const trace = newTrace();
    const missing = await ownPath(r.ctx, siteRequest('/__wr/nothing'), 'nothing', trace);
    expect(missing.status).toBe(404);
    expect(trace.decision).toBe('own');
    expect(r.store.calls).toBe(0);
  });

  it('hands the admin paths to the admin routes, which ask for credentials', async () => {
    const r = contextRig();
    expect((await ownPath(r.ctx, siteRequest('/__wr/admin/live'), 'admin/live', newTrace())).status).toBe(401);
  });

  it('status: "none" without a ticket (and takes none), the place in line with one', async () => {
    const r = contextRig();
    const none = await ownPath(r.ctx, siteRequest('/__wr/status'), 'status', newTrace());
    expect(await none.json()).toMatchObject({ state: 'none' });
    expect(r.store.calls).toBe(0);

    await visit(r.ctx, siteRequest(), newTrace(), true);
    const mine = await visit(r.ctx, siteRequest(), newTrace(), true);
    if (mine.kind !== 'waiting') throw new Error(`expected waiting, got ${mine.kind}`);
    const trace = newTrace();
    const status = await ownPath(r.ctx, siteRequest('/__wr/status', [cookieValue(mine.cookie)]), 'status', trace);
    expect(await status.json()).toMatchObject({ state: 'waiting', ticket: 2, place: 2, ahead: 1 });
    expect(trace.decision).toBe('status_waiting');
    const post = new Request('https://shop.example/__wr/status', { method: 'POST' });
    expect((await ownPath(r.ctx, post, 'status', newTrace())).status).toBe(405);
  });

  it('the session calls: POST only; leave gives up a held slot, heartbeat keeps it', async () => {
    const r = contextRig({ max_active: '1', activity_refresh_seconds: '5' });
    const admitted = await visit(r.ctx, siteRequest(), newTrace(), true);
    if (admitted.kind !== 'admitted') throw new Error(`expected admitted, got ${admitted.kind}`);
    const cookie = `waiting_room=${cookieValue(admitted.cookie)}`;
    const post = (path: string) => new Request(`https://shop.example/__wr/${path}`, { method: 'POST', headers: { cookie } });
    const policy = admissionPolicy(r.config);

    expect((await ownPath(r.ctx, siteRequest('/__wr/heartbeat'), 'heartbeat', newTrace())).status).toBe(405);
    r.clock.advance(10_000);
    const beat = await ownPath(r.ctx, post('heartbeat'), 'heartbeat', newTrace());
    expect(await beat.json()).toEqual({ state: 'active', refreshed: true });
    expect((await r.inner.stats('default', r.clock.now(), policy)).active).toBe(1);

    const left = await ownPath(r.ctx, post('leave'), 'leave', newTrace());
    expect(left.status).toBe(204);
    r.clock.advance((r.config.leaveGraceSeconds + 1) * 1000);
    expect((await r.inner.stats('default', r.clock.now(), policy)).active).toBe(0);
  });
});
