/**
 * Self-hosting without the bridge: two Node hosts (the real `npm start` bundle, bin/node-host.mjs,
 * each its own process) with WR_STORE=redis against one redis-server, as two hosts behind a load
 * balancer would run. They share the line: tickets are unique across both, and an admission made
 * through one is honoured by the other. Then Redis goes away, and no visitor sees a 5xx.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoOrigin } from '../src/node/demo-origin';
import { freePort, type RunningServer } from '../src/node/host';
import { PROJECT_ROOT } from './support/compute-host';
import { buildNodeBundles, deploymentEnv, hostBaseEnv, startNodeHostProcess, type NodeHostProcess } from './support/node-host-process';
import { reachedOrigin } from './support/e2e-scenarios';
import { ADMIN_PASSWORD, API_TOKEN, KEY_1 } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';
import { HttpVisitor } from './support/stack';

type NodeHost = NodeHostProcess;
const startNodeHost = startNodeHostProcess;

async function stopNodeHost(host: NodeHost | undefined): Promise<void> {
  if (host === undefined || host.child.exitCode !== null) return;
  const exited = new Promise((done) => host.child.once('exit', done));
  host.child.kill('SIGTERM');
  await exited;
}

let redis: RedisServer;
let origin: RunningServer;
let a: NodeHost;
let b: NodeHost;

beforeAll(async () => {
  buildNodeBundles();
  redis = await startRedisServer();
  origin = await startDemoOrigin();
  const env = {
    // A deployment: secrets from the environment alone (devconfig.json's development values are refused).
    ...deploymentEnv(redis.url, origin.url),
    // Decisions straight from the store on every request: no per-host cache hiding the other host's writes.
    WR_STATE_CACHE_SECONDS: '0',
    WR_STORE_TIMEOUT_MS: '500',
    WR_STORE_FAILURE: 'hold',
  };
  [a, b] = await Promise.all([startNodeHost(env), startNodeHost(env)]);
}, 120_000);

afterAll(async () => {
  await Promise.allSettled([stopNodeHost(a), stopNodeHost(b)]);
  await origin?.close();
  await redis?.stop();
});

/**
 * A redis-server that speaks only TLS, with a password, on a free port: its certificate is for
 * 127.0.0.1, signed by a CA made here (`ca`, a PEM file the host is told to trust).
 */
async function startTlsRedis(dir: string): Promise<{ port: number; ca: string; stop(): void }> {
  const ssl = (args: string[]) => {
    const made = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`openssl ${args[0]} failed: ${made.stderr}`);
  };
  ssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=waiting-room test CA']);
  ssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1']);
  writeFileSync(join(dir, 'san.cnf'), 'subjectAltName=IP:127.0.0.1\n');
  ssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '1', '-extfile', 'san.cnf']);
  const port = await freePort();
  const child = spawn('redis-server', ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--tls-cert-file', join(dir, 'server.pem'), '--tls-key-file', join(dir, 'server.key'), '--tls-ca-cert-file', join(dir, 'ca.pem'), '--tls-auth-clients', 'no', '--requirepass', 'tls-test-Pass-8812', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  await new Promise<void>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`TLS redis-server did not start:\n${log}`)), 15_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      log += chunk.toString('utf8');
      if (log.includes('Ready to accept connections')) {
        clearTimeout(timer);
        ready();
      }
    });
    child.once('exit', (code) => fail(new Error(`TLS redis-server exited ${String(code)}:\n${log}`)));
  });
  return { port, ca: join(dir, 'ca.pem'), stop: () => child.kill('SIGKILL') };
}

describe('a Node host on a Redis that speaks TLS (rediss://), with a password', () => {
  it('takes tickets through it, trusting the CA it is told to', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wr-tls-redis-'));
    const tls = await startTlsRedis(dir);
    let host: NodeHost | undefined;
    try {
      host = await startNodeHost({
        WR_STORE: 'redis',
        REDIS_URL: `rediss://:tls-test-Pass-8812@127.0.0.1:${tls.port}`,
        NODE_EXTRA_CA_CERTS: tls.ca,
        ORIGIN_URL: origin.url,
        WR_SIGNING_KEYS: `k1:${KEY_1}`,
        WR_STATE_CACHE_SECONDS: '0',
      });
      expect(host.output()).toContain(`Redis store at rediss://127.0.0.1:${tls.port}`);
      expect(host.output()).not.toContain('tls-test-Pass-8812');
      const visitors = [new HttpVisitor(host.url), new HttpVisitor(host.url)];
      for (const visitor of visitors) expect((await visitor.get('/')).status).toBe(200);
      expect(visitors.map((v) => v.claims['t'])).toEqual([1, 2]);
    } finally {
      await stopNodeHost(host);
      tls.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('two Node hosts on one Redis (WR_STORE=redis)', () => {
  it('say so at start, with where the secrets come from and none of their values', () => {
    expect(a.output()).toContain(`Redis store at ${redis.url}`);
    expect(a.output()).toContain('Secrets:   from the environment only');
    expect(a.output()).toContain('password from environment variable WR_ADMIN_PASSWORD');
    expect(a.output()).toContain('token from environment variable WR_ADMIN_API_TOKEN');
    for (const secret of [ADMIN_PASSWORD, API_TOKEN, KEY_1]) expect(a.output()).not.toContain(secret);
  });

  it('refuse to start on the published development secrets, or without a key ring, naming each variable', async () => {
    const run = (env: Record<string, string>) => {
      return spawnSync(process.execPath, [resolve(PROJECT_ROOT, 'bin/node-host.mjs')], { cwd: PROJECT_ROOT, env: { ...hostBaseEnv(), PORT: '0', ORIGIN_URL: origin.url, WR_STORE: 'redis', REDIS_URL: redis.url, ...env }, encoding: 'utf8', timeout: 30_000 });
    };
    const none = run({});
    expect(none.status).toBe(1);
    expect(none.stderr).toMatch(/signing_keys \(environment variable WR_SIGNING_KEYS, not set\): is required/);
    const dev = JSON.parse(readFileSync(resolve(PROJECT_ROOT, 'devconfig.json'), 'utf8')) as { dev_secrets: Record<string, string> };
    const published = run({ WR_SIGNING_KEYS: dev.dev_secrets['signing_keys']!, WR_ADMIN_PASSWORD: dev.dev_secrets['admin_password']! });
    expect(published.status).toBe(1);
    expect(published.stderr).toContain('environment variable WR_SIGNING_KEYS: is the development value published in devconfig.json');
    expect(published.stderr).toContain('environment variable WR_ADMIN_PASSWORD: is the development value published in devconfig.json');
    const weak = run({ WR_SIGNING_KEYS: `k1:${KEY_1}`, WR_ADMIN_PASSWORD: 'password1234' });
    expect(weak.status).toBe(1);
    expect(weak.stderr).toMatch(/admin_password \(environment variable WR_ADMIN_PASSWORD\): is among the first passwords anyone tries/);
    // The same on every interface with the demo's memory store: listening beyond loopback is a deployment.
    const exposed = spawnSync(process.execPath, [resolve(PROJECT_ROOT, 'bin/node-host.mjs')], {
      cwd: PROJECT_ROOT,
      env: { ...hostBaseEnv(), PORT: '0', ORIGIN_URL: origin.url, HOST: '0.0.0.0' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(exposed.status).toBe(1);
    expect(exposed.stderr).toContain('WR_SIGNING_KEYS, not set');
  }, 90_000);

  it('hand out unique tickets across both hosts, and an admission through one lets visitors in through the other', async () => {
    // A load balancer sends each visitor's first request to either host.
    const visitors = Array.from({ length: 10 }, (_, i) => new HttpVisitor(i % 2 === 0 ? a.url : b.url));
    const firsts = await Promise.all(visitors.map((v) => v.get('/')));
    for (const response of firsts) {
      expect(response.status).toBe(200);
      expect(reachedOrigin(response)).toBe(false);
    }
    const tickets = visitors.map((v) => v.claims['t'] as number);
    expect([...tickets].sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);

    const admit = await fetch(`${a.url}/__wr/api/admit?count=4`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } });
    expect(await admit.json()).toMatchObject({ admitted: 4, tail: 10, cursor: 4 });

    // Every visitor now asks the OTHER host than the one that gave it its ticket.
    const crossed = visitors.map((_, i) => new HttpVisitor(i % 2 === 0 ? b.url : a.url));
    crossed.forEach((c, i) => (c.cookie = visitors[i]!.cookie));
    const through = [];
    for (const c of crossed) through.push(reachedOrigin(await c.get('/products')));
    expect(through).toEqual(tickets.map((t) => t <= 4));
  });

  it('turn nobody away with a 5xx when Redis is down: waiting visitors are held, new ones too', async () => {
    const waiting = new HttpVisitor(a.url);
    expect((await waiting.get('/')).status).toBe(200);
    await redis.stop();
    for (const host of [a, b]) {
      const before = host.logText().length;
      const fresh = await new HttpVisitor(host.url).get('/');
      expect(fresh.status).toBeLessThan(500);
      expect(reachedOrigin(fresh)).toBe(false);
      // Fails fast (no offline queue): the store call was refused, not given up at the store timeout.
      // Read from the request's log line, not a stopwatch, so a busy machine cannot decide it.
      await expect.poll(() => host.logText().slice(before), { timeout: 10_000 }).toMatch(/\n/);
      const line = JSON.parse(host.logText().slice(before).split('\n')[0]!) as Record<string, unknown>;
      expect(line).toMatchObject({ path: '/', decision: 'unavailable', store_error: expect.stringMatching(/^error: /) });
    }
    // The visitor who was waiting comes back, through the other host: held, not an error.
    const same = new HttpVisitor(b.url);
    same.cookie = waiting.cookie;
    const held = await same.get('/');
    expect(held.status).toBeLessThan(500);
    expect(reachedOrigin(held)).toBe(false);
    // The hosts keep running (they reconnect in the background) and said what happened.
    expect(a.child.exitCode).toBeNull();
    expect(b.child.exitCode).toBeNull();
    await expect.poll(() => a.output(), { timeout: 5_000 }).toMatch(/redis: .*failing store calls fast and reconnecting/);
  });
});
