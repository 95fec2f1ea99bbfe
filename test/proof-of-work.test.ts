/**
 * The proof-of-work gate (issue 14, item 2): the edge's check of a solution, the handler's flow
 * (challenge, then a ticket for a solution, never for a request that skips it), and the holding
 * page's own solver run against node:crypto's SHA-256. In a real browser: test/browser.test.ts.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { runInNewContext } from 'node:vm';
import jws from 'jws';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/core/config';
import { checkSolution, clientTag, issueChallenge, leadingZeroBits, spentOnce } from '../src/core/proof-of-work';
import { parseKeyRing } from '../src/core/tokens';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, BASE_SETTINGS, cookieFrom, FaultyStore, KEY_1, KEY_2, ManualClock, MemoryLogger, payloadOf, purposeKey, source, testHandler } from './support/fixtures';

const NOW = Date.UTC(2026, 10, 25, 12, 0, 0);
const ring = parseKeyRing(`k1:${KEY_1}`);
const SETTINGS = { queueName: 'default', powDifficulty: 8, clientIpv4Prefix: 32 as const, cookieName: 'waiting_room' };
const CLIENT = '198.51.100.20';

const zeroBits = (text: string): number => leadingZeroBits(createHash('sha256').update(text).digest());
/** A solution found with node:crypto, independently of the page's solver. */
function solve(nonce: string, difficulty: number, from = 0): number {
  for (let c = from; ; c++) if (zeroBits(`${nonce}:${c}`) >= difficulty) return c;
}

describe('leading zero bits', () => {
  it.each([
    [[0x80], 0],
    [[0x40], 1],
    [[0x01], 7],
    [[0x00, 0xff], 8],
    [[0x00, 0x00, 0x10], 19],
    [[0, 0, 0, 0], 32],
  ])('%j begins with %i', (bytes, bits) => {
    expect(leadingZeroBits(new Uint8Array(bytes))).toBe(bits);
  });
});

describe('checking a solution at the edge', () => {
  it('accepts a solution to a challenge made for this client, once', async () => {
    const limiter = spentOnce(new MemoryStateCache({ now: () => NOW }), SETTINGS.queueName);
    const pow = await issueChallenge(ring, SETTINGS, CLIENT, NOW);
    expect(pow).toMatchObject({ difficulty: 8, cookie: 'waiting_room_pow', nonce: expect.stringMatching(/^[0-9a-f]{32}$/) });
    const c = solve(pow.nonce, 8);
    expect(await checkSolution(ring, SETTINGS, limiter, `${pow.challenge}~${c}`, CLIENT, NOW + 5_000)).toEqual({ ok: true, nonce: pow.nonce });
    // Spent: the same solution again is refused.
    expect(await checkSolution(ring, SETTINGS, limiter, `${pow.challenge}~${c}`, CLIENT, NOW + 6_000)).toEqual({ ok: false, reason: 'pow_reused' });
  });

  it('spends a solution once when copies of it come at the same moment', async () => {
    // Checked and marked in two steps, copies that all checked before any marked would all pass.
    const cache = new MemoryStateCache({ now: () => NOW });
    const pow = await issueChallenge(ring, SETTINGS, CLIENT, NOW);
    const solution = `${pow.challenge}~${solve(pow.nonce, 8)}`;
    const results = await Promise.all(Array.from({ length: 20 }, () => checkSolution(ring, SETTINGS, spentOnce(cache, SETTINGS.queueName), solution, CLIENT, NOW + 1_000)));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(results.filter((r) => !r.ok && r.reason === 'pow_reused')).toHaveLength(19);
    // The mark itself, asked for by 20 at once with nothing between them: one spends it.
    const marks = await Promise.all(Array.from({ length: 20 }, () => spentOnce(cache, SETTINGS.queueName).spend('fresh-nonce')));
    expect(marks.filter(Boolean)).toHaveLength(1);
    // Another queue's mark is its own: the same nonce there is not spent (it would fail its own checks first in use).
    expect(await spentOnce(cache, 'other').spend(pow.nonce)).toBe(true);
  });

  it('counts a solution when the cache that marks it fails, and still refuses a bad one', async () => {
    const failing = { spend: async () => { throw new Error('cache down'); } };
    const pow = await issueChallenge(ring, SETTINGS, CLIENT, NOW);
    const c = solve(pow.nonce, 8);
    expect(await checkSolution(ring, SETTINGS, failing, `${pow.challenge}~${c}`, CLIENT, NOW + 1_000)).toEqual({ ok: true, nonce: pow.nonce });
    expect(await checkSolution(ring, SETTINGS, failing, `${pow.challenge}~${c}`, '198.51.100.99', NOW + 1_000)).toMatchObject({ ok: false, reason: 'pow_wrong_client' });
  });

  it('refuses what skips the work or was made for someone else', async () => {
    const limiter = spentOnce(new MemoryStateCache({ now: () => NOW }), SETTINGS.queueName);
    const pow = await issueChallenge(ring, SETTINGS, CLIENT, NOW);
    const c = solve(pow.nonce, 8);
    let wrong = 0;
    while (zeroBits(`${pow.nonce}:${wrong}`) >= 8) wrong++;
    const check = (solution: string | undefined, options: { address?: string; at?: number; settings?: typeof SETTINGS } = {}) =>
      checkSolution(ring, options.settings ?? SETTINGS, limiter, solution, options.address ?? CLIENT, options.at ?? NOW + 1_000);
    expect(await check(undefined)).toMatchObject({ reason: 'pow_missing' });
    expect(await check(`${pow.challenge}`)).toMatchObject({ reason: 'pow_malformed' });
    expect(await check(`${pow.challenge}~-1`)).toMatchObject({ reason: 'pow_malformed' });
    expect(await check(`${pow.challenge}~1e3`)).toMatchObject({ reason: 'pow_malformed' });
    expect(await check(`~${c}`)).toMatchObject({ reason: 'pow_malformed' });
    expect(await check(`${pow.challenge}~${wrong}`)).toMatchObject({ reason: 'pow_wrong_solution: ' + zeroBits(`${pow.nonce}:${wrong}`) + ' of 8 zero bits' });
    // Another address (or another /24 with that grouping) cannot use it.
    expect(await check(`${pow.challenge}~${c}`, { address: '198.51.100.21' })).toMatchObject({ reason: 'pow_wrong_client' });
    // Expired after its two minutes.
    expect(await check(`${pow.challenge}~${c}`, { at: NOW + 120_000 })).toMatchObject({ reason: 'pow_bad_challenge: expired' });
    // The operator raised the difficulty: an easier challenge no longer counts.
    expect(await check(`${pow.challenge}~${c}`, { settings: { ...SETTINGS, powDifficulty: 12 } })).toMatchObject({ reason: 'pow_too_easy: 8 bits, 12 asked' });
    // Another queue's challenge.
    expect(await check(`${pow.challenge}~${c}`, { settings: { ...SETTINGS, queueName: 'other' } })).toMatchObject({ reason: 'pow_bad_challenge: wrong_queue' });
    // Forged: an easier difficulty written into the payload breaks the signature; one signed with
    // another key, or with the waiting-ticket key, is refused; so is an unsigned one.
    const [header, , signature] = pow.challenge.split('.');
    const easier = Buffer.from(JSON.stringify({ ...payloadOf(pow.challenge), d: 1 })).toString('base64url');
    expect(await check(`${header}.${easier}.${signature}~0`)).toMatchObject({ reason: 'pow_bad_challenge: bad_signature' });
    const claims = payloadOf(pow.challenge);
    const other = jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: claims, secret: purposeKey(KEY_2, 'waiting') });
    expect(await check(`${other}~${c}`)).toMatchObject({ reason: 'pow_bad_challenge: bad_signature' });
    const none = `${Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
    expect(await check(`${none}~${c}`)).toMatchObject({ ok: false });
    // None of these spent the challenge: the right solution still works once.
    expect(await check(`${pow.challenge}~${c}`)).toMatchObject({ ok: true });
  });

  it('binds a challenge to the client key: an IPv6 client by its /64', async () => {
    expect(await clientTag(SETTINGS, '2001:db8:1:2::1')).toBe(await clientTag(SETTINGS, '2001:db8:1:2::ff'));
    expect(await clientTag(SETTINGS, '2001:db8:1:2::1')).not.toBe(await clientTag(SETTINGS, '2001:db8:1:3::1'));
    expect(await clientTag(SETTINGS, CLIENT)).not.toBe(await clientTag({ ...SETTINGS, queueName: 'other' }, CLIENT));
  });
});

/** Runs the holding page's own script (templates/holding.js) on a challenge, with just enough of a browser around it. */
function runPageSolver(pow: { challenge: string; nonce: string; difficulty: number; cookie: string }): { cookie: string; reloaded: boolean } {
  const script = readFileSync(new URL('../templates/holding.js', import.meta.url), 'utf8');
  let onLoad: (() => void) | undefined;
  const page = { cookie: '', reloaded: false };
  const note = { textContent: 'Please turn on JavaScript' };
  const pending: (() => void)[] = [];
  const context = {
    document: {
      getElementById: () => ({ textContent: JSON.stringify({ status: '/__wr/status', refresh: 5, texts: { note: 'You don’t need to do anything' }, pow }) }),
      querySelector: () => note,
      set cookie(value: string) {
        page.cookie = value;
      },
    },
    addEventListener: (_: string, handler: () => void) => (onLoad = handler),
    setTimeout: (fn: () => void) => pending.push(fn),
    window: { stop: () => undefined },
    sessionStorage: { setItem: () => undefined },
    location: { protocol: 'https:', href: 'https://shop.example/', replace: () => (page.reloaded = true) },
    Date,
    Int32Array,
    JSON,
    String,
  };
  runInNewContext(script, context);
  onLoad?.();
  while (pending.length > 0 && !page.reloaded) pending.shift()!();
  // With the script running, the note no longer asks for JavaScript.
  expect(note.textContent).toBe('You don’t need to do anything');
  return page;
}

describe("the holding page's solver", () => {
  it('finds a solution that node:crypto agrees with, and sends it in the cookie', async () => {
    for (const difficulty of [1, 8, 14]) {
      const pow = await issueChallenge(ring, { ...SETTINGS, powDifficulty: difficulty }, CLIENT, NOW);
      const page = runPageSolver(pow);
      expect(page.reloaded).toBe(true);
      const match = /^waiting_room_pow=([^~]+)~(\d+); path=\/; max-age=120; samesite=lax; secure$/.exec(page.cookie);
      expect(match, page.cookie).not.toBeNull();
      expect(match![1]).toBe(pow.challenge);
      // The first counter that solves it, as node:crypto finds it too.
      expect(Number(match![2])).toBe(solve(pow.nonce, difficulty));
    }
  });
});

describe('the gate in the request path', () => {
  function rig(settings: Record<string, string> = { pow_difficulty: '10' }) {
    const clock = new ManualClock(NOW);
    const store = new FaultyStore(new MemoryQueueStore());
    const logger = new MemoryLogger();
    const handler = testHandler(settings, { store, logger, clock, ticketLimiter: new MemoryFailureLimiter(clock) });
    const admin = async (): Promise<{ figures: Record<string, string>; state: { tickets_refused_last_minute_here: Record<string, number> } }> =>
      (await handler(new Request('https://shop.example/__wr/admin/live', { headers: { authorization: `Basic ${btoa(`admin:${ADMIN_PASSWORD}`)}` } }), { address: '192.0.2.1', pop: 'TEST' })).json() as never;
    const get = (cookies: Record<string, string> = {}, headers: Record<string, string> = {}, address = CLIENT) =>
      handler(
        new Request('https://shop.example/tickets', {
          headers: { cookie: Object.entries(cookies).map(([k, v]) => `${k}=${v}`).join('; '), ...headers },
        }),
        { address, pop: 'TEST' },
      );
    return { clock, store, logger, get, admin };
  }
  const liveData = async (response: Response): Promise<{ pow?: { challenge: string; nonce: string; difficulty: number; cookie: string } }> =>
    JSON.parse(/<script type="application\/json" id="wr-live">([^<]*)<\/script>/.exec(await response.text())![1]!.replace(/\\u003c/g, '<'));

  it('answers a new visitor with a challenge and no ticket, then gives a ticket for its solution', async () => {
    const r = rig();
    const first = await r.get();
    expect(first.status).toBe(200);
    expect(cookieFrom(first)).toBeUndefined();
    expect(r.store.calls).toBe(0);
    expect(r.logger.last).toMatchObject({ decision: 'pow_challenge', reason: 'pow_missing' });
    const { pow } = await liveData(first.clone());
    expect(pow).toMatchObject({ difficulty: 10, cookie: 'waiting_room_pow' });
    expect(await first.text()).toContain('turn on JavaScript');
    const c = solve(pow!.nonce, 10);
    const second = await r.get({ waiting_room_pow: `${pow!.challenge}~${c}` });
    expect(payloadOf(cookieFrom(second)!)).toMatchObject({ k: 'w', t: 1 });
    expect(r.logger.last).toMatchObject({ decision: 'waiting', ticket: 1 });
    // The visitor now holds a ticket: the spent solution is not looked at again.
    const third = await r.get({ waiting_room: cookieFrom(second)!, waiting_room_pow: `${pow!.challenge}~${c}` });
    expect(r.logger.last).toMatchObject({ decision: 'waiting', ticket: 1 });
    expect(third.status).toBe(200);
    // A program gets the challenge as JSON.
    const json = await r.get({}, { accept: 'application/json' });
    expect(await json.json()).toMatchObject({ status: 'challenge', difficulty: 10, cookie: 'waiting_room_pow', nonce: expect.stringMatching(/^[0-9a-f]{32}$/) });
  });

  it('never gives a ticket to a request that skips or fakes the work, and asks nothing of the store for it', async () => {
    const r = rig();
    const { pow } = await liveData(await r.get());
    const c = solve(pow!.nonce, 10);
    let wrong = 0;
    while (zeroBits(`${pow!.nonce}:${wrong}`) >= 10) wrong++;
    const attempts: Record<string, string>[] = [
      {},
      { waiting_room_pow: 'garbage' },
      { waiting_room_pow: `${pow!.challenge}~${wrong}` },
      { waiting_room_pow: `${pow!.challenge.slice(0, -2)}xx~${c}` },
    ];
    for (const cookies of attempts) {
      const response = await r.get(cookies);
      expect(cookieFrom(response), JSON.stringify(cookies)).toBeUndefined();
      expect(r.logger.last?.decision).toBe('pow_challenge');
    }
    // Solved on another address: refused there.
    expect(cookieFrom(await r.get({ waiting_room_pow: `${pow!.challenge}~${c}` }, {}, '203.0.113.9'))).toBeUndefined();
    expect(r.logger.last?.reason).toBe('pow_wrong_client');
    expect(r.store.calls).toBe(0);
    // Used once, by its client; a replay gets a new challenge.
    expect(payloadOf(cookieFrom(await r.get({ waiting_room_pow: `${pow!.challenge}~${c}` }))!)['t']).toBe(1);
    expect(cookieFrom(await r.get({ waiting_room_pow: `${pow!.challenge}~${c}` }))).toBeUndefined();
    expect(r.logger.last).toMatchObject({ decision: 'pow_challenge', reason: 'pow_reused' });
    // The operator sees it: 2 challenges for no proof, 5 failed proofs (garbage, wrong, forged, another client's, replayed).
    const live = await r.admin();
    // The one ticket's join, then the console's figures, its recent changes, and (its first poll
    // here) the sale's record older than the hour.
    expect(r.store.calls).toBe(4);
    expect(live.state.tickets_refused_last_minute_here).toEqual({ ticket_limit: 0, proof_missing: 2, proof_failed: 5, challenge_missing: 0, challenge_failed: 0 });
    expect(live.figures['refused']).toBe('0 over the per-client limit, 5 with a failed proof of work, 2 sent a challenge');
  });

  it('does not check a join asked again after a lost answer: its solution was spent on it, and it keeps its ticket', async () => {
    const r = rig({ pow_difficulty: '10', failed_proof: 'shadow' });
    const { pow } = await liveData(await r.get());
    const solution = `${pow!.challenge}~${solve(pow!.nonce, 10)}`;
    r.store.mode = 'error';
    const lost = await r.get({ waiting_room_pow: solution });
    const pending = cookieFrom(lost)!;
    expect(payloadOf(pending)).toMatchObject({ k: 'w', t: 0, p: expect.stringMatching(/^[0-9a-f]{16}$/) });
    // The solution was spent on the join whose answer was lost; the browser still sends it.
    r.store.mode = 'ok';
    const retried = await r.get({ waiting_room: pending, waiting_room_pow: solution });
    expect(payloadOf(cookieFrom(retried)!)).toMatchObject({ k: 'w', t: 1 });
    expect(payloadOf(cookieFrom(retried)!)['x']).toBeUndefined();
    expect(r.logger.last).toMatchObject({ decision: 'waiting', reason: 'join_retried' });
    // The ticket clears the spent solution: a later new ticket (after a reset) must not find it a replay.
    expect(retried.headers.getSetCookie()).toContain('waiting_room_pow=; Max-Age=0; Path=/; HttpOnly; Secure; SameSite=Lax');
  });

  it('with failed_proof = shadow, puts a failed proof in a line that never moves: no ticket, no store call, never let in', async () => {
    const r = rig({ pow_difficulty: '10', failed_proof: 'shadow', admit_per_period: '0' });
    // A real visitor joins first, through the gate.
    const { pow } = await liveData(await r.get({}, {}, '192.0.2.44'));
    const real = await r.get({ waiting_room_pow: `${pow!.challenge}~${solve(pow!.nonce, 10)}` }, {}, '192.0.2.44');
    expect(payloadOf(cookieFrom(real)!)).toMatchObject({ t: 1 });
    const calls = r.store.calls;
    // No proof yet: a challenge, as always.
    expect((await r.get()).status).toBe(200);
    expect(r.logger.last?.decision).toBe('pow_challenge');
    // A forged proof: what looks like a place in line.
    const shadow = await r.get({ waiting_room_pow: 'forged~1' });
    expect(shadow.status).toBe(200);
    const cookie = cookieFrom(shadow)!;
    const claims = payloadOf(cookie);
    expect(claims).toMatchObject({ k: 'w', x: 1 });
    expect(claims['t']).toBeGreaterThan(1);
    expect(r.logger.last).toMatchObject({ decision: 'waiting', reason: 'pow_bad_challenge: malformed; shadow queue' });
    const place = /data-text="place">([^<]*)</.exec(await shadow.text())![1];
    // Everyone waiting is let in, time passes: the shadow place does not move and is never let in.
    await r.store.admit('default', 1_000, r.clock.now(), { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 });
    const storeCalls = r.store.calls;
    let held = cookie;
    for (let i = 0; i < 20; i++) {
      r.clock.advance(30_000);
      const again = await r.get({ waiting_room: held });
      expect(again.status).toBe(200);
      expect(/data-text="place">([^<]*)</.exec(await again.text())![1]).toBe(place);
      held = cookieFrom(again) ?? held;
      expect(payloadOf(held)).toMatchObject({ k: 'w', x: 1, t: claims['t'] });
    }
    expect(r.logger.last).toMatchObject({ decision: 'waiting', reason: 'shadow queue' });
    // No store call for any of it; the real queue's tail is still the one real visitor.
    expect(r.store.calls).toBe(storeCalls);
    expect(calls + 1).toBe(storeCalls);
    expect((await r.store.peek('default')).tail).toBe(1);
    // A shadow cookie cannot be turned into a real one: without x it no longer verifies.
    const [header, , signature] = held.split('.');
    const stripped = Buffer.from(JSON.stringify({ ...payloadOf(held), x: undefined })).toString('base64url');
    const tampered = await r.get({ waiting_room: `${header}.${stripped}.${signature}` });
    expect(payloadOf(cookieFrom(tampered) ?? 'a.e30.c')['x']).toBeUndefined();
    expect(r.logger.last?.decision).toBe('pow_challenge');
  });

  it('is off by default, and refuses a difficulty out of range', () => {
    expect(parseConfig(source(BASE_SETTINGS)).powDifficulty).toBe(0);
    expect(() => parseConfig(source({ ...BASE_SETTINGS, pow_difficulty: '25' }))).toThrow(/pow_difficulty/);
    expect(() => parseConfig(source({ ...BASE_SETTINGS, pow_difficulty: 'hard' }))).toThrow(/pow_difficulty/);
    expect(parseConfig(source(BASE_SETTINGS)).failedProof).toBe('challenge');
    expect(() => parseConfig(source({ ...BASE_SETTINGS, failed_proof: 'tarpit' }))).toThrow(/failed_proof/);
  });
});
