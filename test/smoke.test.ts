/**
 * `npm run smoke`: the check an operator runs against a deployed service. It must pass on a
 * working deployment and fail, saying why, on the broken ones an operator will meet: nothing
 * deployed (a bare origin), the store unreachable, a wrong API token.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseArguments, report, runSmoke, type SmokeOptions, type SmokeResult } from '../src/node/smoke';
import { ADMIN_PASSWORD, API_TOKEN } from './support/fixtures';
import { findComputeHost, PROJECT_ROOT } from './support/compute-host';
import { freePort } from '../src/node/host';
import { startNodeStack, type Stack } from './support/stack';

const outcomes = (results: readonly SmokeResult[]) => Object.fromEntries(results.map((r) => [r.name, r.outcome]));

function options(base: string, extra: Partial<SmokeOptions> = {}): SmokeOptions {
  return { base, path: '/', prefix: '/__wr/', adminUser: 'admin', adminPassword: ADMIN_PASSWORD, apiToken: API_TOKEN, timeoutMs: 5_000, ...extra };
}

describe('the smoke check against the Node host', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startNodeStack();
  });
  afterAll(async () => stack.close());

  it('passes every check on a working deployment, letting one visitor in with a one-use VIP code', async () => {
    const results = await runSmoke(options(stack.url));
    expect(outcomes(results)).toEqual({ health: 'pass', visitor: 'pass', status: 'pass', admin: 'pass', jwks: 'pass', admitted: 'pass' });
    expect(results.find((r) => r.name === 'visitor')?.detail).toMatch(/the holding page/);
    expect(report(results)).toEqual({ lines: expect.arrayContaining(['smoke check: 6 passed, 0 failed']), status: 0 });
    // The VIP code let in a visitor of its own: nobody waiting was moved.
    const stats = await fetch(`${stack.url}/__wr/api/stats`, { headers: { authorization: `Bearer ${API_TOKEN}` } }).then((r) => r.json() as Promise<{ cursor: number }>);
    expect(stats.cursor).toBe(0);
  });

  it('fails the admission check with a wrong API token, and skips it without one', async () => {
    const wrong = await runSmoke(options(stack.url, { apiToken: 'x'.repeat(40) }));
    expect(outcomes(wrong)['admitted']).toBe('fail');
    expect(wrong.find((r) => r.name === 'admitted')?.detail).toMatch(/POST \/__wr\/api\/vip: 401/);
    expect(report(wrong).status).toBe(1);
    const without = await runSmoke(options(stack.url, { apiToken: undefined, adminPassword: undefined }));
    expect(outcomes(without)).toMatchObject({ admin: 'pass', admitted: 'skip' });
    expect(report(without).status).toBe(0);
  });

  it('fails when the store cannot be reached, while visitors are still held (never a 5xx)', async () => {
    await stack.stopBridge();
    try {
      const results = await runSmoke(options(stack.url));
      expect(outcomes(results)).toMatchObject({ health: 'pass', visitor: 'pass', admitted: 'fail' });
      expect(results.find((r) => r.name === 'admitted')?.detail).toMatch(/503/);
    } finally {
      await stack.startBridge();
    }
  });
});

const computeHost = findComputeHost();

describe.skipIf(!computeHost.found)('the smoke check against the local deployment, npm run serve:fastly', () => {
  // The real command in a copy of the project (its own bin/, so the suite's other builds are
  // untouched): it builds the wasm and serves it with fastly compute serve, the demo origin, the
  // bridge and a redis-server of its own, every port a free one.
  let project: string;
  let child: ChildProcess;
  let output = '';
  let url: string;
  beforeAll(async () => {
    if (!computeHost.found) return;
    project = mkdtempSync(join(tmpdir(), 'wr-serve-smoke-'));
    for (const dir of ['src', 'templates']) cpSync(join(PROJECT_ROOT, dir), join(project, dir), { recursive: true });
    for (const file of ['package.json', 'fastly.toml', 'devconfig.json']) copyFileSync(join(PROJECT_ROOT, file), join(project, file));
    symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(project, 'node_modules'));
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    child = spawn('npm', ['run', 'serve:fastly'], {
      cwd: project,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, PORT: String(port), WR_ORIGIN_PORT: '0', WR_BRIDGE_PORT: '0', WR_REDIS_PORT: '0', VICEROY_PATH: computeHost.path, FASTLY_DISABLE_WASM_METRICS: '1' },
    });
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const deadline = Date.now() + 180_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`npm run serve:fastly exited (${child.exitCode}):\n${output}`);
      if (Date.now() > deadline) throw new Error(`npm run serve:fastly did not answer within 180 s:\n${output}`);
      const up = await fetch(`${url}/__wr/health`).then((r) => r.ok, () => false);
      if (up) break;
      await new Promise((r) => setTimeout(r, 500));
    }
  }, 200_000);
  afterAll(async () => {
    if (child?.pid !== undefined && child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      process.kill(-child.pid, 'SIGTERM');
      await exited;
    }
    if (project !== undefined) rmSync(project, { recursive: true, force: true });
  }, 30_000);

  it('passes every check with the dev credentials of devconfig.json, a VIP visitor reaching the demo origin through the wasm', async () => {
    const dev = JSON.parse(readFileSync(join(PROJECT_ROOT, 'devconfig.json'), 'utf8')) as { dev_secrets: Record<string, string> };
    const results = await runSmoke(options(url, { adminPassword: dev.dev_secrets['admin_password'], apiToken: dev.dev_secrets['admin_api_token'] }));
    expect(outcomes(results), JSON.stringify(results, null, 1)).toEqual({ health: 'pass', visitor: 'pass', status: 'pass', admin: 'pass', jwks: 'pass', admitted: 'pass' });
    expect(report(results).status).toBe(0);
  });
});

describe('the smoke check against something that is not the waiting room', () => {
  let bare: Server;
  let url: string;
  beforeAll(async () => {
    // An origin with no waiting room in front: what a deploy that never took looks like.
    bare = createServer((_, response) => response.writeHead(200, { 'content-type': 'text/html' }).end('<html>shop</html>'));
    await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(bare.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => bare.close(() => resolve())));

  it('fails health, visitor, status, admin and jwks', async () => {
    const results = await runSmoke(options(url, { apiToken: undefined }));
    expect(outcomes(results)).toMatchObject({ health: 'fail', visitor: 'fail', status: 'fail', admin: 'fail', jwks: 'fail' });
    expect(results.find((r) => r.name === 'visitor')?.detail).toMatch(/without a queue cookie/);
    expect(report(results).status).toBe(1);
  });

  it('fails, with the reason, when nothing listens', async () => {
    const results = await runSmoke(options('http://127.0.0.1:1', { apiToken: undefined }));
    expect(results.every((r) => r.outcome === 'fail' || r.outcome === 'skip')).toBe(true);
    expect(results[0]?.detail).toMatch(/fetch failed|ECONNREFUSED/);
  });
});

describe('the smoke command line', () => {
  it('reads a URL, a path and a prefix, and the credentials from the environment', () => {
    expect(parseArguments(['https://shop.example', '--path', '/tickets/', '--prefix', '/__q'], { WR_SMOKE_ADMIN_PASSWORD: 'pw', WR_SMOKE_API_TOKEN: '' })).toEqual({
      base: 'https://shop.example',
      path: '/tickets/',
      prefix: '/__q/',
      adminUser: 'admin',
      adminPassword: 'pw',
      apiToken: undefined,
      timeoutMs: 10_000,
    });
  });

  it('refuses what it cannot use, saying what it wants', () => {
    expect(parseArguments([], {})).toMatch(/^usage: npm run smoke -- <site URL/);
    expect(parseArguments(['ftp://shop.example'], {})).toMatch(/not an http\(s\) URL/);
    expect(parseArguments(['shop'], {})).toMatch(/is not a URL/);
    expect(parseArguments(['https://shop.example', '--path', 'tickets'], {})).toMatch(/--path needs a path/);
    expect(parseArguments(['https://shop.example', '--bogus'], {})).toMatch(/unknown argument --bogus/);
  });
});
