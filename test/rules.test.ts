/**
 * The rules before the queue (src/core/rules.ts), alone: which bypass applies to a request, in
 * which order, and a VIP code that does not work, from plain requests and a context.
 */
import { describe, expect, it } from 'vitest';
import { readPath } from '../src/core/path-canon';
import type { ClientInfo } from '../src/core/ports';
import { BYPASS_QUEUE, bypassRule, useVip } from '../src/core/rules';
import { signToken } from '../src/core/tokens';
import { MAX_COOKIES_CHECKED } from '../src/core/visit';
import { createVipCode, hashVipCode, VIP_PARAM } from '../src/core/vip';
import { contextRig, cookieValue, newTrace } from './support/context';
import { createVip, payloadOf } from './support/fixtures';

const GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';
const SETTINGS = { bypass_ips: '192.0.2.0/24', bypass_cookie: 'wr_bypass', bypass_crawlers: 'on', crawler_ips: '66.249.64.0/19' };

function client(address: string): ClientInfo {
  return { address, pop: undefined };
}

function request(path: string, headers: Record<string, string> = {}): Request {
  return new Request(`https://shop.example${path}`, { headers });
}

describe('bypassRule', () => {
  const r = contextRig(SETTINGS);
  const visitor = client('203.0.113.9');
  const rule = (path: string, client = visitor, headers: Record<string, string> = {}) =>
    bypassRule(r.ctx, request(path, headers), client, readPath(path));

  it('applies each rule on its own, and none to an ordinary request', async () => {
    expect(await rule('/robots.txt')).toBe('bypass_path');
    expect(await rule('/shop', client('192.0.2.44'))).toBe('bypass_ip');
    expect(await rule('/shop', client('66.249.66.1'), { 'user-agent': GOOGLEBOT })).toBe('bypass_crawler');
    expect(await rule('/shop')).toBeUndefined();
  });

  it('checks the path before the address (the order the log line reports)', async () => {
    expect(await rule('/favicon.ico', client('192.0.2.44'))).toBe('bypass_path');
  });

  it('a crawler needs both its user agent and its published addresses', async () => {
    expect(await rule('/shop', visitor, { 'user-agent': GOOGLEBOT })).toBeUndefined();
    expect(await rule('/shop', client('66.249.66.1'), { 'user-agent': 'curl/8' })).toBeUndefined();
  });

  it('a bypass pass counts only when signed by us as a bypass pass and not expired', async () => {
    const iat = Math.floor(r.clock.now() / 1000);
    const pass = await signToken(r.ctx.secrets.keyRing, { q: BYPASS_QUEUE, k: 'b', t: 0, iat, exp: iat + 60 });
    const visitorToken = await signToken(r.ctx.secrets.keyRing, { q: 'default', k: 'a', t: 1, iat, exp: iat + 60 });
    expect(await rule('/shop', visitor, { cookie: `wr_bypass=${pass}` })).toBe('bypass_cookie');
    expect(await rule('/shop', visitor, { cookie: `wr_bypass=${visitorToken}` })).toBeUndefined();
    expect(await rule('/shop', visitor, { cookie: `wr_bypass=${pass.slice(0, -2)}xx` })).toBeUndefined();
    r.clock.advance(61_000);
    expect(await rule('/shop', visitor, { cookie: `wr_bypass=${pass}` })).toBeUndefined();
  });

  it('junk or expired values sent before a bypass pass do not hide it; well-formed forgeries are checked at most MAX_COOKIES_CHECKED times', async () => {
    const iat = Math.floor(r.clock.now() / 1000);
    const pass = await signToken(r.ctx.secrets.keyRing, { q: BYPASS_QUEUE, k: 'b', t: 0, iat, exp: iat + 60 });
    const expired = await signToken(r.ctx.secrets.keyRing, { q: BYPASS_QUEUE, k: 'b', t: 0, iat: iat - 120, exp: iat - 60 });
    const junk = ['x', 'x', 'a.b', 'a.b.c', expired, `${pass}=`, 'y'.repeat(2000)].map((v) => `wr_bypass=${v}`);
    expect(await rule('/shop', visitor, { cookie: [...junk, `wr_bypass=${pass}`].join('; ') })).toBe('bypass_cookie');
    // Signature checks stay bounded: well-formed values with a wrong signature each cost one.
    const [h, p] = pass.split('.');
    const forged = Array.from({ length: MAX_COOKIES_CHECKED }, (_, i) => `wr_bypass=${h}.${p}.${'A'.repeat(42)}${'AEIMQ'[i]}`);
    expect(await rule('/shop', visitor, { cookie: [...forged, `wr_bypass=${pass}`].join('; ') })).toBeUndefined();
  });

  it('with no bypass configured, nothing bypasses', async () => {
    const bare = contextRig({ bypass_paths: '' });
    expect(await bypassRule(bare.ctx, request('/robots.txt', { 'user-agent': GOOGLEBOT }), client('66.249.66.1'), readPath('/robots.txt'))).toBeUndefined();
  });
});

describe('useVip', () => {
  it('a malformed code is refused without a store call', async () => {
    const r = contextRig();
    const trace = newTrace();
    expect(await useVip(r.ctx, request('/?wr_vip=%25%25'), '%%', trace)).toBeUndefined();
    expect(trace.reason).toBe('vip_malformed');
    expect(r.store.calls).toBe(0);
  });

  it('a working code spends one use and sends the visitor to the same address without it, holding an access token', async () => {
    const r = contextRig();
    const code = createVipCode();
    await createVip(r.inner, 'default', await hashVipCode(code), { uses: 1, expiresAtMs: null }, r.clock.now());
    const trace = newTrace();
    const used = await useVip(r.ctx, request(`/shop?a=1&${VIP_PARAM}=${code}`), code.toLowerCase(), trace);
    expect(used?.status).toBe(303);
    expect(used?.headers.get('location')).toBe('/shop?a=1');
    expect(payloadOf(cookieValue(used?.headers.get('set-cookie') ?? ''))).toMatchObject({ k: 'a', q: 'default' });
    expect(trace.decision).toBe('vip');

    const again = newTrace();
    expect(await useVip(r.ctx, request(`/shop?${VIP_PARAM}=${code}`), code, again)).toBeUndefined();
    expect(again.reason).toBe('vip_used_up');
    expect(again.decision).toBe('unknown');
  });
});
