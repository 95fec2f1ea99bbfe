/**
 * One queue over several databases (`store_shards`, see docs/architecture.md, "Past one database"):
 * each database keeps a line of its own, with its own tickets, cursor and admission, and a visitor
 * belongs to one of them for the life of its tokens (the `sh` claim). Past about 3,150 arrivals a
 * second one database's 10,000 billed commands a second are not enough; n databases take n times
 * that, as long as arrivals spread evenly (an instance picks its database at random).
 *
 * A call about a visitor (AdmissionPolicy.shard set) goes to that visitor's database, with the
 * policy's share of the queue's figures. A call about the queue as a whole (no shard: the operator's
 * and the origin's) is made on every database and the answers summed:
 *   - rate mode's `admit_per_period` q: floor(q/n) each, and one more for q mod n of them, which
 *     ones turning with the period's number, so every period lets in exactly q and no database is
 *     favoured; the thresholds (`max_active`, `max_new_per_minute`) the same way, the extra ones to
 *     the first databases, so their sum is the threshold and capacity is never exceeded;
 *   - an explicit `admit N`: split in proportion to the databases' waiting visitors (largest
 *     remainder), one database after the other, each with its own idempotency key (`<key>:<k>`),
 *     never more than N in all, even when a retry replays some databases and not others;
 *   - controls and resets: applied to every database (a failure on any is reported; each is an
 *     idempotent set, so the operator's retry is safe); runtime values split as the settings are;
 *   - figures, history and the sale's record: summed.
 * The audit trail, the VIP codes and the webhook outbox live in the first database only.
 *
 * FIFO only, without a scheduled event and without adaptive admission: config.ts refuses the others.
 */
import type {
  AdmissionPolicy,
  AdmitResult,
  AuditAppended,
  AuditMerge,
  ClaimResult,
  DrawResult,
  HistoryPoint,
  JoinOptions,
  JoinResult,
  QueuePeek,
  QueueState,
  QueueStats,
  QueueStore,
  RecordPoint,
  ResetResult,
  RuntimeControl,
  SaleTotals,
  StatsOptions,
  VipCode,
  VipUse,
  WebhookOutbox,
} from '../core/ports';
import { REFUSAL_REASONS } from '../core/ports';
import { holesBetween } from '../core/types';
import { assertAdmitCount, checkIdempotencyKey } from './scripts';

/** The most databases one queue may spread over. */
export const MAX_STORE_SHARDS = 8;

/**
 * `total` split over `n` parts: floor(total / n) each, and one more for total mod n of them,
 * counted from part `first` round. Part `part`'s share; the parts' shares sum to `total`.
 */
export function evenShare(total: number, n: number, part: number, first = 0): number {
  const extra = total % n;
  const offset = (((part - first) % n) + n) % n;
  return Math.floor(total / n) + (offset < extra ? 1 : 0);
}

/**
 * `total` split in proportion to `weights` by largest remainder (ties to the lower index): whole
 * shares that sum to `total`. All weights 0: all shares 0.
 */
export function proportionalShares(total: number, weights: readonly number[]): number[] {
  const sum = weights.reduce((a, b) => a + b, 0);
  if (sum === 0) return weights.map(() => 0);
  const exact = weights.map((w) => (total * w) / sum);
  const shares = exact.map(Math.floor);
  let left = total - shares.reduce((a, b) => a + b, 0);
  const order = exact.map((e, i) => ({ i, r: e - Math.floor(e) })).sort((a, b) => b.r - a.r || a.i - b.i);
  for (const { i } of order) {
    if (left <= 0) break;
    shares[i]! += 1;
    left -= 1;
  }
  return shares;
}

/** A per-database idempotency key: `<key>:<k>`, or a short digest of a key too long to take the suffix. */
export function shardKey(key: string, shard: number): string {
  if (key.length <= 62) return `${key}:${shard}`;
  // FNV-1a over the key: 8 hex digits after its first 51 characters keep keys apart in practice.
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return `${key.slice(0, 51)}~${h.toString(16).padStart(8, '0')}:${shard}`;
}

/** The value of a runtime control for one database: split as the settings are; null and undefined as they are. */
function splitControl(value: number | null | undefined, n: number, shard: number): number | null | undefined {
  return typeof value === 'number' ? evenShare(value, n, shard) : value;
}

/**
 * The problem when `store_shards` and the databases configured disagree (`named`: how many besides
 * the first, and `where` they are named): a clear error that changes nothing.
 */
export function shardCountProblem(storeShards: number, named: number, where: string): string {
  return `is ${storeShards}, but ${where} names ${named} database${named === 1 ? '' : 's'} besides the first: it must name exactly ${storeShards - 1} (store_shards − 1), or store_shards must be ${named + 1}`;
}

/** A database that did not answer an operator's call: which, and why. */
export class ShardError extends Error {
  readonly code = 'ERR_STORE_SHARD';
  constructor(message: string) {
    super(message);
    this.name = 'ShardError';
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class ShardedStore implements QueueStore {
  readonly #shards: readonly QueueStore[];
  readonly outbox?: WebhookOutbox;

  constructor(shards: readonly QueueStore[]) {
    if (shards.length < 1 || shards.length > MAX_STORE_SHARDS) throw new RangeError(`ShardedStore: expected 1 to ${MAX_STORE_SHARDS} databases, got ${shards.length}`);
    this.#shards = shards;
    if (shards[0]!.outbox !== undefined) this.outbox = shards[0]!.outbox;
    if (shards.every((s) => s.record !== undefined)) this.record = (queue, nowMs, fromMs, minutes) => this.#record(queue, nowMs, fromMs, minutes);
  }

  /** How many databases. */
  get count(): number {
    return this.#shards.length;
  }

  /** The database a visitor's call goes to (policy.shard; 0 without one), and the policy with that database's share. */
  #route(policy: AdmissionPolicy, nowMs: number): { store: QueueStore; policy: AdmissionPolicy } {
    const shard = policy.shard ?? 0;
    const store = this.#shards[shard];
    if (!Number.isSafeInteger(shard) || store === undefined) throw new RangeError(`no database ${String(shard)}: this queue has ${this.#shards.length}`);
    return { store, policy: this.#policyOf(policy, shard, nowMs) };
  }

  /** Database `shard`'s share of the policy at `nowMs` (see the top: the remainder turns with the period). */
  #policyOf(policy: AdmissionPolicy, shard: number, nowMs: number): AdmissionPolicy {
    const n = this.#shards.length;
    const { shard: _s, ...rest } = policy;
    if (n === 1) return rest;
    const period = policy.auto.periodMs > 0 ? Math.floor(nowMs / policy.auto.periodMs) : 0;
    return {
      ...rest,
      auto: { ...policy.auto, count: evenShare(policy.auto.count, n, shard, period % n) },
      thresholds: { maxActive: evenShare(policy.thresholds.maxActive, n, shard), maxNewPerMinute: evenShare(policy.thresholds.maxNewPerMinute, n, shard) },
    };
  }

  /** The same call on every database; any failure fails it, naming the databases that did not answer. */
  async #everywhere<T>(what: string, call: (store: QueueStore, shard: number) => Promise<T>): Promise<T[]> {
    const settled = await Promise.allSettled(this.#shards.map((store, shard) => call(store, shard)));
    const failed = settled.flatMap((s, shard) => (s.status === 'rejected' ? [`database ${shard + 1}: ${messageOf(s.reason)}`] : []));
    if (failed.length > 0) throw new ShardError(`${what} failed on ${failed.length} of ${this.#shards.length} databases (${failed.join('; ')})`);
    return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
  }

  join(queue: string, nowMs: number, policy: AdmissionPolicy, options?: JoinOptions): Promise<JoinResult> {
    const r = this.#route(policy, nowMs);
    return r.store.join(queue, nowMs, r.policy, options);
  }

  poll(queue: string, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    const r = this.#route(policy, nowMs);
    return r.store.poll(queue, nowMs, r.policy);
  }

  claim(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<ClaimResult> {
    const r = this.#route(policy, nowMs);
    return r.store.claim(queue, ticket, nowMs, r.policy, waitedMs, generation);
  }

  touch(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, untilMs: number, generation?: number): Promise<boolean> {
    const r = this.#route(policy, nowMs);
    return r.store.touch(queue, ticket, nowMs, r.policy, untilMs, generation);
  }

  leave(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, graceMs: number, generation?: number): Promise<boolean> {
    const r = this.#route(policy, nowMs);
    return r.store.leave(queue, ticket, nowMs, r.policy, graceMs, generation);
  }

  draw(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<DrawResult> {
    const r = this.#route(policy, nowMs);
    return r.store.draw(queue, ticket, nowMs, r.policy, waitedMs, generation);
  }

  /**
   * `admit N` over the databases: shares in proportion to their waiting visitors (holes left out), asked one
   * database after the other, each never more than what is left of N after what the earlier ones
   * let in (a replay counts what its key let in), a shortfall carried to the next. So N waiting
   * visitors are N let in, and a retry with the same key never goes past N in all.
   */
  async admit(queue: string, count: number, nowMs: number, policy: AdmissionPolicy, idempotencyKey?: string): Promise<AdmitResult> {
    if (policy.shard !== undefined || this.#shards.length === 1) {
      const r = this.#route(policy, nowMs);
      return r.store.admit(queue, count, nowMs, r.policy, idempotencyKey);
    }
    assertAdmitCount(count);
    if (idempotencyKey !== undefined) checkIdempotencyKey(idempotencyKey);
    const peeks = await this.#everywhere('admit', (store) => store.peek(queue));
    // Real visitors only: a database's reported holes (ticket blocks' numbers nobody holds) weigh nothing.
    const waiting = peeks.map((p) => Math.max(0, p.tail - p.cursor - holesBetween(p, p.cursor, p.tail)));
    const shares = proportionalShares(Math.min(count, waiting.reduce((a, b) => a + b, 0)), waiting);
    let left = count;
    let carried = 0;
    let replays = 0;
    let calls = 0;
    const states: (QueueState | undefined)[] = [];
    const failures: string[] = [];
    for (const [shard, store] of this.#shards.entries()) {
      const want = shares[shard]! + carried;
      const ask = Math.min(want, left);
      // A database with no share is still asked, for 0, when the call has a key: a retry must hear
      // what its key let in there, even once every line is empty (else it would answer 0, not a replay).
      if (ask < 1 && idempotencyKey === undefined) {
        states.push(undefined);
        continue;
      }
      try {
        const result = await store.admit(queue, ask, nowMs, this.#policyOf(policy, shard, nowMs), idempotencyKey === undefined ? undefined : shardKey(idempotencyKey, shard));
        states.push(result);
        calls += 1;
        if (result.replayed) replays += 1;
        left -= Math.min(left, result.admitted);
        carried = Math.max(0, want - result.admitted);
      } catch (error) {
        states.push(undefined);
        failures.push(`database ${shard + 1}: ${messageOf(error)}`);
        carried = want;
      }
    }
    if (failures.length > 0) {
      throw new ShardError(`admit let in ${count - left} of ${count}, then failed on ${failures.length} of ${this.#shards.length} databases (${failures.join('; ')}); a retry with the same key lets in only the rest`);
    }
    // The databases not asked answer their state as a waiting visitor's poll would.
    const fresh = await Promise.all(states.map((s, shard) => (s !== undefined ? s : this.#shards[shard]!.poll(queue, nowMs, this.#policyOf(policy, shard, nowMs)))));
    return { ...mergeStates(fresh), admitted: count - left, replayed: calls > 0 && replays === calls, asked: count };
  }

  async control(queue: string, change: RuntimeControl, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    if (policy.shard !== undefined || this.#shards.length === 1) {
      const r = this.#route(policy, nowMs);
      return r.store.control(queue, change, nowMs, r.policy);
    }
    const n = this.#shards.length;
    // Checked before any database changes: a value below one a database would be 0, which means no limit.
    for (const [name, value] of [
      ['max_active', change.maxActive],
      ['max_new_per_minute', change.maxNewPerMinute],
      ['admit_per_period', change.admitPerPeriod],
      ['adaptive pin', change.adaptivePin],
    ] as const) {
      if (typeof value === 'number' && value > 0 && value < n) throw new RangeError(`${name} ${value} is below the ${n} databases the queue spreads over: each needs at least 1`);
    }
    const states = await this.#everywhere('control', (store, shard) =>
      store.control(
        queue,
        {
          ...change,
          ...(change.maxActive !== undefined && { maxActive: splitControl(change.maxActive, n, shard) }),
          ...(change.maxNewPerMinute !== undefined && { maxNewPerMinute: splitControl(change.maxNewPerMinute, n, shard) }),
          ...(change.admitPerPeriod !== undefined && { admitPerPeriod: splitControl(change.admitPerPeriod, n, shard) }),
          ...(change.adaptivePin !== undefined && { adaptivePin: splitControl(change.adaptivePin, n, shard) }),
        },
        nowMs,
        this.#policyOf(policy, shard, nowMs),
      ),
    );
    return mergeStates(states);
  }

  async stats(queue: string, nowMs: number, policy: AdmissionPolicy, options?: StatsOptions): Promise<QueueStats> {
    if (policy.shard !== undefined || this.#shards.length === 1) {
      const r = this.#route(policy, nowMs);
      return r.store.stats(queue, nowMs, r.policy, options);
    }
    const all = await this.#everywhere('stats', (store, shard) => store.stats(queue, nowMs, this.#policyOf(policy, shard, nowMs), options));
    return mergeStats(all);
  }

  async history(queue: string, nowMs: number): Promise<readonly HistoryPoint[]> {
    if (this.#shards.length === 1) return this.#shards[0]!.history(queue, nowMs);
    const all = await this.#everywhere('history', (store) => store.history(queue, nowMs));
    return mergePoints(all, sumHistoryPoints);
  }

  /** Set in the constructor when every database keeps a record. */
  readonly record?: (queue: string, nowMs: number, fromMs: number, minutes: number) => Promise<readonly RecordPoint[]>;

  async #record(queue: string, nowMs: number, fromMs: number, minutes: number): Promise<readonly RecordPoint[]> {
    if (this.#shards.length === 1) return this.#shards[0]!.record!(queue, nowMs, fromMs, minutes);
    const all = await this.#everywhere('record', (store) => store.record!(queue, nowMs, fromMs, minutes));
    return mergePoints(all, sumRecordPoints);
  }

  async reset(queue: string, nowMs: number, policy: AdmissionPolicy, expectedEpoch?: number): Promise<ResetResult> {
    if (policy.shard !== undefined || this.#shards.length === 1) {
      const r = this.#route(policy, nowMs);
      return r.store.reset(queue, nowMs, r.policy, expectedEpoch);
    }
    if (expectedEpoch === undefined) {
      const all = await this.#everywhere('reset', (store, shard) => store.reset(queue, nowMs, this.#policyOf(policy, shard, nowMs)));
      return { ...mergeStates(all), applied: all.some((r) => r.applied) };
    }
    // The epoch the caller read is the first database's. The others may have another (one that lost
    // its state starts again at 0): each is reset from its own, when the first is still at the one
    // expected (this reset is new), or, on a retry, when it is not at the first's (it missed it).
    const epochs = await this.#everywhere('reset', (store, shard) => store.stats(queue, nowMs, this.#policyOf(policy, shard, nowMs)).then((s) => s.epoch));
    const fresh = epochs[0] === expectedEpoch;
    const all = await this.#everywhere('reset', async (store, shard) => {
      const own = this.#policyOf(policy, shard, nowMs);
      const due = shard === 0 ? fresh : fresh || epochs[shard] !== epochs[0];
      return due ? store.reset(queue, nowMs, own, epochs[shard]) : { ...(await store.poll(queue, nowMs, own)), applied: false };
    });
    return { ...mergeStates(all), applied: all.some((r) => r.applied) };
  }

  async peek(queue: string): Promise<QueuePeek> {
    if (this.#shards.length === 1) return this.#shards[0]!.peek(queue);
    const all = await this.#everywhere('peek', (store) => store.peek(queue));
    const cursor = sum(all.map((p) => p.cursor));
    return { tail: sum(all.map((p) => p.tail)), cursor, ...summedHoles(all, cursor) };
  }

  createVips(queue: string, codeHashes: readonly string[], code: VipCode, nowMs: number): Promise<boolean[]> {
    return this.#shards[0]!.createVips(queue, codeHashes, code, nowMs);
  }

  useVip(queue: string, codeHash: string, nowMs: number): Promise<VipUse> {
    return this.#shards[0]!.useVip(queue, codeHash, nowMs);
  }

  appendAudit(queue: string, entry: string, nowMs: number, merge?: AuditMerge): Promise<AuditAppended> {
    return this.#shards[0]!.appendAudit(queue, entry, nowMs, merge);
  }

  readAudit(queue: string, limit: number, nowMs: number): Promise<readonly string[]> {
    return this.#shards[0]!.readAudit(queue, limit, nowMs);
  }
}

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

/**
 * The databases' holes (ticket blocks' numbers nobody holds, above each one's cursor) as one range
 * just above their summed cursor, as many numbers as theirs: what a summed state or peek reports.
 */
function summedHoles(parts: readonly QueuePeek[], cursor: number): Pick<QueuePeek, 'holes'> {
  const holes = sum(parts.map((p) => holesBetween(p, p.cursor, p.tail)));
  return holes > 0 ? { holes: [{ from: cursor + 1, to: cursor + holes }] } : {};
}

/**
 * The queue's state from its databases' states: counts summed (so `tail - cursor` is everyone
 * waiting), the controls as any database has them (they are set on all), the epoch and generation
 * of the first (the admin's reset carries the epoch it read: the same on every database a reset
 * reached). The databases' holes (ticket blocks' numbers nobody holds) are one range just above
 * the summed cursor, as many numbers as theirs above their own cursors, so the line's waiting
 * count (waitingOf) leaves them out as it does on one database.
 */
export function mergeStates(states: readonly QueueState[]): QueueState {
  const first = states[0]!;
  const admitPerPeriod = states.every((s) => s.admitPerPeriod !== undefined) ? sum(states.map((s) => s.admitPerPeriod!)) : undefined;
  const held = states.find((s) => s.switch !== undefined)?.switch;
  const cursor = sum(states.map((s) => s.cursor));
  return {
    tail: sum(states.map((s) => s.tail)),
    cursor,
    ...summedHoles(states, cursor),
    paused: states.some((s) => s.paused),
    ...(held !== undefined && { switch: held }),
    ...(states.some((s) => s.recovering === true) && { recovering: true as const }),
    maxActive: sum(states.map((s) => s.maxActive)),
    maxNewPerMinute: sum(states.map((s) => s.maxNewPerMinute)),
    ...(admitPerPeriod !== undefined && { admitPerPeriod }),
    active: sum(states.map((s) => s.active)),
    admittedLastMinute: sum(states.map((s) => s.admittedLastMinute)),
    admittedLast5Minutes: sum(states.map((s) => s.admittedLast5Minutes)),
    eventSize: 0,
    eventSeed: 0,
    waiting: sum(states.map((s) => s.waiting)),
    epoch: first.epoch,
    generation: first.generation,
  };
}

function sumTotals(all: readonly SaleTotals[]): SaleTotals {
  const refused = Object.fromEntries(REFUSAL_REASONS.map((r) => [r, sum(all.map((t) => t.refused[r]))])) as SaleTotals['refused'];
  const buckets = all.reduce<number[]>((acc, t) => t.waitBuckets.map((b, i) => b + (acc[i] ?? 0)), []);
  return {
    refused,
    storeErrors: sum(all.map((t) => t.storeErrors)),
    admitted: sum(all.map((t) => t.admitted)),
    lapsed: sum(all.map((t) => t.lapsed)),
    // A switch is set on every database: counted once.
    switchChanges: Math.max(...all.map((t) => t.switchChanges)),
    waitSumMs: sum(all.map((t) => t.waitSumMs)),
    waitMaxMs: Math.max(...all.map((t) => t.waitMaxMs)),
    waitBuckets: buckets,
  };
}

export function mergeStats(all: readonly QueueStats[]): QueueStats {
  const first = all[0]!;
  const measured = all.filter((s) => s.avgWaitSeconds !== null);
  const weight = sum(measured.map((s) => Math.max(1, s.admittedLast5Minutes)));
  const totals = all.every((s) => s.totals !== undefined) ? sumTotals(all.map((s) => s.totals!)) : undefined;
  const lostState = all.find((s) => s.lostState !== undefined)?.lostState;
  const history = all.every((s) => s.history !== undefined) ? mergePoints(all.map((s) => s.history!), sumHistoryPoints) : undefined;
  return {
    ...mergeStates(all),
    reserved: sum(all.map((s) => s.reserved)),
    avgWaitSeconds: measured.length === 0 ? null : sum(measured.map((s) => s.avgWaitSeconds! * Math.max(1, s.admittedLast5Minutes))) / weight,
    ...(history !== undefined && { history }),
    ...(first.adaptive !== undefined && { adaptive: first.adaptive }),
    ...(lostState !== undefined && { lostState }),
    ...(totals !== undefined && { totals }),
    databases: all.map((s) => ({ tail: s.tail, cursor: s.cursor })),
  };
}

function sumHistoryPoints(atMs: number, points: readonly HistoryPoint[]): HistoryPoint {
  return {
    atMs,
    tail: sum(points.map((p) => p.tail)),
    cursor: sum(points.map((p) => p.cursor)),
    waiting: sum(points.map((p) => p.waiting)),
    active: sum(points.map((p) => p.active)),
    admittedLastMinute: sum(points.map((p) => p.admittedLastMinute)),
  };
}

function sumRecordPoints(atMs: number, points: readonly RecordPoint[]): RecordPoint {
  return { ...sumHistoryPoints(atMs, points), epoch: points[0]!.epoch, mode: points[0]!.mode, totals: sumTotals(points.map((p) => p.totals)) };
}

/**
 * Per-minute points of several databases as one series: at every minute any of them has, each
 * database's latest point at or before it (a database that made no call that minute stands as it
 * was); minutes before a database's first point count without it.
 */
export function mergePoints<P extends HistoryPoint>(series: readonly (readonly P[])[], add: (atMs: number, points: readonly P[]) => P): P[] {
  const minutes = [...new Set(series.flatMap((s) => s.map((p) => p.atMs)))].sort((a, b) => a - b);
  const at = series.map(() => -1);
  return minutes.map((atMs) => {
    const points: P[] = [];
    series.forEach((s, i) => {
      while (at[i]! + 1 < s.length && s[at[i]! + 1]!.atMs <= atMs) at[i]! += 1;
      if (at[i]! >= 0) points.push(s[at[i]!]!);
    });
    return add(atMs, points);
  });
}
