/**
 * The request path as a function: a Request in, a Response out, on the in-memory store with an
 * injected clock. Faults are injected by wrapping the real store.
 */
import jws from 'jws';
import { beforeEach, describe, expect, it } from 'vitest';
import { parseConfig, parseSecrets, type Config } from '../src/core/config';
import { admissionPolicy, createHandler, type Handler } from '../src/core/handler';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryQueueStore } from '../src/store/memory-store';
import {
  ADMIN_PASSWORD,
  API_TOKEN,
  BASE_SECRETS,
  BASE_SETTINGS,
  base64url,
  cookieFrom,
  FaultyStore,
  KEY_1,
  KEY_2,
  ManualClock,
  MemoryLogger,
  payloadOf,
  purposeKey,
  RecordingOrigin,
  source,
} from './support/fixtures';

const SITE = 'https://shop.example';
const CLIENT = { address: '203.0.113.9', pop: 'TST' };

/** Lets `count` in directly in the store, as the admin would, at the rig's time. */
function admitNow(r: Rig, count: number) {
  return r.inner.admit('default', count, r.clock.now(), admissionPolicy(r.config));
}

interface Rig {
  handler: Handler;
  config: Config;
  store: FaultyStore;
  inner: MemoryQueueStore;
  origin: RecordingOrigin;
  logger: MemoryLogger;
  clock: ManualClock;
}

function rig(settings: Record<string, string> = {}, secrets: Record<string, string> = {}): Rig {
  const inner = new MemoryQueueStore();
  const store = new FaultyStore(inner);
  const origin = new RecordingOrigin();
  const logger = new MemoryLogger();
  const clock = new ManualClock();
  const config = parseConfig(source({ ...BASE_SETTINGS, store_timeout_ms: '100', ...settings }));
  const handler = createHandler({
    config,
    secrets: parseSecrets(source({ ...BASE_SECRETS, ...secrets })),
    store,
    origin,
    logger,
    clock,
    cache: new MemoryStateCache(clock),
  });
  return { handler, config, store, inner, origin, logger, clock };
}

function get(path: string, cookie?: string, headers: Record<string, string> = {}): Request {
  return new Request(`${SITE}${path}`, { headers: { ...(cookie ? { cookie: `waiting_room=${cookie}` } : {}), ...headers } });
}

/** A visitor who keeps their cookies, like a browser: ours, and the admission it carries (see admission.ts). */
class Visitor {
  cookie: string | undefined;
  admission: string | undefined;
  constructor(private readonly r: Rig) {}
  async visit(path = '/'): Promise<Response> {
    const carried: Record<string, string> = this.admission === undefined ? {} : { cookie: `waiting_room_adm=${this.admission}${this.cookie ? `; waiting_room=${this.cookie}` : ''}` };
    const response = await this.r.handler(get(path, this.cookie, carried), CLIENT);
    this.cookie = cookieFrom(response) ?? this.cookie;
    this.admission = cookieFrom(response, 'waiting_room_adm') ?? this.admission;
    return response;
  }
  get ticket(): number {
    return Number(payloadOf(this.cookie ?? '..')['t']);
  }
  get kind(): string {
    return String(payloadOf(this.cookie ?? '..')['k']);
  }
}

describe('the holding page says things once, in the visitor\'s language', () => {
  it('without a site name, shows the heading once (page and title) and the default message in German for a German browser', async () => {
    const r = rig();
    const html = await (await r.handler(get('/', undefined, { 'accept-language': 'de-DE,de;q=0.9' }), CLIENT)).text();
    const heading = /<h1 id="heading" data-text="heading">([^<]*)<\/h1>/.exec(html)![1]!;
    // The tab's title leads with the place, in the visitor's language, and names no site.
    expect(html).toContain('<title>Platz 1 in der Warteschlange</title>');
    expect(html).toContain('<p class="brand" dir="auto"></p>');
    // Once in the page (the script's data carries the texts apart).
    const visible = html.slice(0, html.indexOf('<script type="application/json"'));
    expect(visible.split(heading).length - 1).toBe(1);
    expect(html).toContain('Wir lassen Besucher nach und nach ein, damit die Website für alle schnell bleibt.');
    expect(html).not.toContain('We are letting visitors in');
  });

  it('a site name equal to the heading is not shown twice; another one is, and an operator message is kept as written', async () => {
    const same = rig({ page_title: 'You are in line', page_message: 'Big sale today.' });
    const html = await (await same.handler(get('/'), CLIENT)).text();
    expect(html).toContain('<h1 id="heading" data-text="heading">You are in line</h1>');
    expect(html).toContain('<title>#1 in line</title>');
    expect(html).toContain('<p class="brand" dir="auto"></p>');
    expect(html).toContain('Big sale today.');
    const named = rig({ page_title: 'Demo shop' });
    const page = await (await named.handler(get('/', undefined, { 'accept-language': 'ja' }), CLIENT)).text();
    expect(page).toContain('<p class="brand" dir="auto">Demo shop</p>');
    expect(page).toContain('<title>1番目に並んでいます · Demo shop</title>');
  });
});

describe('an ended event and a same-site logo', () => {
  it('the event-over page neither says it lets people in nor promises a retry, and its JSON agrees', async () => {
    const r = rig({ event_start: '2026-11-22T10:00:00Z', event_end: '2026-11-22T11:00:00Z' });
    const page = await r.handler(get('/', undefined, { 'accept-language': 'de' }), CLIENT);
    expect(page.status).toBe(410);
    expect(page.headers.get('retry-after')).toBeNull();
    expect(page.headers.get('refresh')).toBeNull();
    const html = await page.text();
    expect(html).toContain('Diese Veranstaltung ist beendet');
    expect(html).toContain('<p class="message" dir="auto"></p>');
    expect(html).not.toContain('Wir lassen Besucher');
    expect(html).toContain('<noscript><p class="meta"></p></noscript>');
    const json = await r.handler(get('/', undefined, { accept: 'application/json' }), CLIENT);
    expect(json.headers.get('retry-after')).toBeNull();
    expect(await json.json()).toMatchObject({ status: 'over', retry_after_seconds: null });
  });

  it('a logo at a path of the site is passed to the origin, never queued; other paths still are', async () => {
    const r = rig({ page_logo_url: '/brand/logo.svg' });
    const logo = await r.handler(get('/brand/logo.svg'), CLIENT);
    expect(logo.headers.get('x-origin')).toBe('yes');
    expect(cookieFrom(logo)).toBeUndefined();
    expect(r.logger.last).toMatchObject({ decision: 'bypass_logo' });
    // Another spelling of it reads as the same path; a neighbour does not.
    expect((await r.handler(get('/brand/./logo.svg'), CLIENT)).headers.get('x-origin')).toBe('yes');
    const other = await r.handler(get('/brand/other.svg'), CLIENT);
    expect(other.headers.get('x-origin')).toBeNull();
    expect(payloadOf(cookieFrom(other)!)['k']).toBe('w');
  });
});

describe('a new visitor', () => {
  it('takes a ticket and gets the holding page with a waiting cookie', async () => {
    const r = rig();
    const response = await r.handler(get('/'), CLIENT);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/html');
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('refresh')).toBe('5');
    const html = await response.text();
    expect(html).toContain('You are next');
    const cookieHeader = response.headers.getSetCookie()[0] ?? '';
    expect(cookieHeader).toMatch(/; Max-Age=60; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
    const claims = payloadOf(cookieFrom(response)!);
    expect(claims).toMatchObject({ q: 'default', k: 'w', t: 1 });
    expect(Number(claims['exp']) - Number(claims['iat'])).toBe(60);
    expect(r.origin.requests).toHaveLength(0);
    expect(r.store.calls).toBe(1);
    expect(r.logger.last).toMatchObject({ decision: 'waiting', ticket: 1, cursor: 0, tail: 1, status: 200, pop: 'TST' });
  });

  it('keeps the same ticket when it comes back, without a new increment', async () => {
    const r = rig();
    const v = new Visitor(r);
    await v.visit();
    await new Visitor(r).visit();
    const again = await v.visit();
    expect(v.ticket).toBe(1);
    expect(await again.text()).toContain('You are next');
    expect((await r.inner.peek('default')).tail).toBe(2);
  });

  it('re-issues the waiting ticket on each poll and loses it after the queue timeout', async () => {
    const r = rig();
    const v = new Visitor(r);
    await v.visit();
    const first = v.cookie;
    r.clock.advance(50_000);
    await v.visit();
    expect(v.cookie).not.toBe(first);
    expect(v.ticket).toBe(1);
    r.clock.advance(50_000);
    await v.visit();
    expect(v.ticket).toBe(1);
    // Gone longer than queue_timeout_seconds (60 s): the place is lost, a new ticket is taken.
    r.clock.advance(61_000);
    await v.visit();
    expect(v.ticket).toBe(2);
  });
});

describe('away and back', () => {
  it('promises on the page what the cookie keeps: the place for queue_timeout_seconds after the last update, not a second more', async () => {
    const r = rig();
    const v = new Visitor(r);
    expect(await (await v.visit()).text()).toContain('You may leave and come back: this browser keeps your place for 60 seconds after the last update.');
    r.clock.advance(59_000);
    await v.visit();
    expect(v.ticket).toBe(1);
    // Past the promise, the cookie is gone: a new ticket, at the back.
    r.clock.advance(60_500);
    await v.visit();
    expect(v.ticket).toBe(2);
  });
});

describe('admission', () => {
  it('lets exactly the first N tickets reach the origin, in order, and they stay in', async () => {
    const r = rig();
    const visitors = Array.from({ length: 5 }, () => new Visitor(r));
    for (const v of visitors) await v.visit();
    await admitNow(r, 3);
    const statuses = [];
    for (const v of visitors) {
      await v.visit('/product');
      statuses.push(v.kind);
    }
    expect(statuses).toEqual(['a', 'a', 'a', 'w', 'w']);
    expect(r.origin.requests.map((q) => new URL(q.url).pathname)).toEqual(['/product', '/product', '/product']);
    // Admitted visitors keep access with no store call at all.
    const calls = r.store.calls;
    for (const v of visitors.slice(0, 3)) expect((await v.visit('/cart')).headers.get('x-origin')).toBe('yes');
    expect(r.store.calls).toBe(calls);
  });

  it('rate mode: a called visitor claims its admission with one store call, then needs none', async () => {
    const r = rig();
    const visitors = Array.from({ length: 3 }, () => new Visitor(r));
    for (const v of visitors) await v.visit();
    await admitNow(r, 2);
    let calls = r.store.calls;
    await visitors[0]!.visit();
    // One poll (the cache is off here) and one claim.
    expect(r.store.calls - calls).toBe(2);
    expect(visitors[0]!.kind).toBe('a');
    expect(await r.inner.stats('default', r.clock.now(), admissionPolicy(r.config))).toMatchObject({ reserved: 1, admittedLastMinute: 2 });
    calls = r.store.calls;
    await visitors[0]!.visit();
    expect(r.store.calls).toBe(calls);
    // Ticket 2 never comes back: after its claim deadline (refresh 5 s + cache 0 s + 5 s) ticket 3 has its admission.
    r.clock.advance(10_001);
    await visitors[2]!.visit();
    expect(visitors[2]!.kind).toBe('a');
  });

  it('rate mode: a called visitor is let in even when its claim gets no answer', async () => {
    const r = rig();
    const v = new Visitor(r);
    await v.visit();
    await admitNow(r, 1);
    r.store.claim = () => Promise.reject(new Error('store is down'));
    const response = await v.visit('/product');
    expect(response.headers.get('x-origin')).toBe('yes');
    expect(v.kind).toBe('a');
  });

  it('renews an access token on activity, not on every request', async () => {
    const r = rig();
    const v = new Visitor(r);
    await v.visit();
    await admitNow(r, 1);
    await v.visit();
    const token = v.cookie;
    r.clock.advance(30_000);
    // Neither renewed nor signed again: the admission it carries has more than half its 120 s left.
    expect((await v.visit()).headers.getSetCookie()).toEqual([]);
    r.clock.advance(31_000);
    const renewed = await v.visit();
    // The access token renewed, and the admission (61 s old, less than half left) signed again.
    expect(renewed.headers.getSetCookie().map((c) => c.split('=')[0])).toEqual(['waiting_room', 'waiting_room_adm']);
    expect(v.cookie).not.toBe(token);
    expect(v.kind).toBe('a');
    // The session slides: 11 minutes after admission (session 600 s) the renewed token still works.
    r.clock.advance(540_000);
    expect((await v.visit()).headers.get('x-origin')).toBe('yes');
    // Inactive for longer than the session: the token has expired and the visitor queues again.
    r.clock.advance(601_000);
    await v.visit();
    expect(v.kind).toBe('w');
  });

  it('admits automatically, one period quota at a time, without banking quiet periods', async () => {
    const r = rig({ admit_per_period: '2', admit_period_seconds: '10' });
    const visitors = Array.from({ length: 5 }, () => new Visitor(r));
    for (const v of visitors) await v.visit();
    expect(visitors.map((v) => v.kind)).toEqual(['a', 'a', 'w', 'w', 'w']);
    r.clock.advance(10_000);
    for (const v of visitors.slice(2)) await v.visit();
    expect(visitors.map((v) => v.kind)).toEqual(['a', 'a', 'a', 'a', 'w']);
    // An hour of quiet must not open the gate for the next burst.
    r.clock.advance(3_600_000);
    await visitors[4]!.visit();
    const burst = Array.from({ length: 10 }, () => new Visitor(r));
    for (const v of burst) await v.visit();
    const state = await r.inner.peek('default');
    expect(state.cursor - 5).toBeLessThanOrEqual(2);
    expect(burst.filter((v) => v.kind === 'a').length).toBeLessThanOrEqual(2);
  });
});

describe('tokens that must not pass', () => {
  async function forged(r: Rig): Promise<Record<string, string>> {
    const iat = Math.floor(r.clock.now() / 1000);
    const access = { q: 'default', k: 'a', t: 1, iat, exp: iat + 600 };
    const accessKey = purposeKey(KEY_1, 'access');
    const [h, , s] = jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: access, secret: accessKey }).split('.');
    return {
      tampered: `${h}.${base64url({ ...access, t: 0 })}.${s}`,
      otherKey: jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: access, secret: purposeKey(KEY_2, 'access') }),
      ringKey: jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: access, secret: KEY_1 }),
      relabelledTicket: jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: access, secret: purposeKey(KEY_1, 'waiting') }),
      unknownKid: jws.sign({ header: { alg: 'HS256', kid: 'zz' }, payload: access, secret: accessKey }),
      algNone: `${base64url({ alg: 'none', kid: 'k1' })}.${base64url(access)}.`,
      expired: jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: { ...access, exp: iat - 1 }, secret: accessKey }),
      otherQueue: jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: { ...access, q: 'vip' }, secret: accessKey }),
      garbage: 'not-a-token',
    };
  }

  it('treats every forged, expired or foreign token as a new visitor', async () => {
    const r = rig();
    for (const [name, token] of Object.entries(await forged(r))) {
      const response = await r.handler(get('/', token), CLIENT);
      expect(response.status, name).toBe(200);
      expect(await response.text(), name).toContain('Your place in line');
      expect(payloadOf(cookieFrom(response)!)['k'], name).toBe('w');
    }
    expect(r.origin.requests).toHaveLength(0);
    expect((await r.inner.peek('default')).tail).toBe(9);
    expect(r.logger.records.map((l) => l.reason)).toEqual([
      'token_bad_signature',
      'token_bad_signature',
      'token_bad_signature',
      'token_bad_signature',
      'token_unknown_key',
      'token_malformed',
      'token_expired',
      'token_wrong_queue',
      'token_malformed',
    ]);
  });

  it('uses the valid token when a forged duplicate comes along', async () => {
    const r = rig();
    const v = new Visitor(r);
    await v.visit();
    await admitNow(r, 1);
    await v.visit();
    const request = new Request(`${SITE}/`, {
      headers: { cookie: `waiting_room=forged.token.here; other=1; waiting_room=${v.cookie}` },
    });
    expect((await r.handler(request, CLIENT)).headers.get('x-origin')).toBe('yes');
  });

  it('stops every token of a removed key (the emergency reset)', async () => {
    const r = rig({}, { signing_keys: `k2:${KEY_2},k1:${KEY_1}` });
    const v = new Visitor(r);
    await v.visit();
    await admitNow(r, 1);
    await v.visit();
    expect(v.kind).toBe('a');
    const rotated = createHandler({
      config: parseConfig(source(BASE_SETTINGS)),
      secrets: parseSecrets(source({ ...BASE_SECRETS, signing_keys: `k3:${KEY_2.split('').reverse().join('')}` })),
      store: r.store,
      origin: r.origin,
      logger: r.logger,
      clock: r.clock,
      cache: new MemoryStateCache(r.clock),
    });
    const before = r.origin.requests.length;
    const response = await rotated(get('/', v.cookie), CLIENT);
    expect(await response.text()).toContain('Your place in line');
    expect(r.origin.requests.length).toBe(before);
  });
});

describe('bypass and own paths', () => {
  it('sends bypass paths, bypass addresses and paths outside the queue straight to the origin with no store call', async () => {
    const r = rig({ bypass_paths: '/health,/static/*', bypass_ips: '10.0.0.0/8, 2001:db8::/32', queue_paths: '/shop/*' });
    const cases: [string, string, string][] = [
      ['/health', '203.0.113.9', 'bypass_path'],
      ['/static/app.css', '203.0.113.9', 'bypass_path'],
      ['/shop/item', '10.1.2.3', 'bypass_ip'],
      ['/shop/item', '2001:db8::7', 'bypass_ip'],
      ['/shop/item', '::ffff:10.9.9.9', 'bypass_ip'],
      ['/about', '203.0.113.9', 'no_queue'],
    ];
    for (const [path, address, decision] of cases) {
      const response = await r.handler(get(path), { address, pop: 'TST' });
      expect(response.headers.get('x-origin'), path).toBe('yes');
      expect(r.logger.last?.decision).toBe(decision);
    }
    expect(r.store.calls).toBe(0);
    // Still queued: the same path from another address, and a path the rule only seems to cover.
    expect((await r.handler(get('/shop/item'), CLIENT)).headers.get('x-origin')).toBeNull();
    expect((await r.handler(get('/SHOP//item'), CLIENT)).headers.get('x-origin')).toBeNull();
  });

  it('never forwards its own paths', async () => {
    const r = rig();
    for (const path of ['/__wr/nothing', '/__wr/assets/nope.js', '/__wr/admin/other']) {
      expect((await r.handler(get(path), CLIENT)).status).toBe(404);
    }
    const css = await r.handler(get('/__wr/assets/style.css'), CLIENT);
    expect(css.headers.get('content-type')).toContain('text/css');
    expect(await css.text()).toContain('prefers-reduced-motion');
    expect(r.origin.requests).toHaveLength(0);
  });

  it('reports a visitor status as JSON without taking a ticket', async () => {
    const r = rig();
    const none = await r.handler(get('/__wr/status'), CLIENT);
    expect(await none.json()).toMatchObject({ state: 'none' });
    const v = new Visitor(r);
    await v.visit();
    await new Visitor(r).visit();
    const waiting = await r.handler(get('/__wr/status', v.cookie), CLIENT);
    expect(await waiting.json()).toMatchObject({ state: 'waiting', ticket: 1, ahead: 0, position: 1, refresh_seconds: 5, paused: false, estimate_basis: 'none' });
    await admitNow(r, 1);
    const admitted = await r.handler(get('/__wr/status', v.cookie), CLIENT);
    expect(await admitted.json()).toMatchObject({ state: 'admitted' });
    expect(payloadOf(cookieFrom(admitted)!)['k']).toBe('a');
    expect((await r.inner.peek('default')).tail).toBe(2);
  });
});

describe('when the store fails', () => {
  for (const mode of ['error', 'hang'] as const) {
    it(`(${mode}) admitted visitors pass, waiting ones keep their ticket, new ones wait; never a 5xx`, async () => {
      const r = rig();
      const admitted = new Visitor(r);
      const waiting = new Visitor(r);
      await admitted.visit();
      await waiting.visit();
      await admitNow(r, 1);
      await admitted.visit();
      r.store.mode = mode;
      const a = await admitted.visit('/cart');
      expect(a.headers.get('x-origin')).toBe('yes');
      const w = await waiting.visit();
      expect(w.status).toBe(200);
      expect(await w.text()).toContain('We are checking your place in line');
      expect(waiting.ticket).toBe(2);
      const n = await r.handler(get('/'), CLIENT);
      expect(n.status).toBe(200);
      // No ticket: the cookie keeps only the key of the join that got no answer.
      const pending = cookieFrom(n)!;
      expect(payloadOf(pending)).toMatchObject({ k: 'w', t: 0, p: expect.stringMatching(/^[0-9a-f]{16}$/) });
      expect(r.logger.last).toMatchObject({ decision: 'unavailable', store_error: expect.stringMatching(mode === 'hang' ? /timeout/ : /error/) });
      // The store comes back: the waiting visitor still holds ticket 2.
      r.store.mode = 'ok';
      await admitNow(r, 1);
      await waiting.visit();
      expect(waiting.kind).toBe('a');
      // The new visitor asks again with its key; the store never took a ticket for it: the next one.
      const retried = await r.handler(get('/', pending), CLIENT);
      expect(payloadOf(cookieFrom(retried)!)).toMatchObject({ k: 'w', t: 3 });
      expect(r.logger.last).toMatchObject({ decision: 'waiting', reason: 'join_retried', ticket: 3 });
    });
  }

  it('lets visitors through unqueued when the policy says pass', async () => {
    const r = rig({ store_failure: 'pass' });
    r.store.mode = 'error';
    const response = await r.handler(get('/'), CLIENT);
    expect(response.headers.get('x-origin')).toBe('yes');
    expect(r.logger.last?.decision).toBe('unavailable_pass');
  });

  it('answers the admin with 503 and the reason, not a crash', async () => {
    const r = rig();
    r.store.mode = 'error';
    const response = await r.handler(
      new Request(`${SITE}/__wr/api/admit?count=1`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } }),
      CLIENT,
    );
    expect(response.status).toBe(503);
    // It asked twice (the second time with the same idempotency key) and says what it knows.
    expect(await response.json()).toMatchObject({ applied: 'unknown', error: expect.stringContaining('unknown whether the admit was applied') });
  });
});

describe('holding status codes', () => {
  it('sends Retry-After with 429 and 503', async () => {
    for (const status of ['429', '503']) {
      const r = rig({ hold_status: status });
      const response = await r.handler(get('/'), CLIENT);
      expect(response.status).toBe(Number(status));
      expect(response.headers.get('retry-after')).toBe('5');
    }
  });
});

describe('admin page and APIs', () => {
  const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const ADMIN = basic('admin', ADMIN_PASSWORD);
  let r: Rig;

  beforeEach(async () => {
    r = rig();
    for (let i = 0; i < 10; i++) await new Visitor(r).visit();
  });

  async function csrfToken(): Promise<string> {
    const page = await r.handler(get('/__wr/admin', undefined, { authorization: ADMIN }), CLIENT);
    const match = /name="csrf" value="([^"]+)"/.exec(await page.text());
    return match![1]!;
  }

  function postForm(body: string, headers: Record<string, string> = {}): Request {
    return new Request(`${SITE}/__wr/admin/admit`, {
      method: 'POST',
      body,
      headers: { authorization: ADMIN, 'content-type': 'application/x-www-form-urlencoded', origin: SITE, ...headers },
    });
  }

  it('is refused with a clear message until a password is configured', async () => {
    const { admin_password: _unused, ...noPassword } = BASE_SECRETS;
    const closed = createHandler({
      config: parseConfig(source(BASE_SETTINGS)),
      secrets: parseSecrets(source(noPassword)),
      store: r.store,
      origin: r.origin,
      logger: r.logger,
      clock: r.clock,
      cache: new MemoryStateCache(r.clock),
    });
    const response = await closed(get('/__wr/admin', undefined, { authorization: basic('admin', '') }), CLIENT);
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({ error: expect.stringContaining('admin_password') });
  });

  it('asks for credentials and refuses wrong ones', async () => {
    for (const authorization of [undefined, basic('admin', 'wrong'), basic('root', ADMIN_PASSWORD), 'Basic ???']) {
      const response = await r.handler(get('/__wr/admin', undefined, authorization ? { authorization } : {}), CLIENT);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toContain('Basic');
    }
  });

  it('shows the queue, with frame and script protections', async () => {
    const response = await r.handler(get('/__wr/admin', undefined, { authorization: ADMIN }), CLIENT);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-frame-options')).toBe('DENY');
    expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    const html = await response.text();
    expect(html).toContain('<dd data-figure="waiting">10</dd>');
    expect(html).not.toContain(ADMIN_PASSWORD);
  });

  it('lets N in from the form and answers with the new state', async () => {
    const csrf = await csrfToken();
    const json = await r.handler(postForm(`csrf=${csrf}&count=4`), CLIENT);
    expect(json.status).toBe(200);
    expect(await json.json()).toMatchObject({ admitted: 4, tail: 10, cursor: 4, waiting: 6 });
    const html = await r.handler(postForm(`csrf=${csrf}&count=2`, { accept: 'text/html' }), CLIENT);
    expect(html.status).toBe(303);
    // The notice comes with the tag that lets the page show it (see console.test.ts).
    expect(html.headers.get('location')).toMatch(new RegExp(`^/__wr/admin\\?done=${encodeURIComponent('Let 2 visitors in.')}&done_tag=[^&]+$`));
    expect((await r.inner.peek('default')).cursor).toBe(6);
  });

  it('refuses forged or cross-site form posts and changes nothing', async () => {
    const csrf = await csrfToken();
    const cases = [
      postForm('count=4'),
      postForm(`csrf=${csrf.slice(0, -2)}xx&count=4`),
      postForm(`csrf=${csrf}&count=4`, { origin: 'https://evil.example' }),
      postForm(`csrf=${csrf}&count=4`, { 'sec-fetch-site': 'cross-site' }),
      postForm(`csrf=${csrf}&count=4`, { 'sec-fetch-site': 'same-site' }),
      postForm(`csrf=${csrf}&count=4`, { origin: 'null' }),
    ];
    for (const request of cases) expect((await r.handler(request, CLIENT)).status).toBe(403);
    // An expired form token.
    r.clock.advance(3_601_000);
    expect((await r.handler(postForm(`csrf=${csrf}&count=4`), CLIENT)).status).toBe(403);
    expect((await r.inner.peek('default')).cursor).toBe(0);
  });

  it('accepts the headers a browser sends from the admin page', async () => {
    const csrf = await csrfToken();
    // A browser posting from our page: Fetch Metadata says same-origin, whatever Origin says.
    const fromPage = await r.handler(postForm(`csrf=${csrf}&count=1`, { 'sec-fetch-site': 'same-origin', origin: 'null' }), CLIENT);
    expect(fromPage.status).toBe(200);
    const noOrigin = new Request(`${SITE}/__wr/admin/admit`, {
      method: 'POST',
      body: `csrf=${csrf}&count=1`,
      headers: { authorization: ADMIN, 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect((await r.handler(noOrigin, CLIENT)).status).toBe(200);
    expect((await r.inner.peek('default')).cursor).toBe(2);
  });

  it('pauses, resumes and sets the capacity from the page, and refuses bad values', async () => {
    const csrf = await csrfToken();
    const post = (body: string, accept = 'application/json') =>
      r.handler(
        new Request(`${SITE}/__wr/admin/control`, {
          method: 'POST',
          body: `csrf=${csrf}&${body}`,
          headers: { authorization: ADMIN, 'content-type': 'application/x-www-form-urlencoded', origin: SITE, accept },
        }),
        CLIENT,
      );
    expect(await (await post('paused=true')).json()).toMatchObject({ paused: true, changed: 'Admission paused.' });
    const page = await r.handler(get('/__wr/admin', undefined, { authorization: ADMIN }), CLIENT);
    const html = await page.text();
    expect(html).toContain('In force: <span data-figure="state">paused</span>');
    expect(html).toContain('Resume admission');
    // A browser gets the page back with what changed.
    const resumed = await post('paused=false', 'text/html');
    expect(resumed.status).toBe(303);
    expect(new URL(resumed.headers.get('location') ?? '', SITE).searchParams.get('done')).toBe('Admission resumed.');
    const set = await post('max_active=40&max_new_per_minute=');
    expect(await set.json()).toMatchObject({ mode: 'capacity', max_sessions: 40, max_new_per_minute: 0 });
    const before = await r.inner.stats('default', r.clock.now(), admissionPolicy(r.config));
    for (const bad of ['max_active=-4', 'max_active=lots', 'paused=maybe', 'speed=3', 'max_active=1&max_active=2', '']) {
      const response = await post(bad);
      expect(response.status, bad).toBe(400);
    }
    expect(await r.inner.stats('default', r.clock.now(), admissionPolicy(r.config))).toEqual(before);
    // Without the form token nothing changes either.
    const forged = await r.handler(
      new Request(`${SITE}/__wr/admin/control`, { method: 'POST', body: 'paused=true', headers: { authorization: ADMIN, 'content-type': 'application/x-www-form-urlencoded' } }),
      CLIENT,
    );
    expect(forged.status).toBe(403);
    expect((await r.inner.stats('default', r.clock.now(), admissionPolicy(r.config))).paused).toBe(false);
  });

  it('refuses bad counts with a 400 saying why and changes nothing', async () => {
    const csrf = await csrfToken();
    const bad = ['', 'count=', 'count=abc', 'count=-1', 'count=0', 'count=1.5', 'count=100001', 'count=1e9', 'count=1&count=2'];
    for (const body of bad) {
      const response = await r.handler(postForm(`csrf=${csrf}&${body}`), CLIENT);
      expect(response.status, body).toBe(400);
      expect((await response.json()).error, body).toMatch(/count/);
    }
    const api = [
      ['/__wr/api/admit', '{"count":"x"}'],
      ['/__wr/api/admit', '{"count":0}'],
      ['/__wr/api/admit', '[5]'],
      ['/__wr/api/admit', '{bad json'],
      ['/__wr/api/admit?count=5', '{"count":5}'],
      ['/__wr/api/admit?count=9999999', ''],
      ['/__wr/api/admit', ''],
    ];
    for (const [path, body] of api) {
      const request = new Request(`${SITE}${path}`, { method: 'POST', body, headers: { authorization: `Bearer ${API_TOKEN}` } });
      const response = await r.handler(request, CLIENT);
      expect(response.status, `${path} ${body}`).toBe(400);
    }
    const huge = new Request(`${SITE}/__wr/api/admit`, { method: 'POST', body: 'x'.repeat(10_000), headers: { authorization: `Bearer ${API_TOKEN}` } });
    expect((await r.handler(huge, CLIENT)).status).toBe(413);
    expect((await r.inner.peek('default')).cursor).toBe(0);
  });

  it('refuses an empty or blank Idempotency-Key with a 400 that changes nothing: a retry must not admit twice', async () => {
    // An empty key read as "no key" made each retry a new admit: the caller meant a key and lost it.
    for (const key of ['', ' ', '\t', '   ']) {
      for (const [path, body] of [['/__wr/api/admit?count=2', undefined], ['/__wr/api/admit', '{"count": 2}']] as const) {
        const request = new Request(`${SITE}${path}`, { method: 'POST', body, headers: { authorization: `Bearer ${API_TOKEN}`, 'idempotency-key': key } });
        const response = await r.handler(request, CLIENT);
        expect(response.status, JSON.stringify(key)).toBe(400);
        expect((await response.json()).error).toMatch(/Idempotency-Key is empty.*nothing changed/);
      }
    }
    // The console's form field likewise: the page always fills it in, so an empty one is not the page's.
    const csrf = await csrfToken();
    for (const field of ['idempotency_key=', 'idempotency_key=%20%20']) {
      const response = await r.handler(postForm(`csrf=${csrf}&count=2&${field}`), CLIENT);
      expect(response.status, field).toBe(400);
      expect((await response.json()).error).toMatch(/idempotency_key is empty/);
    }
    expect((await r.inner.peek('default')).cursor).toBe(0);
    // Absent, it still means an admit without a key.
    expect((await r.handler(new Request(`${SITE}/__wr/api/admit?count=2`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } }), CLIENT)).status).toBe(200);
  });

  it('lets the origin admit with its bearer token, by query or JSON body', async () => {
    const post = (path: string, body?: string, token = API_TOKEN) =>
      r.handler(new Request(`${SITE}${path}`, { method: 'POST', body, headers: { authorization: `Bearer ${token}` } }), CLIENT);
    expect((await post('/__wr/api/admit?count=3', undefined, 'wrong-token')).status).toBe(401);
    expect((await post('/__wr/api/admit?count=3', undefined, ADMIN_PASSWORD)).status).toBe(401);
    const byQuery = await post('/__wr/api/admit?count=3');
    expect(await byQuery.json()).toMatchObject({ admitted: 3, cursor: 3, tail: 10, waiting: 7 });
    const byBody = await post('/__wr/api/admit', '{"count": 100}');
    // Never past the tail: only the 7 who wait are let in.
    expect(await byBody.json()).toMatchObject({ admitted: 7, cursor: 10, waiting: 0 });
    const state = await r.handler(new Request(`${SITE}/__wr/api/state`, { headers: { authorization: `Bearer ${API_TOKEN}` } }), CLIENT);
    expect(await state.json()).toMatchObject({ tail: 10, cursor: 10, waiting: 0 });
    expect((await r.handler(new Request(`${SITE}/__wr/api/admit`, { headers: { authorization: `Bearer ${API_TOKEN}` } }), CLIENT)).status).toBe(405);
  });
});

describe('capacity mode', () => {
  const CAPACITY = { max_active: '2', max_new_per_minute: '100', session_seconds: '120', activity_refresh_seconds: '30', leave_grace_seconds: '5' };

  it('refreshes a slot in the store at most once per activity_refresh_seconds, carrying the time in the cookie', async () => {
    const r = rig(CAPACITY);
    const v = new Visitor(r);
    expect((await v.visit()).headers.get('x-origin')).toBe('yes');
    expect(payloadOf(v.cookie!)).toMatchObject({ k: 'a', t: 1 });
    const calls = r.store.calls;
    for (let i = 0; i < 10; i++) {
      r.clock.advance(2_000);
      expect((await v.visit('/page')).headers.get('x-origin')).toBe('yes');
    }
    expect(r.store.calls).toBe(calls);
    r.clock.advance(10_000);
    const refreshed = await v.visit('/page');
    expect(r.store.calls).toBe(calls + 1);
    expect(Number(payloadOf(cookieFrom(refreshed)!)['r'])).toBe(Math.floor(r.clock.now() / 1000));
    await v.visit('/page');
    expect(r.store.calls).toBe(calls + 1);
  });

  it('ends a session at session_max_seconds whatever the activity', async () => {
    const r = rig({ ...CAPACITY, session_max_seconds: '150' });
    const v = new Visitor(r);
    await v.visit();
    for (let t = 0; t < 4; t++) {
      r.clock.advance(30_000);
      expect((await v.visit()).headers.get('x-origin')).toBe('yes');
    }
    // 150 s after admission the token has lapsed: the visitor takes a new ticket (and walks in, there is room).
    r.clock.advance(31_000);
    await v.visit();
    expect(v.ticket).toBe(2);
  });

  it('a visitor whose slot ended queues again on the next refresh', async () => {
    const r = rig(CAPACITY);
    const [a, b, c] = [new Visitor(r), new Visitor(r), new Visitor(r)];
    await a.visit();
    await b.visit();
    expect((await c.visit()).headers.get('x-origin')).toBeNull();
    // The store lets a's slot go (as a beacon's grace would); a learns it at its next refresh.
    await r.inner.leave('default', 1, r.clock.now(), admissionPolicy(r.config), 0);
    r.clock.advance(30_000);
    expect((await c.visit()).headers.get('x-origin')).toBe('yes');
    const again = await a.visit();
    expect(again.headers.get('x-origin')).toBeNull();
    expect(a.kind).toBe('w');
    expect(a.ticket).toBe(4);
    expect(r.logger.records.some((l) => l.reason === 'slot_ended')).toBe(true);
  });

  it('shows a measured wait estimate once visitors have been let in', async () => {
    const r = rig({ ...CAPACITY, max_active: '0', max_new_per_minute: '6' });
    const visitors = Array.from({ length: 12 }, () => new Visitor(r));
    for (const v of visitors) await v.visit();
    const last = visitors[11]!;
    const early = await (await r.handler(get('/__wr/status', last.cookie), CLIENT)).json();
    expect(early).toMatchObject({ state: 'waiting', estimate_basis: 'measured', ahead: 5 });
    // 6 let in during the last minute: 0.1 a second; position 6 → 60 s.
    expect(early.estimated_wait_seconds).toBe(60);
    const html = await (await last.visit()).text();
    expect(html).toContain('Estimated wait: about 1 minute');
  });
});

describe('responses for programs', () => {
  it('answers JSON with the place, the estimate and when to retry, with the configured status', async () => {
    for (const status of ['200', '429', '503']) {
      const r = rig({ hold_status: status, json_paths: '/api/*' });
      await r.handler(get('/'), CLIENT);
      const byAccept = await r.handler(get('/products', undefined, { accept: 'application/json' }), CLIENT);
      expect(byAccept.status).toBe(Number(status));
      expect(byAccept.headers.get('content-type')).toContain('application/json');
      expect(byAccept.headers.get('retry-after')).toBe('5');
      expect(byAccept.headers.getSetCookie()).toHaveLength(1);
      expect(await byAccept.json()).toMatchObject({ status: 'waiting', queue: 'default', ticket: 2, place: 2, ahead: 1, retry_after_seconds: 5, estimate_basis: 'none' });
      // A configured path answers JSON whatever the client accepts.
      const byPath = await r.handler(get('/api/cart'), CLIENT);
      expect(await byPath.json()).toMatchObject({ status: 'waiting', ticket: 3 });
    }
  });

  it('keeps HTML for browsers, which accept both', async () => {
    const r = rig();
    const browser = await r.handler(get('/', undefined, { accept: 'text/html,application/xhtml+xml,application/json;q=0.9,*/*;q=0.8' }), CLIENT);
    expect(browser.headers.get('content-type')).toContain('text/html');
  });

  it('answers JSON without a place when the store is down', async () => {
    const r = rig();
    r.store.mode = 'error';
    const response = await r.handler(get('/', undefined, { accept: 'application/json' }), CLIENT);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: 'checking', ticket: null, place: null, message: 'We are checking your place in line.' });
  });
});

describe('bypass by signed cookie and by verified crawler', () => {
  it('lets a bypass pass minted by the API through, and nothing that only looks like one', async () => {
    const r = rig({ bypass_cookie: 'staff' });
    const mint = await r.handler(
      new Request(`${SITE}/__wr/api/bypass-pass`, { method: 'POST', body: '{"ttl_seconds": 3600}', headers: { authorization: `Bearer ${API_TOKEN}` } }),
      CLIENT,
    );
    const { token, cookie_name } = (await mint.json()) as { token: string; cookie_name: string };
    expect(cookie_name).toBe('staff');
    const withPass = (value: string) => r.handler(new Request(`${SITE}/`, { headers: { cookie: `staff=${value}` } }), CLIENT);
    expect((await withPass(token)).headers.get('x-origin')).toBe('yes');
    expect(r.logger.last?.decision).toBe('bypass_cookie');
    // A plain value, a pass signed with another key, a queue ticket of ours, an expired pass: all queue.
    const iat = Math.floor(r.clock.now() / 1000);
    const foreign = jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: { q: '*', k: 'b', t: 0, iat, exp: iat + 60 }, secret: purposeKey(KEY_2, 'bypass') });
    const ticket = cookieFrom(await r.handler(get('/'), CLIENT))!;
    for (const value of ['1', 'yes', foreign, ticket]) expect((await withPass(value)).headers.get('x-origin'), value).toBeNull();
    r.clock.advance(3_601_000);
    expect((await withPass(token)).headers.get('x-origin')).toBeNull();
    expect(r.store.calls).toBeGreaterThan(0);
  });

  it('refuses silly pass lifetimes and unknown fields', async () => {
    const r = rig({ bypass_cookie: 'staff' });
    for (const body of ['{"ttl_seconds": 5}', '{"ttl_seconds": 99999999}', '{"ttl_seconds": "1h"}', '{"ttl": 60}', '[]']) {
      const response = await r.handler(
        new Request(`${SITE}/__wr/api/bypass-pass`, { method: 'POST', body, headers: { authorization: `Bearer ${API_TOKEN}` } }),
        CLIENT,
      );
      expect(response.status, body).toBe(400);
    }
    const off = rig();
    const response = await off.handler(new Request(`${SITE}/__wr/api/bypass-pass`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } }), CLIENT);
    expect(response.status).toBe(409);
  });

  it('lets a crawler through only from its published ranges', async () => {
    const r = rig({ bypass_crawlers: 'on', crawler_ips: '66.249.64.0/19, 2001:4860:4801::/48' });
    const crawl = (ua: string, address: string) =>
      r.handler(new Request(`${SITE}/sale`, { headers: { 'user-agent': ua } }), { address, pop: 'TST' });
    const googlebot = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';
    expect((await crawl(googlebot, '66.249.66.1')).headers.get('x-origin')).toBe('yes');
    expect((await crawl(googlebot, '2001:4860:4801:10::1')).headers.get('x-origin')).toBe('yes');
    // The same user agent from anywhere else is just a visitor; so is a browser from the crawler range.
    expect((await crawl(googlebot, '203.0.113.5')).headers.get('x-origin')).toBeNull();
    expect((await crawl('Mozilla/5.0 (X11; Linux x86_64) Chrome/120', '66.249.66.1')).headers.get('x-origin')).toBeNull();
  });

  it('refuses crawler bypass without the published ranges', () => {
    expect(() => parseConfig(source({ bypass_crawlers: 'on' }))).toThrow(/crawler_ips/);
  });
});

describe('when the store lost its state', () => {
  // Two rigs with the same keys: the second store is the first one after losing everything.
  it.each(['fifo', 'random'])('%s: a ticket of the lost state rejoins with a new ticket and never passes as a newer visitor\'s number', async (method) => {
    const settings = { admit_per_period: '0', queue_method: method };
    const before = rig(settings);
    const old = new Visitor(before);
    await old.visit();
    expect(payloadOf(old.cookie!)).toMatchObject({ k: 'w', t: 1, gen: expect.any(Number) });

    const after = rig(settings);
    const fresh = new Visitor(after);
    await fresh.visit();
    expect(payloadOf(fresh.cookie!)['gen']).not.toBe(payloadOf(old.cookie!)['gen']);
    // The new ticket 1 is called: it is the fresh visitor's, not the old cookie's.
    await after.inner.admit('default', 1, after.clock.now(), admissionPolicy(after.config));
    const moved = new Visitor(after);
    moved.cookie = old.cookie;
    const held = await moved.visit();
    expect(held.headers.get('x-origin')).toBeNull();
    expect(after.logger.last).toMatchObject({ reason: 'ticket_from_lost_state', ticket: 2 });
    expect(payloadOf(moved.cookie!)).toMatchObject({ k: 'w', t: 2, gen: payloadOf(fresh.cookie!)['gen'] });
    expect((await fresh.visit()).headers.get('x-origin')).toBe('yes');
    expect(after.origin.requests).toHaveLength(1);
  });

  it('capacity: an admitted visitor keeps passing and its slot is registered again, under its own generation', async () => {
    const settings = { max_active: '1', activity_refresh_seconds: '5' };
    const before = rig(settings);
    const seated = new Visitor(before);
    expect((await seated.visit()).headers.get('x-origin')).toBe('yes');
    const gen = payloadOf(seated.cookie!)['gen'];

    const after = rig(settings);
    const moved = new Visitor(after);
    moved.cookie = seated.cookie;
    after.clock.advance(6_000);
    // Its refresh is due: the store registers it again and counts it, so a newcomer waits.
    expect((await moved.visit()).headers.get('x-origin')).toBe('yes');
    expect(payloadOf(moved.cookie!)).toMatchObject({ k: 'a', t: 1, gen });
    const newcomer = new Visitor(after);
    expect((await newcomer.visit()).headers.get('x-origin')).toBeNull();
    expect(payloadOf(newcomer.cookie!)).toMatchObject({ k: 'w', t: 1 });
    expect(await after.inner.stats('default', after.clock.now(), admissionPolicy(after.config))).toMatchObject({ active: 1, tail: 1 });
  });
});

describe('emergency switches', () => {
  const control = (r: Rig, body: unknown) =>
    r.handler(new Request(`${SITE}/__wr/api/control`, { method: 'POST', body: JSON.stringify(body), headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' } }), CLIENT);
  const admit = async (r: Rig, count: number) =>
    (await (await r.handler(new Request(`${SITE}/__wr/api/admit?count=${count}`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } }), CLIENT)).json()) as { admitted: number };

  it('open: everyone passes (new and waiting visitors), no ticket is taken, and a POP that saw the state asks the store nothing', async () => {
    const r = rig({ state_cache_seconds: '5' });
    const waiting = new Visitor(r);
    await waiting.visit();
    expect(waiting.kind).toBe('w');
    const switched = await control(r, { switch: 'open' });
    expect(switched.status).toBe(200);
    expect(await switched.json()).toMatchObject({ switch: 'open', paused: false });
    // Within one cache lifetime the POP sees it; after that, the state it loaded says open.
    r.clock.advance(6_000);
    const polled = await waiting.visit();
    expect(polled.headers.get('x-origin')).toBe('yes');
    expect(r.logger.last).toMatchObject({ decision: 'switch_open' });
    const tail = (await r.store.peek('default')).tail;
    const calls = r.store.calls;
    const fresh = await r.handler(get('/'), CLIENT);
    expect(fresh.headers.get('x-origin')).toBe('yes');
    expect(cookieFrom(fresh)).toBeUndefined();
    expect(r.store.calls).toBe(calls);
    expect((await r.store.peek('default')).tail).toBe(tail);
    // The origin is told how it got through.
    expect(r.origin.sent.at(-1)!.get('waiting-room-admission')).toBeDefined();
    // The holding page's script is told to go to the site.
    expect(await (await r.handler(get('/__wr/status', waiting.cookie), CLIENT)).json()).toMatchObject({ state: 'admitted' });
    // Normal again: a new visitor queues (rate mode, nobody let in by hand).
    await control(r, { switch: 'normal' });
    r.clock.advance(6_000);
    const after = await r.handler(get('/'), CLIENT);
    expect(after.headers.get('x-origin')).toBeNull();
    expect(payloadOf(cookieFrom(after)!)['k']).toBe('w');
  });

  it('hold: nobody new gets in, not by walking in, an admit or a call; those already in keep their access', async () => {
    const r = rig({ max_active: '5', activity_refresh_seconds: '30' });
    const inside = new Visitor(r);
    await inside.visit();
    expect(inside.kind).toBe('a');
    const called = new Visitor(r);
    await control(r, { max_active: 1 });
    await called.visit();
    expect(called.kind).toBe('w');
    await control(r, { switch: 'hold', max_active: 5 });
    // Room for four more, but a newcomer waits.
    const newcomer = new Visitor(r);
    await newcomer.visit();
    expect(newcomer.kind).toBe('w');
    expect(await admit(r, 5)).toMatchObject({ admitted: 0 });
    await called.visit();
    expect(called.kind).toBe('w');
    // The one inside stays inside.
    expect((await inside.visit()).headers.get('x-origin')).toBe('yes');
    // Back to normal: admission resumes at once.
    expect(await (await control(r, { switch: 'normal' })).json()).toMatchObject({ switch: 'normal' });
    await called.visit();
    expect(called.kind).toBe('a');
  });

  it('takes typed JSON only: "true" or "5" where a boolean or a number is meant is a 400 naming the field, and nothing is applied', async () => {
    const r = rig();
    const before = await r.store.stats('default', r.clock.now(), admissionPolicy(r.config));
    for (const [body, field, type] of [
      [{ paused: 'true' }, 'paused', 'boolean'],
      [{ paused: 'false' }, 'paused', 'boolean'],
      [{ max_active: '5' }, 'max_active', 'number'],
      [{ max_new_per_minute: '60' }, 'max_new_per_minute', 'number'],
      [{ adaptive_pin: '7' }, 'adaptive_pin', 'number'],
      // A good field beside a bad one is not applied either.
      [{ paused: true, max_active: '5' }, 'max_active', 'number'],
      [{ switch: 'hold', paused: 'true' }, 'paused', 'boolean'],
    ] as const) {
      const response = await control(r, body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect((await response.json()).error).toMatch(new RegExp(`^${field} must be a JSON ${type}.*; nothing changed$`));
    }
    expect(await r.store.stats('default', r.clock.now(), admissionPolicy(r.config))).toEqual(before);
    expect(await (await control(r, { paused: true, max_active: 5 })).json()).toMatchObject({ paused: true, max_sessions: 5 });
  });

  it('refuses a switch it does not know, changing nothing', async () => {
    const r = rig();
    const refused = await control(r, { switch: 'closed' });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain('switch must be normal, open');
    expect(await (await control(r, { paused: false })).json()).toMatchObject({ switch: 'normal' });
  });
});
