/**
 * `npm run bench`: store round trips per request class against the budgets of DESIGN.md, and the
 * latency the waiting room adds over a bare pass-through proxy, in one bounded run.
 *
 * Everything runs on 127.0.0.1 and is started and stopped here:
 *   - redis-server (test harness, own free port)        child process
 *   - Upstash REST bridge over it + the demo origin       worker thread "backends"
 *   - the Node host with the REAL UpstashQueueStore, and
 *     a bare pass-through proxy (startHost + forward)     main thread (the "edge")
 *   - the load generator for the latency runs             worker thread "load"
 * so the edge's event loop runs only the two hosts, not the client or the backends.
 *
 * Store round trips are counted twice, independently:
 *   - HTTP requests the Upstash client sends to the bridge (a counting wrapper around the global
 *     `fetch`, which `@upstash/redis` calls for every request attempt, retries included);
 *   - script commands Redis executed (INFO commandstats: calls + rejected_calls of EVALSHA,
 *     EVAL and their _RO forms), before and after each phase.
 *
 * The same request classes then run through bin/main.wasm on a Compute host (Viceroy, or the
 * stand-in beside the project; see test/support/compute-host.ts), started here with the real Fastly
 * CLI (`fastly compute serve --skip-build --viceroy-path …`) over a second, separate harness:
 *   - its own redis-server                                child process
 *   - its own Upstash bridge + demo origin                a second "backends" worker thread
 *   - a counting HTTP proxy in front of that bridge       main thread
 *   - the Fastly CLI and the host it starts               child process group (killed as a group)
 * The wasm runs in the host's process, so a fetch wrapper here cannot see its store requests: its
 * `upstash` backend points at the counting proxy, which counts every HTTP request that reaches the
 * bridge, and that harness's own Redis gives the INFO commandstats count, as on the Node side.
 * When no Compute host is found, the wasm column is skipped (with the reason) and only the Node
 * budgets decide the exit code.
 *
 * The bundle (bin/bench.mjs) is also the workers' entry: `workerData.role` picks the part to run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { createServer as createNetServer } from 'node:net';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import type { Config } from '../../src/core/config';
import { startDemoOrigin } from '../../src/node/demo-origin';
import { startHost, type RunningServer } from '../../src/node/host';
import { startUpstashBridge } from '../../src/node/upstash-bridge';
import { buildWaitingRoom } from '../../src/node/waiting-room';
import { createHttpOrigin, readLocalConfig } from '../../src/platform/node';
import { createUpstashClientOptions, UpstashQueueStore } from '../../src/store/upstash-store';
import { findComputeHost, PROJECT_ROOT, type ComputeHost } from '../support/compute-host';
import { startRedisServer } from '../support/redis-server';

// ---------------------------------------------------------------------------------------------
// Parameters (all loops are bounded by these and by the deadlines below)

/** Requests per class in the round-trip count. */
const COUNT_PER_CLASS = 200;
/** Concurrency of the count phase and of the main latency run. */
const CONCURRENCY = 8;
/** Latency run: warm-up per arm, then rounds × per-round requests per arm, arms interleaved. */
const LATENCY_RUNS: readonly { concurrency: number; warmup: number; rounds: number; perRound: number }[] = [
  { concurrency: CONCURRENCY, warmup: 300, rounds: 10, perRound: 200 },
  { concurrency: 1, warmup: 100, rounds: 5, perRound: 100 },
];
const PATH = '/products';
const REQUEST_TIMEOUT_MS = 10_000;
/** The whole run is abandoned (and everything stopped) past this. */
const WATCHDOG_MS = 110_000;
/** Budget of one latency run; requests past it are not sent and the run is reported truncated. */
const LATENCY_RUN_BUDGET_MS = 35_000;
/** Wasm arm: requests per class in the round-trip count (fewer: every request instantiates the wasm). */
const WASM_COUNT_PER_CLASS = 50;
/** Wasm arm: concurrency of the count (the stand-in runs 4 instances at once by default). */
const WASM_CONCURRENCY = 4;
/** Wasm latency run, the stand-in's numbers only: concurrency 1, warm-up per arm, rounds × per-round per arm. */
const WASM_LATENCY_RUN = { concurrency: 1, warmup: 10, rounds: 5, perRound: 20 } as const;
const WASM_LATENCY_BUDGET_MS = 20_000;
/** Building bin/main.wasm and starting `fastly compute serve`, each. */
const WASM_BUILD_TIMEOUT_MS = 60_000;
const HOST_START_TIMEOUT_MS = 30_000;

// ---------------------------------------------------------------------------------------------
// Messages between the threads

interface BackendsInput {
  readonly role: 'backends';
  readonly redisUrl: string;
  readonly token: string;
}
interface LoadInput {
  readonly role: 'load';
}
type WorkerInput = BackendsInput | LoadInput;

type BackendsReply = { type: 'ready'; originUrl: string; bridgeUrl: string } | { type: 'stopped' } | { type: 'error'; message: string };

interface ArmSpec {
  readonly name: string;
  readonly url: string;
  /** Cookie headers, used in turn. */
  readonly cookies: readonly string[];
  readonly expectStatus: number;
  /** True when the demo origin must have answered (its `x-origin: demo` header). */
  readonly expectOrigin: boolean;
}
interface LoadPlan {
  readonly arms: readonly ArmSpec[];
  readonly warmup: number;
  readonly rounds: number;
  readonly perRound: number;
  readonly concurrency: number;
  readonly budgetMs: number;
}
interface ArmSample {
  readonly name: string;
  /** Latencies in ms of the measured (not warm-up) requests that succeeded. */
  readonly latencies: number[];
  /** Mean latency of each round, for paired per-round comparisons. */
  readonly roundMeans: number[];
  /** Time spent in this arm's measured blocks. */
  wallMs: number;
  /** Every request sent, warm-up included. */
  sent: number;
  errors: number;
  firstError: string | undefined;
}
type ToWorker = { type: 'run'; plan: LoadPlan } | { type: 'stop' };
type LoadReply = { type: 'result'; arms: ArmSample[]; truncated: boolean } | { type: 'error'; message: string } | { type: 'stopped' };

// ---------------------------------------------------------------------------------------------
// Small helpers

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function log(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The worker's next message, or a rejection if it errors, exits or stays silent. */
function nextMessage<T>(worker: Worker, timeoutMs: number, what: string): Promise<T> {
  return new Promise<T>((resolvePromise, reject) => {
    const cleanup = (): void => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
    const onMessage = (message: T): void => {
      cleanup();
      resolvePromise(message);
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(new Error(`${what}: ${error.message}`));
    };
    const onExit = (code: number): void => {
      cleanup();
      reject(new Error(`${what}: worker exited with code ${code}`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`${what}: no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
  });
}

async function stopWorker(worker: Worker, what: string): Promise<void> {
  try {
    const reply = nextMessage<{ type: string }>(worker, 5_000, `stopping ${what}`);
    worker.postMessage({ type: 'stop' } satisfies ToWorker);
    await reply;
  } catch (error) {
    log(`${what} did not stop cleanly (${messageOf(error)}); terminating it`);
  }
  await worker.terminate();
}

function findProjectFile(name: string): string {
  // The bundle runs from bin/; the project root is one level up. Fall back to the working directory.
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [resolve(here, '..', name), resolve(here, '..', '..', name), resolve(process.cwd(), name)]) {
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`${name} not found next to the project`);
}

interface Reply {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

function send(agent: http.Agent, method: string, url: string, headers: http.OutgoingHttpHeaders = {}): Promise<Reply> {
  return new Promise<Reply>((resolvePromise, reject) => {
    const req = http.request(url, { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`${method} ${url}: no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** `name=value` of our cookie in a response's Set-Cookie headers. */
function cookieFrom(reply: Reply, name: string): string | undefined {
  for (const line of reply.headers['set-cookie'] ?? []) {
    const pair = line.split(';', 1)[0] ?? '';
    if (pair.startsWith(`${name}=`)) return pair;
  }
  return undefined;
}

/** The `k` claim (w: waiting, a: access) of a cookie's JWS, read without verifying. */
function tokenKind(cookie: string): string | undefined {
  const payload = cookie.slice(cookie.indexOf('=') + 1).split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    return typeof claims === 'object' && claims !== null ? String((claims as Record<string, unknown>)['k']) : undefined;
  } catch {
    return undefined;
  }
}

/** Runs `task(0..n-1)` with `concurrency` lanes; the first failure stops new tasks and is thrown. */
async function runConcurrent(n: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async (): Promise<void> => {
    while (next < n && failure === undefined) {
      const i = next++;
      try {
        await task(i);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, concurrency) }, lane));
  if (failure !== undefined) throw failure;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] ?? NaN;
}

function mean(values: readonly number[]): number {
  return values.length === 0 ? NaN : values.reduce((a, b) => a + b, 0) / values.length;
}

function median(values: readonly number[]): number {
  return percentile([...values].sort((a, b) => a - b), 50);
}

const ms = (value: number): string => (Number.isFinite(value) ? value.toFixed(2) : 'n/a');
const signedMs = (value: number): string => (Number.isFinite(value) ? `${value >= 0 ? '+' : ''}${value.toFixed(2)}` : 'n/a');

function table(header: readonly string[], align: readonly ('l' | 'r')[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, 3, ...rows.map((r) => (r[i] ?? '').length)));
  const cell = (text: string, i: number): string => (align[i] === 'r' ? text.padStart(widths[i] ?? 0) : text.padEnd(widths[i] ?? 0));
  const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => cell(c, i)).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (align[i] === 'r' ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Worker: backends (demo origin + Upstash bridge)

async function backendsWorker(input: BackendsInput): Promise<void> {
  const port = parentPort!;
  try {
    const origin = await startDemoOrigin();
    const bridge = await startUpstashBridge({ redisUrl: input.redisUrl, token: input.token });
    port.on('message', (message: ToWorker) => {
      if (message.type !== 'stop') return;
      void Promise.allSettled([origin.close(), bridge.close()]).then(() => {
        port.postMessage({ type: 'stopped' } satisfies BackendsReply);
        port.close();
      });
    });
    port.postMessage({ type: 'ready', originUrl: origin.url, bridgeUrl: bridge.url } satisfies BackendsReply);
  } catch (error) {
    port.postMessage({ type: 'error', message: messageOf(error) } satisfies BackendsReply);
  }
}

// ---------------------------------------------------------------------------------------------
// Worker: load generator

function timedGet(agent: http.Agent, url: string, cookie: string | undefined, arm: ArmSpec): Promise<{ ms: number; error?: string }> {
  return new Promise((resolvePromise) => {
    const started = performance.now();
    const done = (error?: string): void => resolvePromise({ ms: performance.now() - started, ...(error !== undefined && { error }) });
    const headers: http.OutgoingHttpHeaders = { accept: 'text/html' };
    if (cookie !== undefined) headers['cookie'] = cookie;
    const req = http.get(url, { agent, headers }, (res) => {
      let error: string | undefined;
      if (res.statusCode !== arm.expectStatus) error = `status ${String(res.statusCode)}, expected ${arm.expectStatus}`;
      else if ((res.headers['x-origin'] === 'demo') !== arm.expectOrigin) error = arm.expectOrigin ? 'not from the origin' : 'unexpectedly from the origin';
      res.on('error', (e) => done(e.message));
      res.on('end', () => done(error));
      res.resume();
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', (e) => done(e.message));
  });
}

async function runPlan(plan: LoadPlan): Promise<{ arms: ArmSample[]; truncated: boolean }> {
  const deadline = Date.now() + plan.budgetMs;
  let truncated = false;
  const agents = plan.arms.map(() => new http.Agent({ keepAlive: true, maxSockets: plan.concurrency }));
  const turn = plan.arms.map(() => 0);
  const samples: ArmSample[] = plan.arms.map((arm) => ({
    name: arm.name,
    latencies: [],
    roundMeans: [],
    wallMs: 0,
    sent: 0,
    errors: 0,
    firstError: undefined,
  }));

  async function block(index: number, count: number, record: boolean): Promise<void> {
    const arm = plan.arms[index]!;
    const agent = agents[index]!;
    const sample = samples[index]!;
    const latencies: number[] = [];
    let next = 0;
    const started = performance.now();
    const lane = async (): Promise<void> => {
      while (next < count) {
        if (Date.now() > deadline) {
          truncated = true;
          return;
        }
        next++;
        const cookie = arm.cookies.length === 0 ? undefined : arm.cookies[turn[index]!++ % arm.cookies.length];
        const result = await timedGet(agent, arm.url, cookie, arm);
        sample.sent++;
        if (result.error !== undefined) {
          sample.errors++;
          sample.firstError ??= result.error;
        } else if (record) {
          latencies.push(result.ms);
        }
      }
    };
    await Promise.all(Array.from({ length: plan.concurrency }, lane));
    if (!record) return;
    sample.wallMs += performance.now() - started;
    sample.latencies.push(...latencies);
    sample.roundMeans.push(mean(latencies));
  }

  try {
    for (let i = 0; i < plan.arms.length; i++) await block(i, plan.warmup, false);
    for (let round = 0; round < plan.rounds && !truncated; round++) {
      // Rotate the order each round, so no arm always runs first (or right after another).
      for (let k = 0; k < plan.arms.length; k++) await block((round + k) % plan.arms.length, plan.perRound, true);
    }
  } finally {
    for (const agent of agents) agent.destroy();
  }
  return { arms: samples, truncated };
}

function loadWorker(): void {
  const port = parentPort!;
  port.on('message', (message: ToWorker) => {
    if (message.type === 'stop') {
      port.postMessage({ type: 'stopped' } satisfies LoadReply);
      port.close();
      return;
    }
    runPlan(message.plan).then(
      (result) => port.postMessage({ type: 'result', ...result } satisfies LoadReply),
      (error: unknown) => port.postMessage({ type: 'error', message: messageOf(error) } satisfies LoadReply),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// Main: the edge (both hosts), the counts and the report

/** Sums what Redis executed of the script commands (EVALSHA, EVAL and their _RO forms). */
async function redisScriptCalls(redis: IORedis): Promise<number> {
  const info = await redis.info('commandstats');
  let total = 0;
  for (const line of info.split(/\r?\n/)) {
    const match = /^cmdstat_(evalsha|eval|evalsha_ro|eval_ro):(.*)$/.exec(line);
    if (match === null) continue;
    for (const field of (match[2] ?? '').split(',')) {
      const [key, value] = field.split('=');
      if (key === 'calls' || key === 'rejected_calls') total += Number(value ?? 0);
    }
  }
  return total;
}

interface ClassRow {
  readonly label: string;
  readonly requests: number;
  readonly http: number;
  readonly redis: number;
  readonly budget: number | undefined;
}

async function main(): Promise<number> {
  const startedAt = performance.now();
  const cleanups: { name: string; run: () => Promise<unknown> }[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanup = (): Promise<void> =>
    (cleaning ??= (async () => {
      while (cleanups.length > 0) {
        const step = cleanups.pop()!;
        try {
          await withTimeout(step.run(), 6_000, `stopping ${step.name}`);
        } catch (error) {
          log(`could not stop ${step.name}: ${messageOf(error)}`);
        }
      }
    })());
  const watchdog = setTimeout(() => {
    log(`gave up after ${WATCHDOG_MS / 1000} s; stopping everything`);
    void cleanup().finally(() => process.exit(3));
  }, WATCHDOG_MS);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void cleanup().finally(() => process.exit(130)));
  }

  try {
    // --- Harness: redis-server, then the bridge and the demo origin in their own thread.
    const redisServer = await startRedisServer();
    cleanups.push({ name: 'redis-server', run: () => redisServer.stop() });
    const bundle = fileURLToPath(import.meta.url);
    const token = `bench-${randomUUID()}`;
    const backends = new Worker(bundle, { workerData: { role: 'backends', redisUrl: redisServer.url, token } satisfies WorkerInput });
    cleanups.push({ name: 'backends worker (bridge, demo origin)', run: () => stopWorker(backends, 'backends worker') });
    const ready = await nextMessage<BackendsReply>(backends, 20_000, 'backends worker');
    if (ready.type !== 'ready') throw new Error(`backends worker: ${ready.type === 'error' ? ready.message : ready.type}`);
    const { originUrl, bridgeUrl } = ready;

    const stats = new IORedis(redisServer.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    stats.on('error', () => {});
    await stats.connect();
    cleanups.push({ name: 'stats connection', run: () => stats.quit().catch(() => stats.disconnect()) });
    const redisVersion = /redis_version:(\S+)/.exec(await stats.info('server'))?.[1] ?? '?';

    // --- Count 1: every HTTP request attempt the Upstash client makes to the bridge.
    const realFetch = globalThis.fetch;
    let bridgeRequests = 0;
    const countingFetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      if (url.startsWith(bridgeUrl)) bridgeRequests++;
      return realFetch(input, init);
    };
    globalThis.fetch = countingFetch as typeof fetch;
    cleanups.push({ name: 'fetch counter', run: async () => void (globalThis.fetch = realFetch) });
    // --- Count 2: script commands Redis executed.
    const snapshot = async (): Promise<{ http: number; redis: number }> => ({ http: bridgeRequests, redis: await redisScriptCalls(stats) });

    // --- The edge: the waiting room with the real Upstash store, and a bare proxy beside it.
    const local = readLocalConfig(findProjectFile('devconfig.json'));
    const settingOverrides: Record<string, string> = { upstash_url: bridgeUrl, admit_per_period: '0', store_failure: 'hold' };
    const secretOverrides: Record<string, string> = { upstash_token: token };
    const room = buildWaitingRoom({
      settings: (key) => settingOverrides[key] ?? local.settings(key),
      secrets: (key) => secretOverrides[key] ?? local.secrets(key),
      originUrl,
      // Request logging off in both hosts alike: the bench measures the request path, not stdout.
      logger: { log: () => {} },
      store: (config, secrets) =>
        new UpstashQueueStore({
          redis: new Redis(createUpstashClientOptions({ url: config.upstashUrl ?? '', token: secrets.upstashToken ?? '', retries: config.storeRetries })),
        }),
    });
    const { config } = room;
    const apiToken = room.secrets.adminApiToken;
    if (apiToken === undefined) throw new Error('devconfig.json sets no admin_api_token; the admin admit class needs it');
    const wr = await startHost(room.handler);
    cleanups.push({ name: 'waiting room host', run: () => wr.close() });
    const bareOrigin = createHttpOrigin(originUrl);
    const proxy: RunningServer = await startHost((request) => bareOrigin.forward(request));
    cleanups.push({ name: 'bare proxy host', run: () => proxy.close() });
    log(`redis ${redisServer.url}, bridge ${bridgeUrl}, origin ${originUrl}, waiting room ${wr.url}, bare proxy ${proxy.url}`);

    // --- Store round trips per request class.
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
    cleanups.push({ name: 'client agent', run: async () => agent.destroy() });
    const page = `${wr.url}${PATH}`;
    const admitUrl = `${wr.url}${config.pathPrefix}api/admit?count=1`;
    const isHolding = (r: Reply): boolean => r.status === config.holdStatus && r.headers['refresh'] !== undefined && r.headers['x-origin'] === undefined;
    const isOrigin = (r: Reply): boolean => r.status === 200 && r.headers['x-origin'] === 'demo';
    const expect = (ok: boolean, what: string, r: Reply): void => {
      if (!ok) throw new Error(`${what}: unexpected answer ${r.status} ${JSON.stringify(r.headers)} ${r.body.slice(0, 200)}`);
    };

    const newVisitor = async (): Promise<string> => {
      const r = await send(agent, 'GET', page);
      const cookie = cookieFrom(r, config.cookieName);
      expect(isHolding(r) && cookie !== undefined && tokenKind(cookie) === 'w', 'new visitor: holding page with a waiting ticket', r);
      return cookie!;
    };
    const waitingPoll = async (cookie: string): Promise<void> => {
      const r = await send(agent, 'GET', page, { cookie });
      const renewed = cookieFrom(r, config.cookieName);
      expect(isHolding(r) && renewed !== undefined && tokenKind(renewed) === 'w', 'waiting poll: holding page', r);
    };
    const upgradePoll = async (cookie: string): Promise<string> => {
      const r = await send(agent, 'GET', page, { cookie });
      const access = cookieFrom(r, config.cookieName);
      expect(isOrigin(r) && access !== undefined && tokenKind(access) === 'a', 'called poll: origin page with an access token', r);
      return access!;
    };
    const admitted = async (cookie: string): Promise<void> => {
      const r = await send(agent, 'GET', page, { cookie });
      expect(isOrigin(r) && cookieFrom(r, config.cookieName) === undefined, 'admitted visitor: origin page, cookie untouched', r);
    };
    const adminAdmit = async (): Promise<void> => {
      const r = await send(agent, 'POST', admitUrl, { authorization: `Bearer ${apiToken}` });
      let body: unknown;
      try {
        body = JSON.parse(r.body);
      } catch {
        body = undefined;
      }
      expect(r.status === 200 && (body as { admitted?: unknown } | undefined)?.admitted === 1, 'admin admit: 200 with admitted 1', r);
    };

    const measure = async (label: string, budget: number | undefined, n: number, task: (i: number) => Promise<void>): Promise<ClassRow> => {
      const before = await snapshot();
      await runConcurrent(n, CONCURRENCY, task);
      const after = await snapshot();
      return { label, requests: n, http: after.http - before.http, redis: after.redis - before.redis, budget };
    };

    log('counting store round trips per request class');
    // Cold script cache: a fresh Redis knows no script, so the first call of each one is EVALSHA,
    // NOSCRIPT, then EVAL. Reported apart; it happens once per script after a flush.
    let firstCookie = '';
    const cold: ClassRow[] = [
      await measure('new visitor (join)', undefined, 1, async () => void (firstCookie = await newVisitor())),
      await measure('waiting poll (poll)', undefined, 1, () => waitingPoll(firstCookie)),
      await measure('admin admit (admit)', undefined, 1, adminAdmit),
    ];
    const n = COUNT_PER_CLASS;
    const waiting: string[] = new Array<string>(n).fill('');
    const access: string[] = new Array<string>(n).fill('');
    const rows: ClassRow[] = [];
    rows.push(await measure('new visitor (no cookie)', 1, n, async (i) => void (waiting[i] = await newVisitor())));
    rows.push(await measure('waiting visitor poll (holding cookie)', 1, n, (i) => waitingPoll(waiting[i]!)));
    // Let exactly these n visitors in (the cold phase admitted ticket 1), one admit call each.
    rows.push(await measure('admin / origin admit (POST api/admit)', 1, n, adminAdmit));
    rows.push(await measure('waiting visitor poll, called (upgrade to access)', 1, n, async (i) => void (access[i] = await upgradePoll(waiting[i]!))));
    rows.push(await measure('admitted visitor (access cookie)', 0, n, (i) => admitted(access[i]!)));

    // --- Added latency. Fresh waiting visitors, behind the cursor, for the poll arm.
    const latencyWaiting: string[] = [];
    for (let i = 0; i < CONCURRENCY; i++) latencyWaiting.push(await newVisitor());
    const accessCookies = access.slice(0, CONCURRENCY);
    const arms: ArmSpec[] = [
      // The same Cookie header on every pass-through arm, so the requests are byte for byte alike.
      { name: 'origin, direct (no proxy)', url: `${originUrl}${PATH}`, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
      { name: 'bare proxy (startHost + forward)', url: `${proxy.url}${PATH}`, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
      { name: 'waiting room: admitted (token check)', url: page, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
      { name: 'waiting room: waiting poll (1 store trip)', url: page, cookies: latencyWaiting, expectStatus: config.holdStatus, expectOrigin: false },
    ];
    const load = new Worker(bundle, { workerData: { role: 'load' } satisfies WorkerInput });
    cleanups.push({ name: 'load worker', run: () => stopWorker(load, 'load worker') });

    const latencyReports: string[] = [];
    let latencyFailed = false;
    for (const run of LATENCY_RUNS) {
      log(`latency: concurrency ${run.concurrency}, ${run.warmup} warm-up + ${run.rounds} × ${run.perRound} per arm`);
      const before = await snapshot();
      const reply = nextMessage<LoadReply>(load, LATENCY_RUN_BUDGET_MS + 20_000, 'load worker');
      load.postMessage({ type: 'run', plan: { arms, ...run, budgetMs: LATENCY_RUN_BUDGET_MS } } satisfies ToWorker);
      const result = await reply;
      if (result.type !== 'result') throw new Error(`load worker: ${result.type === 'error' ? result.message : result.type}`);
      const after = await snapshot();
      const report = latencyReport(run, result.arms, result.truncated, after.http - before.http, after.redis - before.redis);
      latencyReports.push(report.text);
      latencyFailed ||= report.failed;
    }

    // --- Report.
    let failed = false;
    const verdict = (row: ClassRow): string => {
      if (row.budget === undefined) return 'info';
      const ok = row.http <= row.budget * row.requests && row.redis <= row.budget * row.requests;
      failed ||= !ok;
      return ok ? 'PASS' : 'FAIL';
    };
    const perRequest = (total: number, requests: number): string => (total / requests).toFixed(2);
    const countTable = table(
      ['request class', 'requests', 'bridge HTTP req / request', 'Redis EVALSHA+EVAL / request', 'budget', 'result'],
      ['l', 'r', 'r', 'r', 'r', 'l'],
      rows.map((row) => [row.label, String(row.requests), perRequest(row.http, row.requests), perRequest(row.redis, row.requests), `≤ ${row.budget}`, verdict(row)]),
    );
    const disagree = rows.filter((row) => row.http !== row.redis);
    const cpus = os.cpus();
    const out: string[] = [
      '## Benchmark (`npm run bench`)',
      '',
      `Machine: ${cpus.length} CPUs (${cpus[0]?.model.trim() ?? 'unknown model'}), ${os.platform()} ${os.arch()}, Node ${process.version}, ` +
        `redis-server ${redisVersion}, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the end. ` +
        'Everything on 127.0.0.1: redis-server, the Upstash REST bridge over it, the demo origin, the Node host with the real ' +
        '`UpstashQueueStore` (`@upstash/redis` client, `createUpstashClientOptions`), a bare pass-through proxy.',
      '',
      `### Store round trips per request (${COUNT_PER_CLASS} requests per class, concurrency ${CONCURRENCY}, warm script cache)`,
      '',
      countTable,
      '',
      'Counted twice, independently: HTTP requests the Upstash client sent to the bridge (a counting wrapper around `fetch`, ' +
        'retries included) and script commands Redis executed (`INFO commandstats`, calls + rejected_calls of EVALSHA/EVAL). ' +
        (disagree.length === 0
          ? 'The two counts agree on every row.'
          : `The counts DISAGREE on: ${disagree.map((r) => `${r.label} (${r.http} HTTP vs ${r.redis} Redis)`).join('; ')}.`),
      `Cold script cache (first call of each script on a fresh Redis: EVALSHA → NOSCRIPT → EVAL, once per script): ` +
        cold.map((row) => `${row.label} ${row.http} HTTP / ${row.redis} Redis`).join(', ') +
        '.',
      '',
      ...latencyReports,
      `Total run time ${((performance.now() - startedAt) / 1000).toFixed(1)} s.`,
    ];
    process.stdout.write(`${out.join('\n')}\n`);
    if (failed) log('FAIL: a store round-trip budget is exceeded');
    if (latencyFailed) log('FAIL: the latency run had errors or was cut short');
    return failed || latencyFailed ? 1 : 0;
  } finally {
    clearTimeout(watchdog);
    await cleanup();
  }
}

function latencyReport(
  run: { concurrency: number; warmup: number; rounds: number; perRound: number },
  arms: readonly ArmSample[],
  truncated: boolean,
  storeHttp: number,
  storeRedis: number,
): { text: string; failed: boolean } {
  const stats = arms.map((arm) => {
    const sorted = [...arm.latencies].sort((a, b) => a - b);
    return {
      arm,
      p50: percentile(sorted, 50),
      p95: percentile(sorted, 95),
      p99: percentile(sorted, 99),
      mean: mean(sorted),
      rps: arm.wallMs > 0 ? (arm.latencies.length / arm.wallMs) * 1000 : NaN,
    };
  });
  const base = stats[1]; // the bare proxy
  const rows = stats.map((s, i) => {
    const isBase = i === 1;
    const vsProxy = base === undefined || isBase;
    // Paired per round: this arm's round mean minus the proxy's mean of the same round.
    const perRound = base === undefined ? [] : s.arm.roundMeans.map((m, r) => m - (base.arm.roundMeans[r] ?? NaN));
    return [
      s.arm.name,
      String(s.arm.latencies.length),
      ms(s.p50),
      ms(s.p95),
      ms(s.p99),
      ms(s.mean),
      Number.isFinite(s.rps) ? s.rps.toFixed(0) : 'n/a',
      vsProxy ? '—' : signedMs(s.p50 - base.p50),
      vsProxy ? '—' : signedMs(s.mean - base.mean),
      vsProxy ? '—' : `${signedMs(median(perRound))} [${signedMs(Math.min(...perRound))}, ${signedMs(Math.max(...perRound))}]`,
      vsProxy ? '—' : `${(s.mean / base.mean).toFixed(2)}×`,
    ];
  });
  const errors = arms.filter((a) => a.errors > 0);
  const pollArm = arms[3];
  const expectedStore = pollArm?.sent ?? 0;
  const text = [
    `### Added latency, concurrency ${run.concurrency} (GET ${PATH}, keep-alive; ${run.warmup} warm-up then ${run.rounds} interleaved rounds × ${run.perRound} per arm)`,
    '',
    table(
      ['arm', 'requests', 'p50 ms', 'p95 ms', 'p99 ms', 'mean ms', 'req/s', 'added p50', 'added mean', 'added mean per round: median [min, max]', 'mean vs proxy'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      rows,
    ),
    '',
    '"added" = this arm minus the bare proxy (same host code, same origin, no waiting-room logic); the per-round column pairs ' +
      'each round\'s mean with the proxy\'s mean of the same round. Load generator in its own thread; origin and bridge in another.',
    `Store requests during this run: ${storeHttp} HTTP / ${storeRedis} Redis, for ${expectedStore} waiting polls sent ` +
      `(admitted and proxy arms: 0 expected)${storeHttp === expectedStore && storeRedis === expectedStore ? ' — as expected.' : ' — MISMATCH.'}` +
      (errors.length > 0 ? ` Errors: ${errors.map((a) => `${a.name} ${a.errors} (${a.firstError ?? ''})`).join('; ')}.` : '') +
      (truncated ? ` Cut short by the ${LATENCY_RUN_BUDGET_MS / 1000} s budget of a run.` : ''),
    '',
  ].join('\n');
  return { text, failed: truncated || errors.length > 0 || storeHttp !== expectedStore || storeRedis !== expectedStore };
}

// ---------------------------------------------------------------------------------------------

if (isMainThread) {
  main().then(
    (code) => process.exit(code),
    async (error: unknown) => {
      process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      await sleep(10);
      process.exit(2);
    },
  );
} else {
  const input = workerData as WorkerInput;
  if (input.role === 'backends') void backendsWorker(input);
  else loadWorker();
}
