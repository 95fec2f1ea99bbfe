/**
 * The admin console's live figures, chart and reset, and the holding page's language, headers and
 * template overrides, through the handler on the in-memory store with an injected clock.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { parseConfig, parseSecrets } from '../src/core/config';
import { createHandler, TEMPLATE_CACHE_SECONDS, type Handler } from '../src/core/handler';
import type { TemplateSource } from '../src/core/ports';
import { createService } from '../src/core/service';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, BASE_SECRETS, BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, MemoryLogger, RecordingOrigin, source, testHandler } from './support/fixtures';

const SITE = 'https://shop.example';
const CLIENT = { address: '198.51.100.20', pop: 'TST' };
const ADMIN = `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`;

/** Templates an operator put in the KV Store, changeable while the service runs. */
class KvTemplates implements TemplateSource {
  readonly entries = new Map<string, string>();
  reads = 0;
  failing = false;
  async get(key: string): Promise<string | undefined> {
    this.reads++;
    if (this.failing) throw new Error('kv lookup failed');
    return this.entries.get(key);
  }
}

interface Rig {
  handler: Handler;
  store: MemoryQueueStore;
  clock: ManualClock;
  logger: MemoryLogger;
  templates: KvTemplates;
}

function rig(settings: Record<string, string> = {}): Rig {
  const store = new MemoryQueueStore();
  const clock = new ManualClock();
  const logger = new MemoryLogger();
  const templates = new KvTemplates();
  const handler = createHandler({
    config: parseConfig(source({ ...BASE_SETTINGS, ...settings })),
    secrets: parseSecrets(source(BASE_SECRETS)),
    store,
    origin: new RecordingOrigin(),
    logger,
    clock,
    cache: new MemoryStateCache(clock),
    templates,
  });
  return { handler, store, clock, logger, templates };
}

const adminGet = (path: string): Request => new Request(`${SITE}${path}`, { headers: { authorization: ADMIN } });

async function csrfOf(r: Rig): Promise<string> {
  const html = await (await r.handler(adminGet('/__wr/admin'), CLIENT)).text();
  return /name="csrf" value="([^"]+)"/.exec(html)![1]!;
}

function post(path: string, body: string): Request {
  return new Request(`${SITE}${path}`, {
    method: 'POST',
    body,
    headers: { authorization: ADMIN, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin', accept: 'application/json' },
  });
}

describe('the admin console', () => {
  let r: Rig;
  beforeEach(async () => {
    r = rig();
    for (let i = 0; i < 6; i++) await r.handler(new Request(`${SITE}/`), CLIENT);
  });

  it('serves live figures and the chart as JSON, behind Basic Auth', async () => {
    expect((await r.handler(new Request(`${SITE}/__wr/admin/live`), CLIENT)).status).toBe(401);
    const response = await r.handler(adminGet('/__wr/admin/live'), CLIENT);
    expect(response.status).toBe(200);
    const live = (await response.json()) as { figures: Record<string, string>; chart: string; pause_label: string };
    expect(live.figures).toMatchObject({ waiting: '6', tail: '6', cursor: '0', state: 'running', method: 'first in, first out', event: 'none scheduled', active: 'not counted in rate mode' });
    expect(live.chart).toContain('<svg class="chart"');
    expect(live.pause_label).toBe('Pause admission');
  });

  it('draws the last hour from the per-minute figures the store keeps', async () => {
    // Ten minutes of traffic: each minute two more join and one is let in (and comes: a call nobody
    // claims would go to the next in line).
    const policy = { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 };
    for (let minute = 0; minute < 10; minute++) {
      r.clock.advance(60_000);
      await r.handler(new Request(`${SITE}/`), CLIENT);
      await r.handler(new Request(`${SITE}/`), CLIENT);
      const { cursor } = await r.store.admit('default', 1, r.clock.now(), policy);
      expect((await r.store.claim('default', cursor, r.clock.now(), policy, 0)).claimed).toBe(true);
    }
    const history = await r.store.history('default', r.clock.now());
    expect(history.length).toBeGreaterThanOrEqual(10);
    const live = (await (await r.handler(adminGet('/__wr/admin/live'), CLIENT)).json()) as { chart: string };
    const points = /<polyline class="waiting" points="([^"]+)"/.exec(live.chart)![1]!.split(' ');
    // One point a recorded minute, and the last at now: the figures the tiles show.
    expect(points.length).toBe(history.filter((p) => p.atMs >= r.clock.now() - 3_660_000).length + 1);
    // The waiting line rises over the ten minutes: its last point is higher (smaller y) than its first.
    const y = (p: string): number => Number(p.split(',')[1]);
    expect(y(points.at(-1)!)).toBeLessThan(y(points[0]!));
    expect(live.chart).toMatch(/\d+ waiting now \(most \d+\)/);
    // An hour later the old minutes have left the hour's history, and the chart keeps them from the
    // sale's record: a sale with neither a reset nor an event is drawn from its oldest point.
    r.clock.advance(3_700_000);
    // A join writes no point; a waiting visitor's poll (the state load) does.
    await r.handler(new Request(`${SITE}/`), CLIENT);
    await r.store.poll('default', r.clock.now(), policy);
    expect((await r.store.history('default', r.clock.now())).length).toBe(1);
    const later = (await (await r.handler(adminGet('/__wr/admin/live'), CLIENT)).json()) as { chart: string };
    expect(later.chart).toContain('Queue length and admissions, since');
    expect(/<polyline class="waiting" points="([^"]+)"/.exec(later.chart)![1]!.split(' ').length).toBe(history.length + 2);
  });

  it('ends the chart at the figures the tiles show in the same poll, not at the minute recorded before the admits', async () => {
    const policy = { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 };
    // A waiting visitor's poll records this minute's point: 6 waiting, nobody let in yet.
    await r.store.poll('default', r.clock.now(), policy);
    expect((await r.store.history('default', r.clock.now())).at(-1)).toMatchObject({ waiting: 6, admittedLastMinute: 0 });
    // Later in the same minute 4 are let in and 3 more join: the minute's point stays as it was.
    r.clock.advance(20_000);
    await r.store.admit('default', 4, r.clock.now(), policy);
    for (let i = 0; i < 3; i++) await r.handler(new Request(`${SITE}/`), CLIENT);
    expect((await r.store.history('default', r.clock.now())).at(-1)).toMatchObject({ waiting: 6, admittedLastMinute: 0 });

    const live = (await (await r.handler(adminGet('/__wr/admin/live'), CLIENT)).json()) as { figures: Record<string, string>; chart: string };
    expect(live.figures).toMatchObject({ waiting: '5', admitted_last_minute: '4' });
    const dot = (series: string): { value: string; title: string } => {
      const m = new RegExp(`<circle class="${series}" data-value="(\\d+)"[^>]*><title>([^<]*)</title>`).exec(live.chart)!;
      return { value: m[1]!, title: m[2]! };
    };
    expect(dot('waiting')).toEqual({ value: live.figures.waiting, title: `${live.figures.waiting} waiting now` });
    expect(dot('admitted')).toEqual({ value: live.figures.admitted_last_minute, title: `${live.figures.admitted_last_minute} let in during the last minute` });
    expect(live.chart).toContain(`${live.figures.waiting} waiting now (most 6)`);
    // The page a reload shows draws the same.
    const html = await (await r.handler(adminGet('/__wr/admin'), CLIENT)).text();
    expect(html).toContain('<dd data-figure="waiting">5</dd>');
    expect(html).toContain('<circle class="waiting" data-value="5"');
  });

  it('resets a queue only when its name is typed in, and says what it did', async () => {
    const csrf = await csrfOf(r);
    for (const confirm of ['', 'Default', 'other', 'default2']) {
      const refused = await r.handler(post('/__wr/admin/reset', `csrf=${csrf}&confirm=${confirm}`), CLIENT);
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: string }).error).toContain('confirm with the queue');
    }
    expect((await r.store.peek('default')).tail).toBe(6);
    // Without the form token it is refused too.
    expect((await r.handler(post('/__wr/admin/reset', 'confirm=default'), CLIENT)).status).toBe(403);
    expect((await r.store.peek('default')).tail).toBe(6);

    const done = await r.handler(post('/__wr/admin/reset', `csrf=${csrf}&confirm=default`), CLIENT);
    expect(done.status).toBe(200);
    const answer = (await done.json()) as { epoch: number };
    // The line is empty (the cursor is at the tail); numbers are never handed out again.
    expect(answer).toMatchObject({ reset: true, applied: true, tail: 6, cursor: 6, queue_length: 0, notice: expect.stringContaining('Reset queue default') });
    expect(await r.store.peek('default')).toEqual({ tail: 6, cursor: 6 });

    // The form sends the epoch it showed: the same submission again (a retry) changes nothing, and
    // a form from before someone else's reset is refused with 409.
    const before = answer.epoch;
    await r.handler(new Request(`${SITE}/`), CLIENT);
    r.clock.advance(1000);
    const stale = await r.handler(post('/__wr/admin/reset', `csrf=${csrf}&confirm=default&epoch=0`), CLIENT);
    expect(stale.status).toBe(409);
    expect(await stale.json()).toMatchObject({ applied: false, epoch: before, error: expect.stringContaining('nothing changed') });
    expect(await r.store.peek('default')).toEqual({ tail: 7, cursor: 6 });
    const fresh = await r.handler(post('/__wr/admin/reset', `csrf=${csrf}&confirm=default&epoch=${before}`), CLIENT);
    expect(await fresh.json()).toMatchObject({ applied: true, tail: 7, cursor: 7 });
    expect((await r.handler(post('/__wr/admin/reset', `csrf=${csrf}&confirm=default&epoch=x`), CLIENT)).status).toBe(400);
  });

  it('voids the tickets taken before a reset: their holders queue again behind nobody', async () => {
    const holder = cookieFrom(await r.handler(new Request(`${SITE}/`), CLIENT))!;
    const csrf = await csrfOf(r);
    await r.handler(post('/__wr/admin/reset', `csrf=${csrf}&confirm=default`), CLIENT);
    r.clock.advance(1000);
    const again = await r.handler(new Request(`${SITE}/`, { headers: { cookie: `waiting_room=${holder}` } }), CLIENT);
    // Its old number 1 is void; it takes the next number after every ticket handed out before.
    expect(r.logger.last).toMatchObject({ reason: 'ticket_before_reset', ticket: 8 });
    expect(cookieFrom(again)).not.toBe(holder);
  });

  it('has frame, script and forgery protections and never shows the password', async () => {
    const response = await r.handler(adminGet('/__wr/admin'), CLIENT);
    expect(response.headers.get('x-frame-options')).toBe('DENY');
    const csp = response.headers.get('content-security-policy')!;
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    const html = await response.text();
    expect(html).not.toContain(ADMIN_PASSWORD);
    expect(html).toContain('<script src="/__wr/assets/admin.js" defer></script>');
    expect(JSON.stringify(r.logger.records)).not.toContain(ADMIN_PASSWORD);
  });

  it('keeps a console that stays open able to act: each live poll brings a fresh form token, and the page token still expires after an hour', async () => {
    const pageToken = await csrfOf(r);
    let liveToken = '';
    // An operator leaves the console open for 61 minutes; its script polls all the while.
    for (const minutes of [10, 10, 10, 10, 10, 10, 1]) {
      r.clock.advance(minutes * 60_000);
      const live = (await (await r.handler(adminGet('/__wr/admin/live'), CLIENT)).json()) as { csrf: unknown };
      expect(typeof live.csrf).toBe('string');
      liveToken = live.csrf as string;
    }
    const pause = (csrf: string) => r.handler(post('/__wr/admin/control', `csrf=${csrf}&paused=true`), CLIENT);
    // The token the page was served with is an hour and a minute old: refused, as before.
    const stale = await pause(pageToken);
    expect(stale.status).toBe(403);
    expect(((await stale.json()) as { error: string }).error).toContain('the form has expired');
    // The one the last poll brought works.
    const fresh = await pause(liveToken);
    expect(fresh.status).toBe(200);
    expect(await fresh.json()).toMatchObject({ paused: true, changed: 'Admission paused.' });
  });

  it('shows as its notice only what its own form posts said, for a few minutes; a link that writes its own text shows nothing', async () => {
    const page = async (path: string): Promise<string> => {
      const html = await (await r.handler(adminGet(path), CLIENT)).text();
      return /<p class="notice" role="status" id="notice">([^<]*)<\/p>/.exec(html)![1]!;
    };
    // A link pasted into an incident chat, in the words the console would use.
    const forged = `/__wr/admin?done=${encodeURIComponent('Reset queue default. Let 100,000 visitors in.')}`;
    expect(await page(forged)).toBe('');

    // A form post without the page's script comes back to the page, which says what it did.
    const csrf = await csrfOf(r);
    const posted = await r.handler(
      new Request(`${SITE}/__wr/admin/admit`, {
        method: 'POST',
        body: `csrf=${csrf}&count=2`,
        headers: { authorization: ADMIN, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin', accept: 'text/html' },
      }),
      CLIENT,
    );
    expect(posted.status).toBe(303);
    const location = posted.headers.get('location')!;
    expect(location).toMatch(/^\/__wr\/admin\?done=Let%202%20visitors%20in\.&done_tag=/);
    expect(await page(location)).toBe('Let 2 visitors in.');

    // Its tag covers the text: the same tag with other words, or without the tag, shows nothing.
    const tag = new URL(location, SITE).searchParams.get('done_tag')!;
    expect(await page(`/__wr/admin?done=${encodeURIComponent('Let 100,000 visitors in.')}&done_tag=${encodeURIComponent(tag)}`)).toBe('');
    expect(await page(`/__wr/admin?done=${encodeURIComponent('Let 2 visitors in.')}`)).toBe('');
    expect(await page(`${location}&done=${encodeURIComponent('Let 2 visitors in.')}`)).toBe('');
    // A reload shows it again for a few minutes, not from an old link.
    r.clock.advance(299_000);
    expect(await page(location)).toBe('Let 2 visitors in.');
    r.clock.advance(2_000);
    expect(await page(location)).toBe('');
  });
});

describe('the console without the store', () => {
  it('is a page that says the store is not answering, what still works and what waits, and tries again; the live figures stay a JSON error', async () => {
    const clock = new ManualClock();
    const store = new FaultyStore(new MemoryQueueStore());
    store.mode = 'error';
    const handler = testHandler({}, { store, clock });
    const page = await handler(adminGet('/__wr/admin'), CLIENT);
    expect(page.status).toBe(503);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('retry-after')).toBe('10');
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    const html = await page.text();
    expect(html).toContain('<h1 id="title">The queue store is not answering</h1>');
    expect(html).toContain('Visitors already let in keep their access');
    expect(html).toContain('store_failure = hold');
    // Its script asks again in the background and reloads once the store answers; without
    // JavaScript the page reloads itself (a refresh that only a browser without scripts obeys).
    expect(html).toContain('<noscript><meta http-equiv="refresh" content="10"></noscript>');
    expect(html).not.toMatch(/<meta http-equiv="refresh"[^>]*>(?!<\/noscript>)/);
    expect(html).toContain('<script src="/__wr/assets/admin.js" defer></script>');
    expect(html).toContain('<body class="admin" data-store-down data-live="/__wr/admin/live" data-every="10">');
    const live = await handler(adminGet('/__wr/admin/live'), CLIENT);
    expect(live.status).toBe(503);
    expect(await live.json()).toMatchObject({ error: expect.stringContaining('the queue store is unavailable') });
  });
});

describe('the holding page', () => {
  it('speaks the language the browser asks for, with the configured fallback', async () => {
    const r = rig({ page_language: 'fr' });
    const page = async (acceptLanguage?: string): Promise<{ lang: string; html: string }> => {
      const response = await r.handler(new Request(`${SITE}/`, { headers: acceptLanguage === undefined ? {} : { 'accept-language': acceptLanguage } }), CLIENT);
      const html = await response.text();
      return { lang: response.headers.get('content-language')!, html };
    };
    expect((await page('de-DE,de;q=0.9,en;q=0.8')).html).toContain('<html lang="de"');
    expect((await page('zh-TW')).lang).toBe('zh-Hans');
    expect((await page('es-MX, en;q=0.5')).html).toContain('Su lugar en la fila');
    expect((await page('pt-BR, ru')).lang).toBe('pt-BR');
    expect((await page('ar-SA')).html).toContain('<html lang="ar" dir="rtl">');
    expect((await page('sv-SE, ru')).lang).toBe('fr');
    expect((await page()).lang).toBe('fr');
  });

  it('gives the status JSON the same texts, in the same language, for live updates', async () => {
    const r = rig();
    for (let i = 0; i < 3; i++) await r.handler(new Request(`${SITE}/`), CLIENT);
    const cookie = cookieFrom(await r.handler(new Request(`${SITE}/`), CLIENT))!;
    const status = await r.handler(new Request(`${SITE}/__wr/status`, { headers: { cookie: `waiting_room=${cookie}`, 'accept-language': 'ja' } }), CLIENT);
    const body = (await status.json()) as { state: string; place: number; texts: Record<string, unknown> };
    expect(body).toMatchObject({ state: 'waiting', place: 4 });
    expect(body.texts).toMatchObject({ place: '4', detail: 'あなたの前に3人が並んでいます', progress: 0 });
    expect(body.texts['nextUpdate']).toEqual({ forms: { other: '次の更新まで{n}秒' }, rule: 'ja' });
    expect(body.texts['title']).toBe('4番目に並んでいます');
    expect(status.headers.getSetCookie().length).toBe(1);
  });

  it('is locked down: a nonce for its one inline style, no framing, scripts only from the edge, compressed', async () => {
    const r = rig({ page_accent_color: '#7a1fa2', page_logo_url: 'https://cdn.example/logo.svg' });
    const response = await r.handler(new Request(`${SITE}/`), CLIENT);
    const csp = response.headers.get('content-security-policy')!;
    const nonce = /'nonce-([^']+)'/.exec(csp)![1]!;
    const html = await response.text();
    expect(html).toContain(`<style nonce="${nonce}">:root { --accent: #7a1fa2;`);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain('img-src \'self\' https://cdn.example');
    expect(html).toContain('<img class="logo" src="https://cdn.example/logo.svg"');
    expect(response.headers.get('x-compress-hint')).toBe('on');
    expect(response.headers.get('refresh')).toBe('5');
  });

  it('refuses branding that would break contrast or markup', () => {
    expect(() => parseConfig(source({ page_accent_color: '#ffd700' }))).toThrow(/page_accent_color: must reach a contrast of 4\.5:1 against white.*1\.\d+:1/);
    expect(() => parseConfig(source({ page_accent_color: 'red' }))).toThrow(/page_accent_color: must be a colour/);
    expect(() => parseConfig(source({ page_logo_url: 'javascript:alert(1)' }))).toThrow(/page_logo_url/);
    expect(() => parseConfig(source({ page_logo_url: 'https://x.example/a.svg" onerror="x' }))).toThrow(/page_logo_url/);
    expect(() => parseConfig(source({ page_language: 'xx' }))).toThrow(/page_language: must be one of en, de, fr, es, it, pt, nl, tr, ja, zh, ko, ar/);
  });
});

describe('templates from the KV Store', () => {
  it('replace the built-in page without a redeploy, per queue or for all, and are cached briefly', async () => {
    const r = rig();
    r.templates.entries.set('holding.html', '<p>Custom {{heading}}: {{place}}</p>');
    const first = await (await r.handler(new Request(`${SITE}/`), CLIENT)).text();
    expect(first).toBe('<p>Custom You are in line: 1</p>');
    const reads = r.templates.reads;
    await r.handler(new Request(`${SITE}/`), CLIENT);
    expect(r.templates.reads).toBe(reads);
    // A queue's own template wins over the shared one, once the POP's copy expires.
    r.templates.entries.set('default/holding.html', '<p>Queue page {{place}}</p>');
    r.clock.advance(TEMPLATE_CACHE_SECONDS * 1000 + 1);
    expect(await (await r.handler(new Request(`${SITE}/`), CLIENT)).text()).toBe('<p>Queue page 3</p>');
  });

  it('fall back to the built-in page when broken or unreachable, say why in the log, and never fail the visitor', async () => {
    const r = rig();
    r.templates.entries.set('holding.html', '<p>{{no_such_slot}}</p>');
    const broken = await r.handler(new Request(`${SITE}/`), CLIENT);
    expect(broken.status).toBe(200);
    expect(await broken.text()).toContain('Your place in line');
    expect(r.logger.last?.reason).toMatch(/^template_broken: holding\.html: template slot \{\{no_such_slot\}\} has no value/);

    const down = rig();
    down.templates.failing = true;
    const response = await down.handler(new Request(`${SITE}/`), CLIENT);
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('Your place in line');
    expect(down.logger.last?.reason).toMatch(/^template_unavailable: holding\.html: kv lookup failed/);
  });

  it('can restyle the page: style.css from the store replaces the built-in one', async () => {
    const r = rig();
    r.templates.entries.set('style.css', 'body { background: #000; }');
    const css = await r.handler(new Request(`${SITE}/__wr/assets/style.css`), CLIENT);
    expect(await css.text()).toBe('body { background: #000; }');
    expect(css.headers.get('content-type')).toContain('text/css');
  });
});

describe('the console with several queues', () => {
  it('lists a queue whose figures do not come within the store timeout as unavailable, without waiting for it', async () => {
    const clock = new ManualClock();
    // A store that never answers for one queue's figures.
    class SlowForOneQueue extends MemoryQueueStore {
      override stats(...args: Parameters<MemoryQueueStore['stats']>): ReturnType<MemoryQueueStore['stats']> {
        return args[0] === 'slow' ? new Promise(() => {}) : super.stats(...args);
      }
    }
    const store = new SlowForOneQueue();
    const service = createService(
      source({ ...BASE_SETTINGS, store_timeout_ms: '100', queues: JSON.stringify([{ name: 'sale', paths: ['/sale/*'] }, { name: 'slow', paths: ['/slow/*'] }]) }),
      source(BASE_SECRETS),
      { store, origin: new RecordingOrigin(), logger: new MemoryLogger(), clock, cache: new MemoryStateCache(clock), authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock) },
    );
    const live = (await (await service.handler(adminGet('/__wr/admin/live?queue=sale'), CLIENT)).json()) as { queues: string };
    expect(live.queues).toContain('<code>slow</code></a>: figures unavailable');
  });

  it('lists every queue with its own live figures, the draw counted for a random queue', async () => {
    const clock = new ManualClock();
    const service = createService(
      source({ ...BASE_SETTINGS, queues: JSON.stringify([{ name: 'sale', paths: ['/sale/*'], settings: { event_start: '2026-11-22T11:00:00Z' } }, { name: 'draw', paths: ['/draw/*'], settings: { queue_method: 'random' } }]) }),
      source(BASE_SECRETS),
      { store: new MemoryQueueStore(), origin: new RecordingOrigin(), logger: new MemoryLogger(), clock, cache: new MemoryStateCache(clock), authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock) },
    );
    for (let i = 0; i < 3; i++) await service.handler(new Request(`${SITE}/sale/x`), CLIENT);
    for (let i = 0; i < 2; i++) await service.handler(new Request(`${SITE}/draw/x`), CLIENT);
    const live = (await (await service.handler(adminGet('/__wr/admin/live?queue=draw'), CLIENT)).json()) as { queues: string; figures: Record<string, string> };
    expect(live.figures['waiting']).toBe('2');
    expect(live.queues).toContain('<code>sale</code></a>: 3 waiting, 0 active, event open');
    expect(live.queues).toContain('<a href="/__wr/admin?queue=draw" aria-current="page"><code>draw</code></a>: 2 waiting, 0 active, random draw');
  });
});

describe("the console's chart over a whole sale, from the sale's record", () => {
  it('draws a sale reset three hours ago from its recorded points, with nothing shaded, and reads them a day per call', async () => {
    const r = rig({ admit_per_period: '0' });
    const policy = { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 };
    const start = Math.floor(r.clock.now() / 60_000) * 60_000;
    await r.store.reset('default', start + 1, policy);
    // A line that grows by 3 a minute for three hours, recorded by a poll each minute.
    for (let m = 0; m < 180; m += 1) {
      for (let i = 0; i < 3; i += 1) await r.store.join('default', start + m * 60_000 + 10, policy);
      await r.store.poll('default', start + m * 60_000 + 20, policy);
    }
    r.clock.ms = start + 180 * 60_000 + 5_000;
    let recordReads = 0;
    const read = r.store.record.bind(r.store);
    r.store.record = async (...a) => {
      recordReads += 1;
      return read(...a);
    };
    const live = (await (await r.handler(adminGet('/__wr/admin/live'), CLIENT)).json()) as { chart: string };
    // The two hours before the last one came from the record: one call (a day of minutes).
    expect(recordReads).toBe(1);
    expect(live.chart).toContain('Queue length and admissions, since');
    expect(live.chart).not.toContain('class="unrecorded"');
    // The waiting line starts at the sale's start (the left edge) with its first point: 3 waiting.
    const points = /<polyline class="waiting" points="([^"]+)"/.exec(live.chart)?.[1]?.split(' ') ?? [];
    expect(points.length).toBeGreaterThanOrEqual(180);
    expect(Number(points[0]?.split(',')[0])).toBeLessThan(45);
    // The console polls on: within the same minute nothing more is read from the record, and the
    // chart is the same; a minute later only that minute is read (one call), and the chart still
    // starts at the sale's start.
    const again = (await (await r.handler(adminGet('/__wr/admin/live'), CLIENT)).json()) as { chart: string };
    expect(recordReads).toBe(1);
    expect(again.chart).toBe(live.chart);
    const reads: [number, number][] = [];
    r.store.record = async (queue, nowMs, fromMs, minutes) => {
      recordReads += 1;
      reads.push([fromMs, minutes]);
      return read(queue, nowMs, fromMs, minutes);
    };
    r.clock.ms += 60_000;
    const later = (await (await r.handler(adminGet('/__wr/admin/live'), CLIENT)).json()) as { chart: string };
    expect(reads).toEqual([[start + 121 * 60_000, 1]]);
    const laterPoints = /<polyline class="waiting" points="([^"]+)"/.exec(later.chart)?.[1]?.split(' ') ?? [];
    expect(laterPoints.length).toBeGreaterThanOrEqual(180);
    expect(Number(laterPoints[0]?.split(',')[0])).toBeLessThan(45);
    expect(later.chart).not.toContain('class="unrecorded"');
  });

  it('draws a sale with neither a reset nor an event from its oldest recorded point, reading the record once', async () => {
    const r = rig({ admit_per_period: '0' });
    const policy = { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 };
    const start = Math.floor(r.clock.now() / 60_000) * 60_000;
    for (let m = 0; m < 150; m += 1) {
      for (let i = 0; i < 2; i += 1) await r.store.join('default', start + m * 60_000 + 10, policy);
      await r.store.poll('default', start + m * 60_000 + 20, policy);
    }
    r.clock.ms = start + 150 * 60_000 + 5_000;
    let recordReads = 0;
    const read = r.store.record.bind(r.store);
    r.store.record = async (...a) => {
      recordReads += 1;
      return read(...a);
    };
    const live = (await (await r.handler(adminGet('/__wr/admin/live'), CLIENT)).json()) as { chart: string };
    // Not the last hour: the whole sale, from its first point (2 waiting), with nothing shaded.
    expect(live.chart).toContain(`Queue length and admissions, since ${new Date(start).toISOString().slice(11, 16)} UTC`);
    expect(live.chart).not.toContain('class="unrecorded"');
    const points = /<polyline class="waiting" points="([^"]+)"/.exec(live.chart)?.[1]?.split(' ') ?? [];
    expect(points.length).toBeGreaterThanOrEqual(150);
    expect(Number(points[0]?.split(',')[0])).toBeLessThan(45);
    // Seven days of record read in one call, then nothing more within the minute.
    expect(recordReads).toBe(1);
    await r.handler(adminGet('/__wr/admin/live'), CLIENT);
    expect(recordReads).toBe(1);
  });
});
