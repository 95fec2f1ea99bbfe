/**
 * A fuzz pass over the handler as a function (in-memory store, injected clock): random cookies
 * (garbage and forged JWS, validly signed tokens with odd claims, huge values, duplicates),
 * headers, paths, query strings and admin API bodies, with and without valid credentials. Whatever
 * comes in, our own code answers below 500, every body we write ourselves says nosniff, and every
 * request passed on is one the origin adapters send to the configured origin only.
 */
import fc from 'fast-check';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import jws from 'jws';
import { describe, expect, it } from 'vitest';
import type { Handler } from '../src/core/handler';
import { checkingPageResponse } from '../src/core/holding';
import { errorResponse, originTarget } from '../src/core/http';
import type { ClientInfo, Origin } from '../src/core/ports';
import { createService } from '../src/core/service';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, API_TOKEN, BASE_SECRETS, BASE_SETTINGS, base64url, KEY_1, KEY_2, ManualClock, MemoryLogger, purposeKey, source } from './support/fixtures';

const SITE = 'https://shop.example';
/** Where the origin adapters would send what the handler passes on. */
const CONFIGURED_ORIGIN = 'https://origin.internal:8443';
const ADMIN = `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`;

/** Records every request the handler passes on, through the Origin port. */
class OriginCalls implements Origin {
  readonly urls: string[] = [];
  async forward(request: Request): Promise<Response> {
    this.urls.push(request.url);
    return new Response('from the origin', { status: 200, headers: { 'x-from-origin': 'yes' } });
  }
}

/** Setting sets the fuzz runs under: rate mode, capacity mode, bypass rules, several queues. */
const SETTINGS: readonly Record<string, string>[] = [
  {},
  { max_active: '2', max_new_per_minute: '5', session_seconds: '60', activity_refresh_seconds: '10' },
  { bypass_cookie: 'wr_bypass', bypass_paths: '/robots.txt,/static/*', queue_paths: '/shop/*', json_paths: '/api/*' },
  { queues: JSON.stringify([{ name: 'sale', paths: ['/sale/*'] }, { name: 'tickets', paths: ['/tickets/*'], hosts: ['tickets.example'] }]) },
  { admit_per_period: '3', admit_period_seconds: '10', queue_method: 'random', hold_status: '429' },
];

const printable = (maxLength: number) => fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength });
const b64 = fc.string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'), maxLength: 40 });
const oddNumber = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(0, -1, 2 ** 53, Number.MAX_SAFE_INTEGER + 2));
const claims = fc.record(
  {
    q: fc.oneof(fc.constantFrom('default', 'sale', 'tickets', '*', ''), printable(8)),
    k: fc.oneof(fc.constantFrom('a', 'w', 'b', 'p', ''), printable(3)),
    t: oddNumber,
    iat: oddNumber,
    exp: fc.oneof(oddNumber, fc.constant(Math.floor(Date.UTC(2026, 10, 22, 13) / 1000))),
    s: oddNumber,
    r: oddNumber,
    j: oddNumber,
  },
  { requiredKeys: [] },
);

const cookieValue = fc.oneof(
  // Looks like a JWS and is not one.
  fc.tuple(b64, b64, b64).map((parts) => parts.join('.')),
  // A structured token under a header we do not accept, or unsigned.
  fc
    .tuple(fc.constantFrom('HS256', 'none', 'HS512', 'RS256', 'ES256'), fc.constantFrom('k1', 'k2', '', '../x'), claims, b64)
    .map(([alg, kid, payload, sig]) => `${base64url({ alg, kid })}.${base64url(payload)}.${sig}`),
  // Signed with our keys (the ring key itself, or a purpose's key derived from it), with claims nobody should issue.
  fc
    .tuple(fc.constantFrom(KEY_1, KEY_2), fc.constantFrom(undefined, 'waiting', 'access', 'admin-form', 'bypass') , claims)
    .map(([ring, purpose, payload]) =>
      jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload, secret: purpose === undefined ? ring : purposeKey(ring, purpose) }),
    ),
  // Huge.
  fc.tuple(fc.integer({ min: 1000, max: 20_000 }), fc.constantFrom('a', '.', 'A.b.', '%')).map(([n, c]) => c.repeat(Math.ceil(n / c.length))),
  printable(60),
);
const cookieName = fc.oneof(fc.constantFrom('waiting_room', 'waiting_room_sale', 'waiting_room_tickets', 'wr_bypass'), printable(10));
const cookieHeader = fc
  .array(fc.tuple(cookieName, cookieValue), { maxLength: 6 })
  .chain((pairs) => fc.constantFrom('; ', ';', ',', ' ; ').map((sep) => pairs.map(([n, v]) => `${n}=${v}`).join(sep)));

const OWN_PATHS = [
  'status', 'health', 'heartbeat', 'leave', 'assets/style.css', 'assets/holding.js', 'assets/nope', 'admin', 'admin/live',
  'admin/state', 'admin/stats', 'admin/admit', 'admin/control', 'admin/reset', 'admin/vip', 'api/admit', 'api/control',
  'api/state', 'api/stats', 'api/reset', 'api/vip', 'api/bypass-pass', 'nope',
].map((p) => `/__wr/${p}`);
const pathPiece = fc.constantFrom('/', '//', '\\', '.', '..', '%2e', '%2E%2e', '%2f', 'shop', 'sale', 'tickets', 'static', 'robots.txt', 'api', '__wr', 'evil.example:1', '@', ';', '%', 'x');
const path = fc.oneof(
  { arbitrary: fc.constantFrom(...OWN_PATHS), weight: 3 },
  fc.array(pathPiece, { maxLength: 8 }).map((pieces) => `/${pieces.join('')}`),
  fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`)),
);
const queryValue = fc.oneof(printable(20), fc.constantFrom('1', '0', '-1', '1e9', '99999999999', 'default', 'sale', 'nope', ''));
const query = fc.option(
  fc
    .array(fc.tuple(fc.oneof(fc.constantFrom('count', 'queue', 'wr_vip', 'done', 'q'), printable(6)), queryValue), { maxLength: 4 })
    .map((pairs) => `?${pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')}`),
  { nil: '' },
);

/** `{csrf}` in a body stands for a form token the admin page really issued. */
const formField = fc.tuple(
  fc.constantFrom('count', 'csrf', 'confirm', 'paused', 'max_active', 'max_new_per_minute', 'uses', 'expires_in_seconds', 'x'),
  fc.oneof(queryValue, fc.constant('{csrf}')),
);
const body = fc.oneof(
  fc.constant(undefined),
  fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
  fc
    .dictionary(
      fc.constantFrom('count', 'paused', 'max_active', 'max_new_per_minute', 'confirm', 'uses', 'expires_in_seconds', 'ttl_seconds', 'x'),
      fc.oneof(oddNumber, fc.boolean(), fc.constant(null), printable(10), fc.constant('default')),
    )
    .map((o) => JSON.stringify(o)),
  fc.array(formField, { maxLength: 5 }).map((fields) => fields.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&')),
  printable(200),
  fc.integer({ min: 4000, max: 70_000 }).map((n) => 'x'.repeat(n)),
);

/** Mostly valid credentials, so the fuzz reaches the admin and API code behind them. */
const authorization = fc.option(
  fc.oneof(
    // RIGHT: the credentials the path asks for (Basic for /admin, Bearer for /api).
    { arbitrary: fc.constant('RIGHT'), weight: 5 },
    { arbitrary: fc.constantFrom(ADMIN, `Bearer ${API_TOKEN}`), weight: 1 },
    { arbitrary: fc.constantFrom('Basic YWRtaW46d3Jvbmc=', 'Bearer nope', 'Basic ???', 'Bearer', ''), weight: 1 },
    { arbitrary: printable(40), weight: 1 },
  ),
  { nil: undefined, freq: 5 },
);
const headers = fc.record(
  {
    authorization,
    accept: fc.oneof(fc.constantFrom('application/json', 'text/html', '*/*', 'text/html,application/json;q=0.9'), printable(30)),
    'accept-language': fc.oneof(fc.constantFrom('de-DE,de;q=0.9', 'fr', '*', 'zz-ZZ', 'en;q=abc'), printable(30)),
    'accept-encoding': fc.constantFrom('gzip', 'br', ''),
    'user-agent': fc.oneof(fc.constantFrom('Mozilla/5.0 (compatible; Googlebot/2.1)', 'curl/8'), printable(40)),
    'sec-fetch-site': fc.constantFrom('same-origin', 'same-origin', 'same-origin', 'cross-site', 'none', 'same-site', 'bogus'),
    origin: fc.oneof(fc.constantFrom(SITE, 'https://evil.example', 'null', 'http://[', ''), printable(20)),
    'content-type': fc.constantFrom('application/json', 'application/x-www-form-urlencoded', 'text/plain', 'multipart/form-data; boundary=x'),
    'content-length': fc.oneof(fc.nat().map(String), printable(8)),
    host: fc.constantFrom('shop.example', 'evil.example', 'tickets.example', 'SHOP.example:443'),
    'x-forwarded-for': printable(30),
  },
  { requiredKeys: ['authorization'] },
);

const client = fc.record({
  address: fc.oneof(fc.ipV4(), fc.ipV6(), fc.constant(undefined), printable(20)),
  pop: fc.constant('FUZ'),
  country: fc.option(fc.oneof(fc.constantFrom('DE', 'US', 'ZZ'), printable(3)), { nil: undefined }),
});

const request = fc.record({
  method: fc.constantFrom('GET', 'GET', 'GET', 'POST', 'POST', 'POST', 'HEAD', 'PUT', 'DELETE', 'OPTIONS', 'PATCH'),
  path,
  query,
  cookie: fc.option(cookieHeader, { nil: undefined }),
  headers,
  body,
  client,
  advanceMs: fc.integer({ min: 0, max: 120_000 }),
});
type FuzzRequest = typeof request extends fc.Arbitrary<infer T> ? T : never;

function build(r: FuzzRequest, csrf: string): Request | undefined {
  const headers = new Headers();
  for (const [name, value] of Object.entries(r.headers)) if (value !== undefined) headers.set(name, value);
  if (r.headers.authorization === 'RIGHT') headers.set('authorization', r.path.startsWith('/__wr/api/') ? `Bearer ${API_TOKEN}` : ADMIN);
  if (r.cookie !== undefined) headers.set('cookie', r.cookie);
  const init: RequestInit = { method: r.method, headers };
  if (r.body !== undefined && r.method !== 'GET' && r.method !== 'HEAD') init.body = r.body.replaceAll('{csrf}', csrf);
  try {
    return new Request(`${SITE}${r.path}${r.query}`, init);
  } catch {
    // A combination fetch itself refuses never reaches a waiting room.
    return undefined;
  }
}

async function csrfFrom(handler: Handler, c: ClientInfo): Promise<string> {
  const page = await handler(new Request(`${SITE}/__wr/admin`, { headers: { authorization: ADMIN } }), c);
  return /name="csrf" value="([^"]+)"/.exec(await page.text())?.[1] ?? '';
}

describe('what the waiting room writes itself', () => {
  it('says nosniff: JSON answers, errors, the holding, checking and admin pages', async () => {
    const clock = new ManualClock();
    const service = createService(source(BASE_SETTINGS), source(BASE_SECRETS), {
      store: new MemoryQueueStore(),
      origin: new OriginCalls(),
      logger: new MemoryLogger(),
      clock,
      cache: new MemoryStateCache(clock), authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock),
    });
    const c = { address: '192.0.2.1', pop: 'TST' };
    const answers = [
      await service.handler(new Request(`${SITE}/__wr/health`), c),
      await service.handler(new Request(`${SITE}/__wr/nope`), c),
      await service.handler(new Request(`${SITE}/__wr/api/admit`, { method: 'POST' }), c),
      await service.handler(new Request(`${SITE}/__wr/api/admit?count=x`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } }), c),
      await service.handler(new Request(`${SITE}/__wr/status`), c),
      await service.handler(new Request(`${SITE}/`), c),
      await service.handler(new Request(`${SITE}/__wr/admin`, { headers: { authorization: ADMIN } }), c),
      checkingPageResponse(new Request(`${SITE}/`), '/__wr/', clock.now()),
      errorResponse(500, 'internal error'),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 404, 401, 400, 200, 200, 200, 200, 500]);
    for (const answer of answers) expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
  });
});

describe('the handler under fuzzed input', () => {
  it('answers below 500, says nosniff on every body of its own, and passes on only what goes to the configured origin', async () => {
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: SETTINGS.length - 1 }), fc.array(request, { minLength: 1, maxLength: 6 }), async (variant, requests) => {
        const clock = new ManualClock();
        const origin = new OriginCalls();
        const service = createService(source({ ...BASE_SETTINGS, ...SETTINGS[variant] }), source(BASE_SECRETS), {
          store: new MemoryQueueStore(),
          origin,
          logger: new MemoryLogger(),
          clock,
          cache: new MemoryStateCache(clock), authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock),
        });
        const csrf = await csrfFrom(service.handler, { address: '192.0.2.1', pop: 'FUZ' });
        for (const r of requests) {
          clock.advance(r.advanceMs);
          const built = build(r, csrf);
          if (built === undefined) continue;
          const response = await service.handler(built, r.client);
          const what = `${r.method} ${r.path}${r.query} → ${response.status}`;
          expect(response.status, what).toBeLessThan(500);
          const fromOrigin = response.headers.get('x-from-origin') === 'yes';
          if (!fromOrigin && response.body !== null) expect(response.headers.get('x-content-type-options'), what).toBe('nosniff');
          await response.arrayBuffer();
        }
        for (const url of origin.urls) {
          // What both adapters send: the configured origin's scheme, host and port, then this string.
          const target = originTarget(url);
          const upstream = new URL(`${CONFIGURED_ORIGIN}${target}`);
          expect(upstream.origin).toBe(CONFIGURED_ORIGIN);
          expect(`${upstream.pathname}${upstream.search}`).toBe(target);
          // An origin resolving the target against its own URL reads the same thing.
          expect(new URL(target, CONFIGURED_ORIGIN).href).toBe(upstream.href);
        }
      }),
      { numRuns: 400 },
    );
  }, 60_000);
});
