/**
 * The bench's two worker threads, and the main thread's side of talking to them. The bundle
 * (bin/bench.mjs) is also the workers' entry: bench.ts hands `workerData` to runWorker(), whose
 * `role` picks the part to run:
 *   - "backends": the demo origin and the Upstash REST bridge over one redis-server, so the edge's
 *     event loop runs only the hosts under test;
 *   - "load": the load generator (the latency runs' interleaved arms, the poll windows).
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { Worker, parentPort } from 'node:worker_threads';
import { startDemoOrigin } from '../../src/node/demo-origin';
import { startUpstashBridge } from '../../src/node/upstash-bridge';
import { nextWorkerMessage } from '../support/worker-message';
import { cookieFrom, keepCookies, log, mean, messageOf, percentile, REQUEST_TIMEOUT_MS, tokenKind, type Cleanups } from './util';

// ---------------------------------------------------------------------------------------------
// Messages between the threads

export interface BackendsInput {
  readonly role: 'backends';
  readonly redisUrl: string;
  readonly token: string;
}
export interface LoadInput {
  readonly role: 'load';
}
export type WorkerInput = BackendsInput | LoadInput;

export type BackendsReply = { type: 'ready'; originUrl: string; bridgeUrl: string } | { type: 'stopped' } | { type: 'error'; message: string };

export interface ArmSpec {
  readonly name: string;
  readonly url: string;
  /** Cookie headers, used in turn. */
  readonly cookies: readonly string[];
  /**
   * On arms that play visitors: the cookies an answer sets replace the ones sent (keepCookies), as
   * a browser keeps them. Without this an access cookie older than the renewal age would be renewed
   * (signed again, its response copied to add Set-Cookie) on every request of the run, which no
   * visitor does more than once a minute.
   */
  readonly keepCookies?: boolean;
  readonly expectStatus: number;
  /** True when the demo origin must have answered (its `x-origin: demo` header). */
  readonly expectOrigin: boolean;
}
export interface LoadPlan {
  readonly arms: readonly ArmSpec[];
  readonly warmup: number;
  readonly rounds: number;
  readonly perRound: number;
  readonly concurrency: number;
  readonly budgetMs: number;
}
export interface ArmSample {
  readonly name: string;
  /** Latencies in ms of the measured (not warm-up) requests that succeeded. */
  readonly latencies: number[];
  /** Mean latency of each round, for paired per-round comparisons. */
  readonly roundMeans: number[];
  /** Median latency of each round, likewise. */
  readonly roundP50s: number[];
  /** Time spent in this arm's measured blocks. */
  wallMs: number;
  /** Every request sent, warm-up included. */
  sent: number;
  errors: number;
  firstError: string | undefined;
}
/** The cached pass's polling: every visitor polls once per `intervalMs`, all polls spread evenly. */
export interface PollPlan {
  readonly url: string;
  /** One `name=value` cookie per visitor; each is replaced by the renewed one the answer carries. */
  readonly cookies: readonly string[];
  readonly cookieName: string;
  readonly holdStatus: number;
  readonly intervalMs: number;
  readonly windowMs: number;
  readonly concurrency: number;
}
export interface PollResult {
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
export type ToWorker = { type: 'run'; plan: LoadPlan } | { type: 'poll'; plan: PollPlan } | { type: 'stop' };
export type LoadReply =
  | { type: 'result'; arms: ArmSample[]; truncated: boolean }
  | { type: 'poll-result'; result: PollResult }
  | { type: 'error'; message: string }
  | { type: 'stopped' };

export async function stopWorker(worker: Worker, what: string): Promise<void> {
  try {
    const reply = nextWorkerMessage<{ type: string }>(worker, 5_000, `stopping ${what}`);
    worker.postMessage({ type: 'stop' } satisfies ToWorker);
    await reply;
  } catch (error) {
    log(`${what} did not stop cleanly (${messageOf(error)}); terminating it`);
  }
  await worker.terminate();
}

/** Starts a "backends" thread (demo origin + Upstash bridge over `redisUrl`), stopped at the end. */
export async function startBackends(
  bundle: string,
  redisUrl: string,
  token: string,
  what: string,
  cleanups: Cleanups,
): Promise<{ originUrl: string; bridgeUrl: string }> {
  const backends = new Worker(bundle, { workerData: { role: 'backends', redisUrl, token } satisfies WorkerInput });
  cleanups.add(`${what} (bridge, demo origin)`, () => stopWorker(backends, what));
  const ready = await nextWorkerMessage<BackendsReply>(backends, 20_000, what);
  if (ready.type !== 'ready') throw new Error(`${what}: ${ready.type === 'error' ? ready.message : ready.type}`);
  return { originUrl: ready.originUrl, bridgeUrl: ready.bridgeUrl };
}

/** Starts the "load" thread, stopped at the end. */
export function startLoadWorker(bundle: string, cleanups: Cleanups): Worker {
  const load = new Worker(bundle, { workerData: { role: 'load' } satisfies WorkerInput });
  cleanups.add('load worker', () => stopWorker(load, 'load worker'));
  return load;
}

/** Has the load thread run a latency plan: the arms' samples, interleaved. */
export async function runLoadPlan(load: Worker, plan: LoadPlan, timeoutMs: number): Promise<{ arms: ArmSample[]; truncated: boolean }> {
  const reply = nextWorkerMessage<LoadReply>(load, timeoutMs, 'load worker');
  load.postMessage({ type: 'run', plan } satisfies ToWorker);
  const result = await reply;
  if (result.type !== 'result') throw new Error(`load worker: ${result.type === 'error' ? result.message : result.type}`);
  return result;
}

/** Has the load thread run a poll window. */
export async function runPollPlan(load: Worker, plan: PollPlan, timeoutMs: number): Promise<PollResult> {
  const reply = nextWorkerMessage<LoadReply>(load, timeoutMs, 'load worker (poll window)');
  load.postMessage({ type: 'poll', plan } satisfies ToWorker);
  const answer = await reply;
  if (answer.type !== 'poll-result') throw new Error(`load worker: ${answer.type === 'error' ? answer.message : answer.type}`);
  return answer.result;
}

/** The worker thread's entry: `workerData.role` picks the part to run. */
export function runWorker(input: WorkerInput): void {
  if (input.role === 'backends') void backendsWorker(input);
  else loadWorker();
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

function timedGet(agent: http.Agent, url: string, cookie: string | undefined, arm: ArmSpec): Promise<{ ms: number; error?: string; renewed?: string }> {
  return new Promise((resolvePromise) => {
    const started = performance.now();
    /** The Cookie header to send next, when the answer set a cookie (ArmSpec.keepCookies). */
    let renewed: string | undefined;
    const done = (error?: string): void =>
      resolvePromise({ ms: performance.now() - started, ...(error !== undefined && { error }), ...(renewed !== undefined && { renewed }) });
    const headers: http.OutgoingHttpHeaders = { accept: 'text/html' };
    if (cookie !== undefined) headers['cookie'] = cookie;
    const req = http.get(url, { agent, headers }, (res) => {
      if (arm.keepCookies === true && res.headers['set-cookie'] !== undefined) renewed = keepCookies(cookie, res.headers['set-cookie']);
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
  // Each arm's cookies, as its visitors hold them now (see ArmSpec.keepCookies).
  const jars = plan.arms.map((arm) => [...arm.cookies]);
  const samples: ArmSample[] = plan.arms.map((arm) => ({
    name: arm.name,
    latencies: [],
    roundMeans: [],
    roundP50s: [],
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
        const jar = jars[index]!;
        const slot = jar.length === 0 ? -1 : turn[index]!++ % jar.length;
        const cookie = slot < 0 ? undefined : jar[slot];
        const result = await timedGet(agent, arm.url, cookie, arm);
        if (result.renewed !== undefined && slot >= 0) jar[slot] = result.renewed;
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
    sample.roundP50s.push(percentile([...latencies].sort((a, b) => a - b), 50));
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
      const renewed = cookieFrom(res, plan.cookieName);
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

