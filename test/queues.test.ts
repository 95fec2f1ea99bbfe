/**
 * Several queues: the document's validation, queue selection on tricky hosts, paths and countries,
 * and isolation (a visitor let into one queue is not let into another; counters do not mix).
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../src/core/config';
import { parseQueues, selectQueue } from '../src/core/queues';
import { OVERVIEW_READS, type QueueStore } from '../src/core/ports';
import { createService } from '../src/core/service';
import { parseCountryHeader, startHost } from '../src/node/host';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, API_TOKEN, BASE_SECRETS, BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, MemoryLogger, payloadOf, RecordingOrigin, source } from './support/fixtures';

const DOCUMENT = JSON.stringify([
  { name: 'de-sale', hosts: ['shop.example'], paths: ['/sale/*'], countries: ['DE', 'AT'], settings: { hold_status: 503, page_title: 'Sale (DE)' } },
  { name: 'sale', hosts: ['shop.example'], paths: ['/sale/*', '/drop'], settings: { max_active: 2 } },
  { name: 'tickets', paths: ['/tickets/*'] },
]);

function problemsOf(doc: unknown): string[] {
  try {
    parseQueues(source({ ...BASE_SETTINGS, queues: typeof doc === 'string' ? doc : JSON.stringify(doc) }));
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.map((p) => p.key);
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('the queues document', () => {
  it('gives each queue its settings, its counters and its own cookie', () => {
    const queues = parseQueues(source({ ...BASE_SETTINGS, queues: DOCUMENT }));
    expect(queues.map((q) => q.config.queueName)).toEqual(['de-sale', 'sale', 'tickets']);
    expect(queues.map((q) => q.config.cookieName)).toEqual(['waiting_room_de-sale', 'waiting_room_sale', 'waiting_room_tickets']);
    expect(queues[0]!.config).toMatchObject({ holdStatus: 503, pageTitle: 'Sale (DE)', refreshSeconds: 5 });
    expect(queues[1]!.config).toMatchObject({ maxActive: 2, holdStatus: 200 });
    expect(queues[0]!.rule).toMatchObject({ hosts: ['shop.example'], countries: ['DE', 'AT'] });
  });

  it('without a document, is the one queue of the plain settings', () => {
    const [only, ...rest] = parseQueues(source(BASE_SETTINGS));
    expect(rest).toEqual([]);
    expect(only!.config).toMatchObject({ queueName: 'default', cookieName: 'waiting_room' });
  });

  it('names every problem with the queue index and field', () => {
    expect(
      problemsOf([
        { name: 'Bad Name' },
        { name: 'ok', paths: ['sale'], hosts: ['bad host'], countries: ['de'], colour: 'red' },
        { name: 'ok', settings: { max_active: -1, path_prefix: '/x/', nonsense: 1, page_title: {} } },
      ]),
    ).toEqual([
      'queues[0].name',
      'queues[1].colour',
      'queues[1].hosts[0]',
      'queues[1].paths[0]',
      'queues[1].countries[0]',
      'queues[2].name',
      'queues[2].settings.path_prefix',
      'queues[2].settings.nonsense',
      'queues[2].settings.page_title',
      'queues[2].settings.max_active',
    ]);
    expect(problemsOf('{not json')).toEqual(['queues']);
    expect(problemsOf([])).toEqual(['queues']);
    expect(problemsOf({ name: 'x' })).toEqual(['queues']);
  });
});

describe('selectQueue', () => {
  const queues = parseQueues(source({ ...BASE_SETTINGS, queues: DOCUMENT }));
  it.each<[string, string, string | undefined, string | undefined]>([
    ['shop.example', '/sale/shoes', 'DE', 'de-sale'],
    ['shop.example', '/sale/shoes', 'de', 'de-sale'],
    ['shop.example', '/sale/shoes', 'FR', 'sale'],
    ['shop.example', '/sale/shoes', undefined, 'sale'],
    ['SHOP.Example:443', '/sale', 'AT', 'de-sale'],
    ['shop.example.', '/sale', 'US', 'sale'],
    ['shop.example', '/SALE/x', 'US', 'sale'],
    ['shop.example', '//sale//x', 'US', 'sale'],
    ['shop.example', '/%73ale/x', 'US', 'sale'],
    ['shop.example', '/a/../sale/x', 'US', 'sale'],
    ['shop.example', '/./sale', 'US', 'sale'],
    ['shop.example', '/drop', 'US', 'sale'],
    ['shop.example', '/drops', 'US', undefined],
    ['shop.example', '/saleroom', 'US', undefined],
    ['other.example', '/sale/x', 'DE', undefined],
    ['other.example', '/tickets/1', 'DE', 'tickets'],
    ['shop.example', '/tickets/1', undefined, 'tickets'],
    ['shop.example', '/', undefined, undefined],
  ])('%s %s from %s → %s', (host, path, country, expected) => {
    expect(selectQueue(queues, { host, path, country })?.rule.name).toBe(expected);
  });
});

describe('several queues in one service', () => {
  function service(document = DOCUMENT, store: QueueStore = new MemoryQueueStore()) {
    const clock = new ManualClock();
    const origin = new RecordingOrigin();
    const built = createService(source({ ...BASE_SETTINGS, queues: document }), source(BASE_SECRETS), {
      store,
      origin,
      logger: new MemoryLogger(),
      clock,
      cache: new MemoryStateCache(clock),
      authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock),
    });
    return { ...built, origin, store, clock };
  }
  const CLIENT = { address: '203.0.113.1', pop: 'TST', country: 'FR' };

  it('an access token for one queue gets nothing on another, and counters do not mix', async () => {
    const s = service();
    // The sale queue has room for 2: this visitor walks in.
    const walkIn = await s.handler(new Request('https://shop.example/drop'), CLIENT);
    expect(walkIn.headers.get('x-origin')).toBe('yes');
    const saleCookie = cookieFrom(walkIn, 'waiting_room_sale')!;
    expect(payloadOf(saleCookie)).toMatchObject({ q: 'sale', k: 'a' });
    // The same cookie, renamed to the tickets queue's, is refused there: a new ticket of that queue.
    const elsewhere = await s.handler(
      new Request('https://shop.example/tickets/1', { headers: { cookie: `waiting_room_tickets=${saleCookie}; waiting_room_sale=${saleCookie}` } }),
      CLIENT,
    );
    expect(elsewhere.headers.get('x-origin')).toBeNull();
    expect(payloadOf(cookieFrom(elsewhere, 'waiting_room_tickets')!)).toMatchObject({ q: 'tickets', k: 'w', t: 1 });
    expect((await s.store.peek('sale')).tail).toBe(1);
    expect((await s.store.peek('tickets')).tail).toBe(1);
    expect((await s.store.peek('de-sale')).tail).toBe(0);
  });

  it('passes what no queue covers, routes own paths by ?queue= and lists every queue to the admin', async () => {
    const s = service();
    expect((await s.handler(new Request('https://shop.example/about'), CLIENT)).headers.get('x-origin')).toBe('yes');
    await s.handler(new Request('https://shop.example/tickets/1'), CLIENT);
    const stats = await s.handler(
      new Request('https://shop.example/__wr/api/stats?queue=tickets', { headers: { authorization: `Bearer ${API_TOKEN}` } }),
      CLIENT,
    );
    expect(await stats.json()).toMatchObject({ queue: 'tickets', tail: 1 });
    const unknown = await s.handler(new Request('https://shop.example/__wr/api/stats?queue=nope', { headers: { authorization: `Bearer ${API_TOKEN}` } }), CLIENT);
    expect(unknown.status).toBe(404);
    const admin = await s.handler(
      new Request('https://shop.example/__wr/admin?queue=sale', { headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` } }),
      CLIENT,
    );
    const html = await admin.text();
    expect(html).toContain('Waiting room · <code>sale</code>');
    for (const name of ['de-sale', 'sale', 'tickets']) expect(html).toContain(`href="/__wr/admin?queue=${name}"`);
    expect(html).toContain('action="/__wr/admin/admit?queue=sale"');
    expect(html).toContain('<code>tickets</code></a>: 1 waiting, 0 active');
  });

  it('reads the figures of the queue on the page and a few others, within the backend requests Fastly allows a request', async () => {
    // 20 queues: one page reading every queue's figures (one store call each) would pass Fastly's
    // 32 backend requests per request; the page reads its own queue and the first others.
    const names = Array.from({ length: 20 }, (_, i) => `q${String(i).padStart(2, '0')}`);
    const store = new FaultyStore(new MemoryQueueStore());
    const s = service(JSON.stringify(names.map((name) => ({ name, paths: [`/${name}/*`] }))), store);
    // A visitor in the last queue, so its figures show when they are read.
    await s.handler(new Request('https://shop.example/q19/x'), CLIENT);
    const admin = (path: string) =>
      s.handler(new Request(`https://shop.example/__wr/admin${path}`, { headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` } }), CLIENT);
    for (const path of ['?queue=q19', '/live?queue=q19']) {
      const before = store.calls;
      const response = await admin(path);
      expect(response.status).toBe(200);
      const text = path.includes('live') ? JSON.stringify(await response.json()) : await response.text();
      // The page's own read (its queue's figures in the list too, not read again), its recent
      // changes, and the first others'; the first also reads the sale's record older than the hour
      // (one call; the host keeps it, so the live poll in the same minute reads none).
      const record = path.includes('live') ? 0 : 1;
      expect(store.calls - before, path).toBe(OVERVIEW_READS + 1 + record);
      expect((1 + 3) * (OVERVIEW_READS + 2), 'every call retried 3 times (store_retries at its most)').toBeLessThanOrEqual(32);
      for (const name of names) expect(text, `${path} ${name}`).toContain(`queue=${name}`);
      expect(text).toContain('<code>q19</code></a>: 1 waiting');
      expect(text).toContain('<code>q00</code></a>: 0 waiting');
      expect(text).toContain(`<code>q${String(OVERVIEW_READS - 2).padStart(2, '0')}</code></a>: 0 waiting`);
      expect(text).toContain(`<code>q${String(OVERVIEW_READS - 1).padStart(2, '0')}</code></a>: figures on its own page`);
      expect(text).toContain('<code>q18</code></a>: figures on its own page');
    }
  });

  it('uses each queue own status code and page', async () => {
    const s = service();
    const de = await s.handler(new Request('https://shop.example/sale/x'), { ...CLIENT, country: 'DE' });
    expect(de.status).toBe(503);
    expect(await de.text()).toContain('· Sale (DE)</title>');
  });

  it('on the Node host, a queue is chosen by the country a named proxy header gives, never by one the client writes', async () => {
    const document = JSON.stringify([
      { name: 'de-sale', paths: ['/sale/*'], countries: ['DE'], settings: { admit_per_period: 0 } },
      { name: 'sale', paths: ['/sale/*'], settings: { admit_per_period: 0 } },
    ]);
    const queueOf = async (url: string, headers: Record<string, string>) => {
      const response = await fetch(`${url}/sale/x`, { headers });
      await response.text();
      const set = response.headers.getSetCookie().find((c) => c.startsWith('waiting_room_'));
      return set === undefined ? undefined : payloadOf(set.split(';')[0]!.split('=')[1]!)['q'];
    };
    // Without CLIENT_COUNTRY_HEADER: no header picks the German queue, whatever its name.
    const plain = await startHost(service(document).handler);
    try {
      for (const header of ['x-client-country', 'cf-ipcountry', 'x-country']) expect(await queueOf(plain.url, { [header]: 'DE' }), header).toBe('sale');
    } finally {
      await plain.close();
    }
    // Named: that header (set by the proxy in front) chooses; another one does not.
    const proxied = await startHost(service(document).handler, { countryHeader: 'cf-ipcountry' });
    try {
      expect(await queueOf(proxied.url, { 'cf-ipcountry': 'DE' })).toBe('de-sale');
      expect(await queueOf(proxied.url, { 'cf-ipcountry': 'FR' })).toBe('sale');
      expect(await queueOf(proxied.url, { 'x-client-country': 'DE' })).toBe('sale');
    } finally {
      await proxied.close();
    }
    expect(parseCountryHeader(undefined)).toEqual({ ok: true, header: undefined });
    expect(parseCountryHeader(' CF-IPCountry ')).toEqual({ ok: true, header: 'cf-ipcountry' });
    for (const bad of ['x country', 'x:y', 'cookie', 'Host', 'connection', 'é']) expect(parseCountryHeader(bad).ok, bad).toBe(false);
  });
});
