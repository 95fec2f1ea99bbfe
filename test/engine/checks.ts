/**
 * Checks that run inside the real Fastly engine (SpiderMonkey compiled to wasm).
 *
 * Build time: `node src/node/build.mjs engine-checks` compiles this module with
 * `--enable-experimental-top-level-await`; js-compute-runtime runs its top level during
 * initialization, so a failed check rejects the top-level promise and fails the build.
 *
 * During initialization the engine refuses `Request`, `Response` and `setTimeout` ("can only be used
 * during request handling, not during initialization"). The handler checks therefore run twice:
 * at build time with minimal stand-ins for exactly those builtins (everything else — jose, HMAC,
 * Headers, URL, streams, the core — is the engine's own), and again at request time with the
 * engine's real builtins, from the fetch listener at the bottom (test/engine.test.ts serves the
 * wasm with the local compute host and asks it once).
 *
 * Every check prints one line; the last line counts them.
 */
import { admissionPolicy, createHandler } from '../../src/core/handler';
import { ConfigError, parseConfig, parseSecrets } from '../../src/core/config';
import type { HoldView } from '../../src/core/types';
import { holdTexts } from '../../src/core/holding';
import { formatDuration, messages, negotiateLocale, type Locale } from '../../src/core/i18n';
import { renderHoldingPage } from '../../src/core/pages';
import { createShuffle } from '../../src/core/shuffle';
import { bypassApplies, queueApplies, readPath, reservedPrefixMatch, sameSiteLocation } from '../../src/core/path-canon';
import { parsePathPatterns } from '../../src/core/path-pattern';
import type { ClientInfo, Logger, Origin, QueueStore, RequestLog } from '../../src/core/ports';
import { parseKeyRing, signToken, verifyToken, type TokenClaims } from '../../src/core/tokens';
import { parsePasswordHash, pbkdf2Sha256, verifyPassword } from '../../src/core/accounts';
import { parseAdmissionKeys } from '../../src/core/admission-keys';
import { signAdmission } from '../../src/core/admission';
import { MemoryQueueStore } from '../../src/store/memory-store';
import { MemoryStateCache } from '../../src/platform/memory-cache';
import { coreCacheSettingsMemory, simpleCacheStateCache } from '../../src/platform/fastly';
import { requestWarmUp } from '../../src/platform/request-warm-up';
import { buildTime } from '../../src/platform/build-time';

// ---------------------------------------------------------------------------------------------
// The runner: `check(name, fn)` runs one check and prints `ok` or `FAIL`; nothing stops early, so
// one run reports every failure.

type Phase = 'build' | 'request';

class Runner {
  readonly lines: string[] = [];
  readonly failed: string[] = [];
  passed = 0;
  skipped = 0;
  constructor(private readonly print: (line: string) => void) {}

  async check(name: string, fn: () => void | Promise<void>): Promise<void> {
    try {
      await fn();
      this.passed += 1;
      this.emit(`ok   ${name}`);
    } catch (error) {
      this.failed.push(name);
      this.emit(`FAIL ${name}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  skip(name: string, why: string): void {
    this.skipped += 1;
    this.emit(`skip ${name}: ${why}`);
  }

  emit(line: string): void {
    this.lines.push(line);
    this.print(line);
  }
}

class CheckFailed extends Error {
  override readonly name = 'CheckFailed';
}

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new CheckFailed(message);
}

function equal<T>(actual: T, expected: T, what: string): void {
  if (actual !== expected) throw new CheckFailed(`${what}: expected ${show(expected)}, got ${show(actual)}`);
}

function show(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}…` : value) : String(value);
}

// ---------------------------------------------------------------------------------------------
// Fixtures

const NOW_MS = Date.UTC(2025, 0, 15, 12, 0, 0);
const SECRET_1 = 'engine-check-secret-one-0123456789abcdef';
const SECRET_2 = 'engine-check-secret-two-0123456789abcdef';
const SECRET_EVIL = 'somebody-elses-secret-0123456789abcdefgh';
const ADMIN_PASSWORD = 'correct horse battery staple';
const API_TOKEN = 'origin-api-token-0123456789abcdef';
const CLIENT: ClientInfo = { address: '203.0.113.7', pop: 'CHK' };

function base64UrlEncode(text: string): string {
  let binary = '';
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function base64UrlDecode(segment: string): string {
  const base64 = segment.replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4));
  return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
}

function segments(token: string): [string, string, string] {
  const parts = token.split('.');
  assert(parts.length === 3, `a compact JWS has 3 parts, got ${parts.length}`);
  return [parts[0] ?? '', parts[1] ?? '', parts[2] ?? ''];
}

/** The same token with its payload replaced and its signature kept: what a tamperer sends. */
function withPayload(token: string, payload: Record<string, unknown>): string {
  const [header, , signature] = segments(token);
  return `${header}.${base64UrlEncode(JSON.stringify(payload))}.${signature}`;
}

function payloadOf(token: string): Record<string, unknown> {
  return JSON.parse(base64UrlDecode(segments(token)[1])) as Record<string, unknown>;
}

/** The cookie value from one `Set-Cookie` line (`name=value; attrs`). */
function cookieValue(setCookie: string | undefined, name: string): string {
  assert(setCookie !== undefined, 'expected a Set-Cookie header');
  const pair = setCookie.split(';')[0] ?? '';
  assert(pair.startsWith(`${name}=`), `Set-Cookie should set ${name}, got ${show(setCookie)}`);
  return pair.slice(name.length + 1);
}

function setCookies(response: Response): string[] {
  return response.headers.getSetCookie();
}

// ---------------------------------------------------------------------------------------------
// Platform facts the core relies on

async function platformChecks(run: Runner): Promise<void> {
  await run.check('platform: atob/btoa round-trip all byte values', () => {
    let binary = '';
    for (let i = 0; i < 256; i++) binary += String.fromCharCode(i);
    equal(atob(btoa(binary)), binary, 'atob(btoa(x))');
    equal(btoa('user:password'), 'dXNlcjpwYXNzd29yZA==', 'btoa');
  });

  await run.check('platform: TextEncoder/TextDecoder round-trip UTF-8', () => {
    const text = 'héllo ✓ 🎟';
    const bytes = new TextEncoder().encode(text);
    equal(bytes.length, 15, 'UTF-8 byte length');
    equal(new TextDecoder().decode(bytes), text, 'decode(encode(x))');
  });

  await run.check('platform: crypto.subtle HMAC-SHA-256 importKey/sign/verify (RFC 4231 case 2)', async () => {
    const key = await crypto.subtle.importKey('raw', new TextEncoder().encode('Jefe'), { name: 'HMAC', hash: 'SHA-256' }, false, [
      'sign',
      'verify',
    ]);
    const data = new TextEncoder().encode('what do ya want for nothing?');
    const mac = await crypto.subtle.sign('HMAC', key, data);
    equal(hex(mac), '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843', 'HMAC');
    equal(await crypto.subtle.verify('HMAC', key, mac, data), true, 'verify of the right MAC');
    const wrong = new Uint8Array(mac);
    wrong[0] = (wrong[0] ?? 0) ^ 1;
    equal(await crypto.subtle.verify('HMAC', key, wrong, data), false, 'verify of a wrong MAC');
  });

  await run.check('platform: crypto.subtle.digest SHA-256', async () => {
    const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode('abc'));
    equal(hex(digest), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', 'SHA-256("abc")');
  });

  await run.check('platform: Headers keeps several Set-Cookie (getSetCookie), also in a copy', () => {
    const headers = new Headers({ 'content-type': 'text/plain' });
    headers.append('set-cookie', 'a=1; Path=/');
    headers.append('set-cookie', 'b=2; Path=/');
    const copy = new Headers(headers);
    copy.append('set-cookie', 'c=3; Path=/');
    equal(JSON.stringify(headers.getSetCookie()), '["a=1; Path=/","b=2; Path=/"]', 'getSetCookie');
    equal(JSON.stringify(copy.getSetCookie()), '["a=1; Path=/","b=2; Path=/","c=3; Path=/"]', 'getSetCookie of a copy');
  });

  await run.check('platform: URL and URLSearchParams', () => {
    const url = new URL('https://shop.example/__wr/admin?admitted=12&count=1&count=2#x');
    equal(url.pathname, '/__wr/admin', 'pathname');
    equal(url.host, 'shop.example', 'host');
    equal(url.searchParams.get('admitted'), '12', 'searchParams.get');
    equal(url.searchParams.getAll('count').join(','), '1,2', 'searchParams.getAll');
    const form = new URLSearchParams('csrf=a%2Bb&count=5&note=x+y');
    equal(form.get('csrf'), 'a+b', 'percent-decoding');
    equal(form.get('note'), 'x y', 'plus as space');
  });

  await run.check('platform: ReadableStream getReader yields the bytes put in', async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"count":'));
        controller.enqueue(new TextEncoder().encode('3}'));
        controller.close();
      },
    });
    const reader = stream.getReader();
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    equal(text, '{"count":3}', 'streamed text');
  });

  await run.check('platform: Date.toISOString and crypto.randomUUID', () => {
    equal(new Date(NOW_MS).toISOString(), '2025-01-15T12:00:00.000Z', 'toISOString');
    assert(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(crypto.randomUUID()), 'randomUUID is a v4 UUID');
  });

  await run.check('platform: no Buffer, process, Intl or AbortController (the core must not need them)', () => {
    const g = globalThis as Record<string, unknown>;
    const present = ['Buffer', 'process', 'Intl', 'AbortController'].filter((name) => g[name] !== undefined);
    // Not a requirement of the engine, a record of it: if one appears, the core still must not use it.
    equal(present.join(','), '', 'globals present');
  });
}

/** Builtins the engine refuses during initialization, probed rather than assumed. */
interface InitLimits {
  readonly setTimeout: string | undefined;
  readonly Request: string | undefined;
  readonly Response: string | undefined;
}

function refusal(fn: () => void): string | undefined {
  try {
    fn();
    return undefined;
  } catch (error) {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  }
}

function probeInitLimits(): InitLimits {
  return {
    setTimeout: refusal(() => clearTimeout(setTimeout(() => undefined, 0))),
    Request: refusal(() => new Request('https://probe.example/')),
    Response: refusal(() => new Response('probe')),
  };
}

async function requestTimePlatformChecks(run: Runner): Promise<void> {
  await run.check('platform: setTimeout fires and clearTimeout cancels (request time)', async () => {
    let cancelledFired = false;
    clearTimeout(setTimeout(() => (cancelledFired = true), 1));
    const started = Date.now();
    await new Promise<void>((resolve) => setTimeout(resolve, 20));
    assert(Date.now() - started >= 15, `setTimeout(20) resolved after ${Date.now() - started} ms`);
    equal(cancelledFired, false, 'a cancelled timer fired');
  });

  await run.check('platform: a Response copy with an added Set-Cookie keeps the origin one (request time)', async () => {
    const origin = new Response('body', { status: 201, statusText: 'Created', headers: { 'set-cookie': 'origin=1; Path=/' } });
    const headers = new Headers(origin.headers);
    headers.append('set-cookie', 'waiting_room=x; Path=/');
    const copy = new Response(origin.body, { status: origin.status, statusText: origin.statusText, headers });
    equal(JSON.stringify(setCookies(copy)), '["origin=1; Path=/","waiting_room=x; Path=/"]', 'Set-Cookie lines');
    equal(copy.status, 201, 'status');
    equal(await copy.text(), 'body', 'body');
  });
}

// ---------------------------------------------------------------------------------------------
// Tokens and pages

async function tokenChecks(run: Runner): Promise<void> {
  const ring = parseKeyRing(`k1:${SECRET_1}`);
  const rotated = parseKeyRing(`k2:${SECRET_2},k1:${SECRET_1}`);
  const removed = parseKeyRing(`k2:${SECRET_2}`);
  const evil = parseKeyRing(`k1:${SECRET_EVIL}`);
  const iat = Math.floor(NOW_MS / 1000);
  const claims: TokenClaims = { q: 'default', k: 'w', t: 42, iat, exp: iat + 600 };
  let token = '';

  await run.check('tokens: signToken then verifyToken gives back the claims', async () => {
    token = await signToken(ring, claims);
    const [header] = segments(token);
    const parsed = JSON.parse(base64UrlDecode(header)) as Record<string, unknown>;
    equal(parsed['alg'], 'HS256', 'header alg');
    equal(parsed['kid'], 'k1', 'header kid');
    const result = await verifyToken(ring, token, 'default', NOW_MS, ['w', 'a']);
    assert(result.ok, `verify failed: ${result.ok ? '' : result.reason}`);
    equal(JSON.stringify(result.claims), JSON.stringify(claims), 'claims');
  });

  await run.check('tokens: an old key still verifies after rotation', async () => {
    const result = await verifyToken(rotated, token, 'default', NOW_MS, ['w', 'a']);
    assert(result.ok, `verify failed: ${result.ok ? '' : result.reason}`);
    const next = await signToken(rotated, claims);
    equal(JSON.parse(base64UrlDecode(segments(next)[0]))['kid'], 'k2', 'the rotated ring signs with k2');
  });

  await run.check('tokens: a tampered payload fails with bad_signature', async () => {
    const tampered = withPayload(token, { ...payloadOf(token), t: 1 });
    const result = await verifyToken(ring, tampered, 'default', NOW_MS, ['w', 'a']);
    equal(result.ok ? 'ok' : result.reason, 'bad_signature', 'verify');
  });

  await run.check('tokens: re-signed with another secret under the same kid fails with bad_signature', async () => {
    const forged = await signToken(evil, { ...claims, k: 'a' });
    const result = await verifyToken(ring, forged, 'default', NOW_MS, ['w', 'a']);
    equal(result.ok ? 'ok' : result.reason, 'bad_signature', 'verify');
  });

  await run.check('tokens: each kind has its own derived key, so a waiting ticket re-labelled as access fails', async () => {
    const relabelled = withPayload(token, { ...payloadOf(token), k: 'a' });
    const result = await verifyToken(ring, relabelled, 'default', NOW_MS, ['a']);
    equal(result.ok ? 'ok' : result.reason, 'bad_signature', 'verify');
    const access = await signToken(ring, { ...claims, k: 'a' });
    const genuine = await verifyToken(ring, access, 'default', NOW_MS, ['a']);
    assert(genuine.ok, `verify failed: ${genuine.ok ? '' : genuine.reason}`);
  });

  await run.check('tokens: an expired token fails with expired', async () => {
    const result = await verifyToken(ring, token, 'default', (claims.exp + 1) * 1000, ['w', 'a']);
    equal(result.ok ? 'ok' : result.reason, 'expired', 'verify');
  });

  await run.check('tokens: alg "none" (unsigned) fails', async () => {
    const header = base64UrlEncode(JSON.stringify({ alg: 'none', typ: 'JWT', kid: 'k1' }));
    const unsigned = `${header}.${segments(token)[1]}.`;
    const result = await verifyToken(ring, unsigned, 'default', NOW_MS, ['w', 'a']);
    assert(!result.ok, 'an alg "none" token verified');
    const signedAnyway = `${header}.${segments(token)[1]}.${segments(token)[2]}`;
    const second = await verifyToken(ring, signedAnyway, 'default', NOW_MS, ['w', 'a']);
    assert(!second.ok, 'an alg "none" header with a valid signature verified');
  });

  await run.check('tokens: a token under a removed key fails with unknown_key', async () => {
    const result = await verifyToken(removed, token, 'default', NOW_MS, ['w', 'a']);
    equal(result.ok ? 'ok' : result.reason, 'unknown_key', 'verify');
  });

  await run.check('tokens: another queue, garbage and oversize tokens fail without throwing', async () => {
    const other = await verifyToken(ring, token, 'other', NOW_MS, ['w', 'a']);
    equal(other.ok ? 'ok' : other.reason, 'wrong_queue', 'other queue');
    for (const junk of ['', 'not-a-token', 'a.b.c', '..', `${token}x`.repeat(20)]) {
      const result = await verifyToken(ring, junk, 'default', NOW_MS, ['w', 'a']);
      assert(!result.ok, `${show(junk)} verified`);
    }
  });

  await run.check('admission: the engine signs an ES256 admission (crypto.subtle ECDSA P-256): a JWS with our kid, a raw 64-byte signature, the claims', async () => {
    // The test key of test/support/fixtures.ts (ADMISSION_KEY_1): a private P-256 JWK.
    const jwk = {
      kid: 'test-adm-1',
      kty: 'EC',
      crv: 'P-256',
      x: 'YoanHRiPfN5KhR4_wHFYgOWgTVdYY1DE4UCojnkpyL4',
      y: '_JS4xWuMkKKfmnvsL-_BywyyWKqVVv5bkS2cOuYTAkI',
      d: 'tUL89AP5L_oDP6dcATaY7wVnPpYOwf7gnCTX8u4Qmgc',
    };
    const [key] = parseAdmissionKeys(JSON.stringify([jwk]));
    const settings = parseConfig((k) => ({ queue_name: 'default', admission_audience: 'origin' })[k]);
    const { token, exp } = await signAdmission(key!, settings, { via: 'queue', ticket: 9, admittedAt: iat, sessionExpires: iat + 600 }, NOW_MS);
    const header = JSON.parse(base64UrlDecode(segments(token)[0])) as Record<string, unknown>;
    equal(header['alg'], 'ES256', 'header alg');
    equal(header['kid'], 'test-adm-1', 'header kid');
    // A JWS ES256 signature is r || s, 64 bytes (86 base64url characters), never DER.
    equal(segments(token)[2].length, 86, 'signature length');
    const claims = payloadOf(token);
    equal(JSON.stringify(claims), JSON.stringify({ queue: 'default', ticket: 9, admitted_at: iat, session_expires: iat + 600, via: 'queue', iss: 'waiting-room', aud: 'origin', iat, exp }), 'claims');
    // Verification is the origin's (Node's jose in test/e2e-wasm.test.ts checks tokens this engine
    // signed): the engine's own ECDSA verify refuses P-256 public keys with a DataError.
  });

  await run.check('admission: the engine has no Ed25519 in crypto.subtle, so admissions are ES256 (EdDSA would need it)', async () => {
    // When a later runtime imports Ed25519 keys this fails: the sign that EdDSA can be offered.
    let imported = false;
    try {
      await crypto.subtle.importKey('jwk', { kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' }, { name: 'Ed25519' }, false, ['verify']);
      imported = true;
    } catch {
      imported = false;
    }
    assert(!imported, 'the engine now imports Ed25519 keys: EdDSA admissions can be offered');
  });

  await run.check('accounts: no PBKDF2 in crypto.subtle; the password hash built on HMAC gives the RFC 7914 vector and verifies a hash Node made', async () => {
    // When a later runtime has PBKDF2 this fails: accounts.ts then uses it (it tries it first).
    let native = false;
    try {
      await crypto.subtle.importKey('raw', new TextEncoder().encode('password'), 'PBKDF2', false, ['deriveBits']);
      native = true;
    } catch {
      native = false;
    }
    assert(!native, 'the engine now has PBKDF2 in crypto.subtle');
    const vector = hex((await pbkdf2Sha256('password', new TextEncoder().encode('salt'), 1)).buffer);
    equal(vector, '120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b', 'PBKDF2-HMAC-SHA256, 1 iteration');
    // A hash made with Node's pbkdf2Sync (test/support/fixtures.ts, ACCOUNTS_SECRET's otto: 1,000 iterations).
    const hash = parsePasswordHash('pbkdf2-sha256$1000$cV5jNvPELfbqD0Mqa1j2cA$7-hR_qj_uv4ppl77iH2JFUJv2VkPyOsDsLoDcl7irFo');
    const started = Date.now();
    assert(await verifyPassword('otto-operates-7h2m', hash), 'the right password verifies');
    const ms = Date.now() - started;
    assert(!(await verifyPassword('otto-operates-7h2n', hash)), 'a wrong password does not');
    run.emit(`info accounts: 1,000 PBKDF2 iterations took ${ms} ms in the engine`);
  });

  await run.check('config: parseSecrets refuses a short signing key, naming the key', () => {
    let error: unknown;
    try {
      parseSecrets((key) => ({ signing_keys: 'k1:short' })[key]);
    } catch (e) {
      error = e;
    }
    assert(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
    equal(error.problems[0]?.key, 'signing_keys', 'problem key');
    assert(!error.message.includes('short'), 'the error message repeats the secret');
  });
}

function holdView(overrides: Partial<HoldView>): HoldView {
  return {
    state: 'waiting',
    ticket: 1_234_567,
    place: 1234,
    ahead: 1233,
    first: 2000,
    front: false,
    paused: false,
    inDraw: null,
    estimate: { seconds: 120, basis: 'measured' },
    startsAtMs: null,
    order: null,
    refreshSeconds: 20,
    nowMs: Date.UTC(2026, 10, 22, 9, 5),
    ...overrides,
  };
}

function holdingHtml(view: HoldView, locale: Locale, title = 't', message = 'm'): string {
  return renderHoldingPage({
    view,
    texts: holdTexts(view, locale),
    locale: messages(locale),
    title,
    message,
    branding: { logoUrl: '/__wr/assets/logo.svg', accent: '#2456c7', background: '#eef2f8' },
    assetPrefix: '/__wr/assets/',
    statusUrl: '/__wr/status',
    nonce: 'n',
  });
}

async function pageChecks(run: Runner): Promise<void> {
  await run.check('pages: renderHoldingPage shows the place and escapes a hostile title', () => {
    const html = holdingHtml(holdView({}), 'en', '<script>alert("x")</script>', 'Tom & Jerry\'s "sale"');
    assert(!html.includes('<script>alert'), 'an unescaped <script> is in the page');
    assert(html.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'), 'the escaped title is missing');
    assert(html.includes('Tom &amp; Jerry&#39;s &quot;sale&quot;'), 'the escaped message is missing');
    assert(html.includes('1,234'), 'the place (1,234) is missing');
    assert(html.includes('1,233 people are ahead of you'), 'the people-ahead line is missing');
    assert(html.includes('Reference for support: 1,234,567'), 'the ticket number is missing');
    assert(!/\{\{/.test(html), 'an unfilled {{slot}} is left');
  });

  await run.check('pages: renderHoldingPage without a known place', () => {
    const html = holdingHtml(holdView({ state: 'checking', place: null, ahead: null, ticket: null, estimate: null }), 'en');
    assert(html.includes('Checking your place'), 'the checking heading is missing');
  });

  await run.check('i18n: the visitor\'s language, its digits and plurals, without Intl', () => {
    const locale = negotiateLocale('fr-CH;q=0.4, de-AT, en;q=0.8');
    assert(locale === 'de', `negotiated ${locale}, expected de`);
    const de = holdingHtml(holdView({}), 'de');
    assert(de.includes('1.233 Personen sind vor Ihnen'), 'the German people-ahead line is missing');
    assert(holdingHtml(holdView({ place: 2, ahead: 1 }), 'de').includes('1 Person ist vor Ihnen'), 'the German singular is missing');
    assert(holdingHtml(holdView({}), 'ja').includes('あなたの前に1,233人が並んでいます'), 'the Japanese line is missing');
    assert(formatDuration('fr', 4800) === 'environ 1 heure et 20 minutes', `French duration ${formatDuration('fr', 4800)}`);
  });

  await run.check('shuffle: the event lottery is a permutation in the engine', () => {
    const shuffle = createShuffle(1000, 123_456_789);
    const seen = new Set<number>();
    for (let t = 1; t <= 1000; t++) seen.add(shuffle.place(t));
    assert(seen.size === 1000 && !seen.has(0) && !seen.has(1001), 'not a permutation of 1..1000');
    assert(shuffle.ticket(shuffle.place(17)) === 17, 'the inverse does not invert');
  });

  await run.check('paths: hostile spellings have the same readings in the engine, and a VIP redirect stays on our site', () => {
    // Expected values are the ones the Node tests see (test/path-canon.test.ts).
    const cases: [string, string][] = [
      ['/static/..;/shop', '/static/..;/shop|/shop'],
      ['/static/..%5cshop', '/static/..%5Cshop|/static/..\\shop|/shop'],
      ['/static/..%252fshop', '/static/..%252fshop|/static/..%2Fshop|/shop'],
      ['/%2Fshop', '/%2Fshop|/shop'],
      ['/caf%C3%A9;x', '/caf%C3%A9;x|/caf%C3%A9'],
    ];
    for (const [path, expected] of cases) equal(readPath(path).readings.join('|'), expected, `readings of ${path}`);
    const shop = parsePathPatterns('/shop/*');
    assert(!bypassApplies(readPath('/static/..;/shop'), parsePathPatterns('/static/*')), '/static/..;/shop was bypassed');
    assert(queueApplies(readPath('/shop;x'), shop), '/shop;x was not queued');
    equal(reservedPrefixMatch('/%5F%5Fwr/admin', '/__wr/'), 'near', 'the prefix spelt /%5F%5Fwr/');
    equal(sameSiteLocation('/.//evil.example/', '?a=1'), '/evil.example/?a=1', 'the VIP redirect');
    equal(new URL(sameSiteLocation('//evil.example/', ''), 'https://site.example/').host, 'site.example', 'the redirect host');
  });
}

// ---------------------------------------------------------------------------------------------
// Decisions through createHandler

/** A store that fails every call and counts them. */
class FailingStore implements QueueStore {
  calls = 0;
  join(): Promise<never> {
    return this.fail();
  }
  poll(): Promise<never> {
    return this.fail();
  }
  admit(): Promise<never> {
    return this.fail();
  }
  peek(): Promise<never> {
    return this.fail();
  }
  claim(): Promise<never> {
    return this.fail();
  }
  touch(): Promise<never> {
    return this.fail();
  }
  leave(): Promise<never> {
    return this.fail();
  }
  control(): Promise<never> {
    return this.fail();
  }
  createVips(): Promise<never> {
    return this.fail();
  }
  useVip(): Promise<never> {
    return this.fail();
  }
  appendAudit(): Promise<never> {
    return this.fail();
  }
  readAudit(): Promise<never> {
    return this.fail();
  }
  stats(): Promise<never> {
    return this.fail();
  }
  draw(): Promise<never> {
    return this.fail();
  }
  history(): Promise<never> {
    return this.fail();
  }
  reset(): Promise<never> {
    return this.fail();
  }
  private fail(): Promise<never> {
    this.calls += 1;
    return Promise.reject(new Error('store is down'));
  }
}

/** A store that never answers (to see the timeout at request time). */
class SilentStore implements QueueStore {
  join(): Promise<never> {
    return new Promise(() => undefined);
  }
  poll(): Promise<never> {
    return new Promise(() => undefined);
  }
  admit(): Promise<never> {
    return new Promise(() => undefined);
  }
  peek(): Promise<never> {
    return new Promise(() => undefined);
  }
  claim(): Promise<never> {
    return new Promise(() => undefined);
  }
  touch(): Promise<never> {
    return new Promise(() => undefined);
  }
  leave(): Promise<never> {
    return new Promise(() => undefined);
  }
  control(): Promise<never> {
    return new Promise(() => undefined);
  }
  createVips(): Promise<never> {
    return new Promise(() => undefined);
  }
  useVip(): Promise<never> {
    return new Promise(() => undefined);
  }
  appendAudit(): Promise<never> {
    return new Promise(() => undefined);
  }
  readAudit(): Promise<never> {
    return new Promise(() => undefined);
  }
  stats(): Promise<never> {
    return new Promise(() => undefined);
  }
  draw(): Promise<never> {
    return new Promise(() => undefined);
  }
  history(): Promise<never> {
    return new Promise(() => undefined);
  }
  reset(): Promise<never> {
    return new Promise(() => undefined);
  }
}

async function handlerChecks(run: Runner, phase: Phase): Promise<void> {
  // The per-POP cache is checked on its own below; the decision checks ask the store every time.
  const settings: Record<string, string> = { queue_name: 'default', refresh_seconds: '20', store_timeout_ms: '50', state_cache_seconds: '0' };
  const secretValues: Record<string, string> = {
    signing_keys: `k1:${SECRET_1}`,
    admin_password: ADMIN_PASSWORD,
    admin_api_token: API_TOKEN,
  };
  const config = parseConfig((key) => settings[key]);
  const secrets = parseSecrets((key) => secretValues[key]);
  const store = new MemoryQueueStore();
  const records: RequestLog[] = [];
  const logger: Logger = { log: (record) => records.push(record) };
  let forwarded = 0;
  const origin: Origin = {
    forward: async () => {
      forwarded += 1;
      return new Response('origin', { status: 200 });
    },
  };
  const clock = { now: () => NOW_MS };
  const cache = new MemoryStateCache(clock);
  const handle = createHandler({ config, secrets, store, origin, logger, clock, cache });
  const failing = new FailingStore();
  const handleWithFailingStore = createHandler({ config, secrets, store: failing, origin, logger, clock, cache });
  const cookieName = config.cookieName;

  const get = (path: string, cookie?: string, headers: Record<string, string> = {}): Request =>
    new Request(`https://shop.example${path}`, { headers: cookie === undefined ? headers : { ...headers, cookie: `${cookieName}=${cookie}` } });
  const lastLog = (): RequestLog => {
    const record = records[records.length - 1];
    assert(record !== undefined, 'no log record was written');
    return record;
  };

  let waitingCookie = '';
  let accessCookie = '';

  await run.check('handler: a new visitor gets the holding page and a ticket cookie', async () => {
    const response = await handle(get('/tickets/final'), CLIENT);
    equal(response.status, 200, 'status');
    equal(response.headers.get('cache-control'), 'no-store', 'cache-control');
    assert((response.headers.get('content-type') ?? '').startsWith('text/html'), 'the holding page is not HTML');
    const cookies = setCookies(response);
    equal(cookies.length, 1, 'Set-Cookie count');
    waitingCookie = cookieValue(cookies[0], cookieName);
    assert(/HttpOnly/.test(cookies[0] ?? '') && /Secure/.test(cookies[0] ?? ''), 'cookie is not HttpOnly; Secure');
    const html = await response.text();
    assert(html.includes('>Reference for support: 1<'), 'the page does not show ticket #1');
    assert(html.includes('You are next<'), 'the page does not say "You are next"');
    equal(lastLog().decision, 'waiting', 'log decision');
    equal(lastLog().ticket, 1, 'log ticket');
    equal((await store.peek('default')).tail, 1, 'store tail');
    equal(forwarded, 0, 'requests forwarded to the origin');
  });

  await run.check('handler: a returning visitor keeps the same ticket (no second join)', async () => {
    const response = await handle(get('/tickets/final', waitingCookie), CLIENT);
    equal(response.status, 200, 'status');
    const html = await response.text();
    assert(html.includes('>Reference for support: 1<'), 'the page does not show ticket #1');
    equal((await store.peek('default')).tail, 1, 'store tail (a second join would make it 2)');
    equal(lastLog().decision, 'waiting', 'log decision');
    equal(lastLog().ticket, 1, 'log ticket');
    equal(payloadOf(cookieValue(setCookies(response)[0], cookieName))['t'], 1, 'renewed cookie ticket');
  });

  await run.check('handler: the visitor status JSON reports the place', async () => {
    const response = await handle(get('/__wr/status', waitingCookie), CLIENT);
    equal(response.status, 200, 'status');
    const body = JSON.parse(await response.text()) as Record<string, unknown>;
    equal(body['state'], 'waiting', 'state');
    equal(body['ticket'], 1, 'ticket');
    equal(body['position'], 1, 'position');
  });

  await run.check('handler: once admitted, the same cookie reaches the origin and gets an access cookie', async () => {
    const admitted = await store.admit('default', 1, NOW_MS, admissionPolicy(config));
    equal(admitted.admitted, 1, 'store.admit');
    const response = await handle(get('/tickets/final', waitingCookie), CLIENT);
    equal(response.status, 200, 'status');
    equal(await response.text(), 'origin', 'body');
    equal(forwarded, 1, 'requests forwarded to the origin');
    accessCookie = cookieValue(setCookies(response)[0], cookieName);
    const payload = payloadOf(accessCookie);
    equal(payload['k'], 'a', 'token kind');
    equal(payload['t'], 1, 'token ticket');
    equal(lastLog().decision, 'admitted', 'log decision');
  });

  await run.check('handler: an access cookie passes with a failing store and makes no store call', async () => {
    const response = await handleWithFailingStore(get('/checkout', accessCookie), CLIENT);
    equal(response.status, 200, 'status');
    equal(await response.text(), 'origin', 'body');
    equal(failing.calls, 0, 'store calls');
    equal(setCookies(response).length, 0, 'Set-Cookie count (no renewal within a minute)');
    equal(lastLog().decision, 'access', 'log decision');
  });

  await run.check('handler: a forged cookie gets a new ticket and never reaches the origin', async () => {
    const forged = withPayload(waitingCookie, { ...payloadOf(waitingCookie), k: 'a' });
    const before = forwarded;
    const response = await handle(get('/checkout', forged), CLIENT);
    equal(response.status, 200, 'status');
    equal(forwarded, before, 'requests forwarded to the origin');
    const html = await response.text();
    assert(html.includes('>Reference for support: 2<'), 'the page does not show a new ticket #2');
    equal(payloadOf(cookieValue(setCookies(response)[0], cookieName))['t'], 2, 'new cookie ticket');
    equal(lastLog().reason, 'token_bad_signature', 'log reason');
    equal(lastLog().decision, 'waiting', 'log decision');
    equal((await store.peek('default')).tail, 2, 'store tail');
  });

  await run.check('handler: a failing store holds a new visitor (no 5xx, no ticket: only its join key)', async () => {
    const before = failing.calls;
    const response = await handleWithFailingStore(get('/tickets/final'), CLIENT);
    equal(response.status, 200, 'status');
    equal(failing.calls, before + 1, 'store calls');
    const cookies = setCookies(response);
    equal(cookies.length, 1, 'Set-Cookie count');
    const pending = payloadOf(cookieValue(cookies[0], cookieName));
    equal(pending['t'], 0, 'ticket in the cookie');
    assert(/^[0-9a-f]{16}$/.test(String(pending['p'])), `the cookie keeps the join key (crypto.getRandomValues): ${String(pending['p'])}`);
    assert((await response.text()).includes('Getting you a place in line'), 'the page does not say it is getting the newcomer a place');
    equal(lastLog().decision, 'unavailable', 'log decision');
    equal(lastLog().store_error, 'error: store is down', 'log store_error');
  });

  await run.check('handler: admin state over Basic auth (atob, constant-time compare)', async () => {
    const refused = await handle(get('/__wr/admin/state', undefined, { authorization: `Basic ${btoa('admin:wrong password!')}` }), CLIENT);
    equal(refused.status, 401, 'status with a wrong password');
    const response = await handle(get('/__wr/admin/state', undefined, { authorization: `Basic ${btoa(`admin:${ADMIN_PASSWORD}`)}` }), CLIENT);
    equal(response.status, 200, 'status');
    const body = JSON.parse(await response.text()) as Record<string, unknown>;
    equal(body['tail'], 2, 'tail');
    equal(body['cursor'], 1, 'cursor');
  });

  await run.check('handler: the origin admit API reads a streamed JSON body', async () => {
    const request = new Request('https://shop.example/__wr/api/admit', {
      method: 'POST',
      headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
      body: '{"count": 5}',
    });
    const response = await handle(request, CLIENT);
    const text = await response.text();
    equal(response.status, 200, `status (${text.trim()})`);
    const body = JSON.parse(text) as Record<string, unknown>;
    equal(body['admitted'], 1, 'admitted (the cursor stops at the tail)');
    equal(body['cursor'], 2, 'cursor');
  });

  if (phase === 'request') {
    await run.check('fastly:cache CoreCache keeps the last valid settings', async () => {
      const snapshot = JSON.stringify({ page_title: `check ${Date.now()}` });
      await coreCacheSettingsMemory.remember(snapshot);
      equal(await coreCacheSettingsMemory.recall(), snapshot, 'recalled snapshot');
      equal(await coreCacheSettingsMemory.holds!(snapshot), true, 'holds the remembered snapshot (by its metadata)');
      equal(await coreCacheSettingsMemory.holds!(`${snapshot} `), false, 'does not hold another snapshot');
    });
    await run.check("fastly:cache SimpleCache answers the second read from the POP's cache", async () => {
      const key = `engine-check-${Date.now()}-${Math.random()}`;
      let loads = 0;
      const load = async () => {
        loads += 1;
        return { tail: 7, cursor: 3 };
      };
      const first = await simpleCacheStateCache.getOrLoad(key, 5, load);
      const second = await simpleCacheStateCache.getOrLoad(key, 5, load);
      equal(first.hit, false, 'first read is a miss');
      equal(second.hit, true, 'second read is a hit');
      equal(loads, 1, 'loads');
      equal(second.value.cursor, 3, 'cached cursor');
      // A peek reads the entry without a transaction; an absent key is undefined, never a load.
      const peeked = await simpleCacheStateCache.peek<{ cursor: number }>(key);
      equal(peeked?.cursor, 3, 'peeked cursor');
      equal(await simpleCacheStateCache.peek(`${key}-absent`), undefined, 'peek of an absent key');
      equal(loads, 1, 'loads after the peeks');
    });
    await run.check('handler: a store that does not answer in time holds the visitor (timeout, request time)', async () => {
      const slow = createHandler({ config, secrets, store: new SilentStore(), origin, logger, clock: { now: () => Date.now() }, cache });
      const response = await slow(get('/tickets/final'), CLIENT);
      equal(response.status, 200, 'status');
      equal(lastLog().decision, 'unavailable', 'log decision');
      assert((lastLog().store_error ?? '').startsWith('timeout'), `store_error: ${show(lastLog().store_error)}`);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Stand-ins for the builtins refused during initialization (build time only). They implement just
// what the core and these checks touch; the Headers and streams inside them are the engine's own.

type HeadersArg = ConstructorParameters<typeof Headers>[0];

class InitRequest {
  readonly url: string;
  readonly method: string;
  readonly headers: Headers;
  readonly body: ReadableStream<Uint8Array> | null;
  constructor(url: string, init: { method?: string; headers?: HeadersArg; body?: string } = {}) {
    this.url = new URL(url).href;
    this.method = init.method ?? 'GET';
    this.headers = new Headers(init.headers);
    const bytes = init.body === undefined ? undefined : new TextEncoder().encode(init.body);
    if (bytes !== undefined) this.headers.set('content-length', String(bytes.length));
    this.body =
      bytes === undefined
        ? null
        : new ReadableStream<Uint8Array>({
            start(controller) {
              controller.enqueue(bytes);
              controller.close();
            },
          });
  }
}

class InitResponse {
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  readonly body: string | null;
  constructor(body?: string | null, init: { status?: number; statusText?: string; headers?: HeadersArg } = {}) {
    if (body !== undefined && body !== null && typeof body !== 'string') {
      throw new TypeError('the build-time Response stand-in takes a string body');
    }
    this.body = body ?? null;
    this.status = init.status ?? 200;
    this.statusText = init.statusText ?? '';
    this.headers = new Headers(init.headers);
  }
  async text(): Promise<string> {
    return this.body ?? '';
  }
}

/** A timer that never fires: the in-memory store answers at once, so no store call times out. */
let nextTimer = 1;
const initSetTimeout = (): number => nextTimer++;
const initClearTimeout = (): void => undefined;

async function withStandIns(limits: InitLimits, run: () => Promise<void>): Promise<void> {
  const g = globalThis as Record<string, unknown>;
  const names = ['Request', 'Response', 'setTimeout', 'clearTimeout'] as const;
  const saved = new Map(names.map((name) => [name, g[name]]));
  if (limits.Request !== undefined) g['Request'] = InitRequest;
  if (limits.Response !== undefined) g['Response'] = InitResponse;
  if (limits.setTimeout !== undefined) {
    g['setTimeout'] = initSetTimeout;
    g['clearTimeout'] = initClearTimeout;
  }
  try {
    await run();
  } finally {
    for (const [name, value] of saved) g[name] = value;
  }
}

// ---------------------------------------------------------------------------------------------
// The two runs

async function buildTimeChecks(): Promise<void> {
  const run = new Runner((line) => console.log(line));
  run.emit('engine checks: build time, inside js-compute-runtime initialization');
  await platformChecks(run);
  const limits = probeInitLimits();
  for (const name of ['setTimeout', 'Request', 'Response'] as const) {
    const why = limits[name];
    if (why === undefined) {
      await run.check(`platform: ${name} is usable during initialization`, () => undefined);
    } else {
      run.skip(`platform: ${name} during initialization`, `refused (${why}); a stand-in is used at build time, the real one at request time`);
    }
  }
  await tokenChecks(run);
  await pageChecks(run);
  await withStandIns(limits, () => handlerChecks(run, 'build'));
  await run.check('warm-up: one admitted visitor ran through the core while the wasm was built (service, token, admitted visitor)', async () => {
    const report = await requestWarmUp;
    equal(report.error, undefined, 'why the warm-up stopped');
    equal(report.steps.join(', '), 'service, token, admitted visitor', 'the steps it finished');
  });
  await run.check('build time: the freed memory was scrubbed after both warm-ups settled (64 zero-filled blocks of 64 KiB)', async () => {
    const report = await buildTime;
    equal(report.warmUp, await requestWarmUp, 'the warm-up it waited for');
    equal(report.scrub.bytes, 64 * 65_536, 'bytes of zero-filled blocks');
  });
  const skipped = run.skipped > 0 ? `, ${run.skipped} skipped` : '';
  if (run.failed.length > 0) {
    run.emit(`engine checks: ${run.passed} passed, ${run.failed.length} failed${skipped}`);
    throw new Error(`engine checks failed: ${run.failed.join('; ')}`);
  }
  run.emit(`engine checks: ${run.passed} passed${skipped}`);
}

async function requestTimeChecks(): Promise<Response> {
  const run = new Runner(() => undefined);
  run.emit('engine request-time checks: inside the engine, handling a request');
  await platformChecks(run);
  await requestTimePlatformChecks(run);
  await tokenChecks(run);
  await pageChecks(run);
  await handlerChecks(run, 'request');
  const failed = run.failed.length > 0 ? `, ${run.failed.length} failed` : '';
  run.emit(`engine request-time checks: ${run.passed} passed${failed}`);
  return new Response(`${run.lines.join('\n')}\n`, {
    status: run.failed.length > 0 ? 500 : 200,
    headers: { 'content-type': 'text/plain; charset=utf-8' },
  });
}

addEventListener('fetch', (event) =>
  event.respondWith(
    requestTimeChecks().catch(
      (error: unknown) => new Response(`engine request-time checks crashed: ${error instanceof Error ? error.stack : String(error)}\n`, { status: 500 }),
    ),
  ),
);

await buildTimeChecks();
