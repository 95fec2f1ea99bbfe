/**
 * Console accounts: the `admin_accounts` secret's parsing (every mistake named), the KDF (the same
 * bytes as Node's own PBKDF2, on both of our code paths), roles, the verified-sign-in cache, and
 * through the handler: who may do what, the per-account throttle, the sign-out, and the audit trail
 * each change leaves (with the actor on the log line).
 */
import { pbkdf2Sync, randomBytes } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  allows,
  checkPassword,
  hashPassword,
  MAX_ITERATIONS,
  MIN_ITERATIONS,
  parseAccounts,
  parsePasswordHash,
  pbkdf2ByHmac,
  pbkdf2Sha256,
  verifyPassword,
  VerifiedCache,
  type Account,
} from '../src/core/accounts';
import { consoleAccounts } from '../src/core/admin';
import { decodeAuditEntry, encodeAuditEntry, readAudit, type AuditEntry } from '../src/core/audit';
import { ACCOUNT_ALLOWANCE_MULTIPLE } from '../src/core/auth-throttle';
import { ConfigError, parseConfig, parseSecrets } from '../src/core/config';
import { createHandler, type Handler } from '../src/core/handler';
import { timingSafeEqual } from '../src/core/http';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { hashForAccount } from '../src/node/keys';
import { ADMIN_PASSWORD, API_TOKEN, BASE_SECRETS, BASE_SETTINGS, FaultyStore, ManualClock, MemoryLogger, RecordingOrigin, source } from './support/fixtures';

const SITE = 'https://shop.example';
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const PASSWORDS = { vera: 'vera-views-9f3k2q', otto: 'otto-operates-7h2m', ada: 'ada-administers-4x8p' } as const;
const FROM = { address: '203.0.113.9', pop: 'TST' };

let ACCOUNTS_JSON: string;
beforeAll(async () => {
  ACCOUNTS_JSON = JSON.stringify({
    vera: { role: 'viewer', hash: await hashPassword(PASSWORDS.vera, MIN_ITERATIONS) },
    otto: { role: 'operator', hash: await hashPassword(PASSWORDS.otto, MIN_ITERATIONS) },
    ada: { role: 'admin', hash: await hashPassword(PASSWORDS.ada, MIN_ITERATIONS) },
  });
});

describe('the KDF', () => {
  it('is PBKDF2-HMAC-SHA256: the RFC 7914 vector, and Node\'s pbkdf2Sync on random inputs, on both code paths', async () => {
    const vector = '120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b';
    const salt = new TextEncoder().encode('salt');
    expect(Buffer.from(await pbkdf2ByHmac('password', salt, 1)).toString('hex')).toBe(vector);
    expect(Buffer.from(await pbkdf2Sha256('password', salt, 1)).toString('hex')).toBe(vector);
    for (let i = 0; i < 4; i++) {
      const password = randomBytes(10).toString('base64') + 'ü€';
      const s = new Uint8Array(randomBytes(16));
      const iterations = 1000 + i * 777;
      const expected = pbkdf2Sync(password, s, iterations, 32, 'sha256').toString('hex');
      expect(Buffer.from(await pbkdf2ByHmac(password, s, iterations)).toString('hex')).toBe(expected);
      expect(Buffer.from(await pbkdf2Sha256(password, s, iterations)).toString('hex')).toBe(expected);
    }
  });

  it('makes a hash that verifies its password and no other, with a new salt each time', async () => {
    const a = await hashPassword('a-long-enough-password', MIN_ITERATIONS);
    const b = await hashPassword('a-long-enough-password', MIN_ITERATIONS);
    expect(a).toMatch(/^pbkdf2-sha256\$1000\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(a).not.toBe(b);
    expect(await verifyPassword('a-long-enough-password', parsePasswordHash(a))).toBe(true);
    expect(await verifyPassword('a-long-enough-passwore', parsePasswordHash(a))).toBe(false);
    expect(await verifyPassword('', parsePasswordHash(a))).toBe(false);
  });

  it('refuses iterations out of bounds, when made and when read', async () => {
    await expect(hashPassword('x'.repeat(12), MIN_ITERATIONS - 1)).rejects.toThrow(/iterations/);
    await expect(hashPassword('x'.repeat(12), MAX_ITERATIONS + 1)).rejects.toThrow(/iterations/);
    const good = await hashPassword('x'.repeat(12), MIN_ITERATIONS);
    expect(() => parsePasswordHash(good.replace('$1000$', '$999$'))).toThrow(/iterations must be from 1000/);
  });

  it('npm run keys -- hash-password refuses a short or guessable password', async () => {
    await expect(hashForAccount('short-pw')).rejects.toThrow(/at least 12/);
    await expect(hashForAccount('Password1234!')).rejects.toThrow(/first passwords/);
    const hash = await hashForAccount('a-fine-long-password-93\n', MIN_ITERATIONS);
    // The line's end read from stdin is not part of the password.
    expect(await verifyPassword('a-fine-long-password-93', parsePasswordHash(hash))).toBe(true);
  });
});

describe('admin_accounts', () => {
  const hash = () => JSON.parse(ACCOUNTS_JSON).otto.hash as string;
  const refusal = (text: string): string => {
    try {
      parseSecrets(source({ ...BASE_SECRETS, admin_accounts: text }));
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const problems = (error as ConfigError).problems;
      expect(problems.map((p) => p.key)).toEqual(['admin_accounts']);
      return problems[0]!.message;
    }
    throw new Error('accepted');
  };

  it('parses names, roles and hashes', () => {
    const accounts = parseAccounts(ACCOUNTS_JSON);
    expect(accounts.map((a) => [a.name, a.role])).toEqual([['vera', 'viewer'], ['otto', 'operator'], ['ada', 'admin']]);
    expect(parseSecrets(source({ ...BASE_SECRETS, admin_accounts: ACCOUNTS_JSON })).adminAccounts).toHaveLength(3);
    expect(parseSecrets(source(BASE_SECRETS)).adminAccounts).toEqual([]);
  });

  it('names what is wrong, and the key, never the hash', () => {
    expect(refusal('{nope')).toMatch(/JSON object/);
    expect(refusal('[]')).toMatch(/JSON object/);
    expect(refusal('{}')).toMatch(/names no account/);
    expect(refusal(JSON.stringify({ 'bad:name': { role: 'admin', hash: hash() } }))).toMatch(/account "bad:name": a name is/);
    expect(refusal(JSON.stringify({ API: { role: 'admin', hash: hash() } }))).toMatch(/kept for the origin's API token/);
    expect(refusal(JSON.stringify({ otto: { role: 'admin', hash: hash() }, OTTO: { role: 'viewer', hash: hash() } }))).toMatch(/"OTTO" is given twice/);
    expect(refusal(JSON.stringify({ otto: { role: 'root', hash: hash() } }))).toMatch(/role must be viewer, operator or admin/);
    expect(refusal(JSON.stringify({ otto: { role: 'admin' } }))).toMatch(/hash is missing/);
    expect(refusal(JSON.stringify({ otto: { role: 'admin', hash: hash(), password: 'x' } }))).toMatch(/unknown field "password"/);
    expect(refusal(JSON.stringify({ otto: { role: 'admin', hash: 'plain-text-password' } }))).toMatch(/account "otto": hash must be "pbkdf2-sha256/);
    const short = hash().replace(/\$[^$]+$/, '$AAAA');
    const message = refusal(JSON.stringify({ otto: { role: 'admin', hash: short } }));
    expect(message).toMatch(/hash value must be 32 bytes/);
    expect(message).not.toContain(short);
  });

  it('keeps admin_password as an admin account named admin_user, unless a named account takes the name', () => {
    const named = parseAccounts(ACCOUNTS_JSON);
    expect(consoleAccounts({ adminPassword: ADMIN_PASSWORD, adminAccounts: [] }, 'admin')).toEqual([{ name: 'admin', role: 'admin', password: ADMIN_PASSWORD }]);
    expect(consoleAccounts({ adminPassword: ADMIN_PASSWORD, adminAccounts: named }, 'admin').map((a) => a.name)).toEqual(['vera', 'otto', 'ada', 'admin']);
    expect(consoleAccounts({ adminPassword: ADMIN_PASSWORD, adminAccounts: named }, 'ada').map((a) => a.name)).toEqual(['vera', 'otto', 'ada']);
    expect(consoleAccounts({ adminPassword: undefined, adminAccounts: [] }, 'admin')).toEqual([]);
  });
});

describe('roles', () => {
  it('viewer reads; operator also changes; admin also resets', () => {
    expect([allows('viewer', 'read'), allows('viewer', 'change'), allows('viewer', 'reset')]).toEqual([true, false, false]);
    expect([allows('operator', 'read'), allows('operator', 'change'), allows('operator', 'reset')]).toEqual([true, true, false]);
    expect([allows('admin', 'read'), allows('admin', 'change'), allows('admin', 'reset')]).toEqual([true, true, true]);
  });
});

describe('the verified sign-in cache', () => {
  it('remembers a right password until it expires, never a wrong one, and is bounded', async () => {
    const cache = new VerifiedCache(1000, 3);
    const [otto] = parseAccounts(ACCOUNTS_JSON).filter((a) => a.name === 'otto') as [Account];
    expect(await checkPassword(otto, 'wrong-password-123', 0, timingSafeEqual, cache)).toBe(false);
    expect(cache.size).toBe(0);
    expect(await checkPassword(otto, PASSWORDS.otto, 0, timingSafeEqual, cache)).toBe(true);
    const key = await VerifiedCache.keyOf(otto, PASSWORDS.otto);
    expect(key).not.toContain(PASSWORDS.otto);
    expect(cache.has(key, 999)).toBe(true);
    expect(cache.has(key, 1000)).toBe(false);
    // Another hash for the same name (a changed password) is another key: checked anew.
    const changed: Account = { ...otto, hash: parsePasswordHash(await hashPassword(PASSWORDS.otto, MIN_ITERATIONS)) };
    expect(await VerifiedCache.keyOf(changed, PASSWORDS.otto)).not.toBe(key);
    expect(await VerifiedCache.keyOf({ ...otto, role: 'admin' }, PASSWORDS.otto)).not.toBe(key);
    for (let i = 0; i < 5; i++) cache.add(`k${i}`, 0);
    expect(cache.size).toBe(3);
    expect([cache.has('k0', 1), cache.has('k1', 1), cache.has('k4', 1)]).toEqual([false, false, true]);
  });
});

describe('the audit entry', () => {
  it('round-trips, and a damaged entry is skipped, not an error', async () => {
    const entry: AuditEntry = { atMs: 1_700_000_000_000, actor: 'otto', role: 'operator', client: '203.0.113.9', action: 'control', change: 'Admission paused.', before: { paused: false }, after: { paused: true } };
    expect(decodeAuditEntry(encodeAuditEntry(entry))).toEqual(entry);
    for (const bad of ['', '{', '[]', '{"t":1}', encodeAuditEntry(entry).replace('"operator"', '"root"'), encodeAuditEntry(entry).replace('"control"', '"dance"')]) {
      expect(decodeAuditEntry(bad)).toBeUndefined();
    }
    const store = new MemoryQueueStore();
    await store.appendAudit('q', encodeAuditEntry(entry), entry.atMs);
    await store.appendAudit('q', 'garbage', entry.atMs + 1);
    await store.appendAudit('q', encodeAuditEntry({ ...entry, atMs: entry.atMs + 2, change: 'Admission resumed.' }), entry.atMs + 2);
    const read = await readAudit(store, 'q', entry.atMs, entry.atMs + 3);
    expect(read.map((e) => e.change)).toEqual(['Admission paused.', 'Admission resumed.']);
    expect((await readAudit(store, 'q', entry.atMs + 1, entry.atMs + 3)).map((e) => e.change)).toEqual(['Admission resumed.']);
  });
});

describe('accounts through the handler', () => {
  const SETTINGS = { auth_failure_limit: '5', auth_penalty_minutes: '2' };
  let clock: ManualClock;
  let logger: MemoryLogger;
  let store: FaultyStore;
  let handler: Handler;

  beforeEach(() => {
    clock = new ManualClock();
    logger = new MemoryLogger();
    store = new FaultyStore(new MemoryQueueStore());
    handler = createHandler({
      config: parseConfig(source({ ...BASE_SETTINGS, ...SETTINGS })),
      secrets: parseSecrets(source({ ...BASE_SECRETS, admin_accounts: ACCOUNTS_JSON })),
      store,
      origin: new RecordingOrigin(),
      logger,
      clock,
      cache: new MemoryStateCache(clock),
      authLimiter: new MemoryFailureLimiter(clock),
    });
  });

  const as = (name: keyof typeof PASSWORDS | 'admin') => basic(name, name === 'admin' ? ADMIN_PASSWORD : PASSWORDS[name]);
  const get = (authorization: string, path: string, client = FROM) => handler(new Request(`${SITE}/__wr/${path}`, { headers: { authorization } }), client);
  /** A console form post with a fresh form token from the live figures. */
  const post = async (authorization: string, path: string, fields: Record<string, string>, client = FROM) => {
    const live = await get(as('ada'), 'admin/live');
    const csrf = ((await live.json()) as { csrf: string }).csrf;
    return handler(
      new Request(`${SITE}/__wr/${path}`, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
        body: new URLSearchParams({ csrf, ...fields }).toString(),
      }),
      client,
    );
  };
  const join = () => handler(new Request(`${SITE}/`), { address: '198.51.100.20', pop: 'TST' });
  const audit = async () => ((await (await get(as('vera'), 'admin/audit')).json()) as { entries: Record<string, unknown>[] }).entries;

  it('a viewer sees the console, the figures and the trail, and every change is a 403 that says why', async () => {
    for (const path of ['admin', 'admin/state', 'admin/live', 'admin/metrics', 'admin/audit']) expect((await get(as('vera'), path)).status).toBe(200);
    const page = await (await get(as('vera'), 'admin')).text();
    expect(page).toContain('Signed in as <strong>vera</strong> (viewer)');
    // Every control is off: no button, select or visible input without `disabled`.
    const controls = [...page.matchAll(/<(button|select|input)\b[^>]*>/g)].map((m) => m[0]).filter((tag) => !tag.includes('type="hidden"'));
    expect(controls.length).toBeGreaterThan(10);
    expect(controls.filter((tag) => !/\sdisabled\b/.test(tag))).toEqual([]);
    for (const [path, fields] of [
      ['admin/admit', { count: '1' }],
      ['admin/control', { paused: 'true' }],
      ['admin/vip', { count: '1' }],
      ['admin/reset', { confirm: 'default' }],
    ] as const) {
      const refused = await post(as('vera'), path, fields);
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { error: string }).error).toMatch(/"vera" is a viewer: it may not (change anything|reset the queue).*nothing changed/);
    }
    expect(await audit()).toEqual([]);
    expect(logger.records.filter((r) => r.status === 403).map((r) => r.actor)).toEqual(['vera', 'vera', 'vera', 'vera']);
  });

  it('an operator admits, pauses and makes VIP codes, but may not reset; the trail says who did what, from where', async () => {
    for (let i = 0; i < 3; i++) await join();
    expect((await post(as('otto'), 'admin/admit', { count: '2' })).status).toBe(200);
    expect((await post(as('otto'), 'admin/control', { paused: 'true' })).status).toBe(200);
    const vip = await post(as('otto'), 'admin/vip', { count: '2' });
    expect(vip.status).toBe(200);
    const codes = ((await vip.json()) as { codes: { code: string }[] }).codes.map((c) => c.code);
    const reset = await post(as('otto'), 'admin/reset', { confirm: 'default' });
    expect(reset.status).toBe(403);
    expect(((await reset.json()) as { error: string }).error).toMatch(/"otto" is an operator: it may not reset the queue \(that needs an admin\)/);
    expect((await post(as('ada'), 'admin/reset', { confirm: 'default' }, { address: '2001:db8:5:6::7', pop: 'TST' })).status).toBe(200);
    const apiAdmit = await handler(new Request(`${SITE}/__wr/api/admit?count=1`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } }), { address: '192.0.2.10', pop: 'TST' });
    expect(apiAdmit.status).toBe(200);
    const entries = await audit();
    expect(entries.map((e) => [e['actor'], e['role'], e['action'], e['client']])).toEqual([
      ['api', 'api', 'admit', '192.0.2.10'],
      ['ada', 'admin', 'reset', '2001:db8:5:6::/64'],
      ['otto', 'operator', 'vip_codes', '203.0.113.9'],
      ['otto', 'operator', 'control', '203.0.113.9'],
      ['otto', 'operator', 'admit', '203.0.113.9'],
    ]);
    expect(entries[4]).toMatchObject({ change: 'Let 2 visitors in (asked 2).', after: { admitted: 2, cursor: 2, tail: 3 } });
    expect(entries[0]).toMatchObject({ change: 'Origin admits in the minute from 12:00 UTC: let in 0, calls 1.' });
    expect(entries[3]).toMatchObject({ change: 'Admission paused.', after: { paused: true } });
    // The codes themselves are never in the trail (a viewer reads it).
    expect(JSON.stringify(entries)).not.toContain(codes[0]);
    expect(entries.every((e) => typeof e['at'] === 'string' && !Number.isNaN(Date.parse(e['at'] as string)))).toBe(true);
    // The log line of each change carries who and what.
    const changes = logger.records.filter((r) => r.status === 200 && r.path.match(/admin\/(admit|control)$/));
    expect(changes.map((r) => [r.actor, r.reason])).toEqual([
      ['otto', 'admitted 2'],
      ['otto', 'control Admission paused.'],
    ]);
    // The console lists them, newest first, with the actor.
    const page = await (await get(as('ada'), 'admin')).text();
    const listed = [...page.matchAll(/<strong data-actor>([^<]+)<\/strong>/g)].map((m) => m[1]);
    expect(listed).toEqual(['api', 'ada', 'otto', 'otto', 'otto']);
  });

  it('a change whose audit entry the store did not take still stands, and the answer and the log say so', async () => {
    await join();
    const original = store.appendAudit;
    store.appendAudit = () => Promise.reject(new Error('store is down'));
    const answer = await post(as('otto'), 'admin/control', { paused: 'true' });
    store.appendAudit = original;
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as { paused: boolean; audit_warning: string };
    expect(body.paused).toBe(true);
    expect(body.audit_warning).toMatch(/applied, but the audit trail did not record it/);
    expect(logger.records.find((r) => r.path === '/__wr/admin/control')).toMatchObject({ actor: 'otto', reason: expect.stringMatching(/^control Admission paused\.; audit not stored/) });
    expect(await audit()).toEqual([]);
  });

  it("the origin's admits of a minute are one entry, added up; a person's change in between starts a new one", async () => {
    for (let i = 0; i < 10; i++) await join();
    const origin = (count: number) =>
      handler(new Request(`${SITE}/__wr/api/admit?count=${count}`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } }), { address: '192.0.2.10', pop: 'TST' });
    for (const count of [1, 2, 1]) expect((await origin(count)).status).toBe(200);
    expect((await post(as('otto'), 'admin/control', { paused: 'true' })).status).toBe(200);
    expect((await post(as('otto'), 'admin/control', { paused: 'false' })).status).toBe(200);
    expect((await origin(3)).status).toBe(200);
    clock.advance(60_000);
    expect((await origin(1)).status).toBe(200);
    expect((await audit()).map((e) => e['change'])).toEqual([
      'Origin admits in the minute from 12:01 UTC: let in 1, calls 1.',
      'Origin admits in the minute from 12:00 UTC: let in 3, calls 1.',
      'Admission resumed.',
      'Admission paused.',
      'Origin admits in the minute from 12:00 UTC: let in 4, calls 3.',
    ]);
  });

  it("the sale's report puts the trail's entries on its timeline, with who did them, in JSON and CSV", async () => {
    for (let i = 0; i < 3; i++) await join();
    expect((await post(as('otto'), 'admin/control', { paused: 'true' })).status).toBe(200);
    clock.advance(60_000);
    expect((await post(as('ada'), 'admin/control', { paused: 'false' })).status).toBe(200);
    clock.advance(60_000);
    const origin = await handler(new Request(`${SITE}/__wr/api/admit?count=1`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } }), { address: '192.0.2.10', pop: 'TST' });
    expect(origin.status).toBe(200);
    clock.advance(60_000);
    const json = await get(as('vera'), 'admin/report.json');
    expect(json.status).toBe(200);
    const actions = ((await json.json()) as { actions: { action: string; actor?: string; source: string }[] }).actions.filter((a) => a.source === 'audit');
    expect(actions.map((a) => [a.actor, a.action])).toEqual([
      ['otto', 'Admission paused.'],
      ['ada', 'Admission resumed.'],
      ['api', 'Origin admits in the minute from 12:02 UTC: let in 1, calls 1.'],
    ]);
    const csv = await (await handler(new Request(`${SITE}/__wr/api/report.csv`, { headers: { authorization: `Bearer ${API_TOKEN}` } }), FROM)).text();
    expect(csv).toContain('Admission paused. (otto)');
    // A trail the store cannot read leaves the report with what the record saw.
    store.readAudit = () => Promise.reject(new Error('store is down'));
    const without = await get(as('vera'), 'admin/report.json');
    expect(without.status).toBe(200);
    expect(((await without.json()) as { actions: { source: string }[] }).actions.every((a) => a.source === 'record')).toBe(true);
  });

  it('admin_password still signs in, as the admin account named admin_user', async () => {
    expect((await get(as('admin'), 'admin/state')).status).toBe(200);
    expect((await post(as('admin'), 'admin/reset', { confirm: 'default' })).status).toBe(200);
    expect((await audit())[0]).toMatchObject({ actor: 'admin', role: 'admin', action: 'reset' });
  });

  it('holds an account guessed at from many addresses, while other accounts sign in', async () => {
    const limit = 5 * ACCOUNT_ALLOWANCE_MULTIPLE;
    const statuses: number[] = [];
    // One guess from each of many addresses: no client reaches its own limit.
    for (let n = 0; n < limit + 2; n++) statuses.push((await get(basic('otto', `guess-${n}`), 'admin/state', { address: `198.51.100.${n + 1}`, pop: 'TST' })).status);
    expect(statuses.slice(0, limit - 1).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(limit - 1).every((s) => s === 429)).toBe(true);
    const held = await get(as('otto'), 'admin/state');
    expect(held.status).toBe(429);
    expect(((await held.json()) as { error: string }).error).toMatch(/for this account/);
    expect((await get(as('ada'), 'admin/state')).status).toBe(200);
    clock.advance(2 * 60_000 + 1000);
    expect((await get(as('otto'), 'admin/state')).status).toBe(200);
  });

  it('an unknown name is refused as a wrong password is', async () => {
    const unknown = await get(basic('mallory', 'whatever-password'), 'admin/state');
    const wrong = await get(basic('otto', 'whatever-password'), 'admin/state');
    expect([unknown.status, wrong.status]).toEqual([401, 401]);
    expect(await unknown.text()).toBe(await wrong.text());
  });

  it('signs out: a 401 with the console\'s realm and a marker, and signing in again at that prompt goes back to the console', async () => {
    const out = await get(as('otto'), 'admin/sign-out');
    expect(out.status).toBe(401);
    expect(out.headers.get('www-authenticate')).toMatch(/^Basic realm="waiting room admin"/);
    expect(out.headers.get('set-cookie')).toMatch(/^wr_signed_out=1; Max-Age=600; Path=\/__wr\/admin\/sign-out; HttpOnly; Secure; SameSite=Strict$/);
    expect(await out.text()).toContain('Signed out');
    const again = await handler(new Request(`${SITE}/__wr/admin/sign-out`, { headers: { authorization: as('otto'), cookie: 'wr_signed_out=1' } }), FROM);
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toBe('/__wr/admin');
    expect(again.headers.get('set-cookie')).toMatch(/^wr_signed_out=; Max-Age=0/);
    // Back in the console, the marker is spent: the next sign-out signs out.
    expect((await get(as('otto'), 'admin')).headers.get('set-cookie')).toBe('wr_signed_out=; Max-Age=0; Path=/__wr/admin/sign-out; HttpOnly; Secure; SameSite=Strict');
  });
});
