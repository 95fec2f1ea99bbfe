/**
 * Local runs that don't collide: `npm start`, `npm run serve:fastly` and `npm run redis:bridge`
 * run as real processes (bundled from src/ as the build bundles them) in a copy of the project, with
 * their ports taken by listeners this test owns, or moved by their variables.
 *
 * serve:fastly runs the real Fastly CLI with a Viceroy of this test's own (it takes Viceroy's
 * command line and, instead of the wasm, forwards /__backend/<name>/… to that backend of the
 * manifest it was given), so what is checked is the manifest the run wrote, in seconds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createConnection, createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { Redis as IORedis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { checkPorts, LocalPortError, localServerManifest, readPort } from '../src/node/local-ports';
import { startRedisServer, type RedisServer } from './support/redis-server';

const ROOT = resolve(import.meta.dirname, '..');
const UPSTASH_TOKEN = 'dev-only-upstash-token';
let project: string;

/** The project as the commands see it: its files, node_modules, and bin/ with the bundles and a stand-in main.wasm. */
beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), 'wr-ports-'));
  const bin = join(project, 'bin');
  mkdirSync(bin);
  for (const file of ['package.json', 'devconfig.json', 'fastly.toml']) copyFileSync(join(ROOT, file), join(project, file));
  symlinkSync(join(ROOT, 'node_modules'), join(project, 'node_modules'));
  await build({
    absWorkingDir: ROOT,
    entryPoints: { 'node-host': 'src/node/start.ts', 'serve-fastly': 'src/node/serve-fastly.ts', 'redis-bridge': 'src/node/redis-bridge-cli.ts' },
    outdir: bin,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    loader: { '.html': 'text', '.css': 'text', '.svg': 'text', '.lua': 'text' },
    plugins: [
      {
        name: 'template-scripts-as-text',
        setup(b) {
          b.onLoad({ filter: /[\\/]templates[\\/][^\\/]+\.js$/ }, (args) => ({ contents: readFileSync(args.path, 'utf8'), loader: 'text' }));
        },
      },
    ],
    logLevel: 'warning',
  });
  // What the Fastly build writes besides the wasm: devconfig.json split into the two stores.
  const dev = JSON.parse(readFileSync(join(ROOT, 'devconfig.json'), 'utf8')) as { config: Record<string, string>; dev_secrets: Record<string, string> };
  const settings = Object.fromEntries(Object.entries(dev.config).filter(([key]) => !key.startsWith('//')));
  writeFileSync(join(bin, 'local-config.json'), JSON.stringify({ settings: JSON.stringify(settings) }));
  writeFileSync(join(bin, 'local-secrets.json'), JSON.stringify(dev.dev_secrets));
  writeFileSync(join(bin, 'main.wasm'), 'not run: the Viceroy of this test forwards to the backends instead');
  writeFileSync(join(project, 'fake-viceroy.mjs'), FAKE_VICEROY);
  chmodSync(join(project, 'fake-viceroy.mjs'), 0o755);
}, 60_000);

afterAll(() => rmSync(project, { recursive: true, force: true }));

const FAKE_VICEROY = `#!/usr/bin/env node
import http from 'node:http';
import { readFileSync } from 'node:fs';
const argv = process.argv.slice(2);
const text = readFileSync(argv[argv.indexOf('-C') + 1], 'utf8');
const [host, port] = argv[argv.indexOf('--addr') + 1].split(':');
const tables = {};
let table = '';
for (const line of text.split('\\n')) {
  const header = /^\\[([^\\]]+)\\]/.exec(line);
  if (header) { table = header[1]; tables[table] ??= {}; continue; }
  const pair = /^(\\w+)\\s*=\\s*"([^"]*)"/.exec(line);
  if (pair && table) tables[table][pair[1]] = pair[2];
}
http.createServer(async (req, res) => {
  try {
    const forward = /^\\/__backend\\/([^/]+)\\/(.*)$/.exec(req.url);
    if (forward) {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const upstream = await fetch(new URL(forward[2], tables['local_server.backends.' + forward[1]].url), {
        method: req.method,
        headers: req.headers.authorization ? { authorization: req.headers.authorization } : {},
        body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
      });
      res.writeHead(upstream.status, { 'x-origin': upstream.headers.get('x-origin') ?? '' });
      res.end(Buffer.from(await upstream.arrayBuffer()));
    } else if (req.url === '/__config') {
      res.end(readFileSync(tables['local_server.config_stores.wr_config'].file));
    } else if (req.url === '/__secrets') {
      res.end(readFileSync(tables['local_server.secret_stores.wr_secrets'].file));
    } else {
      res.writeHead(404).end();
    }
  } catch (error) {
    res.writeHead(502).end(String(error));
  }
}).listen(Number(port), host, () => console.log('INFO Listening on http://' + host + ':' + port));
// Never outlive the CLI that started it.
const parent = process.ppid;
setInterval(() => { if (process.ppid !== parent) process.exit(0); }, 200).unref?.();
`;

// ---- helpers ---------------------------------------------------------------------------------

/** A port free right now (the system's pick, released). */
function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => done(port));
    });
  });
}

/** A listener this test owns on a free port, counting the connections it receives. */
interface Squatter {
  readonly port: number;
  connections: number;
  close(): Promise<void>;
}

const squatters: Squatter[] = [];

async function squat(): Promise<Squatter> {
  const server: Server = createServer((socket) => {
    squatter.connections++;
    socket.destroy();
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const squatter: Squatter = {
    port: (server.address() as AddressInfo).port,
    connections: 0,
    close: () => new Promise((done) => server.close(() => done())),
  };
  squatters.push(squatter);
  return squatter;
}

function isFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once('error', () => done(false));
    server.listen(port, '127.0.0.1', () => server.close(() => done(true)));
  });
}

interface Run {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
  readonly exit: Promise<number | null>;
}

const runs: Run[] = [];

/** Starts `bin/<bundle>.mjs` of the project copy in its own process group, with `env` over a clean environment. */
function run(bundle: string, env: Record<string, string>): Run {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('WR_') && !['PORT', 'BRIDGE_PORT', 'ORIGIN_URL', 'REDIS_URL', 'REDIS_SHARD_URLS', 'VICEROY_PATH'].includes(name)),
  );
  const child = spawn(process.execPath, [join(project, 'bin', `${bundle}.mjs`)], {
    cwd: project,
    env: { ...base, FASTLY_DISABLE_WASM_METRICS: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const started: Run = {
    child,
    stdout: '',
    stderr: '',
    exit: new Promise((done) => child.once('exit', (code) => done(code))),
  };
  child.stdout!.on('data', (chunk: Buffer) => (started.stdout += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (started.stderr += chunk.toString('utf8')));
  runs.push(started);
  return started;
}

async function until(what: string, started: Run, done: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (started.child.exitCode !== null) throw new Error(`exited (${started.child.exitCode}) before ${what}:\n${started.stderr}\n${started.stdout}`);
    if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms:\n${started.stderr}\n${started.stdout}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Stops a run as Ctrl-C would, and returns its exit status. */
async function stopRun(started: Run): Promise<number | null> {
  if (started.child.exitCode === null) started.child.kill('SIGTERM');
  return started.exit;
}

afterEach(async () => {
  for (const started of runs.splice(0)) {
    if (started.child.exitCode !== null || started.child.signalCode !== null) continue;
    started.child.kill('SIGTERM');
    const timer = setTimeout(() => {
      try {
        process.kill(-started.child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, 5_000);
    await started.exit;
    clearTimeout(timer);
  }
  await Promise.all(squatters.splice(0).map((s) => s.close()));
});

/** stderr as lines, with no stack trace in it. */
function errorLines(started: Run): string[] {
  const lines = started.stderr.trim().split('\n');
  expect(lines.filter((line) => /^\s+at /.test(line))).toEqual([]);
  return lines;
}

/** One inline Redis command over a fresh connection: its first reply line. */
function redisCommand(port: number, command: string): Promise<string> {
  return new Promise((done, fail) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = '';
    socket.once('error', fail);
    socket.once('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1');
      if (reply.includes('\r\n')) {
        socket.destroy();
        done(reply.split('\r\n')[0]!);
      }
    });
  });
}

async function upstash(base: string, command: unknown[], token = UPSTASH_TOKEN): Promise<unknown> {
  const response = await fetch(base, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: JSON.stringify(command) });
  return response.json();
}

/**
 * Runs `body` with the project copy's bin/local-config.json (the build's split of devconfig.json)
 * asking for `storeShards` databases, as a devconfig.json with `store_shards` builds it; restored after.
 */
async function withStoreShards(storeShards: number, body: () => Promise<void>): Promise<void> {
  const file = join(project, 'bin', 'local-config.json');
  const before = readFileSync(file, 'utf8');
  const settings = JSON.parse((JSON.parse(before) as { settings: string }).settings) as Record<string, string>;
  writeFileSync(file, JSON.stringify({ settings: JSON.stringify({ ...settings, store_shards: String(storeShards) }) }));
  try {
    await body();
  } finally {
    writeFileSync(file, before);
  }
}

const taken = (command: string, port: number, what: string, variable: string) =>
  new RegExp(`^${command}: port ${port} for ${what} is taken \\(something else listens on 127\\.0\\.0\\.1:${port}\\); stop it or set ${variable} to a free port, e\\.g\\. ${variable}=\\d+ ${command}`);

// ---- npm start -------------------------------------------------------------------------------

describe('npm start', () => {
  it('stops with one line naming a taken PORT and exit status 1, before the demo origin listens', async () => {
    const squatter = await squat();
    const origin = await freePort();
    const started = run('node-host', { PORT: String(squatter.port), WR_ORIGIN_PORT: String(origin) });
    expect(await started.exit).toBe(1);
    const lines = errorLines(started);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(taken('npm start', squatter.port, 'the waiting room', 'PORT'));
    expect(squatter.connections).toBe(0);
  });

  it('names WR_ORIGIN_PORT when the demo origin\'s port is taken, and leaves the waiting room\'s port unopened', async () => {
    const squatter = await squat();
    const host = await freePort();
    const started = run('node-host', { PORT: String(host), WR_ORIGIN_PORT: String(squatter.port) });
    expect(await started.exit).toBe(1);
    const lines = errorLines(started);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(taken('npm start', squatter.port, 'the demo origin', 'WR_ORIGIN_PORT'));
    expect(squatter.connections).toBe(0);
    expect(await isFree(host)).toBe(true);
  });

  it('refuses a PORT that is not a port number, by name', async () => {
    const started = run('node-host', { PORT: '76767', WR_ORIGIN_PORT: '0' });
    expect(await started.exit).toBe(1);
    expect(errorLines(started)).toEqual(['npm start: PORT must be a port number from 0 to 65535 (0 picks a free one), got "76767"']);
  });

  it('refuses a WR_DEMO_CAPACITY that is not a number of requests a second, by name', async () => {
    for (const value of ['abc', '0', '2.5', '-3']) {
      const started = run('node-host', { PORT: '0', WR_ORIGIN_PORT: '0', WR_DEMO_CAPACITY: value });
      expect(await started.exit).toBe(1);
      expect(errorLines(started)).toEqual([`npm start: WR_DEMO_CAPACITY must be a whole number of requests a second from 1 to 999999, got ${JSON.stringify(value)}`]);
    }
  });

  it('serves on PORT in front of the demo origin on WR_ORIGIN_PORT, and frees both when stopped', async () => {
    const [host, origin] = [await freePort(), await freePort()];
    // serve:fastly's own port variables set in the same shell do not stop npm start.
    const started = run('node-host', { PORT: String(host), WR_ORIGIN_PORT: String(origin), WR_BRIDGE_PORT: '0', WR_REDIS_PORT: '0' });
    await until('the start banner', started, () => started.stderr.includes('Visitors:'));
    expect(started.stderr).toContain(`in front of http://127.0.0.1:${origin} (the demo origin; WR_ORIGIN_PORT moves it)`);
    expect(started.stderr).toContain(`Visitors:  http://127.0.0.1:${host}/`);
    const health = await fetch(`http://127.0.0.1:${host}/__wr/health`);
    expect(await health.json()).toEqual({ ok: true });
    const shop = await fetch(`http://127.0.0.1:${origin}/`);
    expect(shop.headers.get('x-origin')).toBe('demo');
    expect(await stopRun(started)).toBe(0);
    expect([await isFree(host), await isFree(origin)]).toEqual([true, true]);
  });
});

// ---- npm run serve:fastly --------------------------------------------------------------------

describe('npm run serve:fastly', () => {
  const COMMAND = 'npm run serve:fastly';
  const WHAT = { PORT: 'the waiting room', WR_ORIGIN_PORT: 'the demo origin', WR_BRIDGE_PORT: 'the Upstash bridge', WR_REDIS_PORT: 'redis-server' } as const;

  it.each(Object.keys(WHAT) as (keyof typeof WHAT)[])('stops before starting anything when %s is taken: one line naming it, exit status 1, no connection to it', async (variable) => {
    const squatter = await squat();
    const others = Object.fromEntries(await Promise.all((Object.keys(WHAT) as string[]).filter((v) => v !== variable).map(async (v) => [v, String(await freePort())])));
    const started = run('serve-fastly', { ...others, [variable]: String(squatter.port), VICEROY_PATH: join(project, 'fake-viceroy.mjs') });
    expect(await started.exit).toBe(1);
    const lines = errorLines(started);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(taken(COMMAND, squatter.port, WHAT[variable], variable));
    if (variable === 'WR_ORIGIN_PORT') expect(lines[0]).toContain(`or set ORIGIN_URL=http://127.0.0.1:${squatter.port} if that is an origin to use`);
    // The old serve:fastly connected to a port it found taken and used whatever answered.
    expect(squatter.connections).toBe(0);
    for (const port of Object.values(others)) expect(await isFree(Number(port))).toBe(true);
  });

  it('says every taken port at once, one line each', async () => {
    const [origin, bridge] = [await squat(), await squat()];
    const started = run('serve-fastly', { PORT: String(await freePort()), WR_ORIGIN_PORT: String(origin.port), WR_BRIDGE_PORT: String(bridge.port) });
    expect(await started.exit).toBe(1);
    const lines = errorLines(started);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(taken(COMMAND, origin.port, 'the demo origin', 'WR_ORIGIN_PORT'));
    expect(lines[1]).toMatch(taken(COMMAND, bridge.port, 'the Upstash bridge', 'WR_BRIDGE_PORT'));
  });

  it('refuses two variables set to one port', async () => {
    const port = await freePort();
    const started = run('serve-fastly', { PORT: String(port), WR_BRIDGE_PORT: String(port), WR_ORIGIN_PORT: '0' });
    expect(await started.exit).toBe(1);
    expect(errorLines(started)).toEqual([`${COMMAND}: PORT and WR_BRIDGE_PORT are both ${port} (the waiting room and the Upstash bridge); give each its own port`]);
  });

  it('moves all four with PORT, WR_ORIGIN_PORT, WR_BRIDGE_PORT and WR_REDIS_PORT, points its manifest copy there, and frees them when stopped', async () => {
    const ports = { PORT: await freePort(), WR_ORIGIN_PORT: await freePort(), WR_BRIDGE_PORT: await freePort(), WR_REDIS_PORT: await freePort() };
    const started = run('serve-fastly', { ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), VICEROY_PATH: join(project, 'fake-viceroy.mjs') });
    await until('Listening on', started, () => started.stdout.includes('Listening on'), 30_000);
    const room = `http://127.0.0.1:${ports.PORT}`;
    // The compute host's backends, from the manifest this run wrote: its origin, its bridge.
    const shop = await fetch(`${room}/__backend/origin/`);
    expect(shop.headers.get('x-origin')).toBe('demo');
    expect(await upstash(`${room}/__backend/upstash/`, ['SET', 'wr-ports-test', 'here'])).toEqual({ result: 'OK' });
    // ...over a redis-server of its own on WR_REDIS_PORT.
    expect(await redisCommand(ports.WR_REDIS_PORT, 'GET wr-ports-test')).toBe('$4');
    // Each also answers on its port directly, and the config store's upstash_url names the bridge.
    expect((await fetch(`http://127.0.0.1:${ports.WR_ORIGIN_PORT}/`)).headers.get('x-origin')).toBe('demo');
    expect(await upstash(`http://127.0.0.1:${ports.WR_BRIDGE_PORT}/`, ['GET', 'wr-ports-test'])).toEqual({ result: 'here' });
    const config = (await (await fetch(`${room}/__config`)).json()) as { settings: string };
    expect(JSON.parse(config.settings)).toMatchObject({ upstash_url: `http://127.0.0.1:${ports.WR_BRIDGE_PORT}` });
    expect(started.stderr).toContain(`Manifest: bin/serve-fastly-${ports.PORT}/fastly.toml`);
    expect(await stopRun(started)).toBe(0);
    for (const port of Object.values(ports)) expect(await isFree(port)).toBe(true);
    expect(existsSync(join(project, 'bin', `serve-fastly-${ports.PORT}`))).toBe(false);
  });

  it('with store_shards = 3, starts a bridge per database over a Redis database of its own, declared as upstash_2 and upstash_3 and named in the stores, and frees them when stopped', async () => {
    await withStoreShards(3, async () => {
      const ports = { PORT: await freePort(), WR_ORIGIN_PORT: await freePort(), WR_BRIDGE_PORT: await freePort(), WR_REDIS_PORT: await freePort() };
      const started = run('serve-fastly', { ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), VICEROY_PATH: join(project, 'fake-viceroy.mjs') });
      await until('Listening on', started, () => started.stdout.includes('Listening on'), 30_000);
      const room = `http://127.0.0.1:${ports.PORT}`;
      // The config store names the three bridges: the first on WR_BRIDGE_PORT, two more of their own.
      const settings = JSON.parse(((await (await fetch(`${room}/__config`)).json()) as { settings: string }).settings) as Record<string, string>;
      expect(settings).toMatchObject({ store_shards: '3', upstash_url: `http://127.0.0.1:${ports.WR_BRIDGE_PORT}` });
      const others = (settings['upstash_shard_urls'] ?? '').split(',');
      expect(others).toHaveLength(2);
      for (const url of others) expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(new Set([settings['upstash_url'], ...others]).size).toBe(3);
      // The secret store holds a token for each further database, one they accept.
      const secrets = (await (await fetch(`${room}/__secrets`)).json()) as Record<string, string>;
      const tokens = (secrets['upstash_shard_tokens'] ?? '').split(',');
      expect(tokens).toHaveLength(2);
      // Each backend reaches a database of its own: one key, three values.
      const backends = ['upstash', 'upstash_2', 'upstash_3'];
      for (const [i, name] of backends.entries()) {
        expect(await upstash(`${room}/__backend/${name}/`, ['SET', 'wr-ports-test', `database ${i + 1}`], i === 0 ? UPSTASH_TOKEN : tokens[i - 1])).toEqual({ result: 'OK' });
      }
      for (const [i, name] of backends.entries()) {
        expect(await upstash(`${room}/__backend/${name}/`, ['GET', 'wr-ports-test'], i === 0 ? UPSTASH_TOKEN : tokens[i - 1])).toEqual({ result: `database ${i + 1}` });
      }
      // upstash_2 and upstash_3 are the bridges upstash_shard_urls names, in order...
      expect(await upstash(`${others[0]}/`, ['GET', 'wr-ports-test'], tokens[0])).toEqual({ result: 'database 2' });
      expect(await upstash(`${others[1]}/`, ['GET', 'wr-ports-test'], tokens[1])).toEqual({ result: 'database 3' });
      // ...over databases 0, 1 and 2 of the run's redis-server on WR_REDIS_PORT.
      for (const db of [0, 1, 2]) {
        const direct = new IORedis(`redis://127.0.0.1:${ports.WR_REDIS_PORT}/${db}`);
        try {
          expect(await direct.get('wr-ports-test')).toBe(`database ${db + 1}`);
        } finally {
          direct.disconnect();
        }
      }
      expect(started.stderr).toContain('Store:    3 databases (store_shards = 3): the Upstash bridges at ');
      const further = others.map((url) => Number(new URL(url).port));
      expect(await stopRun(started)).toBe(0);
      for (const port of [...Object.values(ports), ...further]) expect(await isFree(port)).toBe(true);
      expect(existsSync(join(project, 'bin', `serve-fastly-${ports.PORT}`))).toBe(false);
    });
  });

  it('with store_shards = 2 and REDIS_URL, needs REDIS_SHARD_URLS to name the second database, and says so before starting anything', async () => {
    await withStoreShards(2, async () => {
      const [port, origin, bridge] = [await freePort(), await freePort(), await freePort()];
      const started = run('serve-fastly', {
        PORT: String(port),
        WR_ORIGIN_PORT: String(origin),
        WR_BRIDGE_PORT: String(bridge),
        REDIS_URL: 'redis://127.0.0.1:1',
        VICEROY_PATH: join(project, 'fake-viceroy.mjs'),
      });
      expect(await started.exit).toBe(1);
      expect(errorLines(started)).toEqual([
        `${COMMAND}: store_shards is 2, but REDIS_SHARD_URLS names 0 databases besides the first: it must name exactly 1 (store_shards − 1), or store_shards must be 1 (beside REDIS_URL; or leave REDIS_URL unset to use databases of a redis-server of this run)`,
      ]);
      for (const p of [port, origin, bridge]) expect(await isFree(p)).toBe(true);
    });
  });

  it('uses ORIGIN_URL and REDIS_URL instead of starting its own, and says so', async () => {
    let origin: HttpServer | undefined;
    let redis: RedisServer | undefined;
    try {
      origin = createHttpServer((_req, res) => res.writeHead(200, { 'x-origin': 'mine' }).end('mine'));
      await new Promise<void>((done) => origin!.listen(0, '127.0.0.1', done));
      const originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
      redis = await startRedisServer();
      const [port, bridge] = [await freePort(), await freePort()];
      const started = run('serve-fastly', {
        PORT: String(port),
        WR_BRIDGE_PORT: String(bridge),
        ORIGIN_URL: originUrl,
        REDIS_URL: redis.url,
        VICEROY_PATH: join(project, 'fake-viceroy.mjs'),
      });
      await until('Listening on', started, () => started.stdout.includes('Listening on'), 30_000);
      expect(started.stderr).toContain(`Origin:   ${originUrl} (ORIGIN_URL: yours, not started here)`);
      expect(started.stderr).toContain(`over the Redis at ${redis.url} (REDIS_URL: yours, not started here)`);
      expect((await fetch(`http://127.0.0.1:${port}/__backend/origin/`)).headers.get('x-origin')).toBe('mine');
      expect(await upstash(`http://127.0.0.1:${port}/__backend/upstash/`, ['SET', 'wr-ports-test', 'yours'])).toEqual({ result: 'OK' });
      expect(await redisCommand(redis.port, 'GET wr-ports-test')).toBe('$5');
      expect(await stopRun(started)).toBe(0);
      // Not started here, not stopped here.
      expect(await redisCommand(redis.port, 'PING')).toBe('+PONG');
    } finally {
      await redis?.stop();
      await new Promise((done) => (origin?.listening ? origin.close(done) : done(undefined)));
    }
  });
});

// ---- npm run redis:bridge --------------------------------------------------------------------

describe('npm run redis:bridge', () => {
  it.each(['WR_BRIDGE_PORT', 'BRIDGE_PORT'])('stops with one line naming a taken %s and exit status 1', async (variable) => {
    const squatter = await squat();
    const started = run('redis-bridge', { [variable]: String(squatter.port), REDIS_URL: 'redis://127.0.0.1:1' });
    expect(await started.exit).toBe(1);
    const lines = errorLines(started);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(taken('npm run redis:bridge', squatter.port, 'the Upstash bridge', variable));
  });
});

// ---- the pieces ------------------------------------------------------------------------------

describe('local ports', () => {
  it('reads each port from its variable, its default without one, and refuses what is not a port', () => {
    expect(readPort('cmd', 'host', {}).port).toBe(7676);
    expect(readPort('cmd', 'origin', {}).port).toBe(7677);
    expect(readPort('cmd', 'bridge', {}).port).toBe(8079);
    expect(readPort('cmd', 'redis', {}).port).toBe(0);
    expect(readPort('cmd', 'origin', { WR_ORIGIN_PORT: '9001' })).toMatchObject({ port: 9001, variable: 'WR_ORIGIN_PORT' });
    expect(readPort('cmd', 'bridge', { BRIDGE_PORT: '9002' })).toMatchObject({ port: 9002, variable: 'BRIDGE_PORT' });
    for (const bad of ['-1', '65536', '1.5', '0x50', 'http']) {
      expect(() => readPort('cmd', 'host', { PORT: bad })).toThrow(`cmd: PORT must be a port number from 0 to 65535 (0 picks a free one), got ${JSON.stringify(bad)}`);
    }
    expect(() => readPort('cmd', 'bridge', { WR_BRIDGE_PORT: '9002', BRIDGE_PORT: '9003' })).toThrow('cmd: WR_BRIDGE_PORT=9002 and BRIDGE_PORT=9003 disagree; set only WR_BRIDGE_PORT');
  });

  it('checks ports before anything starts: 0 is never a clash, one port twice is', async () => {
    const zero = (name: 'origin' | 'redis') => readPort('cmd', name, { WR_ORIGIN_PORT: '0', WR_REDIS_PORT: '0' });
    await expect(checkPorts('cmd', [zero('origin'), zero('redis')])).resolves.toBeUndefined();
    const error = await checkPorts('cmd', [readPort('cmd', 'host', { PORT: '9004' }), readPort('cmd', 'bridge', { WR_BRIDGE_PORT: '9004' })]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LocalPortError);
    expect(error).toMatchObject({ code: 'ERR_PORT_TWICE' });
  });

  it("points the manifest copy's backends at this run and its files at the project", () => {
    const manifest = [
      '[setup.backends.origin]',
      'address = "origin.example.com"',
      '[local_server.backends.origin]',
      'url = "http://127.0.0.1:7677/"   # the demo origin',
      '[local_server.backends.upstash]',
      'url = "http://127.0.0.1:8079/"',
      '[local_server.config_stores.wr_config]',
      'file = "bin/local-config.json"',
      '[local_server.secret_stores.wr_secrets]',
      'file = "bin/local-secrets.json"',
    ].join('\n');
    const copy = localServerManifest(manifest, {
      root: '/project',
      backends: { origin: 'http://127.0.0.1:9001/', upstash: 'http://127.0.0.1:9002/' },
      files: { 'bin/local-config.json': '/run/local-config.json' },
    });
    expect(copy.split('\n')).toEqual([
      '[setup.backends.origin]',
      'address = "origin.example.com"',
      '[local_server.backends.origin]',
      'url = "http://127.0.0.1:9001/"   # the demo origin',
      '[local_server.backends.upstash]',
      'url = "http://127.0.0.1:9002/"',
      '[local_server.config_stores.wr_config]',
      'file = "/run/local-config.json"',
      '[local_server.secret_stores.wr_secrets]',
      'file = "/project/bin/local-secrets.json"',
    ]);
    expect(() => localServerManifest('[local_server.backends.origin]\nurl = "http://x/"', { root: '/p', backends: { origin: 'http://a/', upstash: 'http://b/' } })).toThrow(
      'fastly.toml has no url line under [local_server.backends.upstash] to point at this run',
    );
    // The further databases' backends (store_shards above 1): declared at the end when absent,
    // moved like the others when the manifest has them, never declared twice.
    const added = localServerManifest(manifest, {
      root: '/project',
      backends: { origin: 'http://127.0.0.1:9001/', upstash: 'http://127.0.0.1:9002/' },
      added: { upstash_2: 'http://127.0.0.1:9003/', upstash_3: 'http://127.0.0.1:9004/' },
    });
    expect(added.split('\n').slice(10)).toEqual(['', '[local_server.backends.upstash_2]', 'url = "http://127.0.0.1:9003/"', '', '[local_server.backends.upstash_3]', 'url = "http://127.0.0.1:9004/"', '']);
    const declared = `${manifest}\n[local_server.backends.upstash_2]\nurl = "http://127.0.0.1:8080/"\n`;
    const moved = localServerManifest(declared, { root: '/project', backends: { upstash: 'http://127.0.0.1:9002/' }, added: { upstash_2: 'http://127.0.0.1:9003/' } });
    expect(moved.match(/upstash_2/g)).toHaveLength(1);
    expect(moved).toContain('[local_server.backends.upstash_2]\nurl = "http://127.0.0.1:9003/"');
    expect(() => localServerManifest(`${manifest}\n[local_server.backends.upstash_2]\n`, { root: '/p', backends: {}, added: { upstash_2: 'http://a/' } })).toThrow(
      'fastly.toml has no url line under [local_server.backends.upstash_2] to point at this run',
    );
  });
});
