/**
 * What one queue over several databases (`store_shards`, src/store/sharded-store.ts) costs in
 * billed commands, class by class, beside the same class on one database: INFO commandstats on
 * three real redis-servers, each behind its own Upstash REST bridge and reached by the real
 * @upstash/redis client, under a ShardedStore of two and of three of them (one database: the
 * Upstash store alone, as the service builds it for store_shards = 1).
 *
 * The promises: a visitor's call goes to its own database only, so it costs on n databases exactly
 * what it costs on one and no other database runs a command for it; the operator's calls fan out,
 * so they cost more, and each is held to the exact figure measured (explained beside it). The table
 * printed at the end is the one in docs/capacity-and-cost.md, "Several databases".
 *
 * So that "the same class" means the same work, the n-database queue is n copies of the one-database
 * queue: every setting and count that is split over the databases is n times the one-database one
 * (each database then holds what the single database holds and is asked what it is asked).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/core/config';
import { admissionPolicy } from '../src/core/context';
import type { AdmissionPolicy, QueueStore } from '../src/core/ports';
import { createService } from '../src/core/service';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { ShardedStore } from '../src/store/sharded-store';
import { UpstashQueueStore } from '../src/store/upstash-store';
import { commandCalls } from './support/command-stats';
import { PROJECT_ROOT } from './support/compute-host';
import { ADMIN_PASSWORD, API_TOKEN, BASE_SECRETS, BASE_SETTINGS, ManualClock, MemoryLogger, RecordingOrigin, source } from './support/fixtures';
import { table } from './support/markdown-table';
import { useUpstashDatabases } from './support/upstash-databases';

const QUEUE = 'default';
/** The start of a minute and of a 60-s period: every measured call below falls in the one after it. */
const T0 = Date.UTC(2026, 10, 29, 6, 0, 0);
const SIZES = [1, 2, 3] as const;

const databases = useUpstashDatabases(3);

/** The store of a queue over the first `n` databases, under a key prefix of its own (a fresh state). */
function storeOver(n: number): QueueStore {
  const keyPrefix = `wrs-${randomUUID().slice(0, 8)}`;
  const parts = databases.slice(0, n).map((d) => new UpstashQueueStore({ redis: d.client, keyPrefix }));
  return n === 1 ? parts[0]! : new ShardedStore(parts);
}

/**
 * The commands each of the three redis-servers ran while `run` ran (the measuring INFO left out).
 * Nothing else uses them meanwhile: the tests of this file run one after the other.
 */
async function billedPerDatabase(run: () => Promise<unknown>): Promise<number[]> {
  const read = () => Promise.all(databases.map(async (d) => commandCalls(await d.direct.info('commandstats'))));
  const before = await read();
  await run();
  const after = await read();
  return after.map((a, i) => a - before[i]!);
}

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

/** Measured figures: class → billed commands on 1, 2 and 3 databases. */
type Figures = Map<string, Map<number, number>>;
const visitorFigures: Figures = new Map();
const operatorFigures: Figures = new Map();

function put(figures: Figures, label: string, n: number, billed: number): void {
  let row = figures.get(label);
  if (row === undefined) figures.set(label, (row = new Map()));
  row.set(n, billed);
}

// ---------------------------------------------------------------------------------------------
// Visitors: store calls with the visitor's database set (AdmissionPolicy.shard), as the handler
// makes them. Measured on the last database of the n, so that a call that wandered to the first
// would show.

/** A visitor's policy on a queue over `n` databases with `settings(n)`: the visitor's database the last one. */
function visitorPolicy(n: number, settings: (n: number) => Record<string, string>): AdmissionPolicy {
  const p = admissionPolicy(parseConfig(source({ ...BASE_SETTINGS, store_shards: String(n), ...settings(n) })));
  return n === 1 ? p : { ...p, shard: n - 1 };
}

/** A join key (16 hex digits, as the handler makes them) named for readability. */
const key = (name: string): string => Buffer.from(name).toString('hex').padEnd(16, '0').slice(0, 16);

type Measure = (label: string, run: () => Promise<unknown>) => Promise<void>;

/** A claim that must let its ticket in (so that the class measured is the one named). */
async function claimCalled(store: QueueStore, ticket: number, nowMs: number, p: AdmissionPolicy): Promise<void> {
  if (!(await store.claim(QUEUE, ticket, nowMs, p, 0)).claimed) throw new Error(`ticket ${ticket} was not let in`);
}

/** The visitor classes of rate mode, in the order billed-commands.test.ts measures them on one database. */
async function rateVisitors(store: QueueStore, p: AdmissionPolicy, measure: Measure): Promise<void> {
  // The queue's generation exists (its first run writes it once), as on a queue in use.
  await store.poll(QUEUE, T0 - 60_000, p);
  await measure('rate: join, first of the period (the step; a walk-in)', () => store.join(QUEUE, T0 + 1, p, { joinKey: key('first') }));
  await measure('rate: join retried with its key: the same ticket', () => store.join(QUEUE, T0 + 2, p, { joinKey: key('first') }));
  for (let i = 0; i < 8; i++) await store.join(QUEUE, T0 + 3, p, { joinKey: key(`j${i}`) });
  await measure('rate: join, queued', () => store.join(QUEUE, T0 + 4, p, { joinKey: key('queued') }));
  await measure("rate: poll, the minute's first (its history point)", () => store.poll(QUEUE, T0 + 5, p));
  await measure('rate: poll (cache miss)', () => store.poll(QUEUE, T0 + 6, p));
  await measure('rate: poll that runs the period step', () => store.poll(QUEUE, T0 + 60_001, p));
  // The step called the rest of the line (7-10); a call is let in once the rate window (60 s, by
  // 5-s bucket) has room again for it, within its 10-s reservation.
  await measure('rate: claim of a called ticket', () => claimCalled(store, 7, T0 + 66_000, p));
  await measure('rate: claim again (two tabs)', () => claimCalled(store, 7, T0 + 66_001, p));
}

/** The visitor classes of capacity mode. */
async function capacityVisitors(store: QueueStore, p: AdmissionPolicy, measure: Measure): Promise<void> {
  await measure("capacity: join, walk-in, the queue's first run", () => store.join(QUEUE, T0, p, { joinKey: key('first') }));
  await measure('capacity: join, walk-in', () => store.join(QUEUE, T0 + 1, p, { joinKey: key('second') }));
  for (let i = 0; i < 8; i++) await store.join(QUEUE, T0 + 2, p, { joinKey: key(`j${i}`) });
  await measure('capacity: join, waiting', () => store.join(QUEUE, T0 + 3, p, { joinKey: key('waiting') }));
  await measure('capacity: poll (cache miss)', () => store.poll(QUEUE, T0 + 4, p));
  await measure('capacity: leave (a slot freed, the next ticket called)', () => store.leave(QUEUE, 1, T0 + 5, p, 0));
  await measure('capacity: claim of a called ticket', () => claimCalled(store, 6, T0 + 6, p));
  await measure('capacity: touch (a slot refreshed)', () => store.touch(QUEUE, 6, T0 + 7, p, T0 + 600_000));
}

const VISITOR_MODES = [
  { name: 'rate', settings: (n: number) => ({ admit_per_period: String(5 * n), admit_period_seconds: '60' }), run: rateVisitors },
  { name: 'capacity', settings: (n: number) => ({ admit_per_period: '0', max_active: String(5 * n) }), run: capacityVisitors },
] as const;

describe('a visitor\'s call costs on n databases what it costs on one, and only its database runs it', () => {
  beforeAll(async () => {
    // Every script loaded on every server, so that no NOSCRIPT miss is measured below.
    for (const mode of VISITOR_MODES) {
      const store = storeOver(3);
      for (let shard = 0; shard < 3; shard++) await mode.run(store, { ...visitorPolicy(3, mode.settings), shard }, (_label, run) => run().then(() => undefined));
    }
  });

  for (const mode of VISITOR_MODES) {
    it(`${mode.name} mode: join, poll, claim`, async () => {
      for (const n of SIZES) {
        const store = storeOver(n);
        await mode.run(store, visitorPolicy(n, mode.settings), async (label, run) => {
          const per = await billedPerDatabase(run);
          // Only the visitor's database (the last of the n) ran anything.
          expect(per.filter((_, i) => i !== n - 1), `${label} on ${n}: the other databases`).toEqual([0, 0]);
          put(visitorFigures, label, n, per[n - 1]!);
        });
      }
      for (const [label, row] of visitorFigures) {
        if (!label.startsWith(`${mode.name}:`)) continue;
        expect(row.get(1), `${label}: measured`).toBeGreaterThan(0);
        expect([row.get(2), row.get(3)], `${label}: on 2 and 3 databases as on 1`).toEqual([row.get(1), row.get(1)]);
      }
    });
  }
});

// ---------------------------------------------------------------------------------------------
// The operator: through the service's own routes (the origin's API and the console), so that
// everything a request does is counted (the controls' memory, the audit trail in the first
// database, the console's chart), with the store of 1, 2 or 3 databases under it.

const basic = `Basic ${btoa(`admin:${ADMIN_PASSWORD}`)}`;
const bearer = `Bearer ${API_TOKEN}`;

interface Operator {
  /** Answers `path` (under /__wr/) as the service does; throws on anything but a 2xx. */
  call(path: string, init?: { method?: string; body?: unknown; auth?: string; headers?: Record<string, string> }): Promise<Response>;
  clock: ManualClock;
  store: QueueStore;
}

function operatorOver(n: number, settings: Record<string, string>): Operator {
  const store = storeOver(n);
  const clock = new ManualClock(T0);
  const service = createService(source({ ...BASE_SETTINGS, store_shards: String(n), store_timeout_ms: '15000', ...settings }), source(BASE_SECRETS), {
    store,
    origin: new RecordingOrigin(),
    logger: new MemoryLogger(),
    clock,
    cache: new MemoryStateCache(clock),
    authLimiter: new MemoryFailureLimiter(clock),
    ticketLimiter: new MemoryFailureLimiter(clock),
  });
  return {
    clock,
    store,
    async call(path, init = {}) {
      const headers: Record<string, string> = { authorization: init.auth ?? bearer, ...init.headers };
      if (init.body !== undefined) headers['content-type'] = 'application/json';
      const response = await service.handler(
        new Request(`https://shop.example/__wr/${path}`, { method: init.method ?? 'GET', headers, ...(init.body !== undefined && { body: JSON.stringify(init.body) }) }),
        { address: '192.0.2.1', pop: 'test' },
      );
      if (response.status >= 300) throw new Error(`${path}: ${response.status} ${await response.text()}`);
      return response;
    },
  };
}

/** The operator's classes, each measured once, on a queue whose databases each hold 20 joined visitors. */
async function operatorClasses(n: number, settings: (n: number) => Record<string, string>, raise: Record<string, unknown>, measure: Measure): Promise<void> {
  const op = operatorOver(n, settings(n));
  const p = admissionPolicy(parseConfig(source({ ...BASE_SETTINGS, store_shards: String(n), ...settings(n) })));
  // The line: 20 visitors on each database, then a visitor's poll on each (the minute's history
  // point written, as on a queue in use), all in the period the measured calls fall in. Long enough
  // that the admits below leave people waiting on every database.
  for (let shard = 0; shard < n; shard++) {
    const own = n === 1 ? p : { ...p, shard };
    for (let i = 0; i < 20; i++) await op.store.join(QUEUE, T0 + 1_000, own);
    await op.store.poll(QUEUE, T0 + 2_000, own);
  }
  let at = 3_000;
  const next = () => (op.clock.ms = T0 + (at += 100));
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) => () => op.call(path, { method: 'POST', body, headers });
  // Each answer checked too (no store call), so that the class measured is the one named.
  const answers = (call: () => Promise<Response>, expected: Record<string, unknown>) => async () => expect(await (await call()).json()).toMatchObject(expected);
  next();
  await measure('stats (API, figures only)', () => op.call('api/stats'));
  next();
  await measure('metrics', () => op.call('api/metrics'));
  next();
  await measure("console: page load, the first where it is served (reads the sale's record)", () => op.call('admin', { auth: basic }));
  next();
  await measure('console: page load', () => op.call('admin', { auth: basic }));
  next();
  await measure('console: live poll', () => op.call('admin/live', { auth: basic }));
  next();
  await measure('pause', answers(post('api/control', { paused: true }), { paused: true }));
  next();
  await measure('resume', answers(post('api/control', { paused: false }), { paused: false }));
  next();
  await measure('switch: hold', answers(post('api/control', { switch: 'hold' }), { switch: 'hold' }));
  next();
  await measure('switch: back to normal', answers(post('api/control', { switch: 'normal' }), { switch: 'normal' }));
  next();
  await measure('change the quota or the capacity', post('api/control', raise));
  next();
  await measure('admit N, no idempotency key', answers(post('api/admit', { count: 2 * n }), { admitted: 2 * n, replayed: false }));
  next();
  await measure('admit N with an idempotency key', answers(post('api/admit', { count: 2 * n }, { 'idempotency-key': 'op-1' }), { admitted: 2 * n, replayed: false }));
  next();
  await measure('admit N retried with its key (a replay)', answers(post('api/admit', { count: 2 * n }, { 'idempotency-key': 'op-1' }), { admitted: 2 * n, replayed: true }));
  next();
  const epoch = ((await (await op.call('api/stats')).json()) as { epoch: number }).epoch;
  next();
  await measure("reset with the epoch read (the console's)", answers(post('api/reset', { confirm: QUEUE, epoch }), { applied: true }));
  next();
  await measure('reset without an epoch', answers(post('api/reset', { confirm: QUEUE }), { applied: true }));
}

const OPERATOR_MODES = [
  { name: 'rate', settings: (n: number) => ({ admit_per_period: String(6 * n), admit_period_seconds: '60' }), raise: (n: number) => ({ admit_per_period: 9 * n }) },
  { name: 'capacity', settings: (n: number) => ({ admit_per_period: '0', max_active: String(6 * n) }), raise: (n: number) => ({ max_active: 9 * n }) },
] as const;

/**
 * What each operator class was measured to cost: `one` on one database; on n, `first` on the first
 * database and `other` on each of the others, so n databases cost first + (n − 1) × other.
 *
 * Why: the queue's figures, controls and resets are one call on every database (what one call costs
 * on one); the audit entry of a change (4 billed; an origin's admit, merged into the minute's entry,
 * 5), the console's recent changes (2) and the VIP codes live in the first database only, so the
 * others pay less than one database does. What the first pays beyond one database is what the
 * fan-out reads first: `admit N` peeks every database's line (2 each) to split N by who waits, and a
 * reset with the epoch reads every database's figures (2 in rate mode, 4 in capacity) to reset each
 * from its own epoch. The console's first page where it is served reads the sale's record (8 a
 * database: a week's minutes in four reads); later loads and polls read none of it.
 */
const OPERATOR_COSTS: Readonly<Record<string, { one: number; first: number; other: number }>> = {
  'rate: stats (API, figures only)': { one: 2, first: 2, other: 2 },
  'rate: metrics': { one: 2, first: 2, other: 2 },
  "rate: console: page load, the first where it is served (reads the sale's record)": { one: 12, first: 12, other: 10 },
  'rate: console: page load': { one: 4, first: 4, other: 2 },
  'rate: console: live poll': { one: 4, first: 4, other: 2 },
  'rate: pause': { one: 7, first: 7, other: 3 },
  'rate: resume': { one: 7, first: 7, other: 3 },
  'rate: switch: hold': { one: 7, first: 7, other: 3 },
  'rate: switch: back to normal': { one: 8, first: 8, other: 4 },
  'rate: change the quota or the capacity': { one: 9, first: 9, other: 5 },
  'rate: admit N, no idempotency key': { one: 8, first: 10, other: 5 },
  'rate: admit N with an idempotency key': { one: 8, first: 10, other: 5 },
  'rate: admit N retried with its key (a replay)': { one: 2, first: 4, other: 4 },
  "rate: reset with the epoch read (the console's)": { one: 12, first: 14, other: 10 },
  'rate: reset without an epoch': { one: 12, first: 12, other: 8 },
  'capacity: stats (API, figures only)': { one: 4, first: 4, other: 4 },
  'capacity: metrics': { one: 4, first: 4, other: 4 },
  "capacity: console: page load, the first where it is served (reads the sale's record)": { one: 14, first: 14, other: 12 },
  'capacity: console: page load': { one: 6, first: 6, other: 4 },
  'capacity: console: live poll': { one: 6, first: 6, other: 4 },
  'capacity: pause': { one: 7, first: 7, other: 3 },
  'capacity: resume': { one: 7, first: 7, other: 3 },
  'capacity: switch: hold': { one: 7, first: 7, other: 3 },
  'capacity: switch: back to normal': { one: 8, first: 8, other: 4 },
  'capacity: change the quota or the capacity': { one: 12, first: 12, other: 8 },
  'capacity: admit N, no idempotency key': { one: 9, first: 11, other: 6 },
  'capacity: admit N with an idempotency key': { one: 9, first: 11, other: 6 },
  'capacity: admit N retried with its key (a replay)': { one: 2, first: 4, other: 4 },
  "capacity: reset with the epoch read (the console's)": { one: 20, first: 24, other: 20 },
  'capacity: reset without an epoch': { one: 20, first: 20, other: 16 },
};

/**
 * The classes that cost more than n times their one-database cost: a replayed `admit N` (on one
 * database the store answers the key's first result, 2; over several every line is peeked first to
 * split N, 2 a database, before each database replays its part, 2) and, in capacity mode, a reset
 * with the epoch (each database's figures, 4, read before its reset, whose cost on one database the
 * audit entry does not offset). Every other class stays at or under n times.
 */
const BEYOND_N_TIMES: ReadonlySet<string> = new Set([
  'rate: admit N retried with its key (a replay)',
  'capacity: admit N retried with its key (a replay)',
  "capacity: reset with the epoch read (the console's)",
]);

describe('the operator\'s calls over n databases', () => {
  beforeAll(async () => {
    for (const mode of OPERATOR_MODES) await operatorClasses(3, mode.settings, mode.raise(3), (_label, run) => run().then(() => undefined));
  });

  for (const mode of OPERATOR_MODES) {
    it(`${mode.name} mode: stats, console, controls, admit N, reset`, async () => {
      for (const n of SIZES) {
        await operatorClasses(n, mode.settings, mode.raise(n), async (label, run) => {
          const name = `${mode.name}: ${label}`;
          const cost = OPERATOR_COSTS[name];
          expect(cost, `${name}: its measured cost`).toBeDefined();
          const per = await billedPerDatabase(run);
          const want = n === 1 ? [cost!.one, 0, 0] : [cost!.first, ...new Array(n - 1).fill(cost!.other), ...new Array(3 - n).fill(0)];
          expect(per, `${name} on ${n} databases, database by database`).toEqual(want);
          put(operatorFigures, name, n, sum(per));
        });
      }
      for (const [name, row] of operatorFigures) {
        if (!name.startsWith(`${mode.name}:`)) continue;
        for (const n of [2, 3]) {
          if (BEYOND_N_TIMES.has(name)) expect(row.get(n), `${name} on ${n}`).toBeGreaterThan(n * row.get(1)!);
          else expect(row.get(n), `${name} on ${n}: at most ${n} times one database`).toBeLessThanOrEqual(n * row.get(1)!);
        }
      }
    });
  }

  afterAll(() => {
    // Printed even when an assertion failed, so that a changed figure shows beside the others.
    console.log(`${figureTable(visitorFigures)}\n\n${figureTable(operatorFigures)}`);
  });

  it('docs/capacity-and-cost.md shows the figures measured here', () => {
    const doc = readFileSync(join(PROJECT_ROOT, 'docs/capacity-and-cost.md'), 'utf8');
    expect(visitorFigures.size + operatorFigures.size).toBe(15 + Object.keys(OPERATOR_COSTS).length);
    expect(doc).toContain(figureTable(visitorFigures));
    expect(doc).toContain(figureTable(operatorFigures));
  });
});

/** Measured figures as the docs show them: a Markdown table, one class a row, one column per number of databases. */
function figureTable(figures: Figures): string {
  const rows = [...figures].map(([label, row]) => [label, ...SIZES.map((n) => String(row.get(n) ?? '—'))]);
  return table(['class', '1 database', '2 databases', '3 databases'], ['l', 'r', 'r', 'r'], rows);
}
