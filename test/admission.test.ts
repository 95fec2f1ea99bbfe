/**
 * The signed admission (issue 15): the keys, the token (checked with jose and, independently, with
 * `jws`), what every request to the origin carries and how (carried, shared, signed), the JWKS, key
 * rotation, and the origin's side (src/node/admission-check.ts) against a waiting room over HTTP.
 */
import { createPublicKey } from 'node:crypto';
import jws from 'jws';
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAdmissionKeys, jwksDocument } from '../src/core/admission-keys';
import { ADMISSION_ISSUER, signAdmission } from '../src/core/admission';
import { parseConfig, parseSecrets } from '../src/core/config';
import type { Handler } from '../src/core/handler';
import { createAdmissionCheck } from '../src/node/admission-check';
import { startHost, type RunningServer } from '../src/node/host';
import { createService } from '../src/core/service';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import {
  ADMISSION_KEY_1,
  ADMISSION_KEY_2,
  API_TOKEN,
  BASE_SECRETS,
  BASE_SETTINGS,
  cookieFrom,
  FaultyStore,
  ManualClock,
  MemoryLogger,
  RecordingOrigin,
  source,
  testHandler,
} from './support/fixtures';

const NOW = Date.UTC(2026, 10, 25, 12, 0, 0);
const SITE = 'https://shop.example';
const CLIENT = { address: '198.51.100.7', pop: 'TEST' };
const HEADER = 'waiting-room-admission';

const keysOf = (...jwks: object[]) => parseAdmissionKeys(JSON.stringify(jwks));
const settingsOf = (extra: Record<string, string> = {}) => parseConfig(source({ ...BASE_SETTINGS, ...extra }));

/** Verifies as an origin would, with jose and the published keys. */
async function verifyAtOrigin(token: string, keys: object[], at: number, audience = 'origin') {
  return jwtVerify(token, createLocalJWKSet(jwksDocument(keysOf(...keys))), { issuer: ADMISSION_ISSUER, audience, algorithms: ['ES256'], currentDate: new Date(at) });
}

describe('admission keys', () => {
  it('reads a JSON array of private P-256 JWKs and publishes only their public halves', () => {
    const keys = keysOf(ADMISSION_KEY_2, ADMISSION_KEY_1);
    expect(keys.map((k) => k.kid)).toEqual(['test-adm-2', 'test-adm-1']);
    const published = jwksDocument(keys);
    expect(published.keys).toEqual([
      { kty: 'EC', crv: 'P-256', x: ADMISSION_KEY_2.x, y: ADMISSION_KEY_2.y, kid: 'test-adm-2', alg: 'ES256', use: 'sig' },
      { kty: 'EC', crv: 'P-256', x: ADMISSION_KEY_1.x, y: ADMISSION_KEY_1.y, kid: 'test-adm-1', alg: 'ES256', use: 'sig' },
    ]);
    expect(JSON.stringify(published)).not.toContain(ADMISSION_KEY_1.d);
  });

  it.each([
    ['not JSON', '{', /JSON array/],
    ['an empty array', '[]', /non-empty/],
    ['another curve', JSON.stringify([{ ...ADMISSION_KEY_1, crv: 'P-384' }]), /P-256/],
    ['an RSA key', JSON.stringify([{ kty: 'RSA', kid: 'r', n: 'x', e: 'AQAB' }]), /EC key on P-256/],
    ['a public key only', JSON.stringify([{ ...ADMISSION_KEY_1, d: undefined }]), /private part d/],
    ['no kid', JSON.stringify([{ ...ADMISSION_KEY_1, kid: undefined }]), /kid/],
    ['the same kid twice', JSON.stringify([ADMISSION_KEY_1, ADMISSION_KEY_1]), /repeats the kid/],
  ])('refuses %s, saying why', (_what, text, message) => {
    expect(() => parseAdmissionKeys(text)).toThrow(message);
    // The service refuses the secret by name, as it does a broken signing key.
    expect(() => parseSecrets(source({ ...BASE_SECRETS, admission_keys: text }))).toThrow(/admission_keys/);
  });
});

describe('the admission token', () => {
  it('is an ES256 JWS with a kid, issuer, audience and a short life, that jose and jws both verify', async () => {
    const [key] = keysOf(ADMISSION_KEY_1);
    const { token, exp } = await signAdmission(key!, settingsOf(), { via: 'queue', ticket: 42, admittedAt: NOW / 1000 - 30, sessionExpires: NOW / 1000 + 600 }, NOW);
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'ES256', kid: 'test-adm-1', typ: 'JWT' });
    const { payload } = await verifyAtOrigin(token, [ADMISSION_KEY_1], NOW);
    expect(payload).toEqual({
      iss: 'waiting-room',
      aud: 'origin',
      iat: NOW / 1000,
      exp: NOW / 1000 + 120,
      queue: 'default',
      ticket: 42,
      admitted_at: NOW / 1000 - 30,
      session_expires: NOW / 1000 + 600,
      via: 'queue',
    });
    expect(exp).toBe(NOW / 1000 + 120);
    // An independent implementation of the format agrees (jws, with the public key as PEM).
    const pem = createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: ADMISSION_KEY_1.x, y: ADMISSION_KEY_1.y }, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString();
    expect(jws.verify(token, 'ES256', pem)).toBe(true);
    expect(jws.verify(token, 'ES256', createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: ADMISSION_KEY_2.x, y: ADMISSION_KEY_2.y }, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString())).toBe(false);
  });

  it('never outlives the session, carries only the claims chosen, and fails at the origin when expired or for another audience', async () => {
    const [key] = keysOf(ADMISSION_KEY_1);
    const settings = settingsOf({ admission_claims: 'via,ticket', admission_audience: 'shop-origin' });
    const { token } = await signAdmission(key!, settings, { via: 'walk-in', ticket: 7, admittedAt: 1, sessionExpires: NOW / 1000 + 30 }, NOW);
    const claims = decodeJwt(token);
    expect(claims).toEqual({ iss: 'waiting-room', aud: 'shop-origin', iat: NOW / 1000, exp: NOW / 1000 + 30, via: 'walk-in', ticket: 7 });
    await expect(verifyAtOrigin(token, [ADMISSION_KEY_1], NOW + 31_000, 'shop-origin')).rejects.toMatchObject({ code: 'ERR_JWT_EXPIRED' });
    await expect(verifyAtOrigin(token, [ADMISSION_KEY_1], NOW, 'origin')).rejects.toMatchObject({ code: 'ERR_JWT_CLAIM_VALIDATION_FAILED' });
  });

  it('refuses bad claim lists and header names in the settings', () => {
    expect(() => settingsOf({ admission_claims: 'queue,email' })).toThrow(/admission_claims/);
    expect(() => settingsOf({ admission_header: 'X Admission' })).toThrow(/admission_header/);
    expect(() => settingsOf({ admission_lifetime_seconds: '5' })).toThrow(/admission_lifetime_seconds/);
    expect(settingsOf({ admission_header: 'Waiting-Room-Admission' }).admissionHeader).toBe('waiting-room-admission');
  });
});

describe('every request the edge passes to the origin', () => {
  function rig(settings: Record<string, string> = {}, secrets: Record<string, string> = {}) {
    const clock = new ManualClock(NOW);
    const origin = new RecordingOrigin();
    const logger = new MemoryLogger();
    const store = new FaultyStore(new MemoryQueueStore());
    const handler = testHandler(
      { admit_per_period: '100', bypass_paths: '/robots.txt', queue_paths: '/shop/*', ...settings },
      { store, clock, origin, logger, secrets: parseSecrets(source({ ...BASE_SECRETS, ...secrets })) },
    );
    return { clock, origin, logger, store, handler };
  }
  const get = (handler: Handler, path: string, cookies: Record<string, string> = {}, headers: Record<string, string> = {}) =>
    handler(new Request(`${SITE}${path}`, { headers: { cookie: Object.entries(cookies).map(([k, v]) => `${k}=${v}`).join('; '), ...headers } }), CLIENT);
  const lastHeader = (origin: RecordingOrigin) => origin.sent.at(-1)?.get(HEADER) ?? undefined;

  it('carries an admission that verifies; a walk-in says so; the client\'s own header never reaches the origin', async () => {
    const r = rig();
    const first = await get(r.handler, '/shop/cart', {}, { [HEADER]: 'forged-by-the-client' });
    const access = cookieFrom(first)!;
    const token = lastHeader(r.origin)!;
    expect(token).not.toBe('forged-by-the-client');
    expect(r.origin.sent.at(-1)!.get(HEADER)).not.toContain('forged');
    const { payload } = await verifyAtOrigin(token, [ADMISSION_KEY_1], NOW);
    expect(payload).toMatchObject({ queue: 'default', ticket: 1, via: 'walk-in', admitted_at: NOW / 1000 });
    // The session's end as the access token says it (session_seconds 600 in the test settings).
    expect(payload['session_expires']).toBe(Number(decodeJwt(access).exp));
    // The admission goes on with the visitor, signed once: the next requests forward the same token.
    const carried = cookieFrom(first, 'waiting_room_adm')!;
    expect(carried.startsWith(`${token}~`)).toBe(true);
    r.clock.advance(10_000);
    const again = await get(r.handler, '/shop/more', { waiting_room: access, waiting_room_adm: carried }, { [HEADER]: token.replace(/.$/, 'x') });
    expect(again.headers.getSetCookie()).toEqual([]);
    expect(lastHeader(r.origin)).toBe(token);
  });

  it('signs again once half its life is gone, and never takes a carried admission that is not bound to this access token', async () => {
    const r = rig();
    const first = await get(r.handler, '/shop/');
    const access = cookieFrom(first)!;
    const carried = cookieFrom(first, 'waiting_room_adm')!;
    const firstToken = lastHeader(r.origin)!;
    // Another visitor's admission, or one tampered with: not this visitor's, signed anew.
    const other = await get(r.handler, '/shop/');
    const otherCarried = cookieFrom(other, 'waiting_room_adm')!;
    await get(r.handler, '/shop/', { waiting_room: access, waiting_room_adm: otherCarried });
    expect(lastHeader(r.origin)).not.toBe(otherCarried.split('~')[0]);
    expect(decodeJwt(lastHeader(r.origin)!)['ticket']).toBe(1);
    await get(r.handler, '/shop/', { waiting_room: access, waiting_room_adm: `${firstToken}~AAAAAAAAAAAAAAAAAAAAAA` });
    expect(decodeJwt(lastHeader(r.origin)!)['ticket']).toBe(1);
    // 61 s on, with the first one: less than half of 120 s left, a new admission and a new cookie.
    r.clock.advance(61_000);
    const later = await get(r.handler, '/shop/', { waiting_room: access, waiting_room_adm: carried });
    expect(lastHeader(r.origin)).not.toBe(firstToken);
    expect(decodeJwt(lastHeader(r.origin)!)['iat']).toBe(NOW / 1000 + 61);
    expect(cookieFrom(later, 'waiting_room_adm')).toBeDefined();
  });

  it('says how requests the queue does not hold got through: a bypass rule, an unqueued path, the store down', async () => {
    const r = rig({ store_failure: 'pass', admit_per_period: '0' });
    await get(r.handler, '/robots.txt', {}, { [HEADER]: 'client' });
    expect(decodeJwt(lastHeader(r.origin)!)).toMatchObject({ via: 'bypass', queue: 'default' });
    expect(decodeJwt(lastHeader(r.origin)!)['ticket']).toBeUndefined();
    await get(r.handler, '/about');
    expect(decodeJwt(lastHeader(r.origin)!)).toMatchObject({ via: 'unqueued' });
    r.store.mode = 'error';
    await get(r.handler, '/shop/');
    expect(r.logger.last?.decision).toBe('unavailable_pass');
    expect(decodeJwt(lastHeader(r.origin)!)).toMatchObject({ via: 'store-down' });
    // None of them costs a store call for the admission.
    expect(r.store.calls).toBe(1);
  });

  it('a VIP code\'s visitor is let in as vip', async () => {
    const r = rig({ admit_per_period: '0' });
    const created = await r.handler(
      new Request(`${SITE}/__wr/api/vip`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ count: 1, uses: 1 }) }),
      CLIENT,
    );
    expect(created.status).toBe(200);
    const { code } = ((await created.json()) as { codes: { code: string }[] }).codes[0]!;
    const redirected = await get(r.handler, `/shop/?wr_vip=${code}`);
    await get(r.handler, '/shop/', { waiting_room: cookieFrom(redirected)! });
    expect(redirected.status).toBe(303);
    expect(decodeJwt(lastHeader(r.origin)!)).toMatchObject({ via: 'vip', ticket: 0 });
  });

  it('with admission_carry = none, the admission never leaves the edge: no cookie, and this host signs a visitor\'s once per half lifetime', async () => {
    const r = rig({ admission_carry: 'none' });
    const first = await get(r.handler, '/shop/');
    expect(cookieFrom(first, 'waiting_room_adm')).toBeUndefined();
    const access = cookieFrom(first)!;
    const token = lastHeader(r.origin)!;
    expect((await verifyAtOrigin(token, [ADMISSION_KEY_1], NOW)).payload).toMatchObject({ ticket: 1, via: 'walk-in' });
    r.clock.advance(10_000);
    const again = await get(r.handler, '/shop/', { waiting_room: access });
    expect(again.headers.getSetCookie()).toEqual([]);
    expect(lastHeader(r.origin)).toBe(token);
    // Another visitor gets its own.
    await get(r.handler, '/shop/');
    expect(decodeJwt(lastHeader(r.origin)!)['ticket']).toBe(2);
    r.clock.advance(61_000);
    await get(r.handler, '/shop/', { waiting_room: access });
    expect(lastHeader(r.origin)).not.toBe(token);
    expect(decodeJwt(lastHeader(r.origin)!)).toMatchObject({ ticket: 1, iat: NOW / 1000 + 71 });
  });

  it('with admission_header = off, adds nothing', async () => {
    const r = rig({ admission_header: 'off' });
    const first = await get(r.handler, '/shop/');
    expect(r.origin.sent.at(-1)!.has(HEADER)).toBe(false);
    expect(cookieFrom(first, 'waiting_room_adm')).toBeUndefined();
  });

  it('without keys, passes the request unsigned and the log says why', async () => {
    const r = rig({}, { admission_keys: '' });
    await get(r.handler, '/shop/', {}, { [HEADER]: 'client' });
    expect(r.origin.sent.at(-1)!.has(HEADER)).toBe(false);
    expect(r.logger.last?.reason).toContain('admission_unsigned: the secret admission_keys is not set');
  });

  describe('with several queues', () => {
    function service(queues: object[]) {
      const clock = new ManualClock(NOW);
      const origin = new RecordingOrigin();
      const logger = new MemoryLogger();
      const built = createService(source({ ...BASE_SETTINGS, admit_per_period: '100', queues: JSON.stringify(queues) }), source(BASE_SECRETS), {
        store: new MemoryQueueStore(),
        origin,
        logger,
        clock,
        cache: new MemoryStateCache(clock),
        authLimiter: new MemoryFailureLimiter(clock),
        ticketLimiter: new MemoryFailureLimiter(clock),
      });
      return { handler: built.handler, origin, logger };
    }

    it('a path no queue holds is signed `via: unqueued`: a client\'s header, even one the room signed for it, never gets through', async () => {
      const s = service([{ name: 'sale', paths: ['/sale/*'] }]);
      const walkIn = await get(s.handler, '/sale/x');
      const genuine = cookieFrom(walkIn, 'waiting_room_sale_adm')!.split('~')[0]!;
      expect(decodeJwt(genuine)).toMatchObject({ queue: 'sale', via: 'walk-in' });
      for (const sent of [genuine, 'forged-by-the-client']) {
        const passed = await get(s.handler, '/api/checkout', {}, { [HEADER]: sent });
        expect(passed.headers.get('x-origin')).toBe('yes');
        const token = lastHeader(s.origin)!;
        expect(token).not.toBe(sent);
        const { payload } = await verifyAtOrigin(token, [ADMISSION_KEY_1], NOW);
        expect(payload).toMatchObject({ via: 'unqueued' });
        expect(payload['ticket']).toBeUndefined();
        expect(s.logger.last).toMatchObject({ decision: 'no_queue', status: 200 });
      }
    });

    it('a queue with admission_header = off still removes the header the other queues sign, and each queue removes every queue\'s', async () => {
      const s = service([
        { name: 'sale', paths: ['/sale/*'], settings: { admission_header: 'x-sale-admission' } },
        { name: 'blog', paths: ['/blog/*'], settings: { admission_header: 'off' } },
        { name: 'shop', paths: ['/*'] },
      ]);
      const client = { [HEADER]: 'forged', 'x-sale-admission': 'forged', 'x-other': 'kept' };
      await get(s.handler, '/blog/post', {}, client);
      let sent = s.origin.sent.at(-1)!;
      expect([sent.has(HEADER), sent.has('x-sale-admission'), sent.get('x-other')]).toEqual([false, false, 'kept']);
      await get(s.handler, '/sale/x', {}, client);
      sent = s.origin.sent.at(-1)!;
      expect(sent.has(HEADER)).toBe(false);
      expect(decodeJwt(sent.get('x-sale-admission')!)).toMatchObject({ queue: 'sale' });
      await get(s.handler, '/cart', {}, client);
      sent = s.origin.sent.at(-1)!;
      expect(sent.has('x-sale-admission')).toBe(false);
      expect(decodeJwt(sent.get(HEADER)!)).toMatchObject({ queue: 'shop' });
    });
  });

  it('publishes the keys at .well-known/jwks.json, cacheable; rotation: the old key verifies while listed, not after', async () => {
    const before = rig();
    await get(before.handler, '/shop/');
    const oldToken = lastHeader(before.origin)!;
    // Rotation: the new key first, the old one still listed.
    const during = rig({}, { admission_keys: JSON.stringify([ADMISSION_KEY_2, ADMISSION_KEY_1]) });
    const jwksResponse = await get(during.handler, '/__wr/.well-known/jwks.json');
    expect(jwksResponse.status).toBe(200);
    expect(jwksResponse.headers.get('cache-control')).toBe('public, max-age=300');
    const published = (await jwksResponse.json()) as { keys: { kid: string; d?: string }[] };
    expect(published.keys.map((k) => k.kid)).toEqual(['test-adm-2', 'test-adm-1']);
    expect(published.keys.every((k) => k.d === undefined)).toBe(true);
    await get(during.handler, '/shop/');
    expect(decodeProtectedHeader(lastHeader(during.origin)!).kid).toBe('test-adm-2');
    const jwks = createLocalJWKSet(published as never);
    await expect(jwtVerify(oldToken, jwks, { audience: 'origin', issuer: 'waiting-room', currentDate: new Date(NOW) })).resolves.toBeDefined();
    // The old key removed: its tokens no longer verify.
    const after = rig({}, { admission_keys: JSON.stringify([ADMISSION_KEY_2]) });
    const afterKeys = createLocalJWKSet((await (await get(after.handler, '/__wr/.well-known/jwks.json')).json()) as never);
    await expect(jwtVerify(oldToken, afterKeys, { audience: 'origin', issuer: 'waiting-room', currentDate: new Date(NOW) })).rejects.toMatchObject({ code: 'ERR_JWKS_NO_MATCHING_KEY' });
    // No keys: the JWKS says so.
    const none = rig({}, { admission_keys: '' });
    expect((await get(none.handler, '/__wr/.well-known/jwks.json')).status).toBe(503);
  });
});

describe('the origin side (src/node/admission-check.ts) against a waiting room over HTTP', () => {
  let room: RunningServer;
  let handler: Handler;
  const clock = new ManualClock(Date.now());
  beforeAll(async () => {
    handler = testHandler({ admit_per_period: '100' }, { store: new MemoryQueueStore(), clock, origin: new RecordingOrigin() });
    room = await startHost(handler);
  });
  afterAll(async () => {
    await room.close();
  });

  it('accepts an admission of the room and refuses none, a forged one and one for another audience', async () => {
    const check = createAdmissionCheck({ jwksUrl: `${room.url}/__wr/.well-known/jwks.json` });
    const origin = new RecordingOrigin();
    const h = testHandler({ admit_per_period: '100' }, { store: new MemoryQueueStore(), clock, origin });
    await h(new Request(`${SITE}/`), CLIENT);
    const token = origin.sent.at(-1)!.get(HEADER)!;
    expect(await check(token)).toMatchObject({ ok: true, claims: { via: 'walk-in', ticket: 1 } });
    expect(await check(undefined)).toEqual({ ok: false, reason: 'no admission header' });
    expect(await check([token, token])).toEqual({ ok: false, reason: 'more than one admission header' });
    const [h64, p64, s64] = token.split('.');
    const forged = `${h64}.${Buffer.from(JSON.stringify({ ...decodeJwt(token), ticket: 2 })).toString('base64url')}.${s64}`;
    expect(await check(forged)).toEqual({ ok: false, reason: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' });
    expect(await createAdmissionCheck({ jwksUrl: `${room.url}/__wr/.well-known/jwks.json`, audience: 'other' })(token)).toMatchObject({ ok: false, reason: 'ERR_JWT_CLAIM_VALIDATION_FAILED' });
    expect(p64).toBeDefined();
  });
});

describe('npm run keys', () => {
  it('makes secrets the service takes: a key ring, a password, a token and an admission key that signs what its JWKS verifies', async () => {
    const { generateSecrets } = await import('../src/node/keys');
    const made = generateSecrets();
    expect(Object.keys(made)).toEqual(['signing_keys', 'admin_password', 'admin_api_token', 'admission_keys']);
    const secrets = parseSecrets(source({ ...made, upstash_token: 't' }));
    expect(secrets.adminPassword).toBe(made['admin_password']);
    const keys = parseAdmissionKeys(made['admission_keys']!);
    const { token } = await signAdmission(keys[0]!, settingsOf(), { via: 'queue' }, NOW);
    await expect(jwtVerify(token, createLocalJWKSet(jwksDocument(keys)), { audience: 'origin', currentDate: new Date(NOW) })).resolves.toBeDefined();
    // Two runs never agree.
    expect(generateSecrets(['admission_keys'])['admission_keys']).not.toBe(made['admission_keys']);
    expect(() => generateSecrets(['upstash_token'])).toThrow(/come from your providers/);
  });
});
