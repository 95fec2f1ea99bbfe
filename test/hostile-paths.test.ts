/**
 * Hostile path spellings through the handler (a Request in, a Response out): bypass and queue
 * rules dodged by spelling, near misses of our own prefix, and the VIP redirect's Location.
 * The handler sees what the URL parser made of the request target, as on both hosts.
 */
import fc from 'fast-check';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { describe, expect, it } from 'vitest';
import { parseConfig, parseSecrets } from '../src/core/config';
import { createHandler, type Handler } from '../src/core/handler';
import { readPath } from '../src/core/path-canon';
import { matchesAnyPath, normalizePath, parsePathPatterns } from '../src/core/path-pattern';
import { createService } from '../src/core/service';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryQueueStore } from '../src/store/memory-store';
import { originReadings } from './support/origin-readings';
import { API_TOKEN, BASE_SECRETS, BASE_SETTINGS, cookieFrom, ManualClock, MemoryLogger, payloadOf, RecordingOrigin, source } from './support/fixtures';

const SITE = 'https://shop.example';
const CLIENT = { address: '203.0.113.9', pop: 'TST' };
/** The setting: static assets bypass, the shop is queued, the rest of the site is not. */
const PATH_SETTINGS = { bypass_paths: '/static/*', queue_paths: '/shop/*' };

interface Rig {
  handler: Handler;
  origin: RecordingOrigin;
  logger: MemoryLogger;
}

function rig(settings: Record<string, string> = PATH_SETTINGS): Rig {
  const origin = new RecordingOrigin();
  const logger = new MemoryLogger();
  const clock = new ManualClock();
  const handler = createHandler({
    config: parseConfig(source({ ...BASE_SETTINGS, ...settings })),
    secrets: parseSecrets(source(BASE_SECRETS)),
    store: new MemoryQueueStore(),
    origin,
    logger,
    clock,
    cache: new MemoryStateCache(clock),
  });
  return { handler, origin, logger };
}

const get = (r: Rig, path: string) => r.handler(new Request(`${SITE}${path}`), CLIENT);

describe('a bypass rule (/static/*) spelt to reach the shop', () => {
  it.each([
    '/static/..;/shop',
    '/static/..%2fshop',
    '/static/%2e%2e%2fshop',
    '/static/..%5cshop',
    '/static/..%252fshop',
    '/static/%252e%252e%252fshop',
    '/static/..%255cshop',
    '/static/..;x/shop/item',
  ])('%j is held with a ticket, not forwarded', async (path) => {
    const r = rig();
    const response = await get(r, path);
    expect(r.origin.requests).toHaveLength(0);
    expect(response.headers.get('x-origin')).toBeNull();
    expect(response.status).toBe(200);
    expect(payloadOf(cookieFrom(response)!)).toMatchObject({ k: 'w', t: 1 });
    expect(r.logger.last?.decision).toBe('waiting');
  });

  it.each(['/static/app.css', '/static/img/logo.png', '/STATIC/app.css', '/static/a%20b.css'])('a clean %j still bypasses', async (path) => {
    const r = rig();
    const response = await get(r, path);
    expect(response.headers.get('x-origin')).toBe('yes');
    expect(cookieFrom(response)).toBeUndefined();
    expect(r.logger.last?.decision).toBe('bypass_path');
  });
});

describe('a queue rule (/shop/*) spelt to be missed', () => {
  it.each(['/shop;x', '/shop%2F', '/%2Fshop', '/shop;jsessionid=1/item', '/blog/..%2fshop', '/%73hop'])('%j is held', async (path) => {
    const r = rig();
    const response = await get(r, path);
    expect(r.origin.requests).toHaveLength(0);
    expect(payloadOf(cookieFrom(response)!)).toMatchObject({ k: 'w' });
  });

  it.each(['/', '/blog', '/shopping', '/blog/shop'])('%j, outside the queue, still goes to the origin', async (path) => {
    const r = rig();
    const response = await get(r, path);
    expect(response.headers.get('x-origin')).toBe('yes');
    expect(r.logger.last?.decision).toBe('no_queue');
  });

  it('an ambiguous path (nested encodings) is queued, not let through', async () => {
    const r = rig();
    expect(readPath('/blog/%2525252Fshop').ambiguous).toBe(true);
    await get(r, '/blog/%2525252Fshop');
    expect(r.origin.requests).toHaveLength(0);
  });
});

describe('our prefix spelt another way', () => {
  it.each(['/__WR/admin', '/%5F%5Fwr/admin', '/__wr;x/admin', '//__wr/admin', '/__Wr/api/admit', '/__wr', '/blog/..%2f__wr/admin'])(
    '%j gets a 404 from us and is never forwarded',
    async (path) => {
      const r = rig();
      const response = await get(r, path);
      expect(response.status).toBe(404);
      expect(response.headers.get('x-origin')).toBeNull();
      expect(await response.text()).toContain('/__wr/');
      expect(r.origin.requests).toHaveLength(0);
      expect(r.logger.last?.decision).toBe('reserved_spelling');
    },
  );

  it('the exact spelling still reaches our own paths', async () => {
    const r = rig();
    const response = await get(r, '/__wr/health');
    expect(await response.json()).toEqual({ ok: true });
    expect(r.logger.last?.decision).toBe('own');
  });

  it('no path any reading of which is under the prefix reaches the origin (generated)', async () => {
    const pieces = ['__wr', '__WR', '%5F%5Fwr', '%5f_Wr', '%255F%255Fwr', 'admin', 'x', '..', '.', '%2e%2e', ';x', '..;', '%2f', '%5c', '\\', 'static', 'blog'];
    const path = fc.array(fc.array(fc.constantFrom(...pieces), { maxLength: 3 }).map((p) => p.join('')), { minLength: 1, maxLength: 5 }).map((s) => '/' + s.join('/'));
    const r = rig({ bypass_paths: '/*', queue_paths: '' });
    await fc.assert(
      fc.asyncProperty(path, async (raw) => {
        const before = r.origin.requests.length;
        const pathname = new URL(`${SITE}${raw}`).pathname;
        const response = await get(r, raw);
        const forwarded = r.origin.requests.length > before;
        const underPrefix = [...originReadings(pathname)].some((reading) => {
          const normal = normalizePath(reading);
          return normal.startsWith('/__wr/') || normal === '/__wr';
        });
        if (underPrefix) expect(forwarded, `${raw} (${pathname}) was forwarded`).toBe(false);
        if (underPrefix && !pathname.startsWith('/__wr/')) expect(response.status).toBe(404);
      }),
      { numRuns: 300 },
    );
  });
});

describe('bypassing, generated', () => {
  it('if the handler bypasses a path, every reading of it is a bypass path', async () => {
    const pieces = ['static', 'shop', 'a.css', '..', '.', '%2e%2e', ';x', '..;', '%2f', '%5c', '\\', '%252f', '%2F'];
    const path = fc.array(fc.array(fc.constantFrom(...pieces), { maxLength: 3 }).map((p) => p.join('')), { minLength: 1, maxLength: 5 }).map((s) => '/' + s.join('/'));
    const r = rig({ bypass_paths: '/static/*', queue_paths: '/*' });
    const rule = parsePathPatterns('/static/*');
    await fc.assert(
      fc.asyncProperty(path, async (raw) => {
        await get(r, raw);
        if (r.logger.last?.decision !== 'bypass_path') return;
        const pathname = new URL(`${SITE}${raw}`).pathname;
        for (const reading of originReadings(pathname)) {
          expect(matchesAnyPath(reading, rule), `${raw} bypassed, read as ${reading}`).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('a VIP link with a hostile path', () => {
  async function vipCode(r: Rig): Promise<string> {
    const response = await r.handler(
      new Request(`${SITE}/__wr/api/vip`, { method: 'POST', body: JSON.stringify({ uses: 100 }), headers: { authorization: `Bearer ${API_TOKEN}` } }),
      CLIENT,
    );
    expect(response.status).toBe(200);
    return ((await response.json()) as { codes: { code: string }[] }).codes[0]!.code;
  }

  it.each<[string, string]>([
    ['/.//evil.example/', '/evil.example/'],
    ['/\\evil.example/', '/evil.example/'],
    ['//evil.example/', '/evil.example/'],
    ['/\\/evil.example/', '/evil.example/'],
    ['/sale/./item?x=1&', '/sale/item?x=1'],
  ])('%j redirects to %j on our own site', async (path, expected) => {
    const r = rig({ queue_paths: '/*' });
    const code = await vipCode(r);
    // Built by hand: `new URL` would take `//evil.example/` for a host.
    const separator = path.includes('?') ? '' : '?';
    const response = await r.handler(new Request(`${SITE}${path}${separator}wr_vip=${code}`), CLIENT);
    expect(response.status).toBe(303);
    const location = response.headers.get('location')!;
    expect(location).toBe(expected);
    expect(new URL(location, 'https://site.example/').host).toBe('site.example');
    expect(payloadOf(cookieFrom(response)!)).toMatchObject({ k: 'a' });
  });

  it('always redirects to our own host (generated paths and queries)', async () => {
    const r = rig({ queue_paths: '/*' });
    const code = await vipCode(r);
    const pieces = ['/', '\\', '.', '..', '%2f', '%5c', 'evil.example', '@', ':', '%09', 'a', '%2e'];
    const path = fc.array(fc.constantFrom(...pieces), { maxLength: 8 }).map((p) => '/' + p.join(''));
    await fc.assert(
      fc.asyncProperty(path, fc.constantFrom('', 'a=1&', 'next=//evil.example&'), async (raw, query) => {
        const response = await r.handler(new Request(`${SITE}${raw}?${query}wr_vip=${code}`), CLIENT);
        if (response.status !== 303) return;
        const location = response.headers.get('location')!;
        expect(location).toMatch(/^\/(?![/\\])/);
        expect(new URL(location, 'https://site.example/').host).toBe('site.example');
        expect(location).not.toContain('wr_vip');
      }),
      { numRuns: 200 },
    );
  });
});

describe('several queues', () => {
  const QUEUES = JSON.stringify([{ name: 'shop', paths: ['/shop/*'] }]);

  function service(): { handler: Handler; origin: RecordingOrigin; logger: MemoryLogger } {
    const origin = new RecordingOrigin();
    const logger = new MemoryLogger();
    const clock = new ManualClock();
    const built = createService(source({ ...BASE_SETTINGS, queues: QUEUES }), source(BASE_SECRETS), {
      store: new MemoryQueueStore(),
      origin,
      logger,
      clock,
      cache: new MemoryStateCache(clock), authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock),
    });
    return { handler: built.handler, origin, logger };
  }

  it.each(['/shop;x', '/%2Fshop', '/blog/..%2fshop'])('%j goes to the queue whose rule any reading matches', async (path) => {
    const s = service();
    const response = await s.handler(new Request(`${SITE}${path}`), CLIENT);
    expect(s.origin.requests).toHaveLength(0);
    expect(payloadOf(cookieFrom(response, 'waiting_room_shop')!)).toMatchObject({ q: 'shop', k: 'w' });
  });

  it.each(['/__WR/admin', '//__wr/admin', '/%5F%5Fwr/admin'])('%j, in no queue, gets a 404 from us', async (path) => {
    const s = service();
    const response = await s.handler(new Request(`${SITE}${path}`), CLIENT);
    expect(response.status).toBe(404);
    expect(s.origin.requests).toHaveLength(0);
    expect(s.logger.last).toMatchObject({ path, status: 404, decision: 'reserved_spelling' });
  });

  it('a path outside every queue still goes to the origin', async () => {
    const s = service();
    expect((await s.handler(new Request(`${SITE}/blog`), CLIENT)).headers.get('x-origin')).toBe('yes');
  });
});
