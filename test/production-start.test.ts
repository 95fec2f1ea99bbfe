/**
 * The Node host from a production install: a fresh clone, `npm ci --omit=dev` (no esbuild, no
 * TypeScript, no test tools), the bundle built beforehand (`npm run build:node`, on a build machine
 * or before the prune), and the production start (`node bin/node-host.mjs`, which `npm run
 * start:production` runs), which bundles nothing at start. It runs as
 * a deployment (Redis, secrets from the environment), serves, and on SIGTERM stops accepting
 * connections but finishes a 20 MiB download in flight, then exits 0.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../src/node/host';
import { PROJECT_ROOT } from './support/compute-host';
import { buildNodeBundles, deploymentEnv, hostBaseEnv } from './support/node-host-process';
import { startRedisServer, type RedisServer } from './support/redis-server';

const SIZE = 20 * 1024 * 1024;
const CHUNK = 256 * 1024;

/** An origin whose /download sends SIZE bytes: the first chunk at once, the rest once `release()` is called. */
function startSlowOrigin(): Promise<{ url: string; release(): void; expected: string; close(): Promise<void> }> {
  let release: () => void = () => {};
  const gate = new Promise<void>((open) => (release = open));
  const chunk = Buffer.alloc(CHUNK, 0x61);
  const hash = createHash('sha256');
  for (let sent = 0; sent < SIZE; sent += CHUNK) hash.update(chunk);
  const server = http.createServer(async (req, res) => {
    if (req.url !== '/download') {
      res.end('origin');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(SIZE) });
    res.write(chunk);
    await gate;
    for (let sent = CHUNK; sent < SIZE; sent += CHUNK) {
      if (!res.write(chunk)) await new Promise((drained) => res.once('drain', drained));
    }
    res.end();
  });
  return new Promise((ready) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      ready({ url: `http://127.0.0.1:${port}`, release: () => release(), expected: hash.digest('hex'), close: () => new Promise((done) => server.close(() => done())) });
    }),
  );
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): void {
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: 300_000 });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${String(result.status)}):\n${result.stdout}\n${result.stderr}`);
}

describe('a production install: no dev dependencies, no bundling at start, a graceful stop', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-production-'));
  const clone = join(dir, 'waiting-room');
  let redis: RedisServer;
  let origin: Awaited<ReturnType<typeof startSlowOrigin>>;
  beforeAll(async () => {
    run('git', ['clone', '--quiet', PROJECT_ROOT, clone], dir);
    // The build step, done where the dev dependencies are (here: this checkout), into the clone's bin/.
    buildNodeBundles(join(clone, 'bin'));
    // The production install: the runtime dependencies alone (from the local cache when it has them).
    run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], clone);
    redis = await startRedisServer();
    origin = await startSlowOrigin();
  }, 300_000);
  afterAll(async () => {
    await origin?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts from the production install, serves, and on SIGTERM finishes a 20 MiB download in flight while refusing new connections', async () => {
    // The dev dependencies are absent (esbuild itself may be there: @fastly/js-compute depends on it for its own builds).
    for (const tool of ['typescript', 'vitest', 'playwright-core', '@fastly/cli']) expect(existsSync(join(clone, 'node_modules', tool)), `${tool} is not installed`).toBe(false);
    // ...and the production start runs the bundle as it is: it builds nothing.
    const scripts = (JSON.parse(readFileSync(join(clone, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts['start:production']).toBe('node bin/node-host.mjs');
    const port = await freePort();
    // The production command itself (what `npm run start:production` runs, and what a systemd
    // unit starts): node in front, so SIGTERM reaches the host, not a shell between them.
    const child: ChildProcess = spawn(process.execPath, ['bin/node-host.mjs'], {
      cwd: clone,
      env: {
        ...hostBaseEnv(),
        ...deploymentEnv(redis.url, origin.url),
        PORT: String(port),
        WR_BYPASS_PATHS: '/download',
        SHUTDOWN_GRACE_MS: '60000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stdout!.resume();
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    try {
      await expect.poll(() => output, { timeout: 30_000 }).toContain('Visitors:');
      expect(output).toContain('Secrets:   from the environment only');
      const url = `http://127.0.0.1:${port}`;
      // It serves: a visitor's page and the health check the balancer polls.
      expect((await fetch(`${url}/products`)).status).toBe(200);
      expect(await (await fetch(`${url}/__wr/health`)).json()).toEqual({ ok: true });

      // A download starts; SIGTERM arrives while it is in flight.
      const received = createHash('sha256');
      let bytes = 0;
      const download = new Promise<void>((done, fail) => {
        http
          .get(`${url}/download`, { agent: false }, (res) => {
            res.on('data', (data: Buffer) => {
              received.update(data);
              bytes += data.length;
            });
            res.on('end', () => done());
            res.on('error', fail);
          })
          .on('error', fail);
      });
      await expect.poll(() => bytes, { timeout: 10_000 }).toBeGreaterThan(0);
      process.kill(child.pid!, 'SIGTERM');
      await expect.poll(() => output, { timeout: 10_000 }).toContain('stopping: no new connections');
      // New connections are refused while the download goes on.
      await expect(fetch(`${url}/products`, { signal: AbortSignal.timeout(5_000) })).rejects.toThrow();
      origin.release();
      await download;
      expect(bytes).toBe(SIZE);
      expect(received.digest('hex')).toBe(origin.expected);
      expect(await exited).toBe(0);
      expect(output).toContain('stopping: every request finished');
    } finally {
      origin.release();
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
    }
  }, 120_000);
});
