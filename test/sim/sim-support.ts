/**
 * What the simulations share (test/sim/simulate.ts and test/sim/surge.ts): counting what Redis ran,
 * the POPs' shares of the visitors, and the Upstash REST bridge in a worker thread. No top-level
 * code runs here, so a test may import it.
 */
import { fileURLToPath } from 'node:url';
import { Worker, parentPort } from 'node:worker_threads';
import type { Redis as IORedis } from 'ioredis';
import { startUpstashBridge } from '../../src/node/upstash-bridge';
import { parseCommandstats as parseStats } from '../support/command-stats';
import { nextWorkerMessage } from '../support/worker-message';

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function sum(values: readonly number[]): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}

// ---------------------------------------------------------------------------------------------
// Counting in Redis: script calls (round trips) and billed commands

/**
 * Commands only the simulation's own connections send, never the store (which sends nothing but
 * EVALSHA and EVAL, src/store/upstash-store.ts, and whose scripts run none of these): INFO (every
 * snapshot, and each ioredis connection's ready check, the bridge's included), CLIENT (what ioredis
 * sends on connecting), SCRIPT (test/bench/harness.ts's SCRIPT LOAD; none here) and FLUSHALL (before
 * each run). The data commands the simulation sends itself are counted by `Direct` instead.
 */
const HARNESS_COMMANDS: ReadonlySet<string> = new Set(['info', 'client', 'script', 'flushall']);

/** Runs the tasks with at most `limit` in flight; the first failure is thrown after all settle. */
export async function runLimited(tasks: readonly (() => Promise<void>)[], limit: number): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async (): Promise<void> => {
    while (next < tasks.length) {
      const task = tasks[next++]!;
      try {
        await task();
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, lane));
  if (failure !== undefined) throw failure;
}

export interface RedisCounts {
  /** EVALSHA/EVAL (and _RO) calls: store round trips as Redis saw them. */
  readonly scripts: number;
  /** What Upstash bills: every command Redis ran, those inside scripts included, less the simulation's own. */
  readonly billed: number;
}

/**
 * The simulation's own connection to Redis. Every data command it sends goes through here and is
 * counted as it is sent, so that `counts()` can take them out of the billed figure: callers await
 * their own commands before asking for counts (the snapshots do), so the count is exact.
 */
export class Direct {
  #own = 0;
  constructor(readonly redis: IORedis) {}
  /** Data commands sent so far (measured out of `billed`). */
  get own(): number {
    return this.#own;
  }
  hget(key: string, field: string): Promise<string | null> {
    this.#own++;
    return this.redis.hget(key, field);
  }
  hincrby(key: string, field: string, by: number): Promise<number> {
    this.#own++;
    return this.redis.hincrby(key, field, by);
  }
  flushall(): Promise<unknown> {
    return this.redis.flushall();
  }
  async counts(): Promise<RedisCounts> {
    const own = this.#own;
    const { scripts, billed } = parseStats(await this.redis.info('commandstats'), HARNESS_COMMANDS);
    return { scripts, billed: billed - own };
  }
}

/** Two snapshots in a row, and two around one of the simulation's own HGETs, must count nothing. */
export async function checkSnapshots(direct: Direct): Promise<void> {
  const a = await direct.counts();
  const b = await direct.counts();
  await direct.hget('simulate:probe', 'x');
  const c = await direct.counts();
  if (b.scripts !== a.scripts || b.billed !== a.billed || c.scripts !== b.scripts || c.billed !== b.billed) {
    throw new Error(`snapshots count themselves (${JSON.stringify([a, b, c])}): the simulation's own commands are not all measured out`);
  }
}

// ---------------------------------------------------------------------------------------------
// POPs

/** Cumulative shares of `pops` POPs (Zipf-like with exponent `skew`; 0 would be uniform), for picking a visitor's POP. */
export function popShares(pops: number, skew: number): Float64Array {
  const weights = Array.from({ length: pops }, (_, k) => 1 / Math.pow(k + 1, skew));
  const total = sum(weights);
  const cumulative = new Float64Array(pops);
  let running = 0;
  weights.forEach((w, k) => {
    running += w / total;
    cumulative[k] = running;
  });
  cumulative[pops - 1] = 1;
  return cumulative;
}

/** The POP whose share `u` (uniform in [0, 1)) falls in. */
export function pickPop(cumulative: Float64Array, u: number): number {
  let lo = 0;
  let hi = cumulative.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (u < cumulative[mid]!) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// ---------------------------------------------------------------------------------------------
// The bridge, in a worker thread (the running bundle itself, workerData.role = 'bridge'), so that
// its HTTP server and its Redis connection do not share an event loop with the POPs and the Upstash
// client. The bundle's entry calls bridgeWorker when it is not the main thread.

export interface BridgeWorkerInput {
  readonly role: 'bridge';
  readonly redisUrl: string;
  readonly token: string;
}
type BridgeReply = { type: 'ready'; url: string } | { type: 'stopped' } | { type: 'error'; message: string };

export async function bridgeWorker(input: BridgeWorkerInput): Promise<void> {
  const port = parentPort;
  if (port === null || input?.role !== 'bridge') throw new Error('simulate: unknown worker role');
  try {
    const bridge = await startUpstashBridge({ redisUrl: input.redisUrl, token: input.token });
    port.on('message', (message: unknown) => {
      if (message !== 'stop') return;
      void bridge.close().finally(() => {
        port.postMessage({ type: 'stopped' } satisfies BridgeReply);
        port.close();
      });
    });
    port.postMessage({ type: 'ready', url: bridge.url } satisfies BridgeReply);
  } catch (error) {
    port.postMessage({ type: 'error', message: messageOf(error) } satisfies BridgeReply);
  }
}

export interface BridgeWorker {
  readonly url: string;
  stop(): Promise<void>;
}

/** `onTrouble`: told when the bridge does not stop cleanly (it is then terminated). */
export async function startBridgeWorker(redisUrl: string, token: string, onTrouble: (line: string) => void = () => {}): Promise<BridgeWorker> {
  // In the bundle (bin/simulate.mjs) this is the bundle's own URL: the worker runs the same file.
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { role: 'bridge', redisUrl, token } satisfies BridgeWorkerInput });
  let reply: BridgeReply;
  try {
    reply = await nextWorkerMessage<BridgeReply>(worker, 10_000, 'starting the bridge');
  } catch (error) {
    await worker.terminate();
    throw error;
  }
  if (reply.type !== 'ready') {
    await worker.terminate();
    throw new Error(`starting the bridge: ${reply.type === 'error' ? reply.message : reply.type}`);
  }
  let stopped = false;
  return {
    url: reply.url,
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        const done = nextWorkerMessage<BridgeReply>(worker, 5_000, 'stopping the bridge');
        worker.postMessage('stop');
        await done;
      } catch (error) {
        onTrouble(`the bridge did not stop cleanly (${messageOf(error)}); terminating it`);
      }
      await worker.terminate();
    },
  };
}
