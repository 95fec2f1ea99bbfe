/**
 * In-memory QueueStore: the embedded default for a single local process (`npm start`) and the
 * reference the Lua scripts are held to by the shared contract suite.
 *
 * Each method does all its work synchronously before its promise settles, so under one event loop
 * every call is atomic, as a Lua script is in Redis. No node:* imports: this module also runs inside
 * the Fastly engine for build-time checks. State lives as long as the instance; it is not shared
 * between processes or POPs.
 *
 * The state mirrors the Redis layout documented in scripts.ts (the same members in the same sorted
 * sets, as Maps member → score), and each helper below mirrors the Lua function of the same name, so
 * the two stores count, expire and call tickets identically.
 */

import type {
  AdmissionPolicy,
  AdmitResult,
  ClaimResult,
  JoinResult,
  QueueState,
  QueueStats,
  QueueStore,
  RuntimeControl,
  VipCode,
  VipUse,
} from '../core/ports';
import {
  KEEP_MS,
  MINUTE_MS,
  assertAdmitCount,
  assertQueueName,
  averageWaitSeconds,
  checkControl,
  checkGraceMs,
  checkNowMs,
  checkPolicy,
  checkTicket,
  checkUntilMs,
  checkVipCode,
  checkVipHash,
  checkWaitedMs,
  periodStart,
  type CheckedPolicy,
} from './scripts';

interface MemoryQueue {
  tail: number;
  cursor: number;
  /** Start (ms) of the last period whose automatic admission ran; undefined = never. */
  lastPeriodStart: number | undefined;
  /** ticket → slot expiry (ms). */
  readonly active: Map<number, number>;
  /** ticket → reservation expiry (ms). */
  readonly reserved: Map<number, number>;
  /**
   * member (`<ticket>` or `<ticket>@<now>[#k]`) → admission time (ms): `<ticket>` written at the
   * call, re-timed to the claim when the reservation is claimed (see the header of scripts.ts).
   */
  readonly admits: Map<string, number>;
  /** `<from>-<to>` → time (ms) of a rate-mode batch. */
  readonly batches: Map<string, number>;
  /** `<ticket>:<waitedMs>` → time (ms). */
  readonly waits: Map<string, number>;
  paused: boolean;
  /** Runtime overrides; undefined = the configured value. */
  maxActive: number | undefined;
  maxNewPerMinute: number | undefined;
}

/** One VIP code: the fields of its Redis hash, and when its TTL would remove the key. */
interface MemoryVip {
  left: number;
  readonly expiresAtMs: number | null;
  /** Creation time + the key's TTL (see `CheckedVip.keepMs`); from then on the code is unknown. */
  readonly dropAtMs: number;
}

/** Controls in effect for one call: runtime overrides, else the configured thresholds. */
interface Effective {
  readonly paused: boolean;
  readonly maxActive: number;
  readonly maxNewPerMinute: number;
}

export class MemoryQueueStore implements QueueStore {
  readonly #queues = new Map<string, MemoryQueue>();
  /** queue → code hash → code. Apart from the queues' state, as the VIP keys are in Redis. */
  readonly #vips = new Map<string, Map<string, MemoryVip>>();

  async join(queue: string, nowMs: number, policy: AdmissionPolicy): Promise<JoinResult> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    const q = this.#queue(queue);
    q.tail += 1;
    const ticket = q.tail;
    const e = effective(q, p);
    let claimed = false;
    if (isCapacity(e)) {
      expire(q, p.nowMs);
      advance(q, p, e);
      claimed = takeSlot(q, ticket, p, e, 0);
    } else {
      const before = q.cursor;
      autoAdmit(q, p, e.paused);
      if (ticket <= before) {
        trim(q.admits, p.nowMs);
        q.admits.set(String(ticket), p.nowMs);
      }
    }
    return { ...readState(q, p.nowMs, e), ticket, claimed };
  }

  async poll(queue: string, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    const q = this.#queue(queue);
    const e = effective(q, p);
    admissionStep(q, p, e);
    return readState(q, p.nowMs, e);
  }

  async claim(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number): Promise<ClaimResult> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    checkTicket(ticket);
    const waited = checkWaitedMs(waitedMs);
    const q = this.#queue(queue);
    const e = effective(q, p);
    let claimed: boolean;
    if (isCapacity(e)) {
      expire(q, p.nowMs);
      claimed = takeSlot(q, ticket, p, e, waited);
      advance(q, p, e);
    } else {
      claimed = ticket <= q.cursor;
    }
    return { ...readState(q, p.nowMs, e), claimed };
  }

  async touch(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, untilMs: number): Promise<boolean> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    checkTicket(ticket);
    const until = checkUntilMs(untilMs);
    const q = this.#queues.get(queue) ?? emptyQueue();
    if (!isCapacity(effective(q, p))) return true;
    const expiry = q.active.get(ticket);
    if (expiry === undefined || expiry <= p.nowMs) return false;
    const renewed = Math.min(p.nowMs + p.sessionMs, until);
    q.active.set(ticket, renewed);
    return renewed > p.nowMs;
  }

  async leave(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, graceMs: number): Promise<boolean> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    checkTicket(ticket);
    const grace = checkGraceMs(graceMs);
    const q = this.#queue(queue);
    const e = effective(q, p);
    if (!isCapacity(e)) return false;
    if (grace === 0) {
      expire(q, p.nowMs);
      let held = q.active.delete(ticket);
      if (q.reserved.delete(ticket)) {
        q.admits.delete(String(ticket));
        held = true;
      }
      advance(q, p, e);
      return held;
    }
    let held = false;
    const until = p.nowMs + grace;
    for (const slots of [q.active, q.reserved]) {
      const expiry = slots.get(ticket);
      if (expiry !== undefined && expiry > p.nowMs) {
        held = true;
        if (expiry > until) slots.set(ticket, until);
      }
    }
    return held;
  }

  async admit(queue: string, count: number, nowMs: number, policy: AdmissionPolicy): Promise<AdmitResult> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    assertAdmitCount(count);
    const q = this.#queue(queue);
    const e = effective(q, p);
    const capacity = isCapacity(e);
    if (capacity) expire(q, p.nowMs);
    const before = q.cursor;
    const target = Math.min(before + count, q.tail);
    if (target > before) {
      if (capacity) {
        callTickets(q, p, before + 1, target);
      } else {
        q.cursor = target;
        recordBatch(q, p.nowMs, before + 1, target);
      }
    }
    return { ...readState(q, p.nowMs, e), admitted: q.cursor - before };
  }

  async control(queue: string, change: RuntimeControl, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    const c = checkControl(change);
    const q = this.#queue(queue);
    if (c.paused !== undefined) q.paused = c.paused;
    if (c.maxActive !== undefined) q.maxActive = c.maxActive ?? undefined;
    if (c.maxNewPerMinute !== undefined) q.maxNewPerMinute = c.maxNewPerMinute ?? undefined;
    const e = effective(q, p);
    admissionStep(q, p, e);
    return readState(q, p.nowMs, e);
  }

  async stats(queue: string, nowMs: number, policy: AdmissionPolicy): Promise<QueueStats> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    const q = this.#queues.get(queue) ?? emptyQueue();
    let sum = 0;
    let count = 0;
    for (const [member, at] of q.waits) {
      const waited = /:(\d+)$/.exec(member)?.[1];
      if (at > p.nowMs - KEEP_MS && waited !== undefined) {
        sum += Number(waited);
        count += 1;
      }
    }
    return {
      ...readState(q, p.nowMs, effective(q, p)),
      reserved: countAfter(q.reserved, p.nowMs),
      avgWaitSeconds: averageWaitSeconds(sum, count),
    };
  }

  async peek(queue: string): Promise<Pick<QueueState, 'tail' | 'cursor'>> {
    assertQueueName(queue);
    // Reads without creating an entry, as GET does not create a key.
    const state = this.#queues.get(queue);
    return { tail: state?.tail ?? 0, cursor: state?.cursor ?? 0 };
  }

  async createVip(queue: string, codeHash: string, code: VipCode, nowMs: number): Promise<boolean> {
    assertQueueName(queue);
    checkVipHash(codeHash);
    const v = checkVipCode(code, nowMs);
    let codes = this.#vips.get(queue);
    if (codes === undefined) {
      codes = new Map();
      this.#vips.set(queue, codes);
    }
    if (liveVip(codes, codeHash, v.nowMs) !== undefined) return false;
    codes.set(codeHash, { left: v.uses, expiresAtMs: v.expiresAtMs, dropAtMs: v.nowMs + v.keepMs });
    return true;
  }

  /** Mirrors the use_vip script: unknown, then expired, then used up; else one use is taken. */
  async useVip(queue: string, codeHash: string, nowMs: number): Promise<VipUse> {
    assertQueueName(queue);
    checkVipHash(codeHash);
    const now = checkNowMs(nowMs);
    const codes = this.#vips.get(queue);
    const vip = codes === undefined ? undefined : liveVip(codes, codeHash, now);
    if (vip === undefined) return { ok: false, reason: 'unknown' };
    if (vip.expiresAtMs !== null && now >= vip.expiresAtMs) return { ok: false, reason: 'expired' };
    if (vip.left < 1) return { ok: false, reason: 'used_up' };
    vip.left -= 1;
    return { ok: true, remaining: vip.left };
  }

  #queue(queue: string): MemoryQueue {
    let state = this.#queues.get(queue);
    if (state === undefined) {
      state = emptyQueue();
      this.#queues.set(queue, state);
    }
    return state;
  }
}

function emptyQueue(): MemoryQueue {
  return {
    tail: 0,
    cursor: 0,
    lastPeriodStart: undefined,
    active: new Map(),
    reserved: new Map(),
    admits: new Map(),
    batches: new Map(),
    waits: new Map(),
    paused: false,
    maxActive: undefined,
    maxNewPerMinute: undefined,
  };
}

/** The code under `codeHash` unless its TTL has run out (then it is removed, as Redis would have). */
function liveVip(codes: Map<string, MemoryVip>, codeHash: string, nowMs: number): MemoryVip | undefined {
  const vip = codes.get(codeHash);
  if (vip !== undefined && nowMs >= vip.dropAtMs) {
    codes.delete(codeHash);
    return undefined;
  }
  return vip;
}

function effective(q: MemoryQueue, p: CheckedPolicy): Effective {
  return {
    paused: q.paused,
    maxActive: q.maxActive ?? p.maxActive,
    maxNewPerMinute: q.maxNewPerMinute ?? p.maxNewPerMinute,
  };
}

function isCapacity(e: Effective): boolean {
  return e.maxActive > 0 || e.maxNewPerMinute > 0;
}

/** ZCOUNT key (min +inf. */
function countAfter<K>(scores: ReadonlyMap<K, number>, minExclusive: number): number {
  let n = 0;
  for (const score of scores.values()) if (score > minExclusive) n += 1;
  return n;
}

/** ZREMRANGEBYSCORE key -inf min. */
function removeUpTo<K>(scores: Map<K, number>, max: number): void {
  for (const [member, score] of scores) if (score <= max) scores.delete(member);
}

function trim<K>(scores: Map<K, number>, nowMs: number): void {
  removeUpTo(scores, nowMs - KEEP_MS);
}

/**
 * Mirrors `admitted_counts`: arrivals. Admission entries by score, except that every stored
 * reservation's call-time entry is taken out and each live reservation counts once instead, whatever
 * its call time (a lapsed one, still stored, not at all); plus rate-mode batch sizes.
 */
function admittedCounts(q: MemoryQueue, nowMs: number): { minute: number; five: number } {
  let minute = countAfter(q.admits, nowMs - MINUTE_MS);
  let five = countAfter(q.admits, nowMs - KEEP_MS);
  for (const [ticket, expiry] of q.reserved) {
    const at = q.admits.get(String(ticket));
    if (at !== undefined) {
      if (at > nowMs - MINUTE_MS) minute -= 1;
      if (at > nowMs - KEEP_MS) five -= 1;
    }
    if (expiry > nowMs) {
      minute += 1;
      five += 1;
    }
  }
  for (const [member, at] of q.batches) {
    if (at <= nowMs - KEEP_MS) continue;
    const range = /^(\d+)-(\d+)$/.exec(member);
    if (range === null) continue;
    const size = Number(range[2]) - Number(range[1]) + 1;
    five += size;
    if (at > nowMs - MINUTE_MS) minute += size;
  }
  return { minute, five };
}

function readState(q: MemoryQueue, nowMs: number, e: Effective): QueueState {
  const { minute, five } = admittedCounts(q, nowMs);
  return {
    tail: q.tail,
    cursor: q.cursor,
    paused: e.paused,
    maxActive: e.maxActive,
    maxNewPerMinute: e.maxNewPerMinute,
    active: countAfter(q.active, nowMs) + countAfter(q.reserved, nowMs),
    admittedLastMinute: minute,
    admittedLast5Minutes: five,
  };
}

function recordBatch(q: MemoryQueue, nowMs: number, from: number, to: number): void {
  if (to < from) return;
  trim(q.batches, nowMs);
  q.batches.set(`${from}-${to}`, nowMs);
}

/** The same rule as `auto_admit` in scripts.ts. */
function autoAdmit(q: MemoryQueue, p: CheckedPolicy, paused: boolean): void {
  if (paused || p.count <= 0) return;
  const start = periodStart(p.nowMs, p.periodMs);
  if (q.lastPeriodStart !== undefined && start <= q.lastPeriodStart) return;
  q.lastPeriodStart = start;
  const target = Math.min(q.cursor + p.count, q.tail + p.count);
  if (target <= q.cursor) return;
  const before = q.cursor;
  q.cursor = target;
  recordBatch(q, p.nowMs, before + 1, Math.min(target, q.tail));
}

function expire(q: MemoryQueue, nowMs: number): void {
  for (const [ticket, expiry] of q.reserved) {
    if (expiry <= nowMs) {
      q.reserved.delete(ticket);
      q.admits.delete(String(ticket));
    }
  }
  removeUpTo(q.active, nowMs);
  trim(q.admits, nowMs);
  trim(q.batches, nowMs);
  trim(q.waits, nowMs);
}

function freeSlots(q: MemoryQueue, nowMs: number, e: Effective): number {
  let free = Number.POSITIVE_INFINITY;
  if (e.maxActive > 0) free = e.maxActive - q.active.size - q.reserved.size;
  if (e.maxNewPerMinute > 0) free = Math.min(free, e.maxNewPerMinute - admittedCounts(q, nowMs).minute);
  return free;
}

function callTickets(q: MemoryQueue, p: CheckedPolicy, from: number, to: number): void {
  for (let t = from; t <= to; t += 1) {
    q.reserved.set(t, p.nowMs + p.reservationMs);
    q.admits.set(String(t), p.nowMs);
  }
  q.cursor = to;
}

function advance(q: MemoryQueue, p: CheckedPolicy, e: Effective): void {
  if (e.paused) return;
  const n = Math.min(q.tail - q.cursor, freeSlots(q, p.nowMs, e));
  if (n < 1) return;
  callTickets(q, p, q.cursor + 1, q.cursor + n);
}

function admissionStep(q: MemoryQueue, p: CheckedPolicy, e: Effective): void {
  if (isCapacity(e)) {
    expire(q, p.nowMs);
    advance(q, p, e);
  } else {
    autoAdmit(q, p, e.paused);
  }
}

/**
 * Mirrors `take_slot`; runs after `expire`, so whatever is stored is live. Claiming a reservation
 * re-times its admission entry to now: the arrival.
 */
function takeSlot(q: MemoryQueue, ticket: number, p: CheckedPolicy, e: Effective, waited: number): boolean {
  const now = p.nowMs;
  if (q.active.has(ticket)) {
    q.active.set(ticket, now + p.sessionMs);
    return true;
  }
  if (q.reserved.delete(ticket)) {
    q.admits.set(String(ticket), now);
  } else {
    if (ticket > q.cursor || ticket > q.tail || e.paused || freeSlots(q, now, e) < 1) return false;
    let member = `${ticket}@${now}`;
    for (let k = 1; q.admits.has(member); k += 1) member = `${ticket}@${now}#${k}`;
    q.admits.set(member, now);
  }
  q.active.set(ticket, now + p.sessionMs);
  q.waits.set(`${ticket}:${waited}`, now);
  return true;
}
