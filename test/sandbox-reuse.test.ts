/**
 * bin/main.wasm asks Fastly to reuse its sandbox for later requests (src/platform/sandbox-reuse.ts),
 * unless built with WR_SANDBOX_REUSE=0. Shown on the real builds served by the Compute host
 * stand-in: a wasm that opted in asks the host for a next request when it has answered one (the
 * `next_request` hostcall, which the stand-in answers "unsupported", so the instance ends and the
 * next request gets a fresh one, as before); one that did not never asks. A WR_SANDBOX_REUSE that is
 * neither 0 nor 1 stops the build.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findComputeHost, PROJECT_ROOT, serveWasm, STAND_IN_HOST } from './support/compute-host';
import { ADMIN_PASSWORD, API_TOKEN } from './support/fixtures';
import { runCommand, type RunResult } from './support/run-command';
import { startWasmStack, type Stack } from './support/stack';
import type { RequestLog } from '../src/core/ports';

const BUILD = resolve(PROJECT_ROOT, 'src/node/build.mjs');
const work = mkdtempSync(join(tmpdir(), 'wr-reuse-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function buildInto(dir: string, reuse: string | undefined): Promise<RunResult> {
  const env = { ...process.env };
  delete env['WR_SANDBOX_REUSE'];
  if (reuse !== undefined) env['WR_SANDBOX_REUSE'] = reuse;
  return runCommand(process.execPath, [BUILD, 'fastly', '--out', dir], { cwd: PROJECT_ROOT, env, timeoutMs: 180_000 });
}

/** Serves `wasm` on the stand-in with --trace, sends one request, and returns the hostcalls it made. */
async function hostcallsOfOneRequest(wasm: string): Promise<Record<string, number>> {
  const host = await serveWasm(wasm, ['--trace']);
  try {
    const response = await fetch(`${host.url}/products`, { signal: AbortSignal.timeout(30_000) });
    await response.text();
    // The trace line comes when the instance has finished, which may be just after the response.
    const deadline = Date.now() + 10_000;
    let line: RegExpExecArray | null = null;
    while ((line = /request\{id=0\}: hostcalls (\{.*\})/.exec(host.output())) === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    if (line?.[1] === undefined) throw new Error(`no hostcall trace for the request:\n${host.output()}`);
    return JSON.parse(line[1]) as Record<string, number>;
  } finally {
    await host.stop();
  }
}

describe('reusable sandboxes in bin/main.wasm', () => {
  it.skipIf(!existsSync(STAND_IN_HOST))(
    'the default build asks the host for a next request after answering one; WR_SANDBOX_REUSE=0 never does',
    async () => {
      const reused = join(work, 'reused');
      const single = join(work, 'single');
      const [a, b] = await Promise.all([buildInto(reused, undefined), buildInto(single, '0')]);
      expect(a.code, a.stdout + a.stderr).toBe(0);
      expect(b.code, b.stdout + b.stderr).toBe(0);
      const withReuse = await hostcallsOfOneRequest(join(reused, 'main.wasm'));
      const without = await hostcallsOfOneRequest(join(single, 'main.wasm'));
      // The same request, answered the same way by both (the stand-in has no stores configured: the
      // configuration page), reads the downstream request in both; only the first asks for another.
      expect(withReuse['fastly_http_req::body_downstream_get']).toBe(1);
      expect(without['fastly_http_req::body_downstream_get']).toBe(1);
      expect(withReuse['fastly_http_downstream::next_request'], JSON.stringify(withReuse)).toBe(1);
      expect(without['fastly_http_downstream::next_request'], JSON.stringify(without)).toBeUndefined();
    },
    240_000,
  );

  it('a WR_SANDBOX_REUSE that is neither 0 nor 1 stops the build, naming the variable, before anything is written', () => {
    const dir = join(work, 'refused');
    const result = spawnSync(process.execPath, [BUILD, 'fastly', '--out', dir], { cwd: PROJECT_ROOT, env: { ...process.env, WR_SANDBOX_REUSE: 'yes' }, encoding: 'utf8', timeout: 60_000 });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('WR_SANDBOX_REUSE must be 0 (one request per sandbox) or 1 (reuse, the default), not "yes"');
    expect(existsSync(join(dir, 'main.wasm'))).toBe(false);
  });
});

/**
 * Requests of different kinds, one after another in one instance of the engine, as a reused
 * sandbox serves them (test/engine/reuse-sim.ts runs the sequence): what one request leaves behind
 * (the built service, a verified token, a carried admission, the admin page's secrets) must not
 * decide the next one's answer.
 */
describe.skipIf(!findComputeHost().found)('one instance serving a sequence of requests, as a reused sandbox does', () => {
  let stack: Stack;
  beforeAll(async () => {
    const host = findComputeHost();
    if (!host.found) return;
    stack = await startWasmStack({ viceroyPath: host.path, entry: 'reuse-sim' });
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
  });

  interface Result {
    readonly status: number;
    readonly origin: string | null;
    readonly setCookies: readonly string[];
    readonly body: string;
  }
  let sequenceMs = 0;
  async function sequence(steps: readonly Record<string, unknown>[]): Promise<Result[]> {
    const started = Date.now();
    const response = await fetch(`${stack.url}/__reuse-sim/sequence`, { method: 'POST', body: JSON.stringify({ steps }), signal: AbortSignal.timeout(60_000) });
    expect(response.status).toBe(200);
    const { results } = (await response.json()) as { results: Result[] };
    sequenceMs = Date.now() - started;
    return results;
  }
  const admin = (password: string): Record<string, string> => ({ authorization: `Basic ${btoa(`admin:${password}`)}` });

  it('a visitor joins, is let in and passes again and again; a forged token, a wrong password and a stranger get their own answers in between', async () => {
    const results = await sequence([
      { jar: 'a', path: '/products', headers: { accept: 'text/html' } },
      { method: 'POST', path: '/__wr/api/admit?count=1', headers: { authorization: `Bearer ${API_TOKEN}` } },
      { jar: 'a', path: '/products', headers: { accept: 'text/html' } },
      { jar: 'a', path: '/products', headers: { accept: 'text/html' } },
      { jar: 'forged', path: '/products', headers: { accept: 'text/html', cookie: 'waiting_room=FORGED' } },
      { path: '/__wr/admin', headers: admin(ADMIN_PASSWORD) },
      { jar: 'a', path: '/products', headers: { accept: 'text/html' } },
      { path: '/__wr/admin', headers: admin('not-the-password') },
      { jar: 'a', path: '/cart', headers: { accept: 'text/html' } },
      { jar: 'b', path: '/products', headers: { accept: 'text/html' } },
    ]);
    const [joined, admitted, first, again, forged, adminOk, afterAdmin, adminWrong, cart, stranger] = results as [Result, Result, Result, Result, Result, Result, Result, Result, Result, Result];
    // Held with a ticket, then let in by the origin's call, then through to the origin each time.
    expect(joined.origin).toBeNull();
    expect(joined.setCookies.some((c) => c.startsWith('waiting_room='))).toBe(true);
    expect(JSON.parse(admitted.body)).toMatchObject({ admitted: 1, applied: true });
    for (const pass of [first, again, afterAdmin, cart]) {
      expect(pass.status).toBe(200);
      expect(pass.origin).toBe('demo');
    }
    // A forged cookie after the genuine ones were verified (and remembered): held, never passed.
    expect(forged.origin).toBeNull();
    expect(forged.body).not.toContain('origin saw');
    // The admin page with its password, then without: the first sign-in does not carry over.
    expect(adminOk.status).toBe(200);
    expect(adminWrong.status).toBe(401);
    // A new visitor after all that is held with a ticket of its own, behind the first.
    expect(stranger.origin).toBeNull();
    expect(stranger.setCookies.some((c) => c.startsWith('waiting_room='))).toBe(true);
    // Each request logged its own decision, in order, with its number in the sandbox (a host prints
    // a line after the answer it belongs to, so the last ones are waited for).
    await expect.poll(() => stack.logs().length).toBe(10);
    const logs = stack.logs() as (RequestLog & { sandbox_request?: number; vcpu_ms?: number })[];
    expect(logs.map((l) => l.decision)).toEqual(['waiting', 'api', 'admitted', 'access', 'waiting', 'admin', 'access', 'admin', 'access', 'waiting']);
    expect(logs.map((l) => l.sandbox_request)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    // vcpu_ms is each request's own, not the sandbox's since it started: on the stand-in the
    // runtime's count is wall time since the downstream request arrived, so counts carried over
    // from earlier requests would add up to several times the whole sequence's time.
    const vcpu = logs.map((l) => l.vcpu_ms);
    for (const ms of vcpu) expect(typeof ms === 'number' && ms >= 0, JSON.stringify(vcpu)).toBe(true);
    expect(vcpu.reduce<number>((sum, ms) => sum + (ms ?? 0), 0), `${JSON.stringify(vcpu)} in a sequence of ${sequenceMs} ms`).toBeLessThanOrEqual(sequenceMs);
  }, 120_000);
});
