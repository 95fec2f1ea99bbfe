/**
 * The Fastly adapter (src/platform/fastly.ts) over the life of one reused sandbox, in Node: the
 * `fastly:*` modules are replaced by stores whose contents the test changes between requests, as an
 * operator does on a live service (the Compute host stand-in reads its stores once, at start, so it
 * cannot show this). The store is a real redis-server behind the Upstash bridge, reached through the
 * adapter's own Upstash client; the origin is a fake that records what reached it.
 *
 * What a reused sandbox keeps (the service built from the settings item and the key ring, the
 * derived keys) must follow the stores: a changed settings item is used by the next request, a
 * rotated key ring signs with the new key at once and still takes the old key's tokens, a key taken
 * out of the ring (the emergency reset) stops its tokens at the next request.
 */
import jws from 'jws';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { BASE_SECRETS, KEY_1, KEY_2, payloadOf, purposeKey } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';

/** What the fake stores hold; the tests change it between requests. */
const stores = vi.hoisted(() => ({
  config: new Map<string, string>(),
  secrets: new Map<string, string>(),
  logs: [] as string[],
  /** Reads of each store by key, to show a request reads the current value. */
  secretReads: [] as string[],
}));

vi.mock('fastly:config-store', () => ({
  ConfigStore: class {
    get(key: string): string | null {
      return stores.config.get(key) ?? null;
    }
  },
}));
vi.mock('fastly:secret-store', () => ({
  SecretStore: class {
    async get(key: string): Promise<{ plaintext(): string } | null> {
      stores.secretReads.push(key);
      const value = stores.secrets.get(key);
      return value === undefined ? null : { plaintext: () => value };
    }
  },
}));
vi.mock('fastly:logger', () => ({
  Logger: class {
    log(line: string): void {
      stores.logs.push(line);
    }
  },
}));
vi.mock('fastly:env', () => ({ env: (name: string) => (name === 'FASTLY_POP' ? 'TST' : '') }));
vi.mock('fastly:compute', () => ({ vCpuTime: () => 0 }));
vi.mock('fastly:backend', () => ({ Backend: { fromName: (name: string) => ({ target: `${name}.test` }) } }));
vi.mock('fastly:kv-store', () => ({
  KVStore: class {
    constructor() {
      throw new Error('no KV Store linked');
    }
  },
}));
vi.mock('fastly:cache', () => {
  // The POP cache is not under test: every lookup misses, every load runs.
  return {
    SimpleCache: {
      async getOrSet(_key: string, load: () => Promise<{ value: string }>) {
        const { value } = await load();
        return { text: async () => value };
      },
      get: () => null,
      set: () => undefined,
    },
    CoreCache: {
      lookup: () => null,
      insert: () => ({ append() {}, close() {} }),
    },
  };
});
vi.mock('fastly:edge-rate-limiter', () => ({
  RateCounter: class {
    increment(): void {}
    lookupCount(): number {
      return 0;
    }
  },
  PenaltyBox: class {
    has(): boolean {
      return false;
    }
    add(): void {}
  },
}));

// Typed here, not followed: the adapter is type-checked against @fastly/js-compute in its own
// project (src/tsconfig.fastly.json), whose globals this Node project does not have.
const { handleFastlyRequest } = (await import('../src/platform/fastly' as string)) as { handleFastlyRequest(event: unknown): Promise<Response> };
const { SETTINGS_ITEM } = await import('../src/core/config');

let redis: RedisServer;
let bridge: UpstashBridge;
/** Paths that reached the origin, in order. */
const originSaw: string[] = [];
const realFetch = globalThis.fetch;

beforeAll(async () => {
  redis = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: redis.url, token: BASE_SECRETS['upstash_token']! });
  // Fastly's fetch names a backend: `upstash` goes to the bridge (the URL is the bridge's), `origin` to the fake origin.
  vi.stubGlobal('fetch', async (input: RequestInfo | URL, init?: RequestInit & { backend?: string }) => {
    if (init?.backend === 'origin') {
      originSaw.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
      return new Response('from the origin', { status: 200, headers: { 'x-origin': 'fake' } });
    }
    return realFetch(input, init);
  });
}, 60_000);

afterAll(async () => {
  vi.unstubAllGlobals();
  await bridge?.close();
  await redis?.stop();
});

/** Each test its own queue in the one Redis, so what one test let in does not decide another's. */
let queue = 'default';

function setSettings(settings: Record<string, string>): void {
  stores.config.set(SETTINGS_ITEM, JSON.stringify({ queue_name: queue, upstash_url: bridge.url, state_cache_seconds: '0', store_timeout_ms: '2000', ticket_limit: '0', ...settings }));
}

let tests = 0;
beforeEach(() => {
  tests += 1;
  queue = `q${tests}`;
  stores.config.clear();
  stores.secrets.clear();
  for (const [key, value] of Object.entries(BASE_SECRETS)) stores.secrets.set(key, value);
  setSettings({ admit_per_period: '1000' });
  originSaw.length = 0;
});

/** One request through the adapter, as the runtime hands it to the fetch listener. */
async function send(path: string, cookie?: string): Promise<Response> {
  const request = new Request(`https://shop.test${path}`, { headers: { accept: 'text/html', ...(cookie !== undefined && { cookie }) } });
  const later: Promise<unknown>[] = [];
  const event = { request, client: { address: '192.0.2.10', geo: null }, waitUntil: (p: Promise<unknown>) => later.push(p) };
  const response = await handleFastlyRequest(event);
  await Promise.all(later);
  return response;
}

function setCookie(response: Response, name: string): string | undefined {
  for (const header of response.headers.getSetCookie()) {
    const [pair] = header.split(';');
    if (pair?.startsWith(`${name}=`)) return pair.slice(name.length + 1);
  }
  return undefined;
}

function kidOf(token: string): unknown {
  return jws.decode(token)?.header.kid;
}

describe('the Fastly adapter over one long-lived instance', () => {
  it('signs with a rotated key at the next request, takes the old key’s tokens while the ring holds it, and refuses them once it is removed', async () => {
    // A walk-in (admit_per_period 1000): an access token signed with k1.
    const first = await send('/products');
    expect(first.headers.get('x-origin')).toBe('fake');
    const old = setCookie(first, 'waiting_room')!;
    expect(kidOf(old)).toBe('k1');
    expect(jws.verify(old, 'HS256', purposeKey(KEY_1, 'access'))).toBe(true);
    expect((await send('/products', `waiting_room=${old}`)).headers.get('x-origin')).toBe('fake');

    // Rotation: k2 first, k1 kept. A new visitor's token is k2's; the old one still passes.
    stores.secrets.set('signing_keys', `k2:${KEY_2},k1:${KEY_1}`);
    const rotated = await send('/products');
    const fresh = setCookie(rotated, 'waiting_room')!;
    expect(kidOf(fresh)).toBe('k2');
    expect(jws.verify(fresh, 'HS256', purposeKey(KEY_2, 'access'))).toBe(true);
    const stillOld = await send('/products', `waiting_room=${old}`);
    expect(stillOld.headers.get('x-origin')).toBe('fake');
    expect(setCookie(stillOld, 'waiting_room')).toBeUndefined();

    // k1 removed: its token is a stranger's now (a new ticket, signed with k2), k2's still passes.
    stores.secrets.set('signing_keys', `k2:${KEY_2}`);
    originSaw.length = 0;
    const refused = await send('/products', `waiting_room=${old}`);
    const replacement = setCookie(refused, 'waiting_room')!;
    expect(replacement).toBeDefined();
    expect(kidOf(replacement)).toBe('k2');
    expect(payloadOf(replacement)['t']).not.toBe(payloadOf(old)['t']);
    const kept = await send('/products', `waiting_room=${fresh}`);
    expect(kept.headers.get('x-origin')).toBe('fake');
    expect(setCookie(kept, 'waiting_room')).toBeUndefined();

    // And back to k1 alone: k2's token stops at once, k1's passes again.
    stores.secrets.set('signing_keys', `k1:${KEY_1}`);
    const back = await send('/products', `waiting_room=${fresh}`);
    expect(kidOf(setCookie(back, 'waiting_room')!)).toBe('k1');
    expect(setCookie(await send('/products', `waiting_room=${old}`), 'waiting_room')).toBeUndefined();
  });

  it('uses a changed settings item from the next request on, and a broken one never opens the gates', async () => {
    setSettings({ admit_per_period: '0' });
    const held = await send('/products');
    expect(held.headers.get('x-origin')).toBeNull();
    const ticket = setCookie(held, 'waiting_room')!;
    expect(payloadOf(ticket)['k']).toBe('w');

    // The operator renames the cookie and retitles the page: the next request uses both.
    setSettings({ admit_per_period: '0', cookie_name: 'room_pass', page_title: 'Flash sale line' });
    const renamed = await send('/products');
    expect(renamed.headers.get('x-origin')).toBeNull();
    expect(setCookie(renamed, 'room_pass')).toBeDefined();
    expect(setCookie(renamed, 'waiting_room')).toBeUndefined();
    expect(await renamed.text()).toContain('Flash sale line');

    // A bypass path added: served straight away, no cookie.
    setSettings({ admit_per_period: '0', cookie_name: 'room_pass', bypass_paths: '/static/*' });
    originSaw.length = 0;
    const asset = await send('/static/app.css');
    expect(asset.headers.get('x-origin')).toBe('fake');
    expect(originSaw).toEqual(['/static/app.css']);
    expect((await send('/products')).headers.get('x-origin')).toBeNull();

    // A broken item: nobody is let through, and the log says why.
    stores.config.set(SETTINGS_ITEM, '{"admit_per_period": "lots"');
    stores.logs.length = 0;
    const broken = await send('/products');
    expect(broken.status).toBeLessThan(500);
    expect(broken.headers.get('x-origin')).toBeNull();
    // (This fake POP cache remembers no last valid settings: the "checking your place" page, the reason logged.)
    const logged = stores.logs.map((line) => JSON.parse(line) as { decision: string; reason?: string });
    expect(logged.map((l) => l.decision)).toEqual(['config_invalid']);
    expect(logged[0]?.reason).toContain('settings');
  });

  it('reads the signing keys afresh for every request, and the Upstash token only with a store call', async () => {
    const first = await send('/products');
    const access = setCookie(first, 'waiting_room')!;
    const carried = setCookie(first, 'waiting_room_adm')!;
    stores.secretReads.length = 0;
    // An admitted visitor, with the admission its browser carries: the signing keys alone.
    for (let i = 0; i < 3; i += 1) expect((await send('/products', `waiting_room=${access}; waiting_room_adm=${carried}`)).headers.get('x-origin')).toBe('fake');
    expect(stores.secretReads).toEqual(['signing_keys', 'signing_keys', 'signing_keys']);
    // A rotated Upstash token reaches the next store call: a wrong one fails it (the visitor is held, not a 5xx).
    stores.secrets.set('upstash_token', 'not-the-bridge-token');
    const failing = await send('/products');
    expect(failing.status).toBeLessThan(500);
    expect(failing.headers.get('x-origin')).toBeNull();
    stores.secrets.set('upstash_token', BASE_SECRETS['upstash_token']!);
    expect((await send('/products')).headers.get('x-origin')).toBe('fake');
  });
});
