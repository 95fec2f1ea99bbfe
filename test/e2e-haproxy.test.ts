/**
 * Behind a real load balancer: HAProxy (HTTP mode, `option forwardfor`, a health check on
 * `/__wr/health`) in front of two Node hosts (the real bundle, bin/node-host.mjs) on one
 * redis-server, each told HAProxy's address in TRUSTED_PROXIES. Clients come from several loopback
 * addresses, so each is a real client to the hosts: the ticket limit and the sign-in throttle count
 * each one apart, a client's own X-Forwarded-For is not believed, both hosts honour each other's
 * tickets and admissions, and a host killed mid-sale is taken out by the health check with no
 * visitor 5xx after it.
 *
 * HAProxy adds `x-served-by` (the server's name) to each answer, so the test knows which host
 * answered: each host counts in its own memory, and the counts are checked per host.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoOrigin } from '../src/node/demo-origin';
import type { RunningServer } from '../src/node/host';
import { PROJECT_ROOT } from './support/compute-host';
import { reachedOrigin } from './support/e2e-scenarios';
import { ADMIN_PASSWORD, API_TOKEN } from './support/fixtures';
import { fetchFrom } from './support/from-address';
import { haproxyConfig, haproxyMissing, HAPROXY, startHaproxy, stopProcess, type RunningHaproxy } from './support/haproxy';
import { startRedisServer, type RedisServer } from './support/redis-server';
import { buildNodeBundles, deploymentEnv, startNodeHostProcess, type NodeHostProcess } from './support/node-host-process';

const MISSING = haproxyMissing();

/** How often HAProxy checks each host, and after how many failed checks in a row it takes one out. */
const CHECK_INTERVAL_MS = 500;
const CHECK_FALL = 2;
const TICKET_LIMIT = 3;
const AUTH_LIMIT = 3;
const ADMIN_RIGHT = `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`;
const ADMIN_WRONG = `Basic ${Buffer.from('admin:not-the-password-4411').toString('base64')}`;

type HostName = 'a' | 'b';

type NodeHost = NodeHostProcess;
const startNodeHost = startNodeHostProcess;

let dir: string;
let redis: RedisServer;
let origin: RunningServer;
let hosts: Record<HostName, NodeHost>;
let haproxy: RunningHaproxy | undefined;
let lb: string;

/** Polls HAProxy's view until `done` holds, or fails at the deadline naming what it last saw. */
function waitForStates(done: (states: Record<string, string>) => boolean, deadlineMs: number, what: string): Promise<void> {
  return haproxy!.waitForStates(done, deadlineMs, what);
}

/** One visitor: its own loopback address, and its cookie between requests. */
class Client {
  cookie: string | undefined;
  constructor(readonly address: string) {}

  async get(path = '/', headers: Record<string, string> = {}, method = 'GET'): Promise<{ readonly status: number; readonly server: HostName; readonly response: Response }> {
    const response = await fetchFrom(this.address, `${lb}${path}`, { method, headers: { ...headers, ...(this.cookie !== undefined && { cookie: `waiting_room=${this.cookie}` }) } });
    for (const header of response.headers.getSetCookie()) {
      const [pair] = header.split(';');
      if (pair?.startsWith('waiting_room=')) this.cookie = pair.slice('waiting_room='.length);
    }
    return { status: response.status, server: response.headers.get('x-served-by') as HostName, response };
  }

  /** The claims of the current cookie (unverified: for assertions). */
  get claims(): Record<string, unknown> {
    const part = (this.cookie ?? '').split('.')[1] ?? '';
    return part === '' ? {} : (JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>);
  }
}

/**
 * Requests from `address` with no cookie (each one asks for a new ticket) until both hosts have
 * refused it; per host, the tickets given before its first refusal and after it.
 */
async function takeTicketsUntilHeld(address: string, headers: (i: number) => Record<string, string> = () => ({})) {
  const tickets = { a: 0, b: 0 };
  const afterRefusal = { a: 0, b: 0 };
  const refused = { a: 0, b: 0 };
  for (let i = 0; i < 8 * (TICKET_LIMIT + 1) && (refused.a === 0 || refused.b === 0); i++) {
    const { status, server } = await new Client(address).get('/', headers(i));
    if (status === 429) refused[server]++;
    else {
      expect(status).toBe(200);
      if (refused[server] > 0) afterRefusal[server]++;
      else tickets[server]++;
    }
  }
  return { tickets, refused, afterRefusal };
}

describe.skipIf(MISSING !== undefined)(`two Node hosts behind HAProxy${MISSING === undefined ? '' : ` (skipped: ${MISSING})`}`, () => {
  beforeAll(async () => {
    buildNodeBundles();
    dir = mkdtempSync(join(tmpdir(), 'wr-haproxy-'));
    redis = await startRedisServer();
    origin = await startDemoOrigin();
    const env = {
      ...deploymentEnv(redis.url, origin.url),
      // HAProxy connects from 127.0.0.1; the clients come from other loopback addresses.
      TRUSTED_PROXIES: '127.0.0.1',
      WR_STATE_CACHE_SECONDS: '0',
      WR_TICKET_LIMIT: String(TICKET_LIMIT),
      // The longest window and hold: the counts cannot run out while the test sends.
      WR_TICKET_WINDOW_SECONDS: '60',
      WR_TICKET_PENALTY_MINUTES: '60',
      WR_AUTH_FAILURE_LIMIT: String(AUTH_LIMIT),
      WR_AUTH_FAILURE_WINDOW_SECONDS: '60',
      WR_AUTH_PENALTY_MINUTES: '60',
      WR_BYPASS_IPS: '127.0.0.9',
    };
    const [a, b] = await Promise.all([startNodeHost(env), startNodeHost(env)]);
    hosts = { a: a!, b: b! };
    haproxy = await startHaproxy(dir, [{ name: 'a', port: a!.port }, { name: 'b', port: b!.port }], CHECK_INTERVAL_MS, CHECK_FALL);
    lb = haproxy.url;
  }, 120_000);

  afterAll(async () => {
    await haproxy?.stop();
    await Promise.allSettled([stopProcess(hosts?.a.child), stopProcess(hosts?.b.child)]);
    await origin?.close();
    await redis?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('run the configuration docs/self-hosting.md shows: HAProxy accepts it as written', () => {
    const docs = readFileSync(resolve(PROJECT_ROOT, 'docs/self-hosting.md'), 'utf8');
    const example = /```haproxy\n([\s\S]*?)```/.exec(docs)?.[1];
    expect(example).toBeDefined();
    // The same directives as this test's configuration, apart from addresses, TLS and the interval.
    for (const line of haproxyConfig(0, 0, [], CHECK_INTERVAL_MS, CHECK_FALL).split('\n').map((l) => l.trim())) {
      if (line === '' || /^(?:bind|server|default-server|http-response|stats|frontend stats|maxconn|timeout connect)\b/.test(line)) continue;
      expect(example, line).toContain(line);
    }
    // Its certificate is the operator's: a throwaway one stands in for it.
    const pem = join(dir, 'site.pem');
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'site.key'), '-out', join(dir, 'site.crt'), '-days', '1', '-subj', '/CN=localhost'], { encoding: 'utf8' });
    expect(made.status, made.stderr).toBe(0);
    writeFileSync(pem, readFileSync(join(dir, 'site.crt'), 'utf8') + readFileSync(join(dir, 'site.key'), 'utf8'));
    const file = join(dir, 'docs-haproxy.cfg');
    writeFileSync(file, example!.replace('/etc/haproxy/certs/waiting-room.pem', pem));
    const checked = spawnSync(HAPROXY, ['-c', '-f', file], { encoding: 'utf8' });
    expect(checked.status, `${checked.stdout}${checked.stderr}`).toBe(0);
  });

  it('say at start which proxies they trust', () => {
    expect(hosts.a.output()).toContain('Proxies:   client addresses from X-Forwarded-For when the peer is 127.0.0.1 (TRUSTED_PROXIES)');
  });

  // First, while the line is empty: the tickets are then 1 to 8.
  it('honour each other\'s tickets and admissions', async () => {
    const visitors = Array.from({ length: 8 }, (_, i) => new Client(`127.0.2.${i + 1}`));
    const issuer = new Map<Client, HostName>();
    for (const visitor of visitors) {
      const first = await visitor.get('/');
      expect(first.status).toBe(200);
      expect(reachedOrigin(first.response)).toBe(false);
      issuer.set(visitor, first.server);
    }
    expect(visitors.map((v) => v.claims['t'])).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(new Set(issuer.values())).toEqual(new Set(['a', 'b']));

    const admit = await new Client('127.0.0.1').get('/__wr/api/admit?count=4', { authorization: `Bearer ${API_TOKEN}` }, 'POST');
    expect(admit.status).toBe(200);
    expect(await admit.response.json()).toMatchObject({ admitted: 4, tail: 8, cursor: 4 });

    const other = (host: HostName): HostName => (host === 'a' ? 'b' : 'a');
    /** The visitor's next answer from `host` (round robin alternates: a few tries at most). */
    const from = async (visitor: Client, host: HostName) => {
      for (let i = 0; i < 10; i++) {
        const answer = await visitor.get('/products');
        expect(answer.status).toBeLessThan(500);
        if (answer.server === host) return answer;
      }
      throw new Error(`no answer from host ${host} in 10 requests`);
    };
    for (const visitor of visitors) {
      const ticket = visitor.claims['t'] as number;
      // The host that did not issue the ticket honours it: let in if admitted, else held in place.
      const crossed = await from(visitor, other(issuer.get(visitor)!));
      expect(reachedOrigin(crossed.response), `ticket ${ticket} on host ${crossed.server}`).toBe(ticket <= 4);
      if (ticket > 4) {
        expect(visitor.claims['t']).toBe(ticket);
        continue;
      }
      // And the access the other host granted is honoured back on the issuer.
      const back = await from(visitor, issuer.get(visitor)!);
      expect(reachedOrigin(back.response)).toBe(true);
    }
  }, 60_000);

  it('count the ticket limit for each real client apart: one held client holds nobody else', async () => {
    for (const address of ['127.0.0.2', '127.0.0.3', '127.0.0.4']) {
      const counted = await takeTicketsUntilHeld(address);
      // Per host (each counts in its own memory): exactly the limit, then refused for good.
      expect(counted, address).toMatchObject({ tickets: { a: TICKET_LIMIT, b: TICKET_LIMIT }, afterRefusal: { a: 0, b: 0 } });
    }
    for (const host of ['a', 'b'] as const) {
      const refusedFor = new Set(hosts[host].logs().filter((l) => l.status === 429 && l.path === '/').map((l) => l.client));
      expect(refusedFor).toEqual(new Set(['127.0.0.2', '127.0.0.3', '127.0.0.4']));
    }
  }, 60_000);

  it('do not believe a client\'s own X-Forwarded-For: rotating fake values buys no ticket, nor a bypass', async () => {
    const before = { a: hosts.a.logs().length, b: hosts.b.logs().length };
    const fakes = (i: number) => ({ 'x-forwarded-for': [`203.0.113.${i + 1}`, '127.0.0.1', `198.51.100.${i + 1}, 127.0.0.1`, 'unknown', `127.0.0.${20 + i}`, '127.0.0.9'][i % 6]! });
    const counted = await takeTicketsUntilHeld('127.0.0.5', fakes);
    expect(counted).toMatchObject({ tickets: { a: TICKET_LIMIT, b: TICKET_LIMIT }, afterRefusal: { a: 0, b: 0 } });
    for (const host of ['a', 'b'] as const) {
      const refused = hosts[host].logs().slice(before[host]).filter((l) => l.status === 429);
      expect(refused.length).toBeGreaterThan(0);
      expect(new Set(refused.map((l) => l.client))).toEqual(new Set(['127.0.0.5']));
    }
    // bypass_ips is 127.0.0.9: that client goes straight to the origin, a client claiming to be it does not.
    const bypassed = await new Client('127.0.0.9').get('/');
    expect(reachedOrigin(bypassed.response)).toBe(true);
    const pretender = await new Client('127.0.0.6').get('/', { 'x-forwarded-for': '127.0.0.9' });
    expect(pretender.status).toBe(200);
    expect(reachedOrigin(pretender.response)).toBe(false);
  }, 60_000);

  it('count the sign-in throttle for each real client apart: a guesser locks out only itself', async () => {
    const guesser = new Client('127.0.0.7');
    const wrong = { a: 0, b: 0 };
    const held = { a: 0, b: 0 };
    for (let i = 0; i < 8 * (AUTH_LIMIT + 1) && (held.a === 0 || held.b === 0); i++) {
      const { status, server } = await guesser.get('/__wr/admin', { authorization: ADMIN_WRONG });
      if (status === 429) held[server]++;
      else {
        expect(status).toBe(401);
        expect(held[server], `a wrong password compared on host ${server} after it held the client`).toBe(0);
        wrong[server]++;
      }
    }
    // Per host: the wrong password that reaches the limit is answered with the hold itself.
    expect(wrong).toEqual({ a: AUTH_LIMIT - 1, b: AUTH_LIMIT - 1 });
    // Held on both: even the right password is refused, from that client.
    for (let i = 0; i < 2; i++) expect((await guesser.get('/__wr/admin', { authorization: ADMIN_RIGHT })).status).toBe(429);
    // Everybody else signs in, on both hosts, and the origin's API token works.
    const operator = new Client('127.0.0.8');
    const served = new Set<HostName>();
    for (let i = 0; i < 10 && served.size < 2; i++) {
      const answer = await operator.get('/__wr/admin', { authorization: ADMIN_RIGHT });
      expect(answer.status).toBe(200);
      served.add(answer.server);
    }
    expect(served).toEqual(new Set(['a', 'b']));
    const api = await new Client('127.0.0.10').get('/__wr/api/admit?count=1', { authorization: `Bearer ${API_TOKEN}` }, 'POST');
    expect(api.status).toBe(200);
    for (const host of ['a', 'b'] as const) {
      const failed = hosts[host].logs().filter((l) => l.path === '/__wr/admin' && l.client !== undefined);
      expect(new Set(failed.map((l) => l.client))).toEqual(new Set(['127.0.0.7']));
    }
  }, 60_000);

  // Last: it kills host b.
  it('take a host killed mid-sale out by the health check, with no visitor 5xx after it', async () => {
    // Admitted visitors browse, waiting ones poll, new ones arrive (each from its own address).
    const admitted = Array.from({ length: 4 }, (_, i) => new Client(`127.0.4.${i + 1}`));
    for (const visitor of admitted) expect((await visitor.get('/')).status).toBe(200);
    const last = Math.max(...admitted.map((v) => v.claims['t'] as number));
    const operator = new Client('127.0.0.1');
    for (let i = 0; i < 20; i++) {
      const admit = await operator.get('/__wr/api/admit?count=50', { authorization: `Bearer ${API_TOKEN}` }, 'POST');
      expect(admit.status).toBe(200);
      if (((await admit.response.json()) as { cursor: number }).cursor >= last) break;
    }
    for (const visitor of admitted) expect(reachedOrigin((await visitor.get('/products')).response)).toBe(true);

    interface Outcome {
      readonly kind: 'admitted' | 'waiting' | 'new';
      readonly status: number;
      readonly server: HostName | undefined;
      readonly afterDown: boolean;
      readonly origin: boolean;
    }
    const outcomes: Outcome[] = [];
    let down = false;
    let stop = false;
    const waiting: Client[] = [];
    const sale = (async () => {
      for (let i = 0; i < 5_000 && !stop; i++) {
        const kinds = [
          { kind: 'new' as const, client: new Client(`127.5.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`) },
          { kind: 'waiting' as const, client: waiting[i % Math.max(1, waiting.length)] },
          { kind: 'admitted' as const, client: admitted[i % admitted.length]! },
        ];
        for (const { kind, client } of kinds) {
          if (client === undefined) continue;
          const afterDown = down;
          try {
            const answer = await client.get(kind === 'admitted' ? '/products' : '/');
            outcomes.push({ kind, status: answer.status, server: answer.server, afterDown, origin: reachedOrigin(answer.response) });
          } catch {
            outcomes.push({ kind, status: 0, server: undefined, afterDown, origin: false });
          }
          if (kind === 'new' && waiting.length < 20) waiting.push(client);
        }
      }
    })();
    const until = async (condition: () => boolean, deadlineMs: number, what: string) => {
      const deadline = Date.now() + deadlineMs;
      while (!condition()) {
        if (Date.now() > deadline) throw new Error(`${what}: not within ${deadlineMs} ms`);
        await sleep(20);
      }
    };
    try {
      await until(() => outcomes.length >= 30, 30_000, 'the sale under way');
      hosts.b.child.kill('SIGKILL');
      await waitForStates((s) => s['b']?.startsWith('DOWN') === true && s['a'] === 'UP', 30_000, 'host b taken out by the health check');
      down = true;
      const atDown = outcomes.length;
      await until(() => outcomes.length >= atDown + 60, 60_000, '60 answers after host b was taken out');
    } finally {
      stop = true;
      await sale;
    }
    const after = outcomes.filter((o) => o.afterDown);
    expect(after.length).toBeGreaterThanOrEqual(60);
    expect(after.filter((o) => o.status === 0 || o.status >= 500)).toEqual([]);
    expect(new Set(after.map((o) => o.server))).toEqual(new Set(['a']));
    // The sale goes on on host a: admitted visitors browse, new and waiting ones are held in line.
    for (const kind of ['admitted', 'waiting', 'new'] as const) expect(after.some((o) => o.kind === kind), kind).toBe(true);
    expect(after.filter((o) => o.kind === 'admitted').every((o) => o.origin)).toBe(true);
    expect(after.filter((o) => o.kind !== 'admitted').every((o) => o.status === 200 && !o.origin)).toBe(true);
  }, 150_000);
});
