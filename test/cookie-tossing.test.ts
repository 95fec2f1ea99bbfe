/**
 * Cookie tossing: a sibling subdomain, or user content on one, can set a cookie named like ours
 * for the parent domain or a longer path, and the browser then sends it beside the visitor's own.
 * A planted cookie must not take the visitor's place: not a shadow ticket, not a ticket from before
 * a reset, and junk sent first must not push the real ticket out of what is checked (see
 * readToken and chooseToken in src/core/visit.ts).
 */
import { describe, expect, it } from 'vitest';
import { admissionPolicy } from '../src/core/context';
import { parseConfig } from '../src/core/config';
import { MAX_COOKIES_CHECKED } from '../src/core/visit';
import { MemoryQueueStore } from '../src/store/memory-store';
import { BASE_SETTINGS, FaultyStore, ManualClock, MemoryLogger, cookieFrom, payloadOf, source, testHandler } from './support/fixtures';

const CLIENT = { address: '192.0.2.10', pop: 'TEST' };
const SETTINGS = { admit_per_period: '0' };

function rig() {
  const clock = new ManualClock();
  const inner = new MemoryQueueStore();
  const store = new FaultyStore(inner);
  const logger = new MemoryLogger();
  const handler = testHandler(SETTINGS, { store, clock, logger, randomSeed: () => 0 });
  const policy = admissionPolicy(parseConfig(source({ ...BASE_SETTINGS, ...SETTINGS })));
  /** A GET of the site with our cookie once for each of `values`, in that order. */
  const get = (values: readonly string[]) =>
    handler(new Request('https://shop.example/tickets', { headers: values.length > 0 ? { cookie: values.map((v) => `waiting_room=${v}`).join('; ') } : {} }), CLIENT);
  /** A visitor's real ticket, taken through the handler. */
  const join = async (): Promise<string> => {
    const cookie = cookieFrom(await get([]))!;
    expect(payloadOf(cookie)).toMatchObject({ k: 'w' });
    return cookie;
  };
  return { clock, inner, store, logger, handler, policy, get, join };
}

describe('several cookies of ours in one request', () => {
  it("a planted shadow ticket with a lower number does not move the visitor's real ticket into the shadow queue", async () => {
    const r = rig();
    // The attacker's genuine shadow ticket: a failed proof of work on a queue that asks for one
    // (the same queue and keys; a spread of 0 puts it at ticket 41 of an empty queue).
    const gated = testHandler({ ...SETTINGS, pow_difficulty: '10', failed_proof: 'shadow' }, { store: r.store, clock: r.clock, randomSeed: () => 0 });
    const shadow = cookieFrom(await gated(new Request('https://shop.example/tickets', { headers: { cookie: 'waiting_room_pow=forged~1' } }), CLIENT))!;
    expect(payloadOf(shadow)).toMatchObject({ k: 'w', x: 1, t: 41 });
    // The victim's real ticket comes later, with a higher number.
    for (let i = 0; i < 50; i++) await r.inner.join('default', r.clock.now(), r.policy);
    r.clock.advance(1_000);
    const real = await r.join();
    expect(payloadOf(real)['t']).toBe(51);

    for (const order of [[shadow, real], [real, shadow]]) {
      r.clock.advance(5_000);
      const response = await r.get(order);
      expect(response.status).toBe(200);
      // The real ticket is kept and written back; nothing of the shadow ticket is.
      expect(payloadOf(cookieFrom(response)!)).toMatchObject({ k: 'w', t: 51 });
      expect(payloadOf(cookieFrom(response)!)['x']).toBeUndefined();
      expect(r.logger.last?.reason).toBeUndefined();
      expect(r.logger.last).toMatchObject({ decision: 'waiting', ticket: 51 });
    }
    // Let in, the victim gets its access token: the shadow cookie never held it back.
    await r.inner.admit('default', 51, r.clock.now(), r.policy);
    const admitted = await r.get([shadow, real]);
    expect(admitted.headers.get('x-origin')).toBe('yes');
    expect(payloadOf(cookieFrom(admitted)!)).toMatchObject({ k: 'a', t: 51 });
  });

  it('a planted ticket from before a reset does not send the visitor to the back', async () => {
    const r = rig();
    // The attacker took ticket 1 before the operator's reset; it is signed, only of an old epoch.
    const stale = await r.join();
    expect(payloadOf(stale)['t']).toBe(1);
    r.clock.advance(10_000);
    await r.inner.reset('default', r.clock.now(), r.policy);
    r.clock.advance(1_000);
    const real = await r.join();
    const ticket = payloadOf(real)['t'];
    expect(ticket).toBeGreaterThan(1);
    const tail = (await r.inner.peek('default')).tail;

    for (const order of [[stale, real], [real, stale]]) {
      r.clock.advance(5_000);
      const response = await r.get(order);
      expect(payloadOf(cookieFrom(response)!)).toMatchObject({ k: 'w', t: ticket });
      expect(r.logger.last?.reason).not.toBe('ticket_before_reset');
      expect(r.logger.last).toMatchObject({ decision: 'waiting', ticket });
    }
    // No new ticket was taken for the victim.
    expect((await r.inner.peek('default')).tail).toBe(tail);
    // Alone, the stale ticket still means nothing after the reset.
    await r.get([stale]);
    expect(r.logger.last?.reason).toBe('ticket_before_reset');
  });

  it('junk cookies sent first do not push the real ticket out of what is checked', async () => {
    const r = rig();
    const real = await r.join();
    const junk = ['x', 'x', 'x', 'x', 'a.b', '', '"quoted"', 'not.a.token', 'eyJhbGciOiJub25lIn0.e30.', 'x'.repeat(2000)];
    expect(junk.length).toBeGreaterThan(MAX_COOKIES_CHECKED);
    const calls = r.store.calls;
    const response = await r.get([...junk, real]);
    expect(payloadOf(cookieFrom(response)!)).toMatchObject({ k: 'w', t: 1 });
    expect(r.logger.last?.reason).toBeUndefined();
    expect(r.logger.last).toMatchObject({ decision: 'waiting', ticket: 1 });
    // One poll, no new ticket.
    expect(r.store.calls).toBe(calls + 1);
    expect((await r.inner.peek('default')).tail).toBe(1);
  });

  it('checks at most MAX_COOKIES_CHECKED signatures of tokens it has not verified before; one it has costs none', async () => {
    const r = rig();
    const real = await r.join();
    // Well-formed tokens with a bad signature pass every check that needs no crypto.
    const [header, payload] = real.split('.');
    // (Each a canonical 43-character signature: a non-canonical one is refused before any crypto.)
    const forged = Array.from({ length: MAX_COOKIES_CHECKED }, (_, i) => `${header}.${payload}.${'A'.repeat(42)}${'AEIMQUYcgkosw048'[i]}`);
    await r.get([...forged, real]);
    // The real ticket came after the bound: not checked, so a new ticket (the bound is what keeps
    // the crypto per request finite; a __Host- cookie name keeps planted cookies out altogether).
    expect(r.logger.last).toMatchObject({ reason: 'token_bad_signature', ticket: 2 });

    // An access token this host verified before is a lookup, not a signature check.
    await r.inner.admit('default', 1, r.clock.now(), r.policy);
    const access = cookieFrom(await r.get([real]))!;
    expect(payloadOf(access)).toMatchObject({ k: 'a', t: 1 });
    expect((await r.get([access])).headers.get('x-origin')).toBe('yes');
    const passed = await r.get([...forged, access]);
    expect(passed.headers.get('x-origin')).toBe('yes');
  });

  it('the recommended name __Host-waiting_room is set as browsers require of it: host-only, Secure, Path=/', async () => {
    const clock = new ManualClock();
    const handler = testHandler({ cookie_name: '__Host-waiting_room' }, { store: new MemoryQueueStore(), clock });
    const response = await handler(new Request('https://shop.example/tickets'), CLIENT);
    const [header] = response.headers.getSetCookie();
    expect(header).toMatch(/^__Host-waiting_room=[^;]+; /);
    const attributes = header!.split(';').slice(1).map((a) => a.trim().toLowerCase());
    expect(attributes).toContain('secure');
    expect(attributes).toContain('path=/');
    expect(attributes.some((a) => a.startsWith('domain'))).toBe(false);
    // And it is read back: the same ticket on the next request.
    const cookie = cookieFrom(response, '__Host-waiting_room')!;
    const again = await handler(new Request('https://shop.example/tickets', { headers: { cookie: `__Host-waiting_room=${cookie}` } }), CLIENT);
    expect(payloadOf(cookieFrom(again, '__Host-waiting_room')!)).toMatchObject({ k: 'w', t: 1 });
  });
});
