/**
 * What a store call is billed: Upstash bills every command a script runs, plus the script itself.
 * Redis's INFO commandstats counts both (commands run inside a script are counted under their own
 * name), so the delta of all `calls` around one store call is its billed cost. The measuring
 * connection's own INFO is not counted (it is not a `cmdstat_info` call until after the snapshot).
 */
import type IORedis from 'ioredis';
import type { AdmissionPolicy, QueueStore } from '../../src/core/ports';

async function totalCalls(direct: IORedis): Promise<number> {
  const info = await direct.info('commandstats');
  let total = 0;
  for (const match of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
    if (match[1] !== 'info') total += Number(match[2]);
  }
  return total;
}

/** The commands Redis ran for `call` (run alone: nothing else may use this Redis meanwhile). */
export async function billedCommands(direct: IORedis, call: () => Promise<unknown>): Promise<number> {
  const before = await totalCalls(direct);
  await call();
  return (await totalCalls(direct)) - before;
}

export interface CostRow {
  readonly call: string;
  readonly commands: number;
}

/**
 * The hot calls, each measured in the situation the budget names: the first join of a state
 * (creates it), a steady join and poll (rate mode, no period step due), a capacity walk-in and a
 * claim, and explicit admits with and without an idempotency key, and a replay.
 */
export async function measureHotCalls(direct: IORedis, store: QueueStore, queue: (name: string) => string, nowMs: number): Promise<CostRow[]> {
  const rate: AdmissionPolicy = { auto: { count: 0, periodMs: 1_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 };
  const capacity: AdmissionPolicy = { ...rate, thresholds: { maxActive: 2, maxNewPerMinute: 0 } };
  const rows: CostRow[] = [];
  const measure = async (call: string, run: () => Promise<unknown>) => rows.push({ call, commands: await billedCommands(direct, run) });
  const r = queue('rate');
  await measure('join, first of a new state', () => store.join(r, nowMs, rate));
  await measure('join, rate mode', () => store.join(r, nowMs + 1, rate));
  await measure('poll, rate mode', () => store.poll(r, nowMs + 2, rate));
  await measure('admit 1, rate mode', () => store.admit(r, 1, nowMs + 3, rate));
  const c = queue('capacity');
  await store.join(c, nowMs, capacity);
  await measure('join, capacity walk-in', () => store.join(c, nowMs + 1, capacity));
  await measure('join, capacity, full', () => store.join(c, nowMs + 2, capacity));
  await measure('poll, capacity, full', () => store.poll(c, nowMs + 3, capacity));
  await store.leave(c, 1, nowMs + 4, capacity, 0);
  await measure('claim of a called ticket', () => store.claim(c, 3, nowMs + 5, capacity, 1_000));
  await store.join(c, nowMs + 6, capacity);
  await store.leave(c, 2, nowMs + 7, capacity, 0);
  await measure('admit 1, capacity', () => store.admit(c, 1, nowMs + 8, capacity));
  return rows;
}
