/**
 * Which Secret Store entries each kind of request reads on the real wasm (bin/main.wasm under
 * `fastly compute serve`, the host tracing each request's hostcalls), against a real redis-server
 * behind the Upstash bridge: an admitted visitor reads the signing keys alone, a visitor whose
 * request calls the store reads the Upstash token too, and the waiting room's own paths read every
 * secret. A missing `upstash_token` stays a clear configuration error: 503 naming it on our paths,
 * and for a visitor a store failure under the operator's `store_failure` policy, never a 5xx.
 */
import jws from 'jws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_KEYS } from '../src/core/config';
import { findComputeHost } from './support/compute-host';
import { keepCookies } from './support/cookie-jar';
import { ADMIN_PASSWORD, API_TOKEN, KEY_1, purposeKey } from './support/fixtures';
import { HttpVisitor, startWasmStack, type Stack } from './support/stack';

const host = findComputeHost();
const ADMIN = `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`;
const SECRET_GET = 'fastly_secret_store::get';
const SECRET_OPEN = 'fastly_secret_store::open';

/** The hostcall counts of each request the host has finished, in order (`--trace`). */
function tracedRequests(stack: Stack): Record<string, number>[] {
  return [...(stack.hostOutput?.() ?? '').matchAll(/request\{id=\d+\}: hostcalls (\{.*\})/g)].map((match) => JSON.parse(match[1]!) as Record<string, number>);
}

/**
 * Sends one request and returns its response (body read) with its hostcall counts. Requests are
 * sent one at a time, so the trace line that comes next is this request's; it comes when the
 * instance has finished, after-response work included, which may be after the response.
 */
async function traced(stack: Stack, send: () => Promise<Response>): Promise<{ response: Response; body: string; counts: Record<string, number> }> {
  const before = tracedRequests(stack).length;
  const response = await send();
  const body = await response.text();
  await expect.poll(() => tracedRequests(stack).length, { timeout: 10_000 }).toBe(before + 1);
  const counts = tracedRequests(stack)[before]!;
  return { response, body, counts };
}

/** A browser: keeps every cookie it is given (the access token and the carried admission). */
function browser(base: string): { get(path: string): Promise<Response>; cookie(name: string): string | undefined } {
  let jar: string | undefined;
  return {
    async get(path) {
      const response = await fetch(`${base}${path}`, { headers: { accept: 'text/html', ...(jar !== undefined && { cookie: jar }) }, redirect: 'manual' });
      jar = keepCookies(jar, response.headers.getSetCookie());
      return response;
    },
    cookie(name) {
      return new RegExp(`(?:^|; )${name}=([^;]*)`).exec(jar ?? '')?.[1];
    },
  };
}

/** An access token for the default queue, signed as the room signs one (its key for access tokens). */
function accessToken(): string {
  const iat = Math.floor(Date.now() / 1000);
  return jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: { q: 'default', k: 'a', t: 1, iat, exp: iat + 600 }, secret: purposeKey(KEY_1, 'access') });
}

describe.skipIf(!host.found)('Secret Store reads per request on the wasm', () => {
  let stack: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    stack = await startWasmStack({ viceroyPath: host.path, trace: true });
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
  });

  // Each request opens the store once, whatever it reads later (the token, the admission keys).
  it('a visitor who joins reads 2 entries, the admit API and the admin page all 6, an admitted visitor 1; each answers as before', async () => {
    const visitor = browser(stack.url);

    const joined = await traced(stack, () => visitor.get('/products'));
    expect(joined.response.status).toBe(200);
    expect(joined.response.headers.get('x-origin')).toBeNull();
    expect(visitor.cookie('waiting_room')).toBeDefined();
    // Its store calls (EVALSHA, then EVAL on a fresh Redis's NOSCRIPT, …) share one token read.
    expect(joined.counts['backend_requests']).toBeGreaterThan(1);
    expect(joined.counts[SECRET_GET], JSON.stringify(joined.counts)).toBe(2);
    expect(joined.counts[SECRET_OPEN]).toBe(1);

    const admit = await traced(stack, () => fetch(`${stack.url}/__wr/api/admit?count=1`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } }));
    expect(admit.response.status).toBe(200);
    expect(JSON.parse(admit.body)).toMatchObject({ admitted: 1 });
    expect(admit.counts[SECRET_GET], JSON.stringify(admit.counts)).toBe(SECRET_KEYS.length);
    expect(admit.counts[SECRET_OPEN]).toBe(1);

    // Let in: the cursor is read from the store, the cookie upgraded to an access token, and the
    // admission the origin gets signed for the first time (admission_keys, read when needed).
    const letIn = await traced(stack, () => visitor.get('/products'));
    expect(letIn.response.status).toBe(200);
    expect(letIn.response.headers.get('x-origin')).toBe('demo');
    expect(letIn.counts[SECRET_GET], JSON.stringify(letIn.counts)).toBe(3);
    expect(letIn.counts[SECRET_OPEN]).toBe(1);
    expect(visitor.cookie('waiting_room_adm')).toBeDefined();

    // Admitted, carrying its admission: no store call, so no Upstash token read.
    for (const path of ['/products', '/cart']) {
      const admitted = await traced(stack, () => visitor.get(path));
      expect(admitted.response.status).toBe(200);
      expect(admitted.response.headers.get('x-origin')).toBe('demo');
      expect(admitted.counts[SECRET_GET], JSON.stringify(admitted.counts)).toBe(1);
      expect(admitted.counts[SECRET_OPEN]).toBe(1);
      // The one backend request is the origin's: none to Upstash.
      expect(admitted.counts['backend_requests']).toBe(1);
    }

    const admin = await traced(stack, () => fetch(`${stack.url}/__wr/admin`, { headers: { authorization: ADMIN } }));
    expect(admin.response.status).toBe(200);
    expect(admin.counts[SECRET_GET], JSON.stringify(admin.counts)).toBe(SECRET_KEYS.length);
    expect(admin.counts[SECRET_OPEN]).toBe(1);
  }, 60_000);
});

describe.skipIf(!host.found).each([
  ['no upstash_token in the Secret Store', undefined],
  ['an empty upstash_token', ' '],
])('wasm with %s', (_, token) => {
  let stack: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    stack = await startWasmStack({ viceroyPath: host.path, secrets: { upstash_token: token } });
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
  });

  it('our paths answer 503 naming upstash_token', async () => {
    for (const [path, headers] of [['/__wr/health', {}], ['/__wr/admin', { authorization: ADMIN }]] as const) {
      const response = await fetch(`${stack.url}${path}`, { headers });
      expect(response.status, path).toBe(503);
      expect(await response.text(), path).toContain('upstash_token: secret is required on Fastly');
    }
  });

  it("a visitor's request is held (store_failure = hold), not a 5xx, and its log names upstash_token; an admitted visitor still passes", async () => {
    stack.clearLogs();
    const visitor = new HttpVisitor(stack.url);
    const page = await visitor.get('/products', { headers: { accept: 'text/html' } });
    expect(page.status).toBeLessThan(500);
    expect(page.headers.get('x-origin')).toBeNull();
    await expect.poll(() => stack.logs().filter((l) => l.path === '/products').length).toBe(1);
    const log = stack.logs().find((l) => l.path === '/products')!;
    // The store call failed for want of the token: the store_failure policy (hold: `unavailable`),
    // where the token used to stop the whole service (`config_invalid`, the checking page).
    expect(log.decision).toBe('unavailable');
    expect(log.store_error).toBe('error: invalid configuration: upstash_token: secret is required on Fastly');

    // An access token needs no store, so no Upstash token either.
    const admitted = new HttpVisitor(stack.url);
    admitted.cookie = accessToken();
    const pass = await admitted.get('/products', { headers: { accept: 'text/html' } });
    expect(pass.status).toBe(200);
    expect(pass.headers.get('x-origin')).toBe('demo');
  });
});
