/**
 * Password and token guessing is throttled per client: the guard alone with a fake limiter, the
 * admin and origin API through the handler with the Node host's in-memory limiter on an injected
 * clock, and that limiter's own semantics (window, holds, bounded memory).
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { clientKey, clientSiteKey, guardSignIn, type CredentialCheck, type SignInGuard, type ThrottleTrace } from '../src/core/auth-throttle';
import { parseConfig, parseSecrets, type Config } from '../src/core/config';
import { createHandler, type Handler } from '../src/core/handler';
import type { FailureLimiter, FailureWindow } from '../src/core/ports';
import { parseQueues } from '../src/core/queues';
import { createService } from '../src/core/service';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, API_TOKEN, BASE_SECRETS, BASE_SETTINGS, ManualClock, MemoryLogger, RecordingOrigin, source } from './support/fixtures';

const SITE = 'https://shop.example';
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const ADMIN = basic('admin', ADMIN_PASSWORD);
const GUESSER = { address: '198.51.100.7', pop: 'TST' };
const OPERATOR = { address: '203.0.113.9', pop: 'TST' };
const ORIGIN_SERVER = { address: '192.0.2.10', pop: 'TST' };

describe('the client key', () => {
  it('is the IPv4 address, however the platform writes it', () => {
    expect(clientKey('198.51.100.7')).toBe('198.51.100.7');
    expect(clientKey('::ffff:198.51.100.7')).toBe('198.51.100.7');
    expect(clientKey('::FFFF:c633:6407')).toBe('198.51.100.7');
  });

  it('groups IPv6 clients by /64, so one subscriber cannot rotate through its addresses', () => {
    const key = clientKey('2001:db8:1:2::1');
    expect(key).toBe('2001:db8:1:2::/64');
    for (const other of ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0DB8:0001:0002:0:0:0:9', '[2001:db8:1:2::abcd]']) expect(clientKey(other)).toBe(key);
    expect(clientKey('2001:db8:1:3::1')).not.toBe(key);
    expect(clientKey('::1')).toBe('0:0:0:0::/64');
  });

  it('is the IPv4 address a 6to4 address (2002::/16) carries: its whole /48 is that one IPv4 host\'s', () => {
    for (const address of ['2002:c633:6407::1', '2002:c633:6407:1::1', '2002:C633:6407:ffff:1:2:3:4']) expect(clientKey(address)).toBe('198.51.100.7');
    expect(clientKey('2002:c633:6407:1::1', 24)).toBe('198.51.100.0/24');
    expect(clientKey('2002:c633:6408::1')).toBe('198.51.100.8');
  });

  it('has a coarser site key for native IPv6, its /48, and none where the client key is IPv4 already', () => {
    expect(clientSiteKey('2001:db8:1:2::1')).toBe('2001:db8:1::/48');
    for (const other of ['2001:db8:1:ff00::1', '2001:db8:1:ffff:1:2:3:4', '[2001:db8:1::9]']) expect(clientSiteKey(other)).toBe('2001:db8:1::/48');
    expect(clientSiteKey('2001:db8:2::1')).toBe('2001:db8:2::/48');
    for (const address of ['198.51.100.7', '::ffff:198.51.100.7', '2002:c633:6407:1::1', undefined, 'x']) expect(clientSiteKey(address)).toBeUndefined();
  });

  it('is one shared key when the address is unknown or not an address', () => {
    for (const address of [undefined, '', 'localhost', '1.2.3', '2001:db8::1%eth0', 'x'.repeat(500)]) expect(clientKey(address)).toBe('unknown');
  });
});

/** A limiter that answers as told and records what it was asked. */
class FakeLimiter implements FailureLimiter {
  held = false;
  failures = 0;
  fail: 'none' | 'lookup' | 'count' = 'none';
  readonly calls: string[] = [];
  async isHeld(key: string): Promise<boolean> {
    this.calls.push(`isHeld ${key}`);
    if (this.fail === 'lookup') throw new Error('erl unavailable');
    return this.held;
  }
  async countFailure(key: string, window: FailureWindow): Promise<number> {
    this.calls.push(`count ${key} ${window}`);
    if (this.fail === 'count') throw new Error('erl unavailable');
    return ++this.failures;
  }
  async hold(key: string, minutes: number): Promise<void> {
    this.calls.push(`hold ${key} ${minutes}`);
    this.held = true;
  }
  async countOf(): Promise<number> {
    return this.failures;
  }
}

describe('the sign-in guard', () => {
  const settings = { authFailureLimit: 3, authFailureWindowSeconds: 60, authPenaltyMinutes: 5 } as const;
  let limiter: FakeLimiter;
  let trace: ThrottleTrace;
  let compared: number;
  const guard = (address = GUESSER.address): SignInGuard => ({ limiter, settings, address, trace });
  const checking = (result: CredentialCheck) => () => {
    compared++;
    return result;
  };

  beforeEach(() => {
    limiter = new FakeLimiter();
    trace = {};
    compared = 0;
  });

  it('refuses a held client with 429 and Retry-After without comparing its credential, the right one included', async () => {
    limiter.held = true;
    const signIn = await guardSignIn(guard(), 'admin', checking('ok'));
    expect(signIn.kind).toBe('held');
    expect(compared).toBe(0);
    const response = signIn.kind === 'held' ? signIn.response : undefined;
    expect(response?.status).toBe(429);
    expect(response?.headers.get('retry-after')).toBe('300');
    expect(((await response?.json()) as { error: string }).error).toMatch(/too many failed sign-ins.*5 minutes/);
    expect(trace).toEqual({ reason: expect.stringMatching(/^admin_held/), client: '198.51.100.7' });
    expect(limiter.calls).toEqual(['isHeld 198.51.100.7']);
  });

  it('counts each wrong credential for its client and logs the count, then holds the client at the limit', async () => {
    expect((await guardSignIn(guard(), 'admin', checking('wrong'))).kind).toBe('wrong');
    expect(trace).toEqual({ reason: 'admin_bad_credentials: failure 1 of 3 in 60 s', client: '198.51.100.7' });
    expect((await guardSignIn(guard(), 'api', checking('wrong'))).kind).toBe('wrong');
    expect(trace.reason).toBe('api_bad_token: failure 2 of 3 in 60 s');
    const third = await guardSignIn(guard(), 'admin', checking('wrong'));
    expect(third.kind).toBe('held');
    expect(third.kind === 'held' && third.response.status).toBe(429);
    expect(trace.reason).toBe('admin_bad_credentials: failure 3 of 3 in 60 s; held for 5 min');
    expect(limiter.calls.filter((c) => c.startsWith('hold'))).toEqual(['hold 198.51.100.7 5']);
    expect(compared).toBe(3);
  });

  it('neither counts nor names the client for a request without credentials or with the right ones', async () => {
    expect((await guardSignIn(guard(), 'admin', checking('missing'))).kind).toBe('missing');
    expect(trace).toEqual({ reason: 'admin_no_credentials' });
    trace = {};
    expect((await guardSignIn(guard(), 'api', checking('ok'))).kind).toBe('ok');
    expect(trace).toEqual({});
    expect(limiter.calls.filter((c) => !c.startsWith('isHeld'))).toEqual([]);
  });

  it('compares as if unthrottled when the limiter fails, and says so in the log', async () => {
    limiter.fail = 'lookup';
    expect((await guardSignIn(guard(), 'admin', checking('ok'))).kind).toBe('ok');
    expect(trace.reason).toBe('throttle unavailable: erl unavailable');
    expect((await guardSignIn(guard(), 'admin', checking('wrong'))).kind).toBe('wrong');
    expect(trace.reason).toBe('admin_bad_credentials; throttle unavailable: erl unavailable');
    limiter.fail = 'count';
    trace = {};
    expect((await guardSignIn(guard(), 'api', checking('wrong'))).kind).toBe('wrong');
    expect(trace).toEqual({ reason: 'api_bad_token; throttle unavailable: erl unavailable', client: '198.51.100.7' });
  });

  it('counts an account\'s failures from every client, holds the account at 3 × the limit, and then refuses its right password without comparing it', async () => {
    const memory = new MemoryFailureLimiter(new ManualClock());
    const from = (n: number): SignInGuard => ({ limiter: memory, settings, address: `198.51.100.${n}`, trace, account: 'Otto' });
    const kinds: string[] = [];
    // One wrong password from each of 9 addresses: no client reaches its limit of 3, the account does (9).
    for (let n = 1; n <= 9; n++) kinds.push((await guardSignIn(from(n), 'admin', checking('wrong'))).kind);
    expect(kinds).toEqual(['wrong', 'wrong', 'wrong', 'wrong', 'wrong', 'wrong', 'wrong', 'wrong', 'held']);
    expect(trace.reason).toBe('admin_bad_credentials: failure 9 of 9 for account:otto in 60 s; held for 5 min');
    compared = 0;
    // Held, whatever the client and however the name is written: the right password is not compared.
    const held = await guardSignIn({ ...from(50), account: 'OTTO' }, 'admin', checking('ok'));
    expect(held.kind).toBe('held');
    expect(compared).toBe(0);
    expect(held.kind === 'held' && ((await held.response.json()) as { error: string }).error).toMatch(/for this account/);
    // Another account signs in from the same addresses.
    expect((await guardSignIn({ ...from(1), account: 'ada' }, 'admin', checking('ok'))).kind).toBe('ok');
  });

  it('without a limiter still logs who failed, and holds nobody', async () => {
    for (let i = 0; i < 5; i++) expect((await guardSignIn({ ...guard(), limiter: undefined }, 'admin', checking('wrong'))).kind).toBe('wrong');
    expect(trace).toEqual({ reason: 'admin_bad_credentials', client: '198.51.100.7' });
  });
});

describe('the admin and the origin API under guessing', () => {
  const SETTINGS = { auth_failure_limit: '5', auth_penalty_minutes: '2' };
  let clock: ManualClock;
  let logger: MemoryLogger;
  let limiter: MemoryFailureLimiter;
  let handler: Handler;
  let config: Readonly<Config>;

  beforeEach(() => {
    clock = new ManualClock();
    logger = new MemoryLogger();
    limiter = new MemoryFailureLimiter(clock);
    config = parseConfig(source({ ...BASE_SETTINGS, ...SETTINGS }));
    handler = createHandler({
      config,
      secrets: parseSecrets(source(BASE_SECRETS)),
      store: new MemoryQueueStore(),
      origin: new RecordingOrigin(),
      logger,
      clock,
      cache: new MemoryStateCache(clock),
      authLimiter: limiter,
    });
  });

  const admin = (authorization: string, client = GUESSER, path = '/__wr/admin/state') =>
    handler(new Request(`${SITE}${path}`, { headers: { authorization } }), client);
  const api = (token: string, client = GUESSER) =>
    handler(new Request(`${SITE}/__wr/api/admit?count=1`, { method: 'POST', headers: { authorization: `Bearer ${token}` } }), client);

  it('holds a client guessing the password after the limit, while the right password keeps working for everyone else', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      statuses.push((await admin(basic('admin', `guess-${i}`))).status);
      // The operator, elsewhere, keeps working between the guesses: page, figures and API.
      expect((await admin(ADMIN, OPERATOR)).status).toBe(200);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 429, 429, 429, 429]);
    expect((await admin(ADMIN, OPERATOR, '/__wr/admin')).status).toBe(200);
    expect((await api(API_TOKEN, ORIGIN_SERVER)).status).toBe(200);
    // Held means held: the right password from the guesser is refused without being compared.
    const right = await admin(ADMIN);
    expect(right.status).toBe(429);
    expect(right.headers.get('retry-after')).toBe('120');
    // And the hold covers the token too.
    expect((await api(API_TOKEN)).status).toBe(429);
  });

  it('holds a client guessing the bearer token, while the origin keeps letting visitors in', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      statuses.push((await api(`guess-${i}-0123456789abcdefghij`)).status);
      const admitted = await api(API_TOKEN, ORIGIN_SERVER);
      expect(admitted.status).toBe(200);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 429, 429, 429]);
    expect((await admin(ADMIN)).status).toBe(429);
    expect((await admin(ADMIN, OPERATOR)).status).toBe(200);
  });

  it('lets the client try again once the penalty is over, and not before', async () => {
    for (let i = 0; i < 5; i++) await admin(basic('admin', `guess-${i}`));
    clock.advance(2 * 60_000 - 1000);
    expect((await admin(ADMIN)).status).toBe(429);
    clock.advance(1000);
    expect((await admin(ADMIN)).status).toBe(200);
    // Its old failures have left the window: it starts from a clean count.
    for (let i = 0; i < 4; i++) expect((await admin(basic('admin', `again-${i}`))).status).toBe(401);
    expect((await admin(basic('admin', 'again-5'))).status).toBe(429);
  });

  it('counts failures over the window only: a slow typist is never held', async () => {
    for (let i = 0; i < 20; i++) {
      expect((await admin(basic('admin', `typo-${i}`))).status).toBe(401);
      clock.advance(15_000);
    }
    expect((await admin(ADMIN)).status).toBe(200);
  });

  it('counts a guess through the admin forms too, and refuses a held client before reading the form', async () => {
    for (let i = 0; i < 5; i++) {
      const response = await handler(
        new Request(`${SITE}/__wr/admin/admit`, {
          method: 'POST',
          body: 'count=1',
          headers: { authorization: basic('admin', `guess-${i}`), 'content-type': 'application/x-www-form-urlencoded', origin: SITE },
        }),
        GUESSER,
      );
      expect(response.status).toBe(i < 4 ? 401 : 429);
    }
    expect((await admin(ADMIN, GUESSER, '/__wr/admin')).status).toBe(429);
  });

  it('treats a whole IPv6 /64 as one client', async () => {
    for (let i = 1; i <= 5; i++) await admin(basic('admin', `guess-${i}`), { address: `2001:db8:aa:bb::${i.toString(16)}`, pop: 'TST' });
    expect((await admin(ADMIN, { address: '2001:db8:aa:bb:1:2:3:4', pop: 'TST' })).status).toBe(429);
    expect((await admin(ADMIN, { address: '2001:db8:aa:bc::1', pop: 'TST' })).status).toBe(200);
  });

  it('counts an IPv6 /48 too: guessing from a new /64 each time holds the /48 after 16 × the limit', async () => {
    // 5 a client, so 80 for the /48: each guess from a /64 of its own, as a /48 or /56 holder can send,
    // and at a name of its own (one account's guesses would hold the account first, see below).
    const from = (n: number) => ({ address: `2001:db8:77:${n.toString(16)}::1`, pop: 'TST' });
    const statuses: number[] = [];
    for (let n = 0; n < 100; n++) statuses.push((await admin(basic(`guess-${n}`, `guess-${n}`), from(n))).status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(79);
    expect(statuses.slice(79).every((s) => s === 429)).toBe(true);
    expect(logger.records.find((l) => l.status === 429)).toMatchObject({ client: '2001:db8:77::/48' });
    // The right password from any /64 of that /48 is held too; another /48 is not.
    expect((await admin(ADMIN, from(500))).status).toBe(429);
    expect((await admin(ADMIN, { address: '2001:db8:78::1', pop: 'TST' })).status).toBe(200);
  });

  it('counts a 6to4 client as the IPv4 address it carries', async () => {
    for (let n = 1; n <= 5; n++) await admin(basic('admin', `guess-${n}`), { address: `2002:c633:6407:${n}::1`, pop: 'TST' });
    expect((await admin(ADMIN, { address: '198.51.100.7', pop: 'TST' })).status).toBe(429);
    expect((await admin(ADMIN, { address: '2002:c633:6407:99::1', pop: 'TST' })).status).toBe(429);
    expect((await admin(ADMIN, OPERATOR)).status).toBe(200);
  });

  it('logs every failure with its reason, client key and path, and never what was guessed', async () => {
    const guesses = Array.from({ length: 6 }, (_, i) => `secret-guess-${i}-xyz`);
    for (const guess of guesses.slice(0, 3)) await admin(basic('admin', guess));
    for (const guess of guesses.slice(3)) await api(guess);
    const lines = logger.records.map((record) => JSON.stringify(record));
    for (const guess of [...guesses, ADMIN_PASSWORD, API_TOKEN]) {
      expect(lines.join('\n')).not.toContain(guess);
      expect(lines.join('\n')).not.toContain(Buffer.from(`admin:${guess}`).toString('base64'));
    }
    expect(logger.records.map((r) => [r.status, r.path, r.client, r.reason])).toEqual([
      [401, '/__wr/admin/state', '198.51.100.7', 'admin_bad_credentials: failure 1 of 5 in 60 s'],
      [401, '/__wr/admin/state', '198.51.100.7', 'admin_bad_credentials: failure 2 of 5 in 60 s'],
      [401, '/__wr/admin/state', '198.51.100.7', 'admin_bad_credentials: failure 3 of 5 in 60 s'],
      [401, '/__wr/api/admit', '198.51.100.7', 'api_bad_token: failure 4 of 5 in 60 s'],
      [429, '/__wr/api/admit', '198.51.100.7', 'api_bad_token: failure 5 of 5 in 60 s; held for 2 min'],
      [429, '/__wr/api/admit', '198.51.100.7', 'api_held: too many failed sign-ins; not checked'],
    ]);
    // Visitors' and successful requests carry no client key.
    await admin(ADMIN, OPERATOR);
    await handler(new Request(`${SITE}/`), OPERATOR);
    expect(logger.records.slice(-2).map((r) => r.client)).toEqual([undefined, undefined]);
  });
});

describe('several queues', () => {
  it('share one count per client: a guesser held on one queue is held on every queue', async () => {
    const clock = new ManualClock();
    const service = createService(
      source({ ...BASE_SETTINGS, auth_failure_limit: '3', queues: JSON.stringify([{ name: 'sale', paths: ['/sale/*'] }, { name: 'main' }]) }),
      source(BASE_SECRETS),
      {
        store: new MemoryQueueStore(),
        origin: new RecordingOrigin(),
        logger: new MemoryLogger(),
        clock,
        cache: new MemoryStateCache(clock),
        authLimiter: new MemoryFailureLimiter(clock),
        ticketLimiter: new MemoryFailureLimiter(clock),
      },
    );
    const state = (queue: string, authorization: string, client = GUESSER) =>
      service.handler(new Request(`${SITE}/__wr/admin/state?queue=${queue}`, { headers: { authorization } }), client);
    expect((await state('sale', basic('admin', 'a'))).status).toBe(401);
    expect((await state('main', basic('admin', 'b'))).status).toBe(401);
    expect((await state('sale', basic('admin', 'c'))).status).toBe(429);
    expect((await state('main', ADMIN)).status).toBe(429);
    expect((await state('main', ADMIN, OPERATOR)).status).toBe(200);
  });
});

describe('the throttle settings', () => {
  it('default to 10 failures a minute, then a 5-minute hold', () => {
    const config = parseConfig(source(BASE_SETTINGS));
    expect([config.authFailureLimit, config.authFailureWindowSeconds, config.authPenaltyMinutes]).toEqual([10, 60, 5]);
  });

  it('refuse values Fastly cannot count or hold, naming each key', () => {
    expect(() => parseConfig(source({ ...BASE_SETTINGS, auth_failure_limit: '0', auth_failure_window_seconds: '15', auth_penalty_minutes: '90' }))).toThrow(
      /auth_failure_limit: must be between 1 and 100.*auth_failure_window_seconds: must be one of 10, 20, 30, 40, 50, 60.*auth_penalty_minutes: must be between 1 and 60/,
    );
    expect(() => parseConfig(source({ ...BASE_SETTINGS, auth_penalty_minutes: '0.5' }))).toThrow(/auth_penalty_minutes: must be a whole number/);
  });

  it('belong to the whole service: one queue cannot loosen them', () => {
    const queues = JSON.stringify([{ name: 'sale', settings: { auth_failure_limit: 100 } }]);
    expect(() => parseQueues(source({ ...BASE_SETTINGS, queues }))).toThrow(/queues\[0\]\.settings\.auth_failure_limit: is a setting of the whole service/);
  });
});

describe('the in-memory limiter (the Node host)', () => {
  let clock: ManualClock;
  let limiter: MemoryFailureLimiter;
  beforeEach(() => {
    clock = new ManualClock();
    limiter = new MemoryFailureLimiter(clock);
  });

  it('counts failures over a sliding window of whole seconds', async () => {
    for (let i = 0; i < 3; i++) await limiter.countFailure('a', 60);
    clock.advance(30_000);
    expect(await limiter.countFailure('a', 60)).toBe(4);
    expect(await limiter.countFailure('a', 10)).toBe(2);
    // Another client's failures are its own.
    expect(await limiter.countFailure('b', 60)).toBe(1);
    // 59 s after the first three they still count; at 60 s they have left the window.
    clock.advance(29_000);
    expect(await limiter.countFailure('a', 60)).toBe(6);
    clock.advance(1000);
    expect(await limiter.countFailure('a', 60)).toBe(4);
    // Over 20 s: the one at 59 s and the two at 60 s (this one included).
    expect(await limiter.countFailure('a', 20)).toBe(3);
  });

  it('holds for whole minutes; holding again restarts the hold', async () => {
    expect(await limiter.isHeld('a')).toBe(false);
    await limiter.hold('a', 1);
    clock.advance(59_999);
    expect(await limiter.isHeld('a')).toBe(true);
    await limiter.hold('a', 1);
    clock.advance(59_999);
    expect(await limiter.isHeld('a')).toBe(true);
    expect(await limiter.isHeld('b')).toBe(false);
    clock.advance(1);
    expect(await limiter.isHeld('a')).toBe(false);
  });

  it('refuses what Fastly refuses: other windows and holds outside 1-60 whole minutes', async () => {
    await expect(limiter.countFailure('a', 15 as FailureWindow)).rejects.toThrow(TypeError);
    for (const minutes of [0, 61, 1.5]) await expect(limiter.hold('a', minutes)).rejects.toThrow(TypeError);
  });

  it('keeps a bounded number of clients under a flood of distinct addresses, evicting the least recently counted', async () => {
    const small = new MemoryFailureLimiter(clock, { maxClients: 100 });
    await small.countFailure('guesser', 60);
    await small.countFailure('guesser', 60);
    for (let i = 0; i < 98; i++) await small.countFailure(`10.0.0.${i}`, 60);
    // Counted again just now: the guesser is not the one pushed out next.
    expect(await small.countFailure('guesser', 60)).toBe(3);
    for (let i = 0; i < 5000; i++) await small.countFailure(`10.1.${i >> 8}.${i & 255}`, 60);
    expect(small.counted).toBe(100);
    // Pushed out by the flood: it starts again from zero, as on Fastly.
    expect(await small.countFailure('guesser', 60)).toBe(1);
  });

  it('bounds its tables by default too', async () => {
    for (let i = 0; i < 30_000; i++) {
      const key = `2001:db8:${i}::/64`;
      await limiter.countFailure(key, 60);
      await limiter.hold(key, 5);
    }
    expect(limiter.counted).toBe(10_000);
    expect(limiter.heldEntries).toBe(10_000);
  });

  it('when the holds are full, drops ended holds first, then the one that ends soonest', async () => {
    const small = new MemoryFailureLimiter(clock, { maxHeld: 3 });
    const held = async (...keys: string[]) => Promise.all(keys.map((key) => small.isHeld(key)));
    await small.hold('a', 5);
    await small.hold('b', 5);
    clock.advance(4 * 60_000);
    await small.hold('c', 5);
    // Held again: its hold now ends last, so b is the one that ends soonest.
    await small.hold('a', 5);
    clock.advance(60_000);
    // b has just ended: it goes, and the live holds stay.
    await small.hold('d', 5);
    expect(small.heldEntries).toBe(3);
    expect(await held('a', 'c', 'd')).toEqual([true, true, true]);
    // None has ended: the one that ends soonest (c) goes.
    await small.hold('e', 5);
    expect(await held('a', 'c', 'd', 'e')).toEqual([true, false, true, true]);
  });
});
