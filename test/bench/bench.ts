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
 * All of the above runs with the per-POP state cache off (`state_cache_seconds=0`), so each class
 * shows its full cost. A second pass then turns it on (the default lifetime), on one more host of
 * each kind (same harness, a queue of its own): a few thousand real waiting visitors (fewer on the
 * wasm), each holding the cookie of its own real join, poll every `refresh_seconds` for a fixed
 * wall-clock window, spread evenly, bounded in flight, nobody admitted. Both counts over the window
 * give store commands per poll, against window ÷ lifetime (one load per expiry in one POP), and the
 * bridge requests' timestamps give the loads per expiry: the stand-in's SimpleCache does not
 * collapse concurrent misses (Fastly's does), so the wasm's extra loads at an expiry are reported.
 *
 * The queueing-methods pass then compares, on each kind of host, the two `queue_method`s with the
 * cache at its default: a few hundred fresh waiting visitors poll the cached pass's FIFO host for a
 * fixed window, then as many poll one more host with `queue_method=random` (a queue of its own) for
 * the same window; store commands per poll of each, and their ratio. Random presence is per
 * visitor, so the per-POP cache cannot answer a random poll: one store call each.
 *
 * A capacity pass follows on one more host of each kind (same harness, a queue of its own, the
 * state cache off): `max_active` set, `activity_refresh_seconds` at its minimum, and every request
 * class of a slot's life counted the same two ways: a walk-in (the join claims the slot), a new
 * visitor when full (a ticket), an admitted visitor between refreshes (no store call) and after the
 * refresh interval (one touch for a burst of requests), the heartbeat, the leave, the origin's
 * end-of-session header, a called visitor claiming the freed slot, and the runtime control and
 * stats APIs. Fewer visitors per class on the wasm.
 *
 * Every host's request log is kept (the Node hosts: the records of requests that met a store error;
 * the Compute hosts: their `wr_log :: {json}` lines on stdout), and so are the counting proxy's own
 * errors: when a pass fails, the `store_error` and `reason` of the requests that met a store error
 * are printed with it, and the report ends with every host's count of them.
 *
 * The bundle (bin/bench.mjs) is also the workers' entry: `workerData.role` picks the part to run.
 */
import { table } from '../support/markdown-table';
import { localServerSection } from '../support/stack';
import { nextWorkerMessage } from '../support/worker-message';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import type { Config } from '../../src/core/config';
import type { RequestLog } from '../../src/core/ports';
import { startDemoOrigin } from '../../src/node/demo-origin';
import { freePort, startHost, type RunningServer } from '../../src/node/host';
import { startUpstashBridge } from '../../src/node/upstash-bridge';
import { buildWaitingRoom } from '../../src/node/waiting-room';
import { createHttpOrigin, readLocalConfig } from '../../src/platform/node';
import { STORE_SCRIPTS } from '../../src/store/scripts';
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
const WATCHDOG_MS = 240_000;
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
/**
 * Settings over devconfig.json, the same on both hosts: only the admin/origin admits visitors, a
 * store failure holds, and the per-POP state cache is off, so that every waiting poll is a cache
 * miss and the counts are the per-request cost the budgets bound (with the cache on, polls within
 * one lifetime cost nothing, and a miss that cost too much would hide among the hits).
 */
const SETTING_OVERRIDES: Readonly<Record<string, string>> = { admit_per_period: '0', store_failure: 'hold', state_cache_seconds: '0' };
/**
 * The cached pass, on a separate host of each kind: the same settings but `state_cache_seconds`
 * left at its default (the per-POP cache on), and a queue of its own so that nothing of the first
 * pass (its admitted visitors, its cursor) touches it. Nobody is admitted: no automatic admission,
 * no admin admit.
 */
const CACHED_OVERRIDES: Readonly<Record<string, string>> = { admit_per_period: '0', store_failure: 'hold', queue_name: 'bench-cached' };
/** Cached pass: the wall-clock window every host's visitors poll for. */
const CACHED_WINDOW_MS = 12_000;
/** Cached pass, Node host: waiting visitors (real joins), joins' concurrency, polls in flight at most. */
const CACHED_NODE_VISITORS = 3_000;
const CACHED_NODE_JOIN_CONCURRENCY = 16;
const CACHED_NODE_POLL_CONCURRENCY = 32;
/**
 * Cached pass, wasm: fewer visitors (the stand-in instantiates the wasm for every request; at 400
 * polling every 5 s, 80 polls/s, it fell behind the schedule on a 2-CPU machine). At most as many
 * polls in flight as the stand-in has workers (4 by default), so none waits in its queue: a host
 * that falls behind has every worker missing at once at each expiry, which the stand-in does not
 * collapse.
 */
const CACHED_WASM_VISITORS = 250;
const CACHED_WASM_JOIN_CONCURRENCY = 4;
const CACHED_WASM_POLL_CONCURRENCY = 4;
/** Cached pass verdict: store commands per poll must stay below this (≪ 1). */
const CACHED_MAX_COMMANDS_PER_POLL = 0.05;
/**
 * The queueing-methods pass: FIFO with the cache on (the cached pass's host, fresh visitors) against
 * `queue_method=random` (one more host of each kind, its own queue, the cache also at its default,
 * where it cannot help), the same number of waiting visitors polling for the same window, one
 * method after the other. Nobody is admitted. Fewer visitors on the wasm (the stand-in), and at
 * most as many polls in flight as it has workers.
 */
const RANDOM_OVERRIDES: Readonly<Record<string, string>> = { ...CACHED_OVERRIDES, queue_name: 'bench-random', queue_method: 'random' };
const METHODS_WINDOW_MS = 10_000;
const METHODS_NODE_VISITORS = 300;
const METHODS_WASM_VISITORS = 150;
/**
 * The capacity pass, on one more host of each kind: capacity mode (`max_active`), the refresh
 * interval at its minimum (5 s, so the run waits for it once per host), the state cache off (a
 * called visitor's poll then costs its 1 store call every time, deterministically), a queue of
 * its own. No automatic admission in rate terms (capacity mode requires admit_per_period=0). A
 * longer store timeout: on a loaded machine the stand-in's store requests sometimes took over the
 * default 1 s, which turns a class's answer into a store failure (an error here, not a count).
 */
const CAPACITY_OVERRIDES: Readonly<Record<string, string>> = {
  admit_per_period: '0',
  store_failure: 'hold',
  state_cache_seconds: '0',
  queue_name: 'bench-capacity',
  max_active: '50',
  activity_refresh_seconds: '5',
  store_timeout_ms: '5000',
};
/** Capacity pass: visitors per class (at most max_active: each class uses distinct visitors). */
const CAPACITY_NODE_PER_CLASS = 50;
const CAPACITY_WASM_PER_CLASS = 20;
/** Capacity pass: requests per admitted visitor after the refresh interval (the 1st touches). */
const CAPACITY_BURST = 5;
/** Capacity pass: how far past the refresh interval's end the burst starts. */
const CAPACITY_MARGIN_MS = 150;

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
/** The cached pass's polling: every visitor polls once per `intervalMs`, all polls spread evenly. */
interface PollPlan {
  readonly url: string;
  /** One `name=value` cookie per visitor; each is replaced by the renewed one the answer carries. */
  readonly cookies: readonly string[];
  readonly cookieName: string;
  readonly holdStatus: number;
  readonly intervalMs: number;
  readonly windowMs: number;
  readonly concurrency: number;
}
interface PollResult {
  /** Polls due within the window (visitors × window ÷ interval). */
  readonly scheduled: number;
  /** Polls sent within the window (the rest were due while `concurrency` were in flight). */
  readonly sent: number;
  /** Holding page with a renewed waiting cookie, as expected. */
  readonly held: number;
  /** Answers that carried an access cookie: nobody may be admitted in this pass. */
  readonly admitted: number;
  readonly errors: number;
  readonly firstError: string | undefined;
  /** Latest send after its due time. */
  readonly maxLagMs: number;
  /** Latencies of the held polls, p50 and p99. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** From the first send to the last answer. */
  readonly wallMs: number;
}
type ToWorker = { type: 'run'; plan: LoadPlan } | { type: 'poll'; plan: PollPlan } | { type: 'stop' };
type LoadReply =
  | { type: 'result'; arms: ArmSample[]; truncated: boolean }
  | { type: 'poll-result'; result: PollResult }
  | { type: 'error'; message: string }
  | { type: 'stopped' };

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


async function stopWorker(worker: Worker, what: string): Promise<void> {
  try {
    const reply = nextWorkerMessage<{ type: string }>(worker, 5_000, `stopping ${what}`);
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

function send(agent: http.Agent, method: string, url: string, headers: http.OutgoingHttpHeaders = {}, body?: string): Promise<Reply> {
  return new Promise<Reply>((resolvePromise, reject) => {
    const allHeaders = body === undefined ? headers : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers };
    const req = http.request(url, { method, agent, headers: allHeaders }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`${method} ${url}: no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
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

/** The claims of a cookie's JWS, read without verifying. */
function tokenClaims(cookie: string): Record<string, unknown> | undefined {
  const payload = cookie.slice(cookie.indexOf('=') + 1).split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    return typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The `k` claim (w: waiting, a: access) of a cookie's JWS, read without verifying. */
function tokenKind(cookie: string): string | undefined {
  const claims = tokenClaims(cookie);
  return claims === undefined ? undefined : String(claims['k']);
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

// ---------------------------------------------------------------------------------------------
// The hosts' request logs: what a store failure looked like from inside

/** A request that met a store failure: a `store_error`, an `unavailable…` decision, or a 5xx answer. */
function isTrouble(r: RequestLog): boolean {
  return r.store_error !== undefined || r.status >= 500 || r.decision.startsWith('unavailable');
}

/** One host's (or the counting proxy's) account of its store failures, for the report and for a failing pass. */
interface TroubleSource {
  readonly name: string;
  /** Lines describing what went wrong so far; empty when nothing did. */
  report(): string[];
  /** One line: how much was logged, how much of it went wrong. */
  summary(): string;
}

/** The lines of a set of troubled request records: each distinct store_error/reason with its count, then the first few requests. */
function troubleLines(name: string, records: readonly RequestLog[], logged: number): string[] {
  if (records.length === 0) return [];
  const kinds = new Map<string, number>();
  for (const r of records) {
    const key = `store_error ${JSON.stringify(r.store_error ?? null)}, reason ${JSON.stringify(r.reason ?? null)}, decision ${r.decision}, status ${r.status}`;
    kinds.set(key, (kinds.get(key) ?? 0) + 1);
  }
  const shown = 8;
  return [
    `${name}: ${records.length} of ${logged} logged request(s) met a store failure: ${[...kinds].map(([k, n]) => `${n}× (${k})`).join('; ')}`,
    ...records
      .slice(0, shown)
      .map(
        (r) =>
          `    ${r.ts} ${r.method} ${r.path} → ${r.status} ${r.decision}` +
          `${r.reason !== undefined ? ` reason=${JSON.stringify(r.reason)}` : ''}` +
          `${r.store_error !== undefined ? ` store_error=${JSON.stringify(r.store_error)}` : ''}` +
          `${r.store_ms !== undefined ? ` store_ms=${r.store_ms}` : ''}`,
      ),
    ...(records.length > shown ? [`    … and ${records.length - shown} more`] : []),
  ];
}

/** A request log kept in memory: every record counted, the troubled ones kept; and the host's own error lines. */
class RequestLogKeeper implements TroubleSource {
  #logged = 0;
  readonly #trouble: RequestLog[] = [];
  /** The host's own error lines (a Compute host's stderr: a wasm trap, a backend error), the first ones. */
  readonly #hostLines: string[] = [];
  #hostLinesSeen = 0;
  constructor(readonly name: string) {}
  add(record: RequestLog): void {
    this.#logged++;
    if (isTrouble(record)) this.#trouble.push(record);
  }
  /** Requests so far that met a store failure. */
  troubleCount(): number {
    return this.#trouble.length;
  }
  addHostLine(line: string): void {
    this.#hostLinesSeen++;
    if (this.#hostLines.length < 20) this.#hostLines.push(line.slice(0, 500));
  }
  /** A Logger for a Node host: nothing printed, nothing kept but the troubled records (a push, off the measured path's cost). */
  get logger(): { log: (record: RequestLog) => void } {
    return { log: (record) => this.add(record) };
  }
  report(): string[] {
    const rpcFault = this.#hostLines.some((line) => /rpc \w+: no reply/.test(line));
    return [
      ...(rpcFault
        ? [
            `${this.name}: DIAGNOSIS: the Compute host stand-in lost a reply between its worker and main threads ("rpc …: no reply"). ` +
              'Its worker waits with Atomics.wait and takes the reply with receiveMessageOnPort; the main thread posts the reply, stores the ' +
              'flag, then notifies. When the worker finds the flag already set, takes the reply and reaches its next rpc before that ' +
              'notify runs (both threads preempted at the wrong moments, a loaded 2-CPU machine), the late notify wakes the next wait ' +
              'with no reply yet: that hostcall fails (a body read: a store error; async_select: a trap, "wasm trapped"), and every later ' +
              'rpc of that worker gets the previous one\'s reply ("Invalid handle", "Generic error"). A fault of the stand-in, not of ' +
              'the waiting room: the store errors and traps of this host after it are its consequences.',
          ]
        : []),
      ...troubleLines(this.name, this.#trouble, this.#logged),
      ...(this.#hostLinesSeen === 0 ? [] : [`${this.name}: ${this.#hostLinesSeen} error line(s) from the host itself:`, ...this.#hostLines.map((l) => `    ${l}`)]),
      ...(this.#hostLinesSeen > this.#hostLines.length ? [`    … and ${this.#hostLinesSeen - this.#hostLines.length} more`] : []),
    ];
  }
  summary(): string {
    return (
      `${this.name}: ${this.#logged} requests logged, ${this.#trouble.length} met a store failure` +
      (this.#hostLinesSeen > 0 ? `; ${this.#hostLinesSeen} error line(s) from the host` : '')
    );
  }
}

/** Prints a source's troubles now (on stderr), for a pass that just failed; returns them for the report. */
async function printTrouble(what: string, sources: readonly TroubleSource[]): Promise<string[]> {
  // The Compute host prints its log lines from another process: give the failing request's line time to arrive.
  await sleep(300);
  const lines = sources.flatMap((source) => source.report());
  if (lines.length === 0) lines.push(`${sources.map((source) => source.name).join(', ')}: no request met a store failure (nothing in the log explains ${what})`);
  for (const line of lines) log(`${what}: ${line}`);
  return lines;
}

const ms = (value: number): string => (Number.isFinite(value) ? value.toFixed(2) : 'n/a');
const signedMs = (value: number): string => (Number.isFinite(value) ? `${value >= 0 ? '+' : ''}${value.toFixed(2)}` : 'n/a');

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

/** One waiting visitor's poll; classifies the answer and keeps the renewed cookie. */
function pollOnce(agent: http.Agent, plan: PollPlan, cookie: string): Promise<{ ms: number; outcome: 'held' | 'admitted' | 'error'; cookie?: string; error?: string }> {
  return new Promise((resolvePromise) => {
    const started = performance.now();
    const req = http.get(plan.url, { agent, headers: { accept: 'text/html', cookie } }, (res) => {
      let renewed: string | undefined;
      for (const line of res.headers['set-cookie'] ?? []) {
        const pair = line.split(';', 1)[0] ?? '';
        if (pair.startsWith(`${plan.cookieName}=`)) renewed = pair;
      }
      const kind = renewed === undefined ? undefined : tokenKind(renewed);
      let error: string | undefined;
      if (res.statusCode !== plan.holdStatus && kind !== 'a') error = `status ${String(res.statusCode)}, expected ${plan.holdStatus}`;
      else if (kind !== 'w' && kind !== 'a') error = `no renewed waiting cookie (k=${String(kind)})`;
      else if (kind === 'w' && res.headers['x-origin'] !== undefined) error = 'a waiting cookie on an answer from the origin';
      res.on('error', (e) => resolvePromise({ ms: performance.now() - started, outcome: 'error', error: e.message }));
      res.on('end', () => {
        const ms = performance.now() - started;
        if (error !== undefined) resolvePromise({ ms, outcome: 'error', error });
        else resolvePromise({ ms, outcome: kind === 'a' ? 'admitted' : 'held', ...(renewed !== undefined && { cookie: renewed }) });
      });
      res.resume();
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', (e) => resolvePromise({ ms: performance.now() - started, outcome: 'error', error: e.message }));
  });
}

/**
 * Polls for `windowMs` of wall-clock time: poll j is due at j × interval ÷ visitors and goes to
 * visitor j mod visitors, so each visitor polls once per interval and the polls are spread evenly.
 * At most `concurrency` are in flight; a poll due while they are is sent late, and polls still
 * unsent when the window closes are not sent (reported as scheduled − sent).
 */
async function runPollWindow(plan: PollPlan): Promise<PollResult> {
  const cookies = [...plan.cookies];
  const n = cookies.length;
  if (n === 0) throw new Error('poll window: no visitors');
  const spacing = plan.intervalMs / n;
  const scheduled = Math.ceil(plan.windowMs / spacing);
  const agent = new http.Agent({ keepAlive: true, maxSockets: plan.concurrency });
  const latencies: number[] = [];
  let sent = 0;
  let held = 0;
  let admitted = 0;
  let errors = 0;
  let firstError: string | undefined;
  let maxLagMs = 0;
  let next = 0;
  let inFlight = 0;
  const start = performance.now();
  try {
    await new Promise<void>((resolveDone) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      let done = false;
      const pump = (): void => {
        if (done) return;
        if (timer !== undefined) clearTimeout(timer);
        timer = undefined;
        const now = performance.now() - start;
        while (inFlight < plan.concurrency && next < scheduled && next * spacing <= now && now < plan.windowMs) {
          maxLagMs = Math.max(maxLagMs, now - next * spacing);
          const visitor = next % n;
          next++;
          inFlight++;
          sent++;
          void pollOnce(agent, plan, cookies[visitor]!).then((result) => {
            inFlight--;
            if (result.cookie !== undefined) cookies[visitor] = result.cookie;
            if (result.outcome === 'held') {
              held++;
              latencies.push(result.ms);
            } else if (result.outcome === 'admitted') {
              admitted++;
            } else {
              errors++;
              firstError ??= result.error;
            }
            pump();
          });
        }
        if (next >= scheduled || now >= plan.windowMs) {
          if (inFlight === 0) {
            done = true;
            resolveDone();
          }
          return; // the last answers pump again
        }
        if (inFlight >= plan.concurrency) return; // an answer pumps again
        timer = setTimeout(pump, Math.max(0, next * spacing - now));
      };
      pump();
    });
  } finally {
    agent.destroy();
  }
  const sorted = latencies.sort((a, b) => a - b);
  return {
    scheduled,
    sent,
    held,
    admitted,
    errors,
    firstError,
    maxLagMs,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    wallMs: performance.now() - start,
  };
}

function loadWorker(): void {
  const port = parentPort!;
  port.on('message', (message: ToWorker) => {
    if (message.type === 'stop') {
      port.postMessage({ type: 'stopped' } satisfies LoadReply);
      port.close();
      return;
    }
    if (message.type === 'poll') {
      runPollWindow(message.plan).then(
        (result) => port.postMessage({ type: 'poll-result', result } satisfies LoadReply),
        (error: unknown) => port.postMessage({ type: 'error', message: messageOf(error) } satisfies LoadReply),
      );
      return;
    }
    runPlan(message.plan).then(
      (result) => port.postMessage({ type: 'result', ...result } satisfies LoadReply),
      (error: unknown) => port.postMessage({ type: 'error', message: messageOf(error) } satisfies LoadReply),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// The request classes and their round-trip counts (the same code for both hosts)

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

/** Both counts of one host so far: bridge HTTP requests and Redis script calls. */
type Snapshot = () => Promise<{ http: number; redis: number }>;

/** One visitor per class, each checking that the answer is what its class expects. */
interface VisitorClasses {
  /** The queued page every visitor asks for. */
  readonly page: string;
  /** No cookie: holding page and a waiting ticket (`k: w`). Returns the cookie. */
  newVisitor(): Promise<string>;
  /** Waiting ticket, not called yet: holding page and a renewed waiting ticket. */
  waitingPoll(cookie: string): Promise<void>;
  /** Waiting ticket that has been called: the origin's page and an access token (`k: a`). Returns it. */
  upgradePoll(cookie: string): Promise<string>;
  /** Access token: the origin's page, cookie untouched. */
  admitted(cookie: string): Promise<void>;
  /** POST api/admit?count=1 with the origin API token: 200 and `admitted: 1`. */
  adminAdmit(): Promise<void>;
}

function visitorClasses(host: string, base: string, agent: http.Agent, config: Config, apiToken: string): VisitorClasses {
  const page = `${base}${PATH}`;
  const admitUrl = `${base}${config.pathPrefix}api/admit?count=1`;
  const isHolding = (r: Reply): boolean => r.status === config.holdStatus && r.headers['refresh'] !== undefined && r.headers['x-origin'] === undefined;
  const isOrigin = (r: Reply): boolean => r.status === 200 && r.headers['x-origin'] === 'demo';
  const expect = (ok: boolean, what: string, r: Reply): void => {
    if (!ok) throw new Error(`${host}, ${what}: unexpected answer ${r.status} ${JSON.stringify(r.headers)} ${r.body.slice(0, 200)}`);
  };
  return {
    page,
    async newVisitor() {
      const r = await send(agent, 'GET', page);
      const cookie = cookieFrom(r, config.cookieName);
      expect(isHolding(r) && cookie !== undefined && tokenKind(cookie) === 'w', 'new visitor: holding page with a waiting ticket', r);
      return cookie!;
    },
    async waitingPoll(cookie) {
      const r = await send(agent, 'GET', page, { cookie });
      const renewed = cookieFrom(r, config.cookieName);
      expect(isHolding(r) && renewed !== undefined && tokenKind(renewed) === 'w', 'waiting poll: holding page', r);
    },
    async upgradePoll(cookie) {
      const r = await send(agent, 'GET', page, { cookie });
      const access = cookieFrom(r, config.cookieName);
      expect(isOrigin(r) && access !== undefined && tokenKind(access) === 'a', 'called poll: origin page with an access token', r);
      return access!;
    },
    async admitted(cookie) {
      const r = await send(agent, 'GET', page, { cookie });
      expect(isOrigin(r) && cookieFrom(r, config.cookieName) === undefined, 'admitted visitor: origin page, cookie untouched', r);
    },
    async adminAdmit() {
      const r = await send(agent, 'POST', admitUrl, { authorization: `Bearer ${apiToken}` });
      let body: unknown;
      try {
        body = JSON.parse(r.body);
      } catch {
        body = undefined;
      }
      expect(r.status === 200 && (body as { admitted?: unknown } | undefined)?.admitted === 1, 'admin admit: 200 with admitted 1', r);
    },
  };
}

interface CountResult {
  /** First call of each script on a fresh Redis (info only). */
  readonly cold: ClassRow[];
  /** The budgeted classes, always in this order. */
  readonly rows: ClassRow[];
  /** Access cookies of the visitors admitted during the count. */
  readonly access: string[];
}

const CLASS_BUDGETS: readonly { label: string; budget: number }[] = [
  { label: 'new visitor (no cookie)', budget: 1 },
  { label: 'waiting visitor poll (holding cookie)', budget: 1 },
  { label: 'admin / origin admit (POST api/admit)', budget: 1 },
  { label: 'waiting visitor poll, called (upgrade to access)', budget: 1 },
  { label: 'admitted visitor (access cookie)', budget: 0 },
];

/** Runs every class `n` times against a waiting room with a fresh Redis, counting both ways. */
async function countRoundTrips(classes: VisitorClasses, n: number, concurrency: number, snapshot: Snapshot): Promise<CountResult> {
  const measure = async (label: string, budget: number | undefined, count: number, task: (i: number) => Promise<void>): Promise<ClassRow> => {
    const before = await snapshot();
    await runConcurrent(count, concurrency, task);
    const after = await snapshot();
    return { label, requests: count, http: after.http - before.http, redis: after.redis - before.redis, budget };
  };
  const label = (i: number): string => CLASS_BUDGETS[i]?.label ?? '?';
  const budget = (i: number): number | undefined => CLASS_BUDGETS[i]?.budget;
  // Cold script cache: a fresh Redis knows no script, so the first call of each one is EVALSHA,
  // NOSCRIPT, then EVAL. Reported apart; it happens once per script after a flush.
  let firstCookie = '';
  const cold: ClassRow[] = [
    await measure('new visitor (join)', undefined, 1, async () => void (firstCookie = await classes.newVisitor())),
    await measure('waiting poll (poll)', undefined, 1, () => classes.waitingPoll(firstCookie)),
    await measure('admin admit (admit)', undefined, 1, () => classes.adminAdmit()),
  ];
  const waiting: string[] = new Array<string>(n).fill('');
  const access: string[] = new Array<string>(n).fill('');
  const rows: ClassRow[] = [];
  rows.push(await measure(label(0), budget(0), n, async (i) => void (waiting[i] = await classes.newVisitor())));
  rows.push(await measure(label(1), budget(1), n, (i) => classes.waitingPoll(waiting[i]!)));
  // Let exactly these n visitors in (the cold phase admitted ticket 1), one admit call each.
  rows.push(await measure(label(2), budget(2), n, () => classes.adminAdmit()));
  rows.push(await measure(label(3), budget(3), n, async (i) => void (access[i] = await classes.upgradePoll(waiting[i]!))));
  rows.push(await measure(label(4), budget(4), n, (i) => classes.admitted(access[i]!)));
  return { cold, rows, access };
}

function withinBudget(row: ClassRow): boolean {
  return row.budget === undefined || (row.http <= row.budget * row.requests && row.redis <= row.budget * row.requests);
}

// ---------------------------------------------------------------------------------------------
// The cached pass: many real waiting visitors polling one host (one POP) with the state cache on

interface CachedPassInput {
  readonly host: string;
  /** The pass's name in the progress lines. */
  readonly pass: string;
  /** The wall-clock window the visitors poll for. */
  readonly windowMs: number;
  /** The request classes against the cached host (its config: the cached queue). */
  readonly classes: VisitorClasses;
  /** The cached host's parsed settings (state cache lifetime, refresh, hold status, cookie). */
  readonly config: Config;
  readonly visitors: number;
  readonly joinConcurrency: number;
  readonly pollConcurrency: number;
  readonly load: Worker;
  readonly snapshot: Snapshot;
  /** `performance.now()` of every HTTP request that reached this host's bridge so far. */
  readonly storeTimes: () => readonly number[];
  /**
   * The host's request log. With store_failure=hold a poll that met a store failure still gets a
   * holding page and a renewed waiting cookie ("checking your place"), which the poll check cannot
   * tell from a good answer: the log can, and such a window's counts are not the cost of a poll.
   */
  readonly requestLog: RequestLogKeeper;
}

interface CachedPassResult {
  readonly host: string;
  readonly visitors: number;
  /** The joins that made the visitors (before the window, not in its counts). */
  readonly joins: { readonly http: number; readonly redis: number };
  readonly poll: PollResult;
  /** Store requests from the window's start to its last answer. */
  readonly http: number;
  readonly redis: number;
  readonly windowMs: number;
  readonly intervalMs: number;
  readonly ttlSeconds: number;
  /** Loads (bridge requests) per cache expiry: requests less than a quarter lifetime apart are one expiry. */
  readonly loadsPerExpiry: number[];
  /** Requests in the window that met a store failure (the host's log). */
  readonly storeFailures: number;
}

async function runCachedPass(input: CachedPassInput): Promise<CachedPassResult> {
  const { config } = input;
  const { windowMs } = input;
  log(`${input.host}: ${input.pass}, ${input.visitors} visitors join (concurrency ${input.joinConcurrency})`);
  const cookies = new Array<string>(input.visitors).fill('');
  const beforeJoins = await input.snapshot();
  await runConcurrent(input.visitors, input.joinConcurrency, async (i) => void (cookies[i] = await input.classes.newVisitor()));
  const afterJoins = await input.snapshot();
  // Each visitor polls as the holding page's Refresh header asks: once per refresh_seconds.
  const intervalMs = config.refreshSeconds * 1000;
  log(
    `${input.host}: ${input.pass}, ${input.visitors} visitors poll every ${config.refreshSeconds} s for ${windowMs / 1000} s ` +
      `(one poll every ${(intervalMs / input.visitors).toFixed(2)} ms, at most ${input.pollConcurrency} in flight)`,
  );
  const plan: PollPlan = {
    url: input.classes.page,
    cookies,
    cookieName: config.cookieName,
    holdStatus: config.holdStatus,
    intervalMs,
    windowMs,
    concurrency: input.pollConcurrency,
  };
  const failuresBefore = input.requestLog.troubleCount();
  const before = await input.snapshot();
  const windowStart = performance.now();
  const reply = nextWorkerMessage<LoadReply>(input.load, windowMs + REQUEST_TIMEOUT_MS + 10_000, 'load worker (poll window)');
  input.load.postMessage({ type: 'poll', plan } satisfies ToWorker);
  const answer = await reply;
  if (answer.type !== 'poll-result') throw new Error(`load worker: ${answer.type === 'error' ? answer.message : answer.type}`);
  const after = await input.snapshot();
  // A Compute host prints its log lines from another process: let the window's last ones arrive.
  await sleep(300);
  const storeFailures = input.requestLog.troubleCount() - failuresBefore;
  const times = input.storeTimes().filter((t) => t >= windowStart);
  const gapMs = (config.stateCacheSeconds * 1000) / 4;
  const loadsPerExpiry: number[] = [];
  let last = -Infinity;
  for (const t of times) {
    if (loadsPerExpiry.length === 0 || t - last > gapMs) loadsPerExpiry.push(1);
    else loadsPerExpiry[loadsPerExpiry.length - 1]!++;
    last = t;
  }
  return {
    host: input.host,
    visitors: input.visitors,
    joins: { http: afterJoins.http - beforeJoins.http, redis: afterJoins.redis - beforeJoins.redis },
    poll: answer.result,
    http: after.http - before.http,
    redis: after.redis - before.redis,
    windowMs,
    intervalMs,
    ttlSeconds: config.stateCacheSeconds,
    loadsPerExpiry,
    storeFailures,
  };
}

/** Expected store commands of one POP over the window: one load per cache lifetime. */
function expectedLoads(r: CachedPassResult): number {
  return r.ttlSeconds > 0 ? r.windowMs / 1000 / r.ttlSeconds : r.poll.sent;
}

/**
 * The cached pass's verdict. `pass`: both counts per poll below the limit. `uncollapsed` (only
 * where the cache does not collapse concurrent misses, i.e. the stand-in): the raw counts are not,
 * but only because of extra loads at expiries: one load per expiry is below the limit, and the
 * expiries come no more often than once per lifetime. Anything else fails, as do errors and
 * admissions.
 */
function cachedVerdict(r: CachedPassResult, collapses: boolean): 'pass' | 'uncollapsed' | 'fail' {
  const polls = r.poll.sent;
  if (polls === 0 || r.poll.errors > 0 || r.poll.admitted > 0 || r.storeFailures > 0 || r.redis < 1) return 'fail';
  if (r.http / polls < CACHED_MAX_COMMANDS_PER_POLL && r.redis / polls < CACHED_MAX_COMMANDS_PER_POLL) return 'pass';
  const expiries = r.loadsPerExpiry.length;
  if (!collapses && expiries / polls < CACHED_MAX_COMMANDS_PER_POLL && expiries <= Math.ceil(expectedLoads(r)) + 1) return 'uncollapsed';
  return 'fail';
}

type CachedOutcome = { readonly kind: 'ran'; readonly result: CachedPassResult } | { readonly kind: 'error'; readonly message: string };

function cachedPassReport(
  ttlSeconds: number,
  node: CachedOutcome,
  wasm: CachedOutcome | { kind: 'skipped'; reason: string },
): { text: string; failed: boolean } {
  const rows: string[][] = [];
  const notes: string[] = [];
  let failed = false;
  const add = (label: string, outcome: CachedOutcome | { kind: 'skipped'; reason: string }, collapses: boolean): void => {
    if (outcome.kind !== 'ran') {
      failed ||= outcome.kind === 'error';
      const why = outcome.kind === 'error' ? `FAILED: ${outcome.message}` : `skipped: ${outcome.reason}`;
      rows.push([label, '—', '—', '—', '—', '—', '—', outcome.kind === 'error' ? 'FAIL' : 'skipped']);
      notes.push(`${label}: ${why}`);
      return;
    }
    const r = outcome.result;
    const polls = r.poll.sent;
    const verdict = cachedVerdict(r, collapses);
    failed ||= verdict === 'fail';
    const expected = expectedLoads(r);
    const expiries = r.loadsPerExpiry.length;
    const maxPerExpiry = Math.max(0, ...r.loadsPerExpiry);
    const extra = r.http - expiries;
    rows.push([
      label,
      String(r.visitors),
      String(polls),
      `${r.http} · ${r.redis}`,
      polls > 0 ? `${(r.http / polls).toFixed(4)} · ${(r.redis / polls).toFixed(4)}` : 'n/a',
      `≈ ${expected.toFixed(0)} (${r.windowMs / 1000} s ÷ ${r.ttlSeconds} s)`,
      `${expiries} · ${expiries > 0 ? (r.http / expiries).toFixed(2) : 'n/a'} · ${maxPerExpiry}`,
      verdict === 'pass'
        ? 'PASS'
        : verdict === 'uncollapsed'
          ? `PASS only at one load per expiry (${(r.loadsPerExpiry.length / polls).toFixed(4)}); raw over the limit: uncollapsed misses`
          : 'FAIL',
    ]);
    const p = r.poll;
    notes.push(
      `${label}: ${r.visitors} visitors, each holding the waiting cookie of its own real join (the joins, before the window and not in its counts: ` +
        `${r.joins.http} HTTP / ${r.joins.redis} Redis for ${r.visitors} joins), polling every ${r.intervalMs / 1000} s (one poll every ` +
        `${(r.intervalMs / r.visitors).toFixed(2)} ms across them); ${p.scheduled} polls due in the window, ${p.sent} sent` +
        (p.scheduled > p.sent ? ` (${p.scheduled - p.sent} not sent: the host was behind)` : '') +
        `, latest send ${ms(p.maxLagMs)} ms after its due time; ${p.held} answered with the holding page and a renewed waiting cookie, ` +
        `${p.admitted} admitted, ${p.errors} errors${p.firstError !== undefined ? ` (first: ${p.firstError})` : ''}` +
        `${r.storeFailures > 0 ? `, ${r.storeFailures} requests that met a STORE FAILURE (held all the same: see "Store failures seen by the hosts")` : ''}; poll p50 ${ms(p.p50Ms)} ms, ` +
        `p99 ${ms(p.p99Ms)} ms; last answer ${(p.wallMs / 1000).toFixed(1)} s after the first send (${(p.sent / (r.windowMs / 1000)).toFixed(0)} polls/s). ` +
        (collapses
          ? `Concurrent misses share one load here (MemoryStateCache): ${extra === 0 ? 'one load per expiry, as expected' : `${extra} extra load(s) over ${expiries} expiries — UNEXPECTED`}.`
          : `The stand-in's SimpleCache does NOT collapse concurrent misses (request collapsing is not implemented; see its README): every ` +
            `request that misses while another is loading runs its own load, so a few extra loads at each expiry are expected here; ` +
            `measured ${extra} extra load(s) over ${expiries} expiries (at most ${maxPerExpiry} at one expiry). Fastly's SimpleCache.getOrSet ` +
            `collapses them within a POP, so there the count is one load per expiry: ${expiries} here, ${polls > 0 ? (expiries / polls).toFixed(4) : 'n/a'} per poll.`),
    );
  };
  add('node (one process = one POP)', node, true);
  add('wasm on the Compute host (one POP)', wasm, false);
  const text = [
    `### Store commands per poll with the state cache on (state_cache_seconds at its default, ${ttlSeconds} s; ${CACHED_WINDOW_MS / 1000} s of real waiting visitors polling; nobody admitted)`,
    '',
    table(
      [
        'host',
        'visitors',
        'polls',
        'store commands (HTTP · Redis)',
        'commands per poll (HTTP · Redis)',
        'expected ≈ window ÷ lifetime (one POP)',
        'expiries · loads per expiry (mean · max)',
        `verdict (< ${CACHED_MAX_COMMANDS_PER_POLL} per poll)`,
      ],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
      rows,
    ),
    '',
    `A separate host of each kind with the same settings as above except state_cache_seconds (left at its default) and its own queue ` +
      `(${Object.entries(CACHED_OVERRIDES).map(([k, v]) => `${k}=${v}`).join(', ')}). Store commands: HTTP requests that reached the ` +
      'bridge · script commands Redis executed (INFO commandstats deltas of EVALSHA/EVAL), from the window\'s start to its last answer. ' +
      'Every answer is checked: a holding page with a renewed waiting cookie (an access cookie would be an admission). ' +
      '"loads per expiry": bridge requests less than a quarter of the cache lifetime apart are counted as one expiry. ' +
      `Verdict: PASS when both counts per poll are below ${CACHED_MAX_COMMANDS_PER_POLL}. On the wasm only, where the stand-in does not ` +
      'collapse concurrent misses, raw counts over the limit are reported as such and pass only if one load per expiry is below it and ' +
      'the expiries come no more often than once per lifetime; errors or admissions fail.',
    ...notes.map((n) => `- ${n}`),
    '',
  ].join('\n');
  return { text, failed };
}

// ---------------------------------------------------------------------------------------------
// The queueing-methods pass: store commands per waiting poll, FIFO with the cache vs random

/** Both methods on one kind of host: FIFO (the cached pass's host, fresh visitors) and random (its own host). */
interface MethodsOutcome {
  readonly fifo: CachedOutcome;
  readonly random: CachedOutcome;
}

/** Random: every sent poll is exactly one store command, both counts; no errors, nobody admitted. */
function randomVerdict(r: CachedPassResult): boolean {
  const polls = r.poll.sent;
  return polls > 0 && r.poll.errors === 0 && r.poll.admitted === 0 && r.storeFailures === 0 && r.http === polls && r.redis === polls;
}

/** A one-line account of a poll window (what was due, sent, answered, how late, how fast). */
function pollWindowNote(r: CachedPassResult): string {
  const p = r.poll;
  return (
    `${r.visitors} visitors (their joins before the window, not counted: ${r.joins.http} HTTP / ${r.joins.redis} Redis), one poll every ` +
    `${(r.intervalMs / r.visitors).toFixed(2)} ms across them; ${p.scheduled} polls due, ${p.sent} sent` +
    (p.scheduled > p.sent ? ` (${p.scheduled - p.sent} not sent: the host was behind)` : '') +
    `, latest send ${ms(p.maxLagMs)} ms late; ${p.held} held with a renewed waiting cookie, ${p.admitted} admitted, ${p.errors} errors` +
    (r.storeFailures > 0 ? `, ${r.storeFailures} requests that met a STORE FAILURE (held all the same: see "Store failures seen by the hosts")` : '') +
    `${p.firstError !== undefined ? ` (first: ${p.firstError})` : ''}; p50 ${ms(p.p50Ms)} ms, p99 ${ms(p.p99Ms)} ms; ` +
    `${(p.sent / (r.windowMs / 1000)).toFixed(0)} polls/s`
  );
}

function methodsReport(
  ttlSeconds: number,
  refreshSeconds: number,
  node: MethodsOutcome,
  wasm: MethodsOutcome | { kind: 'skipped'; reason: string } | { kind: 'error'; message: string },
): { text: string; failed: boolean } {
  const rows: string[][] = [];
  const notes: string[] = [];
  let failed = false;
  const perPoll = (count: number, polls: number): string => (polls > 0 ? (count / polls).toFixed(4) : 'n/a');
  const ratio = (random: number, fifo: number): string => (fifo > 0 && Number.isFinite(random / fifo) ? `${(random / fifo).toFixed(0)}×` : 'n/a');
  const add = (host: string, outcome: MethodsOutcome | { kind: 'skipped'; reason: string } | { kind: 'error'; message: string }, collapses: boolean): void => {
    if ('kind' in outcome) {
      failed ||= outcome.kind === 'error';
      for (const method of ['fifo', 'random']) rows.push([host, method, '—', '—', '—', '—', '—', '—', outcome.kind === 'error' ? 'FAIL' : 'skipped']);
      notes.push(`${host}: ${outcome.kind === 'error' ? `FAILED: ${outcome.message}` : `skipped: ${outcome.reason}`}`);
      return;
    }
    const { fifo, random } = outcome;
    let fifoPerPoll: { http: number; redis: number } | undefined;
    if (fifo.kind === 'ran') {
      const r = fifo.result;
      const polls = r.poll.sent;
      const verdict = cachedVerdict(r, collapses);
      failed ||= verdict === 'fail';
      fifoPerPoll = polls > 0 ? { http: r.http / polls, redis: r.redis / polls } : undefined;
      const expiries = r.loadsPerExpiry.length;
      rows.push([
        host,
        `fifo, state_cache_seconds=${r.ttlSeconds}`,
        String(r.visitors),
        String(polls),
        `${r.http} · ${r.redis}`,
        `${perPoll(r.http, polls)} · ${perPoll(r.redis, polls)}`,
        `≈ ${expectedLoads(r).toFixed(0)} (${r.windowMs / 1000} s ÷ ${r.ttlSeconds} s, one POP)`,
        '1×',
        verdict === 'pass' ? 'PASS' : verdict === 'uncollapsed' ? `PASS at one load per expiry (${expiries} expiries: ${perPoll(expiries, polls)} per poll)` : 'FAIL',
      ]);
      notes.push(
        `${host}, fifo: ${pollWindowNote(r)}; ${expiries} cache expiries, ${(r.http / Math.max(1, expiries)).toFixed(2)} loads per expiry` +
          (collapses ? '.' : ' (the stand-in does not collapse concurrent misses; Fastly does: one load per expiry there).'),
      );
    } else {
      failed = true;
      rows.push([host, 'fifo', '—', '—', '—', '—', '—', '—', 'FAIL']);
      notes.push(`${host}, fifo: FAILED: ${fifo.message}`);
    }
    if (random.kind === 'ran') {
      const r = random.result;
      const polls = r.poll.sent;
      const ok = randomVerdict(r);
      failed ||= !ok;
      rows.push([
        host,
        'random',
        String(r.visitors),
        String(polls),
        `${r.http} · ${r.redis}`,
        `${perPoll(r.http, polls)} · ${perPoll(r.redis, polls)}`,
        `= polls (${polls}): one draw each`,
        fifoPerPoll === undefined || polls === 0 ? 'n/a' : `${ratio(r.http / polls, fifoPerPoll.http)} · ${ratio(r.redis / polls, fifoPerPoll.redis)}`,
        ok ? 'PASS (one per poll)' : 'FAIL',
      ]);
      notes.push(`${host}, random: ${pollWindowNote(r)}.`);
    } else {
      failed = true;
      rows.push([host, 'random', '—', '—', '—', '—', '—', '—', 'FAIL']);
      notes.push(`${host}, random: FAILED: ${random.message}`);
    }
  };
  add('node (one POP)', node, true);
  add('wasm on the Compute host (one POP)', wasm, false);
  const text = [
    `### Store commands per waiting poll: FIFO with the per-POP cache vs random (${METHODS_WINDOW_MS / 1000} s of waiting visitors polling every ${refreshSeconds} s; nobody admitted)`,
    '',
    table(
      ['host', 'queue_method', 'visitors', 'polls', 'store commands (HTTP · Redis)', 'commands per poll (HTTP · Redis)', 'expected', 'per poll vs FIFO (HTTP · Redis)', 'verdict'],
      ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
      rows,
    ),
    '',
    `The same number of fresh waiting visitors (each with the cookie of its own real join) poll for the same window, one method after ` +
      `the other on each kind of host: fifo on the cached pass's host (${Object.entries(CACHED_OVERRIDES).map(([k, v]) => `${k}=${v}`).join(', ')}; ` +
      `state_cache_seconds at its default, ${ttlSeconds} s), random on a host of its own (${Object.entries(RANDOM_OVERRIDES).map(([k, v]) => `${k}=${v}`).join(', ')}). ` +
      'Counted as in the cached pass (HTTP requests that reached the bridge · script commands Redis executed, from the window\'s start to ' +
      'its last answer). FIFO: one load per cache lifetime serves every poll in the POP, so its cost per poll falls as the crowd grows ' +
      '(≈ refresh_seconds ÷ (lifetime × visitors)); random: a visitor\'s presence in the draw is its own, so every poll is a store call, ' +
      'whatever the crowd. Verdict: fifo as in the cached pass; random PASS when both counts equal the polls sent exactly.',
    ...notes.map((n) => `- ${n}`),
    '',
  ].join('\n');
  return { text, failed };
}

// ---------------------------------------------------------------------------------------------
// The capacity pass: capacity-mode admission, every request class of a slot's life

/** The capacity pass's rows, in the order of the table (node and wasm alike). */
const CAP = {
  walkIn: 0,
  full: 1,
  called: 2,
  between: 3,
  burst: 4,
  first: 5,
  rest: 6,
  heartbeat: 7,
  leave: 8,
  endSession: 9,
  control: 10,
  stats: 11,
} as const;

const CAPACITY_CLASSES: readonly { readonly label: string; readonly budget: string }[] = [
  { label: 'new visitor while there is room: walks in (the join claims the slot)', budget: '≤ 1' },
  { label: 'new visitor when full: gets a ticket (join)', budget: '≤ 1' },
  { label: 'called visitor claims a slot: poll + claim (state cache off)', budget: '≤ 2 = claim 1 + poll 1 (0 on a cache hit)' },
  { label: 'admitted visitor between refreshes (token only)', budget: '≤ 0' },
  { label: `admitted visitor after the refresh interval: burst of ${CAPACITY_BURST} each`, budget: `≤ 1 per visitor = ≤ ${(1 / CAPACITY_BURST).toFixed(2)}` },
  { label: '  └ its 1st request after the interval (touch, renewed cookie)', budget: '≤ 1' },
  { label: `  └ its requests 2–${CAPACITY_BURST} (the renewed cookie)`, budget: '≤ 0' },
  { label: 'heartbeat (POST __wr/heartbeat: touch)', budget: '≤ 1' },
  { label: 'leave (POST __wr/leave)', budget: '≤ 1' },
  { label: 'end of session by the origin (GET /checkout/done, end-session header)', budget: '≤ 1' },
  { label: 'runtime control (POST __wr/api/control {"paused":false})', budget: '≤ 1' },
  { label: 'stats (GET __wr/api/stats)', budget: '≤ 1' },
];

interface CapacityRow {
  readonly requests: number;
  /** The most store calls the budget allows for these requests. */
  readonly allowed: number;
  readonly http: number;
  readonly redis: number;
}

/** A capacity-mode visitor's moves against one host, each checking that the answer is what it expects. */
function capacityClient(host: string, base: string, agent: http.Agent, config: Config, apiToken: string) {
  const page = `${base}${PATH}`;
  const own = (rest: string): string => `${base}${config.pathPrefix}${rest}`;
  const bearer = { authorization: `Bearer ${apiToken}` };
  const isHolding = (r: Reply): boolean => r.status === config.holdStatus && r.headers['refresh'] !== undefined && r.headers['x-origin'] === undefined;
  const isOrigin = (r: Reply): boolean => r.status === 200 && r.headers['x-origin'] === 'demo';
  const fail = (what: string, r: Reply): never => {
    throw new Error(`${host} (capacity), ${what}: unexpected answer ${r.status} ${JSON.stringify(r.headers)} ${JSON.stringify(r.body.slice(0, 200))}`);
  };
  /** An access token that holds a slot: `k: a` with a session start and a refresh time. */
  const slotToken = (cookie: string | undefined): cookie is string => {
    const claims = cookie === undefined ? undefined : tokenClaims(cookie);
    return claims?.['k'] === 'a' && typeof claims['s'] === 'number' && typeof claims['r'] === 'number';
  };
  const json = (r: Reply): Record<string, unknown> => {
    try {
      const body: unknown = JSON.parse(r.body);
      if (typeof body === 'object' && body !== null) return body as Record<string, unknown>;
    } catch {
      // not JSON: fall through
    }
    return {};
  };
  return {
    /** No cookie, room free: the origin's page and an access token with a slot. */
    async walkIn(): Promise<string> {
      const r = await send(agent, 'GET', page);
      const cookie = cookieFrom(r, config.cookieName);
      if (!isOrigin(r) || !slotToken(cookie)) fail('walk-in: origin page with a slot token', r);
      return cookie!;
    },
    /** No cookie, full: the holding page and a waiting ticket. */
    async ticket(): Promise<string> {
      const r = await send(agent, 'GET', page);
      const cookie = cookieFrom(r, config.cookieName);
      if (!isHolding(r) || cookie === undefined || tokenKind(cookie) !== 'w') fail('new visitor when full: holding page with a ticket', r);
      return cookie!;
    },
    /** Slot token within its refresh interval: the origin's page, cookie untouched. */
    async admitted(cookie: string): Promise<void> {
      const r = await send(agent, 'GET', page, { cookie });
      if (!isOrigin(r) || cookieFrom(r, config.cookieName) !== undefined) fail('admitted visitor: origin page, cookie untouched', r);
    },
    /** Slot token past its refresh interval: the origin's page and a renewed token (a later `r`). */
    async touched(cookie: string): Promise<string> {
      const r = await send(agent, 'GET', page, { cookie });
      const renewed = cookieFrom(r, config.cookieName);
      const before = Number(tokenClaims(cookie)?.['r']);
      if (!isOrigin(r) || !slotToken(renewed) || !(Number(tokenClaims(renewed)?.['r']) > before)) {
        fail('admitted visitor after the interval: origin page with a renewed slot token', r);
      }
      return renewed!;
    },
    async heartbeat(cookie: string): Promise<string> {
      const r = await send(agent, 'POST', own('heartbeat'), { cookie });
      const renewed = cookieFrom(r, config.cookieName);
      const body = json(r);
      if (r.status !== 200 || body['state'] !== 'active' || body['refreshed'] !== true || !slotToken(renewed)) fail('heartbeat: active, refreshed', r);
      return renewed!;
    },
    async leave(cookie: string): Promise<void> {
      const r = await send(agent, 'POST', own('leave'), { cookie });
      if (r.status !== 204) fail('leave: 204', r);
    },
    /** The origin's end-of-session header: its page, the header removed, the cookie cleared. */
    async endSession(cookie: string): Promise<void> {
      const r = await send(agent, 'GET', `${base}/checkout/done`, { cookie });
      const cleared = cookieFrom(r, config.cookieName);
      if (!isOrigin(r) || r.headers[config.endSessionHeader] !== undefined || cleared !== `${config.cookieName}=`) {
        fail('end of session: origin page, header removed, cookie cleared', r);
      }
    },
    /** A called ticket's poll: the origin's page and a slot token (its reservation claimed). */
    async claim(cookie: string): Promise<string> {
      const r = await send(agent, 'GET', page, { cookie });
      const access = cookieFrom(r, config.cookieName);
      if (!isOrigin(r) || !slotToken(access)) fail('called visitor: origin page with a slot token', r);
      return access!;
    },
    async control(): Promise<void> {
      const r = await send(agent, 'POST', own('api/control'), bearer, JSON.stringify({ paused: false }));
      const body = json(r);
      if (r.status !== 200 || body['mode'] !== 'capacity' || body['paused'] !== false) fail('control: 200, capacity mode, not paused', r);
    },
    async stats(): Promise<Record<string, unknown>> {
      const r = await send(agent, 'GET', own('api/stats'), bearer);
      const body = json(r);
      if (r.status !== 200 || body['mode'] !== 'capacity' || body['max_sessions'] !== config.maxActive) fail('stats: 200, capacity mode', r);
      return body;
    },
  };
}

/** When a slot token's refresh interval ends (ms since the epoch): its last refresh `r` plus the interval. */
function refreshDueMs(cookie: string, config: Config): number {
  const claims = tokenClaims(cookie);
  const last = Number(claims?.['r'] ?? claims?.['s']);
  if (!Number.isFinite(last)) throw new Error('capacity pass: an access token without a refresh time');
  return (last + config.activityRefreshSeconds) * 1000;
}

interface CapacityInput {
  readonly host: string;
  readonly base: string;
  readonly agent: http.Agent;
  /** The capacity host's parsed settings (the wasm gets the same). */
  readonly config: Config;
  readonly apiToken: string;
  readonly perClass: number;
  readonly concurrency: number;
  readonly snapshot: Snapshot;
  /** This harness's Upstash bridge, to load the store's scripts first (a warm script cache). */
  readonly bridge: { readonly url: string; readonly token: string };
}

interface CapacityResult {
  readonly host: string;
  readonly perClass: number;
  readonly concurrency: number;
  /** Indexed by CAP. */
  readonly rows: readonly CapacityRow[];
  /** How long the pass slept for the refresh interval to pass. */
  readonly waitedMs: number;
  readonly wallMs: number;
  /** What the stats API said at the checkpoints (not counted in any class). */
  readonly checkpoints: string;
}

type CapacityOutcome = { readonly kind: 'ran'; readonly result: CapacityResult } | { readonly kind: 'error'; readonly message: string };

/**
 * One capacity queue through its life, every class counted on its own (the counts are deltas
 * around each class only; the checkpoints between them are not counted):
 *   walk-ins fill max_active (the first `perClass` counted) → admitted visitors between refreshes →
 *   new visitors when full (tickets) → control, stats → sleep until the walk-ins' refresh interval
 *   is over → a burst per visitor (1st request touches, the rest ride the renewed cookie) →
 *   heartbeats → the origin ends those sessions (each frees a slot and calls the next ticket) →
 *   the called tickets poll and claim → they leave.
 */
async function runCapacityPass(input: CapacityInput): Promise<CapacityResult> {
  const { config, perClass: n, concurrency, snapshot } = input;
  const started = performance.now();
  if (config.maxActive < n) throw new Error(`capacity pass: ${n} visitors per class, but max_active is ${config.maxActive}`);
  // A warm script cache, as the other passes have by now (their cold cost is reported above): every
  // store script loaded through the bridge (which adapts the text for Redis and maps the SHA-1s),
  // outside any class's counts. SCRIPT LOAD is not a script call, so Redis does not count it either.
  const loader = new Redis(createUpstashClientOptions({ url: input.bridge.url, token: input.bridge.token, retries: 0 }));
  for (const script of STORE_SCRIPTS) {
    const sha = await loader.scriptLoad(script.text);
    if (sha !== script.sha1) throw new Error(`capacity pass: SCRIPT LOAD of ${script.name} gave ${sha}, pinned ${script.sha1}`);
  }
  const c = capacityClient(input.host, input.base, input.agent, config, input.apiToken);
  const rows: CapacityRow[] = new Array<CapacityRow>(CAPACITY_CLASSES.length);
  const measure = async (index: number, requests: number, allowed: number, run: () => Promise<void>): Promise<void> => {
    const before = await snapshot();
    await run();
    const after = await snapshot();
    rows[index] = { requests, allowed, http: after.http - before.http, redis: after.redis - before.redis };
  };
  const each = (count: number, task: (i: number) => Promise<void>) => () => runConcurrent(count, concurrency, task);
  /** Throws when a class that must not refresh ran into its tokens' refresh time (it would not measure what it says). */
  const stillWithin = (cookies: readonly string[], what: string): void => {
    const due = Math.min(...cookies.map((cookie) => refreshDueMs(cookie, config)));
    if (Date.now() >= due) throw new Error(`capacity pass: ${what} ran past activity_refresh_seconds (${config.activityRefreshSeconds} s); host too slow`);
  };
  const checkpoints: string[] = [];
  const checkpoint = async (when: string, expect: Record<string, number>): Promise<void> => {
    const body = await c.stats();
    const seen = Object.keys(expect).map((key) => `${key} ${String(body[key])}`);
    checkpoints.push(`${when}: ${seen.join(', ')}`);
    for (const [key, value] of Object.entries(expect)) {
      if (body[key] !== value) throw new Error(`capacity pass, ${when}: ${key} is ${String(body[key])}, expected ${value}`);
    }
  };
  log(`${input.host}: capacity pass, max_active ${config.maxActive}, ${n} visitors per class, concurrency ${concurrency}`);

  // Walk-ins: the first n counted, then the room filled up (not counted).
  const access = new Array<string>(config.maxActive).fill('');
  await measure(CAP.walkIn, n, n, each(n, async (i) => void (access[i] = await c.walkIn())));
  await runConcurrent(config.maxActive - n, concurrency, async (i) => void (access[n + i] = await c.walkIn()));
  // Admitted visitors within their refresh interval: the token alone decides. The n freshest
  // tokens, so a slow host has the most time before their interval ends (checked after).
  const fresh = [...access].sort((a, b) => refreshDueMs(b, config) - refreshDueMs(a, config)).slice(0, n);
  await measure(CAP.between, n, 0, each(n, (i) => c.admitted(fresh[i]!)));
  stillWithin(fresh, 'the admitted visitors between refreshes');
  await checkpoint('full', { active_sessions: config.maxActive, cursor: config.maxActive, tail: config.maxActive });
  // New visitors when full: a ticket each.
  const tickets = new Array<string>(n).fill('');
  await measure(CAP.full, n, n, each(n, async (i) => void (tickets[i] = await c.ticket())));
  await measure(CAP.control, n, n, each(n, () => c.control()));
  await measure(CAP.stats, n, n, each(n, async () => void (await c.stats())));
  await checkpoint('tickets taken', { active_sessions: config.maxActive, cursor: config.maxActive, waiting: n });

  // After the refresh interval: the first request of each visitor touches, the rest do not.
  const burst = access.slice(0, n);
  const dueMs = Math.max(...burst.map((cookie) => refreshDueMs(cookie, config))) + CAPACITY_MARGIN_MS;
  const waitedMs = Math.max(0, dueMs - Date.now());
  log(`${input.host}: capacity pass, ${(waitedMs / 1000).toFixed(1)} s until the walk-ins' refresh interval is over`);
  await sleep(waitedMs);
  const renewed = new Array<string>(n).fill('');
  await measure(CAP.first, n, n, each(n, async (i) => void (renewed[i] = await c.touched(burst[i]!))));
  await measure(CAP.rest, n * (CAPACITY_BURST - 1), 0, each(n, async (i) => {
    for (let k = 1; k < CAPACITY_BURST; k++) await c.admitted(renewed[i]!);
  }));
  stillWithin(renewed, 'the rest of the burst');
  const first = rows[CAP.first]!;
  const rest = rows[CAP.rest]!;
  rows[CAP.burst] = { requests: first.requests + rest.requests, allowed: n, http: first.http + rest.http, redis: first.redis + rest.redis };

  // Heartbeats, then the origin ends those sessions (each frees a slot and calls the next ticket).
  const beaten = new Array<string>(n).fill('');
  await measure(CAP.heartbeat, n, n, each(n, async (i) => void (beaten[i] = await c.heartbeat(renewed[i]!))));
  await measure(CAP.endSession, n, n, each(n, (i) => c.endSession(beaten[i]!)));
  stillWithin(beaten, 'the end of session');
  await checkpoint('sessions ended', { active_sessions: config.maxActive, cursor: config.maxActive + n, reserved: n, waiting: 0 });

  // The called tickets poll: the poll (state cache off: 1) sees the call, the claim takes the reserved slot (1).
  const claimed = new Array<string>(n).fill('');
  await measure(CAP.called, n, 2 * n, each(n, async (i) => void (claimed[i] = await c.claim(tickets[i]!))));
  await checkpoint('slots claimed', { active_sessions: config.maxActive, reserved: 0 });
  await measure(CAP.leave, n, n, each(n, (i) => c.leave(claimed[i]!)));

  return {
    host: input.host,
    perClass: n,
    concurrency,
    rows,
    waitedMs,
    wallMs: performance.now() - started,
    checkpoints: checkpoints.join('; '),
  };
}

function capacityReport(node: CapacityOutcome, wasm: CapacityOutcome | { kind: 'skipped'; reason: string }): { text: string; failed: boolean } {
  const within = (row: CapacityRow | undefined): boolean => row !== undefined && row.http <= row.allowed && row.redis <= row.allowed;
  const cell = (row: CapacityRow | undefined): string =>
    row === undefined ? 'error' : `${(row.http / row.requests).toFixed(2)} · ${(row.redis / row.requests).toFixed(2)} (${row.requests})`;
  const nodeRows = node.kind === 'ran' ? node.result.rows : undefined;
  const wasmRows = wasm.kind === 'ran' ? wasm.result.rows : undefined;
  let failed = node.kind !== 'ran' || wasm.kind === 'error';
  const rows = CAPACITY_CLASSES.map((cls, i) => {
    const nodeRow = nodeRows?.[i];
    const wasmRow = wasmRows?.[i];
    const nodeOk = within(nodeRow);
    const wasmOk = wasm.kind === 'skipped' || within(wasmRow);
    failed ||= !nodeOk || !wasmOk;
    return [
      cls.label,
      cls.budget,
      cell(nodeRow),
      wasm.kind === 'skipped' ? 'skipped' : cell(wasmRow),
      nodeOk && wasmOk ? (wasm.kind === 'skipped' ? 'PASS (node only)' : 'PASS') : 'FAIL',
    ];
  });
  const agreement = (outcome: CapacityOutcome | { kind: 'skipped'; reason: string }, label: string): string => {
    if (outcome.kind === 'skipped') return `${label}: skipped (${outcome.reason}).`;
    if (outcome.kind === 'error') return `${label}: FAILED: ${outcome.message}`;
    const r = outcome.result;
    const disagree = CAPACITY_CLASSES.filter((_, i) => r.rows[i]!.http !== r.rows[i]!.redis).map((cls) => cls.label.trim());
    return (
      `${label}: ${r.perClass} visitors per class, concurrency ${r.concurrency}; slept ${(r.waitedMs / 1000).toFixed(1)} s for the refresh ` +
      `interval; the pass took ${(r.wallMs / 1000).toFixed(1)} s. ${disagree.length === 0 ? 'The two counts agree on every row.' : `The counts DISAGREE on: ${disagree.join('; ')}.`} ` +
      `Stats API at the checkpoints (not counted): ${r.checkpoints}.`
    );
  };
  const text = [
    `### Capacity mode: store round trips per request (${Object.entries(CAPACITY_OVERRIDES).map(([k, v]) => `${k}=${v}`).join(', ')}; warm script cache)`,
    '',
    table(
      ['request class', 'budget', 'node round trips / request (HTTP · Redis) (requests)', 'wasm round trips / request (HTTP · Redis) (requests)', 'result'],
      ['l', 'l', 'r', 'r', 'l'],
      rows,
    ),
    '',
    'A separate host of each kind (the wasm: the same bin/main.wasm with these settings) over the same harness as above, its own queue. ' +
      'Counted as above: HTTP requests that reached the bridge · script commands Redis executed, each class on its own. One queue\'s life: ' +
      `walk-ins fill max_active (the first ones counted; each gets the origin's page and an access token carrying its slot); admitted ` +
      `visitors within activity_refresh_seconds (the origin's page, the cookie untouched, checked to end before the tokens' refresh time); ` +
      `new visitors when full (the holding page and a ticket); control and stats; then, after the walk-ins' refresh interval, a burst ` +
      `of ${CAPACITY_BURST} requests per visitor, one after another (the 1st touches the slot and renews the cookie, the others carry the ` +
      'renewed cookie, as a browser does); a heartbeat each; the origin ends those sessions (its header removed, the cookie cleared; the ' +
      'freed slot calls the next ticket); the called tickets poll and claim their reserved slots; they leave. With the state cache ' +
      'off a called visitor\'s poll costs its 1 store call every time: poll 1 + claim 1 = 2; with the cache on (the default) the poll is ' +
      'answered from the POP\'s cache (see the cached pass: 0 on a hit) and the claim is the 1 call. The burst row is per request: 1 touch ' +
      `per visitor per refresh interval over ${CAPACITY_BURST} requests.`,
    `- ${agreement(node, 'node')}`,
    `- ${agreement(wasm, 'wasm')}`,
    '',
  ].join('\n');
  return { text, failed };
}

// ---------------------------------------------------------------------------------------------
// The wasm harness: build, a counting proxy in front of the bridge, `fastly compute serve`

/**
 * `findComputeHost()`, with its paths resolved against the real project root: it derives the root
 * from its own file's location, which inside the bundle (bin/bench.mjs) is one level too high.
 * Same order as there: VICEROY_PATH, then viceroy on PATH, then the stand-in beside the project.
 */
function locateComputeHost(root: string): ComputeHost {
  const env: NodeJS.ProcessEnv = { ...process.env };
  const fromEnv = env['VICEROY_PATH'];
  if (fromEnv !== undefined && fromEnv !== '') env['VICEROY_PATH'] = resolve(root, fromEnv);
  const found = findComputeHost(env);
  if (found.found || (fromEnv !== undefined && fromEnv !== '') || PROJECT_ROOT === root) return found;
  const standIn = resolve(root, '..', 'shared', 'tools', 'compute-host', 'viceroy');
  return existsSync(standIn) ? findComputeHost({ ...env, VICEROY_PATH: standIn }) : found;
}

/** Runs a command to completion; rejects with its output when it fails or takes too long. */
function runCommand(command: string, args: readonly string[], cwd: string, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (chunk: Buffer): void => void (output = (output + chunk.toString('utf8')).slice(-4_000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolvePromise();
      else reject(new Error(`${command} ${args.join(' ')} failed (${signal ?? `exit ${String(code)}`}):\n${output}`));
    });
  });
}

interface CountingProxy extends TroubleSource {
  readonly url: string;
  /** HTTP requests received so far (each one forwarded to the target). */
  count(): number;
  /** `performance.now()` of each of them. */
  times(): readonly number[];
  close(): Promise<void>;
}

/**
 * An HTTP proxy that counts every request it forwards to `target`, bodies streamed both ways. It
 * keeps its own failures (a forward that failed, on a reused keep-alive socket or a new one; a
 * client connection error; a request the client gave up on; a 5xx from the target) for the report.
 */
async function startCountingProxy(target: string): Promise<CountingProxy> {
  const upstream = new URL(target);
  // Keep-alive to the bridge, but an idle socket is dropped here after 2 s, well before the bridge
  // (a Node server: keepAliveTimeout 5 s, closed at 6 s) closes it. Without a timeout of its own
  // the agent keeps idle sockets until the bridge closes them, and a request that picks one at that
  // moment fails (ECONNRESET / socket hang up): measured 10 of 300 reuses between 5.9 and 6.1 s idle.
  // This proxy would answer that with a 502 text body, which the Upstash client does not retry
  // (it retries only a fetch that throws) and cannot parse: a store error in the wasm that no
  // production path has. The bench's quiet stretches (a host starting, the capacity pass's sleep
  // for the refresh interval) are about that long.
  const agent = new http.Agent({ keepAlive: true, timeout: 2_000 });
  let requests = 0;
  const times: number[] = [];
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  const at = (): string => new Date().toISOString();
  const server = http.createServer((req, res) => {
    requests++;
    times.push(performance.now());
    const headers = { ...req.headers };
    delete headers['connection'];
    delete headers['keep-alive'];
    headers['host'] = upstream.host;
    const clientReused = (req.socket as { _wrBenchServed?: number })._wrBenchServed ?? 0;
    (req.socket as { _wrBenchServed?: number })._wrBenchServed = clientReused + 1;
    const forward = http.request(
      { protocol: upstream.protocol, hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, agent },
      (answer) => {
        const status = answer.statusCode ?? 502;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status >= 500) failures.push(`${at()} ${req.method} ${req.url}: the bridge answered ${status}`);
        res.writeHead(status, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', (error) => {
      failures.push(
        `${at()} ${req.method} ${req.url}: forward to the bridge failed on a ${forward.reusedSocket ? 'reused keep-alive' : 'new'} socket: ` +
          `${(error as NodeJS.ErrnoException).code ?? ''} ${error.message}; answered 502`,
      );
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`counting proxy: ${error.message}`);
    });
    res.on('close', () => {
      if (!res.writableFinished) failures.push(`${at()} ${req.method} ${req.url}: the client connection closed before the answer was sent (its request #${clientReused + 1})`);
    });
    req.pipe(forward);
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    failures.push(`${at()} client connection error: ${error.code ?? ''} ${error.message}`);
    socket.destroy();
  });
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolveListen());
  });
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('counting proxy: no address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    name: 'wasm counting proxy',
    count: () => requests,
    times: () => times,
    report: () => (failures.length === 0 ? [] : [`wasm counting proxy: ${failures.length} failure(s):`, ...failures.slice(0, 12).map((f) => `    ${f}`)]),
    summary: () =>
      `wasm counting proxy: ${requests} requests forwarded (bridge statuses ${[...statuses].map(([k, n]) => `${k}: ${n}`).join(', ') || 'none'}), ${failures.length} failure(s)`,
    close: () =>
      new Promise<void>((resolveClose) => {
        server.close(() => resolveClose());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}

interface ComputeHostProcess {
  readonly url: string;
  /** The host's request log: its `wr_log :: {json}` lines on stdout. */
  readonly log: RequestLogKeeper;
  /** `GET /__host/stats` of the stand-in (undefined from a host that has no such path). */
  stats(): Promise<{ tInst: number; ms: number }[] | undefined>;
  stop(): Promise<void>;
}

/**
 * `fastly compute serve --skip-build` on `dir` (its fastly.toml and bin/main.wasm), in its own
 * process group: the CLI starts the host as its child, and stop() kills the whole group.
 */
async function startComputeHost(name: string, fastlyCli: string, viceroyPath: string, dir: string): Promise<ComputeHostProcess> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    fastlyCli,
    ['compute', 'serve', '--skip-build', '--non-interactive', '--dir', dir, '--viceroy-path', viceroyPath, '--addr', `127.0.0.1:${port}`],
    { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FASTLY_DISABLE_WASM_METRICS: '1' } },
  );
  const killGroup = (): void => {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  };
  // Last resort for exits that skip the cleanup (process.exit from elsewhere).
  process.once('exit', killGroup);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  // The host writes a line per request (and the wasm's log lines) for as long as it runs: keep the
  // pipes drained, a tail to explain a failure, and the waiting room's request log (the `wr_log`
  // endpoint prints `wr_log :: {json}` lines on stdout) for the store errors behind a failure.
  let tail = '';
  let listening = false;
  const requestLog = new RequestLogKeeper(name);
  let partial = '';
  let partialErr = '';
  // The host's stderr carries its own errors ("[host] wasm error: …" for a trap, "[host] backend
  // error: …"); a healthy run prints nothing there. Stdout lines other than the request log and the
  // per-request INFO lines are kept when they look like errors.
  child.stderr!.on('data', (chunk: Buffer) => {
    const lines = (partialErr + chunk.toString('utf8')).split('\n');
    partialErr = lines.pop() ?? '';
    for (const line of lines) if (line.trim() !== '') requestLog.addHostLine(`stderr: ${line}`);
  });
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const match = /^wr_log :: (\{.*\})\s*$/.exec(line);
      if (match?.[1] === undefined) {
        if (/\b(ERROR|WARN)\b|\[host\]|trap|panic|-> 5\d\d /i.test(line)) requestLog.addHostLine(`stdout: ${line}`);
        continue;
      }
      try {
        requestLog.add(JSON.parse(match[1]) as RequestLog);
      } catch {
        requestLog.add({ ts: new Date().toISOString(), method: '?', path: '?', status: 0, decision: 'unreadable', store_error: `unreadable log line: ${line.slice(0, 200)}` });
      }
    }
  });
  const ready = new Promise<void>((resolveReady, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name}: no "Listening on" within ${HOST_START_TIMEOUT_MS / 1000} s:\n${tail}`)), HOST_START_TIMEOUT_MS);
    const onData = (chunk: Buffer): void => {
      tail = (tail + chunk.toString('utf8')).slice(-4_000);
      if (!listening && tail.includes('Listening on')) {
        listening = true;
        clearTimeout(timer);
        resolveReady();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`${name}: ${error.message}`));
    });
    // 'close', not 'exit': by then the pipes are drained, so the message carries the last output.
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name}: fastly compute serve exited (${signal ?? `exit ${String(code)}`}):\n${tail}`));
    });
  });
  const stop = async (): Promise<void> => {
    killGroup();
    await exited;
    process.off('exit', killGroup);
  };
  try {
    await ready;
  } catch (error) {
    await stop();
    throw error;
  }
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    log: requestLog,
    async stats() {
      const agent = new http.Agent({ keepAlive: false });
      try {
        const reply = await send(agent, 'GET', `${url}/__host/stats`);
        const parsed: unknown = JSON.parse(reply.body);
        if (!Array.isArray(parsed)) return undefined;
        return parsed.filter(
          (e): e is { tInst: number; ms: number } => typeof e === 'object' && e !== null && typeof e.tInst === 'number' && typeof e.ms === 'number',
        );
      } catch {
        return undefined;
      } finally {
        agent.destroy();
      }
    },
    stop,
  };
}

type WasmOutcome =
  | { readonly kind: 'skipped'; readonly reason: string }
  | { readonly kind: 'error'; readonly message: string }
  | {
      readonly kind: 'ran';
      readonly hostPath: string;
      readonly count: CountResult;
      readonly latency: { text: string; failed: boolean };
      readonly cached: CachedOutcome;
      readonly capacity: CapacityOutcome;
      readonly methods: MethodsOutcome;
    };

interface WasmContext {
  readonly root: string;
  readonly bundle: string;
  readonly config: Config;
  /** The cached pass's settings, as the Node host parsed them (the wasm gets the same). */
  readonly cachedConfig: Config;
  /** The capacity pass's settings, likewise. */
  readonly capacityConfig: Config;
  /** The random host's settings (queue_method=random), likewise. */
  readonly randomConfig: Config;
  readonly apiToken: string;
  readonly load: Worker;
  readonly cleanups: { name: string; run: () => Promise<unknown> }[];
  /** Where the arm registers its hosts' request logs and the counting proxy, for the report. */
  readonly trouble: TroubleSource[];
}

/**
 * Warms a fresh Compute host: its workers compile the wasm as it starts, and the first requests on
 * them are slow enough, on a busy machine, to run into store_timeout_ms. A bypass path
 * (devconfig.json: /health) reaches the origin and never the store.
 */
async function warmComputeHost(what: string, url: string, agent: http.Agent, concurrency: number, snapshot: Snapshot): Promise<void> {
  const before = await snapshot();
  await runConcurrent(5 * concurrency, concurrency, async () => {
    const r = await send(agent, 'GET', `${url}/health`);
    if (r.headers['x-origin'] !== 'demo') throw new Error(`${what} warm-up: GET /health answered ${r.status} without the origin's header`);
  });
  const after = await snapshot();
  if (after.http !== before.http) throw new Error(`${what} warm-up: GET /health reached the store`);
}

/** The wasm arm: its own harness, the classes counted, and the stand-in's latency line. */
async function runWasmArm(ctx: WasmContext): Promise<WasmOutcome> {
  const host = locateComputeHost(ctx.root);
  if (!host.found) return { kind: 'skipped', reason: host.reason };
  const { cleanups } = ctx;
  /** This arm's hosts' logs and the counting proxy, as they start: what a failure prints. */
  const sources: TroubleSource[] = [];
  const watch = (source: TroubleSource): void => {
    sources.push(source);
    ctx.trouble.push(source);
  };
  try {
    log(`wasm: Compute host ${host.path}`);
    const redisServer = await startRedisServer();
    cleanups.push({ name: 'wasm redis-server', run: () => redisServer.stop() });
    const token = `bench-wasm-${randomUUID()}`;
    const backends = new Worker(ctx.bundle, { workerData: { role: 'backends', redisUrl: redisServer.url, token } satisfies WorkerInput });
    cleanups.push({ name: 'wasm backends worker (bridge, demo origin)', run: () => stopWorker(backends, 'wasm backends worker') });
    const ready = await nextWorkerMessage<BackendsReply>(backends, 20_000, 'wasm backends worker');
    if (ready.type !== 'ready') throw new Error(`wasm backends worker: ${ready.type === 'error' ? ready.message : ready.type}`);
    const { originUrl, bridgeUrl } = ready;
    const proxy = await startCountingProxy(bridgeUrl);
    cleanups.push({ name: 'wasm counting proxy', run: () => proxy.close() });
    watch(proxy);
    const stats = new IORedis(redisServer.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    stats.on('error', () => {});
    await stats.connect();
    cleanups.push({ name: 'wasm stats connection', run: () => stats.quit().catch(() => stats.disconnect()) });
    const snapshot: Snapshot = async () => ({ http: proxy.count(), redis: await redisScriptCalls(stats) });

    // Two apps, each in its own folder with its own fastly.toml: the waiting room, and a bare
    // pass-through wasm (one fetch to the origin backend) as the latency baseline on the same host.
    const dir = mkdtempSync(join(os.tmpdir(), 'wr-bench-wasm-'));
    cleanups.push({ name: 'wasm build folder', run: async () => rmSync(dir, { recursive: true, force: true }) });
    const appDir = join(dir, 'app');
    const bareDir = join(dir, 'bare');
    const cachedDir = join(dir, 'cached');
    mkdirSync(join(bareDir, 'bin'), { recursive: true });
    writeFileSync(join(bareDir, 'bare.js'), "addEventListener('fetch', (event) => event.respondWith(fetch(event.request, { backend: 'origin' })));\n");
    const started = performance.now();
    await Promise.all([
      runCommand(process.execPath, [join(ctx.root, 'src/node/build.mjs'), 'fastly', '--out', join(appDir, 'bin')], ctx.root, WASM_BUILD_TIMEOUT_MS),
      runCommand(
        process.execPath,
        [join(ctx.root, 'node_modules/@fastly/js-compute/dist/cli/js-compute-runtime-cli.js'), join(bareDir, 'bare.js'), join(bareDir, 'bin', 'main.wasm')],
        ctx.root,
        WASM_BUILD_TIMEOUT_MS,
      ),
    ]);
    log(`wasm: built bin/main.wasm and the bare proxy in ${((performance.now() - started) / 1000).toFixed(1)} s`);

    // The same settings as the Node host: devconfig.json with the same overrides; the Upstash URL
    // and the `upstash` backend are the counting proxy.
    const dev = JSON.parse(readFileSync(join(ctx.root, 'devconfig.json'), 'utf8')) as { config?: Record<string, string>; dev_secrets?: Record<string, string> };
    const settings = { ...dev.config, ...SETTING_OVERRIDES, upstash_url: proxy.url };
    const secrets = { ...dev.dev_secrets, upstash_token: token };
    writeFileSync(join(appDir, 'bin', 'config.json'), JSON.stringify(settings));
    writeFileSync(join(appDir, 'bin', 'secrets.json'), JSON.stringify(secrets));
    const manifest = (name: string, lines: readonly string[]): string =>
      ['manifest_version = 3', `name = "${name}"`, 'language = "javascript"', '[local_server]', ...lines, ''].join('\n');
    writeFileSync(
      join(appDir, 'fastly.toml'),
      manifest('waiting-room-bench', [
        ...localServerSection(originUrl, proxy.url),
      ]),
    );
    writeFileSync(join(bareDir, 'fastly.toml'), manifest('bare-proxy-bench', ['[local_server.backends.origin]', `url = "${originUrl}/"`]));
    // A variant of the app for another pass: the same bin/main.wasm and backends, other settings.
    const writeVariant = (variantDir: string, variant: string, overrides: Readonly<Record<string, string>>): void => {
      mkdirSync(join(variantDir, 'bin'), { recursive: true });
      copyFileSync(join(appDir, 'bin', 'main.wasm'), join(variantDir, 'bin', 'main.wasm'));
      writeFileSync(join(variantDir, 'bin', 'config.json'), JSON.stringify({ ...dev.config, ...overrides, upstash_url: proxy.url }));
      writeFileSync(join(variantDir, 'bin', 'secrets.json'), JSON.stringify(secrets));
      writeFileSync(
        join(variantDir, 'fastly.toml'),
        readFileSync(join(appDir, 'fastly.toml'), 'utf8').replace('name = "waiting-room-bench"', `name = "waiting-room-bench-${variant}"`),
      );
    };
    writeVariant(cachedDir, 'cached', CACHED_OVERRIDES);

    const fastlyCli = join(ctx.root, 'node_modules/.bin/fastly');
    const app = await startComputeHost('waiting room wasm', fastlyCli, host.path, appDir);
    cleanups.push({ name: 'waiting room wasm host (fastly compute serve)', run: () => app.stop() });
    watch(app.log);
    const bare = await startComputeHost('bare proxy wasm', fastlyCli, host.path, bareDir);
    cleanups.push({ name: 'bare proxy wasm host (fastly compute serve)', run: () => bare.stop() });
    log(`wasm: redis ${redisServer.url}, bridge ${bridgeUrl} behind counting proxy ${proxy.url}, origin ${originUrl}, waiting room ${app.url}, bare proxy ${bare.url}`);

    // --- Store round trips per request class.
    const agent = new http.Agent({ keepAlive: true, maxSockets: WASM_CONCURRENCY });
    cleanups.push({ name: 'wasm client agent', run: async () => agent.destroy() });
    const classes = visitorClasses('wasm', app.url, agent, ctx.config, ctx.apiToken);
    log(`wasm: counting store round trips per request class (${WASM_COUNT_PER_CLASS} per class)`);
    const count = await countRoundTrips(classes, WASM_COUNT_PER_CLASS, WASM_CONCURRENCY, snapshot);

    // --- Latency, on the stand-in's terms.
    const waitingCookies: string[] = [];
    for (let i = 0; i < 2; i++) waitingCookies.push(await classes.newVisitor());
    const accessCookies = count.access.slice(0, 2);
    const arms: ArmSpec[] = [
      { name: 'bare proxy wasm (one fetch to origin)', url: `${bare.url}${PATH}`, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
      { name: 'waiting room wasm: admitted (token check)', url: classes.page, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
      { name: 'waiting room wasm: waiting poll (1 store trip)', url: classes.page, cookies: waitingCookies, expectStatus: ctx.config.holdStatus, expectOrigin: false },
    ];
    const run = WASM_LATENCY_RUN;
    log(`wasm: latency, concurrency ${run.concurrency}, ${run.warmup} warm-up + ${run.rounds} × ${run.perRound} per arm`);
    const before = await snapshot();
    const reply = nextWorkerMessage<LoadReply>(ctx.load, WASM_LATENCY_BUDGET_MS + 20_000, 'load worker');
    ctx.load.postMessage({ type: 'run', plan: { arms, ...run, budgetMs: WASM_LATENCY_BUDGET_MS } } satisfies ToWorker);
    const result = await reply;
    if (result.type !== 'result') throw new Error(`load worker: ${result.type === 'error' ? result.message : result.type}`);
    const after = await snapshot();
    // The host's timings of this run's waiting-room requests: the last ones it served (concurrency 1).
    const appRequests = (result.arms[1]?.sent ?? 0) + (result.arms[2]?.sent ?? 0);
    const hostStats = (await app.stats())?.slice(-appRequests);
    const latency = wasmLatencyReport(result.arms, result.truncated, after.http - before.http, after.redis - before.redis, hostStats);

    // --- The cached pass, on a third host: the same wasm with the cached settings.
    let cached: CachedOutcome;
    let cachedApp: ComputeHostProcess | undefined;
    const cachedAgent = new http.Agent({ keepAlive: true, maxSockets: CACHED_WASM_JOIN_CONCURRENCY });
    cleanups.push({ name: 'wasm cached client agent', run: async () => cachedAgent.destroy() });
    try {
      cachedApp = await startComputeHost('cached waiting room wasm', fastlyCli, host.path, cachedDir);
      const started = cachedApp;
      cleanups.push({ name: 'cached waiting room wasm host (fastly compute serve)', run: () => started.stop() });
      watch(cachedApp.log);
      log(`wasm: cached waiting room ${cachedApp.url}`);
      await warmComputeHost('wasm (cached)', cachedApp.url, cachedAgent, CACHED_WASM_JOIN_CONCURRENCY, snapshot);
      const cachedResult = await runCachedPass({
        host: 'wasm',
        pass: 'cached pass',
        windowMs: CACHED_WINDOW_MS,
        classes: visitorClasses('wasm (cached)', cachedApp.url, cachedAgent, ctx.cachedConfig, ctx.apiToken),
        config: ctx.cachedConfig,
        visitors: CACHED_WASM_VISITORS,
        joinConcurrency: CACHED_WASM_JOIN_CONCURRENCY,
        pollConcurrency: CACHED_WASM_POLL_CONCURRENCY,
        load: ctx.load,
        snapshot,
        storeTimes: () => proxy.times(),
        requestLog: cachedApp.log,
      });
      cached = { kind: 'ran', result: cachedResult };
    } catch (error) {
      log(`wasm cached pass FAILED: ${messageOf(error)}`);
      const lines = await printTrouble('wasm cached pass', cachedApp === undefined ? [proxy] : [cachedApp.log, proxy]);
      cached = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
    }

    // --- The capacity pass, on a fourth host: the same wasm with the capacity settings.
    let capacity: CapacityOutcome;
    let capacityApp: ComputeHostProcess | undefined;
    try {
      const capacityDir = join(dir, 'capacity');
      writeVariant(capacityDir, 'capacity', CAPACITY_OVERRIDES);
      capacityApp = await startComputeHost('capacity waiting room wasm', fastlyCli, host.path, capacityDir);
      const started = capacityApp;
      cleanups.push({ name: 'capacity waiting room wasm host (fastly compute serve)', run: () => started.stop() });
      watch(capacityApp.log);
      log(`wasm: capacity waiting room ${capacityApp.url}`);
      const capacityAgent = new http.Agent({ keepAlive: true, maxSockets: WASM_CONCURRENCY });
      cleanups.push({ name: 'wasm capacity client agent', run: async () => capacityAgent.destroy() });
      await warmComputeHost('wasm (capacity)', capacityApp.url, capacityAgent, WASM_CONCURRENCY, snapshot);
      const capacityResult = await runCapacityPass({
        host: 'wasm',
        base: capacityApp.url,
        agent: capacityAgent,
        config: ctx.capacityConfig,
        apiToken: ctx.apiToken,
        perClass: CAPACITY_WASM_PER_CLASS,
        concurrency: WASM_CONCURRENCY,
        snapshot,
        bridge: { url: bridgeUrl, token },
      });
      capacity = { kind: 'ran', result: capacityResult };
    } catch (error) {
      log(`wasm capacity pass FAILED: ${messageOf(error)}`);
      const lines = await printTrouble('wasm capacity pass', capacityApp === undefined ? [proxy] : [capacityApp.log, proxy]);
      capacity = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
    }

    // --- The queueing-methods pass: fresh visitors poll the cached host (fifo), then as many poll a
    // host with queue_method=random (the same wasm, its own queue), for the same window each.
    let fifo: CachedOutcome;
    if (cachedApp === undefined) {
      fifo = { kind: 'error', message: 'the cached host did not start' };
    } else {
      try {
        fifo = {
          kind: 'ran',
          result: await runCachedPass({
            host: 'wasm',
            pass: 'methods pass, fifo',
            windowMs: METHODS_WINDOW_MS,
            classes: visitorClasses('wasm (fifo)', cachedApp.url, cachedAgent, ctx.cachedConfig, ctx.apiToken),
            config: ctx.cachedConfig,
            visitors: METHODS_WASM_VISITORS,
            joinConcurrency: CACHED_WASM_JOIN_CONCURRENCY,
            pollConcurrency: CACHED_WASM_POLL_CONCURRENCY,
            load: ctx.load,
            snapshot,
            storeTimes: () => proxy.times(),
            requestLog: cachedApp.log,
          }),
        };
      } catch (error) {
        log(`wasm methods pass (fifo) FAILED: ${messageOf(error)}`);
        const lines = await printTrouble('wasm methods pass (fifo)', [cachedApp.log, proxy]);
        fifo = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
      }
    }
    let random: CachedOutcome;
    let randomApp: ComputeHostProcess | undefined;
    try {
      const randomDir = join(dir, 'random');
      writeVariant(randomDir, 'random', RANDOM_OVERRIDES);
      randomApp = await startComputeHost('random waiting room wasm', fastlyCli, host.path, randomDir);
      const started = randomApp;
      cleanups.push({ name: 'random waiting room wasm host (fastly compute serve)', run: () => started.stop() });
      watch(randomApp.log);
      log(`wasm: random waiting room ${randomApp.url}`);
      const randomAgent = new http.Agent({ keepAlive: true, maxSockets: CACHED_WASM_JOIN_CONCURRENCY });
      cleanups.push({ name: 'wasm random client agent', run: async () => randomAgent.destroy() });
      await warmComputeHost('wasm (random)', randomApp.url, randomAgent, CACHED_WASM_JOIN_CONCURRENCY, snapshot);
      random = {
        kind: 'ran',
        result: await runCachedPass({
          host: 'wasm',
          pass: 'methods pass, random',
          windowMs: METHODS_WINDOW_MS,
          classes: visitorClasses('wasm (random)', randomApp.url, randomAgent, ctx.randomConfig, ctx.apiToken),
          config: ctx.randomConfig,
          visitors: METHODS_WASM_VISITORS,
          joinConcurrency: CACHED_WASM_JOIN_CONCURRENCY,
          pollConcurrency: CACHED_WASM_POLL_CONCURRENCY,
          load: ctx.load,
          snapshot,
          storeTimes: () => proxy.times(),
          requestLog: randomApp.log,
        }),
      };
    } catch (error) {
      log(`wasm methods pass (random) FAILED: ${messageOf(error)}`);
      const lines = await printTrouble('wasm methods pass (random)', randomApp === undefined ? [proxy] : [randomApp.log, proxy]);
      random = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
    }
    return { kind: 'ran', hostPath: host.path, count, latency, cached, capacity, methods: { fifo, random } };
  } catch (error) {
    log(`wasm arm FAILED: ${messageOf(error)}`);
    const lines = await printTrouble('wasm arm', sources);
    return { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
  }
}

function wasmLatencyReport(
  arms: readonly ArmSample[],
  truncated: boolean,
  storeHttp: number,
  storeRedis: number,
  hostStats: { tInst: number; ms: number }[] | undefined,
): { text: string; failed: boolean } {
  const stats = arms.map((arm) => ({ arm, p50: percentile([...arm.latencies].sort((a, b) => a - b), 50), mean: mean(arm.latencies) }));
  const base = stats[0];
  const rows = stats.map((s, i) => [
    s.arm.name,
    String(s.arm.latencies.length),
    ms(s.p50),
    ms(s.mean),
    i === 0 || base === undefined ? '—' : signedMs(s.p50 - base.p50),
    i === 0 || base === undefined ? '—' : signedMs(s.mean - base.mean),
  ]);
  const errors = arms.filter((a) => a.errors > 0);
  const expectedStore = arms[2]?.sent ?? 0;
  const storeOk = storeHttp === expectedStore && storeRedis === expectedStore;
  const run = WASM_LATENCY_RUN;
  const instantiate =
    hostStats !== undefined && hostStats.length > 0
      ? ` The host's own timings of this run's ${hostStats.length} waiting-room requests (GET /__host/stats): median ${ms(median(hostStats.map((s) => s.ms)))} ms, of which ${ms(median(hostStats.map((s) => s.tInst)))} ms instantiating the wasm.`
      : '';
  const text = [
    `### Wasm latency on the Compute host: the stand-in's numbers, NOT Fastly's (concurrency ${run.concurrency}; ${run.warmup} warm-up then ${run.rounds} interleaved rounds × ${run.perRound} per arm)`,
    '',
    table(['arm', 'requests', 'p50 ms', 'mean ms', 'added p50', 'added mean'], ['l', 'r', 'r', 'r', 'r', 'r'], rows),
    '',
    `The host instantiates a fresh wasm for every request, so absolute numbers say nothing about Fastly; "added" is this arm minus the bare proxy wasm on the same host.${instantiate}` +
      ` Store requests during this run: ${storeHttp} HTTP / ${storeRedis} Redis, for ${expectedStore} waiting polls sent${storeOk ? ' — as expected.' : ' — MISMATCH.'}` +
      (errors.length > 0 ? ` Errors: ${errors.map((a) => `${a.name} ${a.errors} (${a.firstError ?? ''})`).join('; ')}.` : '') +
      (truncated ? ` Cut short by the ${WASM_LATENCY_BUDGET_MS / 1000} s budget of the run.` : ''),
    '',
  ].join('\n');
  return { text, failed: truncated || errors.length > 0 || !storeOk };
}

// ---------------------------------------------------------------------------------------------
// Main: the edge (both Node hosts), the wasm arm, the counts and the report

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
  /** Every host's request log and the counting proxy, as they start. */
  const trouble: TroubleSource[] = [];
  const watchdog = setTimeout(() => {
    log(`gave up after ${WATCHDOG_MS / 1000} s; stopping everything`);
    for (const line of trouble.flatMap((source) => source.report())) log(line);
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
    const ready = await nextWorkerMessage<BackendsReply>(backends, 20_000, 'backends worker');
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
    const bridgeTimes: number[] = [];
    const countingFetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      if (url.startsWith(bridgeUrl)) {
        bridgeRequests++;
        bridgeTimes.push(performance.now());
      }
      return realFetch(input, init);
    };
    globalThis.fetch = countingFetch as typeof fetch;
    cleanups.push({ name: 'fetch counter', run: async () => void (globalThis.fetch = realFetch) });
    // --- Count 2: script commands Redis executed.
    const snapshot: Snapshot = async () => ({ http: bridgeRequests, redis: await redisScriptCalls(stats) });

    // --- The edge: the waiting room with the real Upstash store, and a bare proxy beside it.
    const devconfig = findProjectFile('devconfig.json');
    const root = dirname(devconfig);
    const local = readLocalConfig(devconfig);
    const settingOverrides: Record<string, string> = { ...SETTING_OVERRIDES, upstash_url: bridgeUrl };
    const secretOverrides: Record<string, string> = { upstash_token: token };
    const roomLog = new RequestLogKeeper('node waiting room (counts, latency)');
    trouble.push(roomLog);
    const room = buildWaitingRoom({
      settings: (key) => settingOverrides[key] ?? local.settings(key),
      secrets: (key) => secretOverrides[key] ?? local.secrets(key),
      originUrl,
      // Nothing printed (the bench measures the request path, not stdout): the records are counted,
      // and those of requests that met a store failure kept, for the report.
      logger: roomLog.logger,
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
    const classes = visitorClasses('node', wr.url, agent, config, apiToken);
    log(`counting store round trips per request class (${COUNT_PER_CLASS} per class)`);
    const nodeCount = await countRoundTrips(classes, COUNT_PER_CLASS, CONCURRENCY, snapshot).catch(async (error: unknown) => {
      await printTrouble('node round-trip count', [roomLog]);
      throw error;
    });

    // --- Added latency. Fresh waiting visitors, behind the cursor, for the poll arm.
    const latencyWaiting: string[] = [];
    for (let i = 0; i < CONCURRENCY; i++) latencyWaiting.push(await classes.newVisitor());
    const accessCookies = nodeCount.access.slice(0, CONCURRENCY);
    const arms: ArmSpec[] = [
      // The same Cookie header on every pass-through arm, so the requests are byte for byte alike.
      { name: 'origin, direct (no proxy)', url: `${originUrl}${PATH}`, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
      { name: 'bare proxy (startHost + forward)', url: `${proxy.url}${PATH}`, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
      { name: 'waiting room: admitted (token check)', url: classes.page, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
      { name: 'waiting room: waiting poll (1 store trip)', url: classes.page, cookies: latencyWaiting, expectStatus: config.holdStatus, expectOrigin: false },
    ];
    const load = new Worker(bundle, { workerData: { role: 'load' } satisfies WorkerInput });
    cleanups.push({ name: 'load worker', run: () => stopWorker(load, 'load worker') });

    const latencyReports: string[] = [];
    let latencyFailed = false;
    for (const run of LATENCY_RUNS) {
      log(`latency: concurrency ${run.concurrency}, ${run.warmup} warm-up + ${run.rounds} × ${run.perRound} per arm`);
      const before = await snapshot();
      const reply = nextWorkerMessage<LoadReply>(load, LATENCY_RUN_BUDGET_MS + 20_000, 'load worker');
      load.postMessage({ type: 'run', plan: { arms, ...run, budgetMs: LATENCY_RUN_BUDGET_MS } } satisfies ToWorker);
      const result = await reply;
      if (result.type !== 'result') throw new Error(`load worker: ${result.type === 'error' ? result.message : result.type}`);
      const after = await snapshot();
      const report = latencyReport(run, result.arms, result.truncated, after.http - before.http, after.redis - before.redis);
      latencyReports.push(report.text);
      latencyFailed ||= report.failed;
    }

    // --- The cached pass on the Node host: a second waiting room, the state cache at its default,
    // its own queue, the same store, bridge and counts; the first room stays idle from here on.
    const cachedOverrides: Record<string, string> = { ...CACHED_OVERRIDES, upstash_url: bridgeUrl };
    const cachedLog = new RequestLogKeeper('node cached waiting room (cached pass, methods pass fifo)');
    trouble.push(cachedLog);
    const cachedRoom = buildWaitingRoom({
      settings: (key) => cachedOverrides[key] ?? local.settings(key),
      secrets: (key) => secretOverrides[key] ?? local.secrets(key),
      originUrl,
      logger: cachedLog.logger,
      store: (cfg, secrets) =>
        new UpstashQueueStore({
          redis: new Redis(createUpstashClientOptions({ url: cfg.upstashUrl ?? '', token: secrets.upstashToken ?? '', retries: cfg.storeRetries })),
        }),
    });
    let nodeCached: CachedOutcome;
    let cachedHost: RunningServer | undefined;
    const cachedAgent = new http.Agent({ keepAlive: true, maxSockets: CACHED_NODE_JOIN_CONCURRENCY });
    cleanups.push({ name: 'cached client agent', run: async () => cachedAgent.destroy() });
    try {
      cachedHost = await startHost(cachedRoom.handler);
      const started = cachedHost;
      cleanups.push({ name: 'cached waiting room host', run: () => started.close() });
      const result = await runCachedPass({
        host: 'node',
        pass: 'cached pass',
        windowMs: CACHED_WINDOW_MS,
        classes: visitorClasses('node (cached)', cachedHost.url, cachedAgent, cachedRoom.config, apiToken),
        config: cachedRoom.config,
        visitors: CACHED_NODE_VISITORS,
        joinConcurrency: CACHED_NODE_JOIN_CONCURRENCY,
        pollConcurrency: CACHED_NODE_POLL_CONCURRENCY,
        load,
        snapshot,
        storeTimes: () => bridgeTimes,
        requestLog: cachedLog,
      });
      nodeCached = { kind: 'ran', result };
    } catch (error) {
      log(`node cached pass FAILED: ${messageOf(error)}`);
      const lines = await printTrouble('node cached pass', [cachedLog]);
      nodeCached = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
    }

    // --- The capacity pass on the Node host: a third waiting room, capacity mode, its own queue.
    const capacityOverrides: Record<string, string> = { ...CAPACITY_OVERRIDES, upstash_url: bridgeUrl };
    const capacityLog = new RequestLogKeeper('node capacity waiting room');
    trouble.push(capacityLog);
    const capacityRoom = buildWaitingRoom({
      settings: (key) => capacityOverrides[key] ?? local.settings(key),
      secrets: (key) => secretOverrides[key] ?? local.secrets(key),
      originUrl,
      logger: capacityLog.logger,
      store: (cfg, secrets) =>
        new UpstashQueueStore({
          redis: new Redis(createUpstashClientOptions({ url: cfg.upstashUrl ?? '', token: secrets.upstashToken ?? '', retries: cfg.storeRetries })),
        }),
    });
    let nodeCapacity: CapacityOutcome;
    try {
      const capacityHost = await startHost(capacityRoom.handler);
      cleanups.push({ name: 'capacity waiting room host', run: () => capacityHost.close() });
      const capacityAgent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
      cleanups.push({ name: 'capacity client agent', run: async () => capacityAgent.destroy() });
      const result = await runCapacityPass({
        host: 'node',
        base: capacityHost.url,
        agent: capacityAgent,
        config: capacityRoom.config,
        apiToken,
        perClass: CAPACITY_NODE_PER_CLASS,
        concurrency: CONCURRENCY,
        snapshot,
        bridge: { url: bridgeUrl, token },
      });
      nodeCapacity = { kind: 'ran', result };
    } catch (error) {
      log(`node capacity pass FAILED: ${messageOf(error)}`);
      const lines = await printTrouble('node capacity pass', [capacityLog]);
      nodeCapacity = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
    }

    // --- The queueing-methods pass on the Node host: fresh visitors poll the cached room (fifo),
    // then as many poll a fourth room with queue_method=random (its own queue), the same window each.
    const randomOverrides: Record<string, string> = { ...RANDOM_OVERRIDES, upstash_url: bridgeUrl };
    const randomLog = new RequestLogKeeper('node random waiting room (methods pass random)');
    trouble.push(randomLog);
    const randomRoom = buildWaitingRoom({
      settings: (key) => randomOverrides[key] ?? local.settings(key),
      secrets: (key) => secretOverrides[key] ?? local.secrets(key),
      originUrl,
      logger: randomLog.logger,
      store: (cfg, secrets) =>
        new UpstashQueueStore({
          redis: new Redis(createUpstashClientOptions({ url: cfg.upstashUrl ?? '', token: secrets.upstashToken ?? '', retries: cfg.storeRetries })),
        }),
    });
    if (randomRoom.config.queueMethod !== 'random') throw new Error(`the random room's queue_method is ${randomRoom.config.queueMethod}`);
    if (cachedRoom.config.queueMethod !== 'fifo' || cachedRoom.config.stateCacheSeconds < 1) {
      throw new Error(`the cached room is not FIFO with the cache on (${cachedRoom.config.queueMethod}, state_cache_seconds=${cachedRoom.config.stateCacheSeconds})`);
    }
    let nodeFifo: CachedOutcome;
    if (cachedHost === undefined) {
      nodeFifo = { kind: 'error', message: 'the cached host did not start' };
    } else {
      try {
        nodeFifo = {
          kind: 'ran',
          result: await runCachedPass({
            host: 'node',
            pass: 'methods pass, fifo',
            windowMs: METHODS_WINDOW_MS,
            classes: visitorClasses('node (fifo)', cachedHost.url, cachedAgent, cachedRoom.config, apiToken),
            config: cachedRoom.config,
            visitors: METHODS_NODE_VISITORS,
            joinConcurrency: CACHED_NODE_JOIN_CONCURRENCY,
            pollConcurrency: CACHED_NODE_POLL_CONCURRENCY,
            load,
            snapshot,
            storeTimes: () => bridgeTimes,
            requestLog: cachedLog,
          }),
        };
      } catch (error) {
        log(`node methods pass (fifo) FAILED: ${messageOf(error)}`);
        const lines = await printTrouble('node methods pass (fifo)', [cachedLog]);
        nodeFifo = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
      }
    }
    let nodeRandom: CachedOutcome;
    try {
      const randomHost = await startHost(randomRoom.handler);
      cleanups.push({ name: 'random waiting room host', run: () => randomHost.close() });
      const randomAgent = new http.Agent({ keepAlive: true, maxSockets: CACHED_NODE_JOIN_CONCURRENCY });
      cleanups.push({ name: 'random client agent', run: async () => randomAgent.destroy() });
      nodeRandom = {
        kind: 'ran',
        result: await runCachedPass({
          host: 'node',
          pass: 'methods pass, random',
          windowMs: METHODS_WINDOW_MS,
          classes: visitorClasses('node (random)', randomHost.url, randomAgent, randomRoom.config, apiToken),
          config: randomRoom.config,
          visitors: METHODS_NODE_VISITORS,
          joinConcurrency: CACHED_NODE_JOIN_CONCURRENCY,
          pollConcurrency: CACHED_NODE_POLL_CONCURRENCY,
          load,
          snapshot,
          storeTimes: () => bridgeTimes,
          requestLog: randomLog,
        }),
      };
    } catch (error) {
      log(`node methods pass (random) FAILED: ${messageOf(error)}`);
      const lines = await printTrouble('node methods pass (random)', [randomLog]);
      nodeRandom = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
    }

    // --- The same classes through bin/main.wasm on a Compute host.
    const wasm = await runWasmArm({
      root,
      bundle,
      config,
      apiToken,
      cachedConfig: cachedRoom.config,
      capacityConfig: capacityRoom.config,
      randomConfig: randomRoom.config,
      load,
      cleanups,
      trouble,
    });
    if (wasm.kind === 'skipped') log(`wasm column skipped: ${wasm.reason}`);
    if (wasm.kind === 'error') log(`wasm arm FAILED: ${wasm.message}`);

    // --- Report.
    const perRequest = (row: ClassRow): string => `${(row.http / row.requests).toFixed(2)} · ${(row.redis / row.requests).toFixed(2)}`;
    const wasmRows = wasm.kind === 'ran' ? wasm.count.rows : undefined;
    let overBudget = false;
    const rows = nodeCount.rows.map((nodeRow, i) => {
      const wasmRow = wasmRows?.[i];
      const nodeOk = withinBudget(nodeRow);
      const wasmOk = wasm.kind === 'skipped' || (wasmRow !== undefined && withinBudget(wasmRow));
      overBudget ||= !nodeOk || (wasmRow !== undefined && !withinBudget(wasmRow));
      const wasmCell = wasmRow !== undefined ? perRequest(wasmRow) : wasm.kind === 'skipped' ? 'skipped' : 'error';
      const verdict = nodeOk && wasmOk ? (wasm.kind === 'skipped' ? 'PASS (node only)' : 'PASS') : 'FAIL';
      return [nodeRow.label, `≤ ${nodeRow.budget}`, perRequest(nodeRow), wasmCell, verdict];
    });
    const countTable = table(
      ['request class', 'budget', 'node round trips / request (HTTP · Redis)', 'wasm round trips / request (HTTP · Redis)', 'result'],
      ['l', 'r', 'r', 'r', 'l'],
      rows,
    );
    const agreement = (host: string, count: CountResult): string => {
      const disagree = count.rows.filter((row) => row.http !== row.redis);
      return disagree.length === 0
        ? `${host}: the two counts agree on every row.`
        : `${host}: the counts DISAGREE on ${disagree.map((r) => `${r.label} (${r.http} HTTP vs ${r.redis} Redis)`).join('; ')}.`;
    };
    const coldLine = (host: string, count: CountResult): string =>
      `${host}: ${count.cold.map((row) => `${row.label} ${row.http} HTTP / ${row.redis} Redis`).join(', ')}.`;
    const wasmNote =
      wasm.kind === 'ran'
        ? [
            `wasm: bin/main.wasm built from the same source, served by \`fastly compute serve --skip-build --viceroy-path ${wasm.hostPath}\` with the ` +
              'same settings (devconfig.json and the same overrides) and its own redis-server, bridge and demo origin. Its `upstash` backend ' +
              'is a counting HTTP proxy in front of that bridge (every request that reaches the bridge, retries included); Redis is that ' +
              `harness's own. ${agreement('node', nodeCount)} ${agreement('wasm', wasm.count)}`,
            `Cold script cache (first call of each script on a fresh Redis: EVALSHA → NOSCRIPT → EVAL, once per script): ` +
              `${coldLine('node', nodeCount)} ${coldLine('wasm', wasm.count)}`,
          ]
        : [
            wasm.kind === 'skipped'
              ? `wasm column SKIPPED: ${wasm.reason}. Only the Node budgets decide the result.`
              : `wasm column FAILED: ${wasm.message}`,
            agreement('node', nodeCount),
            `Cold script cache (first call of each script on a fresh Redis: EVALSHA → NOSCRIPT → EVAL, once per script): ${coldLine('node', nodeCount)}`,
          ];
    const wasmFailed = wasm.kind === 'error' || (wasm.kind === 'ran' && wasm.latency.failed);
    const cached = cachedPassReport(cachedRoom.config.stateCacheSeconds, nodeCached, wasm.kind === 'ran' ? wasm.cached : wasm.kind === 'skipped' ? wasm : { kind: 'error', message: 'the wasm arm failed before it' });
    const capacity = capacityReport(
      nodeCapacity,
      wasm.kind === 'ran' ? wasm.capacity : wasm.kind === 'skipped' ? wasm : { kind: 'error', message: 'the wasm arm failed before it' },
    );
    const methods = methodsReport(
      cachedRoom.config.stateCacheSeconds,
      cachedRoom.config.refreshSeconds,
      { fifo: nodeFifo, random: nodeRandom },
      wasm.kind === 'ran' ? wasm.methods : wasm.kind === 'skipped' ? wasm : { kind: 'error', message: 'the wasm arm failed before it' },
    );
    const troubleDetails = trouble.flatMap((source) => source.report());
    const troubleText = [
      '### Store failures seen by the hosts',
      '',
      'Every request log of the run: the Node hosts\' records (kept in memory, nothing printed) and the Compute hosts\' `wr_log :: {json}` ' +
        'lines on their stdout; a request counts here when it has a `store_error`, an `unavailable…` decision or a 5xx answer. The ' +
        'counting proxy in front of the wasm harness\'s bridge reports its own failures (a forward that failed, on a reused keep-alive ' +
        'socket or a new one; a client connection closed early; a 5xx from the bridge). Any of them fails the run: with ' +
        'store_failure=hold a poll that met a store failure still gets a holding page and a renewed waiting cookie.',
      ...trouble.map((source) => `- ${source.summary()}`),
      ...(troubleDetails.length > 0 ? ['', '```', ...troubleDetails, '```'] : []),
      '',
    ].join('\n');
    const cpus = os.cpus();
    const out: string[] = [
      '## Benchmark (`npm run bench`)',
      '',
      `Machine: ${cpus.length} CPUs (${cpus[0]?.model.trim() ?? 'unknown model'}), ${os.platform()} ${os.arch()}, Node ${process.version}, ` +
        `redis-server ${redisVersion}, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the end. ` +
        'Everything on 127.0.0.1: redis-server, the Upstash REST bridge over it, the demo origin, the Node host with the real ' +
        '`UpstashQueueStore` (`@upstash/redis` client, `createUpstashClientOptions`), a bare pass-through proxy' +
        (wasm.kind === 'ran' ? ', and bin/main.wasm on a Compute host with its own redis-server, bridge and origin.' : '.'),
      '',
      `### Store round trips per request (node: ${COUNT_PER_CLASS} requests per class, concurrency ${CONCURRENCY}; ` +
        `wasm: ${WASM_COUNT_PER_CLASS} per class, concurrency ${WASM_CONCURRENCY}; warm script cache; ` +
        `settings over devconfig.json on both: ${Object.entries(SETTING_OVERRIDES).map(([k, v]) => `${k}=${v}`).join(', ')})`,
      '',
      countTable,
      '',
      'Each cell: HTTP requests that reached the Upstash bridge · script commands Redis executed (`INFO commandstats`, calls + ' +
        'rejected_calls of EVALSHA/EVAL), per request, counted independently. node: a counting wrapper around `fetch` in the host process.',
      ...wasmNote,
      '',
      cached.text,
      methods.text,
      capacity.text,
      ...latencyReports,
      ...(wasm.kind === 'ran' ? [wasm.latency.text] : []),
      troubleText,
      `Total run time ${((performance.now() - startedAt) / 1000).toFixed(1)} s.`,
    ];
    process.stdout.write(`${out.join('\n')}\n`);
    if (overBudget) log('FAIL: a store round-trip budget is exceeded');
    if (cached.failed) log(`FAIL: the cached pass failed, had errors or admissions, or cost ${CACHED_MAX_COMMANDS_PER_POLL} store commands per poll or more`);
    if (capacity.failed) log('FAIL: the capacity pass failed, or a capacity-mode store round-trip budget is exceeded');
    if (methods.failed) log('FAIL: the queueing-methods pass failed, had errors or admissions, FIFO cost too much per poll, or random did not cost exactly one store command per poll');
    if (latencyFailed) log('FAIL: the latency run had errors or was cut short');
    if (wasm.kind === 'error') log('FAIL: the wasm arm could not run to the end (see above)');
    else if (wasmFailed) log('FAIL: the wasm latency run had errors, was cut short or made unexpected store requests');
    // With store_failure=hold a request that met a store failure can still look right from outside
    // (a holding page and a renewed waiting cookie): any the hosts logged fails the run.
    const storeFailed = troubleDetails.length > 0;
    if (storeFailed) {
      log('FAIL: requests met store failures, or a host or the counting proxy reported errors:');
      for (const line of troubleDetails) log(line);
    }
    return overBudget || latencyFailed || wasmFailed || cached.failed || capacity.failed || methods.failed || storeFailed ? 1 : 0;
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
