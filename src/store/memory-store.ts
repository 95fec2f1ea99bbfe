/**
 * In-memory QueueStore: the embedded default for a single local process (`npm start`) and the
 * reference the Lua scripts are held to by the shared contract suite.
 *
 * Each method does all its work synchronously before its promise settles, so under one event loop
 * every call is atomic, as a Lua script is in Redis. No node:* imports: this module also runs inside
 * the Fastly engine for build-time checks. State lives as long as the instance; it is not shared
 * between processes or POPs.
 *
 * The state mirrors the Redis layout documented in scripts.ts as it stood before issue 13 (the same
 * members in sorted sets, as Maps member → score, counted by score on every call), and each helper
 * below mirrors the Lua function of the same name, so the two stores count, expire, call and draw
 * tickets identically. The Lua keeps its counts in ctl (the book and `pres`, see scripts.ts) to bill
 * fewer commands; what a caller sees is the same, which the contract suite checks on both. Draws walk the waiting visitors
 * in Redis's ZSET order (score, then member bytes) with the same generator (`createDrawRng`), so the
 * same seed draws the same tickets here and in Redis.
 */

import { AUDIT_KEEP_MS, AUDIT_MAX_ENTRIES, type AuditAppended, type AuditMerge, type BlockHoles, type TicketRange } from '../core/ports';
import type {
  AdmissionPolicy,
  AdmitResult,
  ClaimResult,
  DrawResult,
  HistoryPoint,
  JoinOptions,
  RecordPoint,
  JoinResult,
  QueuePeek,
  QueueState,
  QueueStats,
  QueueStore,
  ResetResult,
  RuntimeControl,
  StatsOptions,
  VipCode,
  VipUse,
} from '../core/ports';
import { WAIT_BOUNDS_MS } from '../core/ports';
import {
  HISTORY_MS,
  RECORD_MS,
  TOTALS_LENGTH,
  checkRecordSpan,
  tallyArg,
  totalsFrom,
  blockArgv,
  MAX_STORED_HOLE_RANGES,
  IDEMPOTENCY_MS,
  IDEMPOTENCY_SLOT_KEEP,
  idempotencySlot,
  JOIN_KEEP_MS,
  JOIN_SLOT_DIGITS,
  KEEP_MS,
  MAX_SEED,
  MINUTE_MS,
  assertAdmitCount,
  assertQueueName,
  averageWaitSeconds,
  CALL_BUCKET_MS,
  CALL_SLOTS,
  checkControl,
  checkGraceMs,
  checkIdempotencyKey,
  checkFloor,
  checkJoinKey,
  checkRecoverMs,
  checkNowMs,
  checkPolicy,
  checkTicket,
  checkUntilMs,
  checkVipBatch,
  checkAuditEntry,
  checkAuditLimit,
  checkAuditMerge,
  checkVipCode,
  checkVipHash,
  checkWaitedMs,
  checkAdaptive,
  createDrawRng,
  generationArg,
  isOpen,
  periodStart,
  type CheckedPolicy,
} from './scripts';
import { MemoryOutbox } from './outbox';
import { adaptiveStatusRaw, adaptiveValue, controlAdaptive, parseAdaptiveStatus, takeAdaptive, type AdaptiveFields } from './adaptive';

interface MemoryQueue {
  tail: number;
  cursor: number;
  /** Start (ms) of the last period whose automatic admission ran; undefined = never. */
  lastPeriodStart: number | undefined;
  /**
   * ticket → slot expiry (ms); also `<ticket>@g<generation>` → expiry for a holder from a lost
   * generation registered again by touch (see scripts.ts, Generations).
   */
  readonly active: Map<number | string, number>;
  /** ticket → reservation expiry (ms). */
  readonly reserved: Map<number, number>;
  /**
   * member (`<ticket>` or `<ticket>@<now>[#k]`) → admission time (ms): `<ticket>` written at the
   * call, re-timed to the claim when the reservation is claimed (see the header of scripts.ts).
   */
  readonly admits: Map<string, number>;
  /** `<ticket>:<waitedMs>` → time (ms). */
  readonly waits: Map<string, number>;
  /** Random method: ticket → last poll time (ms). */
  readonly waiting: Map<number, number>;
  /** Minute start (ms) → the point recorded for it: the sale's record (ctl's `h` slots, seven days). */
  readonly history: Map<number, RecordPoint>;
  /** ctl `rt`: the sale's totals, in its order (see TOTALS_LENGTH). */
  readonly totals: number[];
  /** ctl `rf`: the arrivals before this (ms) are in the totals; undefined = none yet. */
  folded: number | undefined;
  /**
   * ctl `ru`: true ('1') when capacity mode wrote reservations whose claims no run counts, false
   * ('0') when every arrival since `folded` counted itself; undefined = absent (see recordHistory).
   */
  uncounted: boolean | undefined;
  /** Rate FIFO: ctl's call buckets, slot → the bucket's start and the range it called (see `callsEntry`). */
  readonly calls: Map<number, { readonly bucket: number; readonly from: number; readonly to: number; readonly lapsed: number }>;
  /** Rate FIFO's rate window (ctl `rw`): `[last admission ms, count]` per PERIOD_MS/16 step, oldest first. */
  rateWindow: [number, number][];
  /** ctl `rc`: the claimed bitmap, its base (undefined: none yet) and the tickets at or above it that claimed. */
  readonly claimed: TicketBits;
  /** ctl `rp`: the same for tickets whose holders came to claim and found the window full. */
  readonly present: TicketBits;
  /** ctl `lp`: the lapse frontier (undefined: none yet). */
  lapseFrontier: number | undefined;
  /** ctl `ra`: the operator's calls above the frontier, `[from, to]`. */
  operatorRanges: [number, number][];
  /** ctl `rl`: late claims let in, `[ticket, ms]`, oldest first. */
  lateClaims: [number, number][];
  /** ctl `rq`: the runs that called above the frontier, `[ms, last called]`, oldest first. */
  callRuns: [number, number][];
  /** ctl `bh`: ticket blocks' holes, `[from, to]` ascending, of one epoch and generation (see holes.lua). */
  holes: { readonly epoch: number; readonly generation: number; ranges: [number, number][] } | undefined;
  paused: boolean;
  /** ctl `switch`: the emergency switch when not normal (see SWITCH in the scripts). */
  switch: 'open' | 'hold' | undefined;
  /** Runtime overrides; undefined = the configured value. */
  maxActive: number | undefined;
  maxNewPerMinute: number | undefined;
  /** ctl `admit_per_period`: rate mode's period quota set at runtime; undefined = the configured value. */
  admitPerPeriod: number | undefined;
  /** The event's frozen pre-queue (ctl `ev_start`, `ev_size`, `ev_seed`); undefined = none frozen. */
  event: { readonly start: number; readonly size: number; readonly seed: number } | undefined;
  /** ctl `epoch`: ms of the last reset, 0 = never. */
  epoch: number;
  /** ctl `gen`: 0 until the first writing call sets it (see `ensureGeneration`). */
  generation: number;
  /** ctl `recover_until` (ms): the recovery window after a lost state (see scripts.ts); 0 = never opened. */
  recoverUntil: number;
  /** ctl `restored`: this generation began from a lost state its caller's POP knew (see RESTORE). */
  restored: QueueStats['lostState'];
  /** Explicit admits' idempotency keys → the count that admit let in, and when the key is forgotten (ms). */
  readonly idempotency: Map<string, { readonly admitted: number; readonly asked: number; readonly untilMs: number; readonly slot: number }>;
  /** ctl's join ring (see scripts.ts, Joins): slot → the latest join whose key falls in it. */
  readonly joins: Map<number, JoinEntry>;
  /** Adaptive admission's fields of ctl (ac_* and the POPs' reports o<n>; see adaptive.ts). */
  readonly ac: AdaptiveFields;
}

/** A bitmap of tickets at or above a base (a multiple of 8), as ctl's `rc` and `rp`. */
interface TicketBits {
  base: number | undefined;
  readonly tickets: Set<number>;
}

/** One entry of the join ring: a key, the ticket it took, when, in which life of the queue, and whether it walked in. */
interface JoinEntry {
  readonly key: string;
  readonly ticket: number;
  readonly atMs: number;
  readonly epoch: number;
  readonly generation: number;
  readonly claimed: boolean;
  /** A block join's last number; 0 = no block. */
  readonly last: number;
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
  /** Rate mode's visitors per period: the policy's, or adaptive admission's value. */
  readonly count: number;
  /** Adaptive admission's knob ('a', 'n', 'r', '' none) and its value in effect (undefined: off). */
  readonly knob: string;
  readonly adaptive: number | undefined;
}

/** One call, as one script run sees it: the queue, the policy, the controls and the draw generator. */
interface Run {
  readonly q: MemoryQueue;
  readonly p: CheckedPolicy;
  readonly e: Effective;
  /** Admission may run: no event, or its start has come (the Lua `OPEN`). */
  readonly open: boolean;
  readonly random: boolean;
  /** One stream per call, as `rng_state` is per script run. */
  readonly rng: { nextRank(n: number): number };
  /** A stats run (the Lua GEN_READ_ONLY): writes nothing, not even the figures it counted. */
  readonly readOnly: boolean;
  /** The Lua `JOINER`: the joining ticket, in the draw (last) without being stored in `waiting`. */
  joiner?: number;
}

export class MemoryQueueStore implements QueueStore {
  /** The webhook outbox, in this process's memory as the queues are. */
  readonly outbox = new MemoryOutbox();
  readonly #queues = new Map<string, MemoryQueue>();
  /** queue → code hash → code. Apart from the queues' state, as the VIP keys are in Redis. */
  readonly #vips = new Map<string, Map<string, MemoryVip>>();
  /** Each queue's audit trail, newest first (see audit_append.lua). */
  readonly #audit = new Map<string, { entries: string[]; dropAtMs: number }>();
  /** Each queue's run of merged audit entries (the merge key of audit_append.lua). */
  readonly #auditRuns = new Map<string, { tag: string; sum: number; calls: number; dropAtMs: number }>();

  async join(queue: string, nowMs: number, policy: AdmissionPolicy, options: JoinOptions = {}): Promise<JoinResult> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    const recover = checkRecoverMs(options.recoverMs);
    const f = checkFloor(options.floor);
    const key = checkJoinKey(options.joinKey);
    const adaptive = checkAdaptive(policy.adaptive);
    const tally = tallyArg(policy.tally);
    const [sizeArg] = blockArgv(options.block);
    const q = this.#queue(queue);
    const size = p.method === 'random' || sizeArg === '' ? 1 : Number(sizeArg);
    // Mirrors RECOVERY: the first evidence of a lost state in this generation opens the window;
    // with recoverIfNew, only a state this join finds absent is that evidence.
    const created = q.generation === 0;
    ensureGeneration(q, p);
    // Mirrors the join script: the settings and report first, then read_controls (its step sees
    // the tail before this join's ticket).
    takeAdaptive(q.ac, adaptive, p.nowMs);
    effective(q, p);
    if (recover > 0 && q.recoverUntil === 0 && (options.recoverIfNew !== true || created)) openRecovery(q, p, recover);
    // Mirrors the join script: the caller's holes count whatever the join does; switched open, none are kept.
    const holesBefore = q.holes;
    if (p.method !== 'random') addHoles(q, p, options.block?.holes);
    // Mirrors join_ring: a retry of a join whose answer was lost gets its ticket again.
    const slot = key === '' ? undefined : joinSlot(key);
    const entry = slot === undefined ? undefined : q.joins.get(slot);
    if (entry !== undefined && entry.key === key && Math.abs(p.nowMs - entry.atMs) < JOIN_KEEP_MS && entry.epoch === q.epoch && entry.generation === q.generation) {
      return replayJoin(q, p, entry);
    }
    // Mirrors the join script: switched open, no ticket and nothing written.
    if (q.switch === 'open') {
      q.holes = holesBefore;
      return { ...readState(begin(q, p, true)), ticket: 0, claimed: false, replayed: false };
    }
    let ticket = q.tail + 1;
    q.tail += size;
    // Mirrors take_tally: the edge's counts ride on the ticket's write.
    takeTally(q, tally);
    prologue(q, p, ticket - 1);
    // Mirrors the join script's rollback rule: a new generation, numbers on above the floor.
    if (f !== undefined && f.generation === q.generation && ticket <= f.tail) {
      q.generation = freshGeneration(p, q.generation);
      ticket = f.tail + 1;
      q.tail = f.tail + size;
      q.cursor = Math.max(q.cursor, f.tail);
      q.lapseFrontier = Math.max(q.lapseFrontier ?? 0, f.tail);
      q.holes = undefined;
      if (p.method === 'random') q.waiting.clear();
      if (recover > 0) openRecovery(q, p, recover);
    }
    const r = begin(q, p);
    let claimed = false;
    // Mirrors the join script: with others waiting ahead (or nobody to admit now), capacity mode and
    // the random method leave the admission step to the polls (the figures are exact all the same:
    // ctl's book, or counted by score).
    const capacity = isCapacity(r.e);
    // Mirrors the join script: holes right above the cursor are passed over.
    if (!r.random && q.cursor < ticket - 1 && holesOf(r).length > 0) {
      const { target, spans } = passHoles(r, q.cursor, 0, ticket - 1);
      if (target > q.cursor) {
        if (capacity) takeHoles(r, target);
        else passSpans(r, spans);
        q.cursor = target;
      }
    }
    const queued = (capacity || r.random) && (r.e.paused || !r.open || q.cursor < ticket - 1);
    // The ticket joins the draw; random rate mode's own step draws among the stored and it (last).
    if (r.random && (capacity || queued)) q.waiting.set(ticket, p.nowMs);
    if (queued) {
      // Nothing to admit here: the ticket waits, unclaimed.
    } else if (capacity && !r.random) {
      claimed = walkIn(r, ticket);
    } else if (capacity) {
      expire(q, p.nowMs);
      advance(r);
      claimed = takeSlot(r, ticket, 0);
    } else if (r.random) {
      // Mirrors the join script: in the draw unstored only while the rate window has room for it.
      const inDraw = windowRoom(r);
      if (inDraw) r.joiner = ticket;
      admissionStep(r);
      // Drawn by this call: it enters at once, with no reservation; else it is stored in the draw.
      if (inDraw && r.joiner === undefined) {
        // Mirrors collect(ticket, 0, true): the joiner's arrival, marked `w`, counted by the join.
        q.admits.set(String(ticket), p.nowMs);
        q.waits.set(`${ticket}w:0`, p.nowMs);
        countWait(q.totals, 0);
        windowTake(r);
        claimed = true;
      } else {
        q.waiting.set(ticket, p.nowMs);
      }
    } else {
      // Before the start, calls made ahead of the tail are taken back: nobody held those tickets.
      if (!r.open && q.cursor > ticket - 1) q.cursor = ticket - 1;
      // Mirrors the join script: lapsed calls handed on, the period step only while nobody waits,
      // and a walk-in only if the rate window has room.
      processLapses(r);
      if (q.cursor >= ticket - 1) autoAdmit(r);
      claimed = ticket <= q.cursor && rateGate(r, ticket);
    }
    const last = size > 1 ? q.tail : 0;
    if (slot !== undefined) q.joins.set(slot, { key, ticket, atMs: p.nowMs, epoch: q.epoch, generation: q.generation, claimed, last });
    // No history point: the join script writes none.
    return { ...readState(r), ticket, claimed, replayed: false, ...(last > 0 && { block: { from: ticket, to: last } }) };
  }

  async poll(queue: string, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    const adaptive = checkAdaptive(policy.adaptive);
    const q = this.#queue(queue);
    takeAdaptive(q.ac, adaptive, p.nowMs);
    ensureGeneration(q, p);
    effective(q, p);
    prologue(q, p, q.tail);
    const r = begin(q, p);
    admissionStep(r);
    return finish(r);
  }

  async claim(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<ClaimResult> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    checkTicket(ticket);
    const waited = checkWaitedMs(waitedMs);
    const gen = generationArg(generation);
    const q = this.#queue(queue);
    ensureGeneration(q, p);
    if (isForeign(q, gen)) return { ...readState(begin(q, p)), claimed: false };
    prologue(q, p, q.tail);
    const r = begin(q, p);
    let claimed: boolean;
    if (q.switch === 'hold') {
      // Mirrors the claim script: a called ticket waits with the rest.
      claimed = false;
    } else if (isCapacity(r.e)) {
      expire(q, p.nowMs);
      claimed = takeSlot(r, ticket, waited);
      advance(r);
    } else if (r.random) {
      claimed = (q.reserved.get(ticket) ?? 0) > p.nowMs;
    } else {
      // Mirrors the claim script: a called ticket is let in if the rate window has room.
      claimed = ticket <= q.cursor && rateGate(r, ticket, waited);
    }
    return { ...finish(r), claimed };
  }

  async touch(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, untilMs: number, generation?: number): Promise<boolean> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    checkTicket(ticket);
    const until = checkUntilMs(untilMs);
    const gen = generationArg(generation);
    const q = this.#queue(queue);
    ensureGeneration(q, p);
    if (!isCapacity(effective(q, p))) return true;
    // A holder from a lost generation is registered again under a member of its own.
    const foreign = isForeign(q, gen);
    const member = foreign ? `${ticket}@g${gen}` : ticket;
    const expiry = q.active.get(member) ?? (foreign ? p.nowMs + 1 : undefined);
    if (expiry === undefined || expiry <= p.nowMs) return false;
    const renewed = Math.min(p.nowMs + p.sessionMs, until);
    q.active.set(member, renewed);
    return renewed > p.nowMs;
  }

  async leave(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, graceMs: number, generation?: number): Promise<boolean> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    checkTicket(ticket);
    const grace = checkGraceMs(graceMs);
    const gen = generationArg(generation);
    const q = this.#queue(queue);
    prologue(q, p, q.tail);
    const r = begin(q, p);
    if (!isCapacity(r.e)) return false;
    if (isForeign(q, gen)) {
      // Only the slot registered again for this holder (see touch), never the ticket's namesake.
      const member = `${ticket}@g${gen}`;
      if (grace === 0) return q.active.delete(member);
      const expiry = q.active.get(member);
      if (expiry === undefined || expiry <= p.nowMs) return false;
      if (expiry > p.nowMs + grace) q.active.set(member, p.nowMs + grace);
      return true;
    }
    if (grace === 0) {
      expire(q, p.nowMs);
      let held = q.active.delete(ticket);
      if (q.reserved.delete(ticket)) {
        q.admits.delete(String(ticket));
        held = true;
      }
      advance(r);
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

  async admit(queue: string, count: number, nowMs: number, policy: AdmissionPolicy, idempotencyKey?: string): Promise<AdmitResult> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    assertAdmitCount(count, idempotencyKey !== undefined);
    if (idempotencyKey !== undefined) checkIdempotencyKey(idempotencyKey);
    const q = this.#queue(queue);
    // Mirrors the admit script's idempotency (see idempotent_slot.lua): a key applied already replays.
    for (const [key, done] of q.idempotency) if (done.untilMs <= p.nowMs) q.idempotency.delete(key);
    const done = idempotencyKey === undefined ? undefined : q.idempotency.get(idempotencyKey);
    if (done !== undefined) return { ...readState(begin(q, p)), admitted: done.admitted, replayed: true, asked: done.asked };
    prologue(q, p, q.tail);
    const r = begin(q, p);
    const capacity = isCapacity(r.e);
    const lapsed = capacity || r.random ? expire(q, p.nowMs) : 0;
    // Random rate mode: lapsed draws drawn again first are not counted in `admitted` (the script
    // does the same); rate FIFO leaves lapsed calls to the poll.
    let admitted = 0;
    // Mirrors the admit script: a keyed count of 0 (a replay check) and the switch holding let nobody in.
    if (count === 0 || q.switch === 'hold') {
      admitted = 0;
    } else if (r.open && r.random) {
      if (!capacity) redraw(r, lapsed);
      const from = q.cursor;
      drawTickets(r, count, true);
      admitted = q.cursor - from;
      if (capacity && admitted > 0) q.uncounted = true;
    } else if (r.open) {
      // Mirrors the admit script: count real visitors, holes passed over, never past the tail.
      const from = q.cursor;
      const { target, passed, spans } = passHoles(r, from, count, q.tail);
      if (target > from) callTickets(r, from + 1, target, capacity, spans, passed);
      if (target > from && capacity) q.uncounted = true;
      admitted = q.cursor - from - passed;
    }
    if (idempotencyKey !== undefined) {
      // Mirrors idempotent_record.lua: a slot of the ring keeps its newest IDEMPOTENCY_SLOT_KEEP keys.
      const slot = idempotencySlot(idempotencyKey);
      q.idempotency.set(idempotencyKey, { admitted, asked: count, untilMs: p.nowMs + IDEMPOTENCY_MS, slot });
      const sharing = [...q.idempotency].filter(([, entry]) => entry.slot === slot).map(([key]) => key);
      for (const key of sharing.slice(0, Math.max(0, sharing.length - IDEMPOTENCY_SLOT_KEEP))) q.idempotency.delete(key);
    }
    return { ...finish(r), admitted, replayed: false, asked: count };
  }

  async control(queue: string, change: RuntimeControl, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    const c = checkControl(change);
    const q = this.#queue(queue);
    prologue(q, p, q.tail);
    if (c.paused !== undefined) q.paused = c.paused;
    // Mirrors the control script: a change of the switch is counted in the totals.
    if (c.switch !== undefined && c.switch !== (q.switch ?? 'normal')) q.totals[2] = (q.totals[2] ?? 0) + 1;
    if (c.switch !== undefined) q.switch = c.switch === 'normal' ? undefined : c.switch;
    if (c.maxActive !== undefined) q.maxActive = c.maxActive ?? undefined;
    if (c.maxNewPerMinute !== undefined) q.maxNewPerMinute = c.maxNewPerMinute ?? undefined;
    if (c.admitPerPeriod !== undefined) q.admitPerPeriod = c.admitPerPeriod ?? undefined;
    // The knob's threshold changed by hand (see control.lua): max active when it is in effect or
    // changed, else max new per minute; the period quota when neither threshold is in effect.
    const rate = (q.maxActive ?? p.maxActive) === 0 && (q.maxNewPerMinute ?? p.maxNewPerMinute) === 0;
    const hand = rate ? c.admitPerPeriod : (q.maxActive ?? p.maxActive) > 0 || c.maxActive !== undefined ? c.maxActive : c.maxNewPerMinute;
    controlAdaptive(q.ac, p.nowMs, c.adaptive, c.adaptivePin, hand);
    const r = begin(q, p);
    admissionStep(r);
    return { ...finish(r), admitPerPeriod: r.e.count };
  }

  async stats(queue: string, nowMs: number, policy: AdmissionPolicy, options?: StatsOptions): Promise<QueueStats> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    const q = this.#queues.get(queue) ?? emptyQueue();
    let sum = 0;
    let count = 0;
    const run = begin(q, p, true);
    // Mirrors the stats script: rate FIFO records no waits, so it reads none.
    const waits = run.random || isCapacity(run.e) ? q.waits : new Map<string, number>();
    for (const [member, at] of waits) {
      const waited = /:(\d+)$/.exec(member)?.[1];
      if (at > p.nowMs - KEEP_MS && waited !== undefined) {
        sum += Number(waited);
        count += 1;
      }
    }
    const adaptive = parseAdaptiveStatus(adaptiveStatusRaw(q.ac, run.e.knob, run.e.adaptive));
    // Mirrors the stats script: the arrivals since the last point added to a copy of the totals.
    const totals = [...q.totals];
    for (const [member, at] of waits) {
      const waited = /:(\d+)$/.exec(member)?.[1];
      if (waited !== undefined && at >= (q.folded ?? 0) && !WALK_IN.test(member)) countWait(totals, Number(waited));
    }
    return {
      ...readState(run),
      // Mirrors the stats script: rate FIFO writes no reservations, it counts its open calls.
      reserved: run.random || isCapacity(run.e) ? countAfter(q.reserved, p.nowMs) : outstandingCalls(q),
      avgWaitSeconds: averageWaitSeconds(sum, count),
      ...(adaptive !== undefined ? { adaptive } : {}),
      ...(q.restored !== undefined ? { lostState: q.restored } : {}),
      admitPerPeriod: run.e.count,
      totals: totalsFrom(totals),
      ...(options?.history === true ? { history: await this.history(queue, nowMs) } : {}),
    };
  }

  /** Mirrors the draw script: see its comment in scripts.ts. */
  async draw(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<DrawResult> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    checkTicket(ticket);
    const waited = checkWaitedMs(waitedMs);
    const gen = generationArg(generation);
    const q = this.#queue(queue);
    ensureGeneration(q, p);
    if (isForeign(q, gen)) return { ...readState(begin(q, p)), outcome: 'unknown', claimed: false };
    prologue(q, p, q.tail);
    const r = begin(q, p);
    let settled: Settled | undefined;
    if (r.random) {
      const lapsed = expire(q, p.nowMs);
      settled = settle(r, ticket, waited);
      if (settled === undefined && q.waiting.has(ticket)) {
        q.waiting.set(ticket, p.nowMs);
        admissionStep(r, lapsed);
        settled = settle(r, ticket, waited) ?? { outcome: 'waiting', claimed: false };
      } else {
        admissionStep(r, lapsed);
        settled ??= { outcome: 'unknown', claimed: false };
      }
    } else {
      admissionStep(r);
      const capacity = isCapacity(r.e);
      const claimed = capacity && takeSlot(r, ticket, waited);
      const outcome = claimed
        ? 'drawn'
        : ticket <= q.cursor && ticket <= q.tail
          ? capacity
            ? 'front'
            : 'drawn'
          : ticket <= q.tail
            ? 'waiting'
            : 'unknown';
      settled = { outcome, claimed };
    }
    return { ...finish(r), ...settled };
  }

  async history(queue: string, nowMs: number): Promise<readonly HistoryPoint[]> {
    assertQueueName(queue);
    const now = checkNowMs(nowMs);
    const q = this.#queues.get(queue);
    if (q === undefined) return [];
    // Mirrors read_history: the last hour's points since the last reset, as the history shows them.
    return [...q.history.values()]
      .filter((point) => point.atMs > now - HISTORY_MS && point.epoch === q.epoch)
      .sort((a, b) => a.atMs - b.atMs)
      .map(({ atMs, tail, cursor, waiting, active, admittedLastMinute }) => ({ atMs, tail, cursor, waiting, active, admittedLastMinute }));
  }

  async record(queue: string, nowMs: number, fromMs: number, minutes: number): Promise<readonly RecordPoint[]> {
    assertQueueName(queue);
    const now = checkNowMs(nowMs);
    const [from, count] = checkRecordSpan(fromMs, minutes);
    const q = this.#queues.get(queue);
    if (q === undefined) return [];
    return [...q.history.values()].filter((point) => point.atMs >= from && point.atMs < from + count * MINUTE_MS && point.atMs > now - RECORD_MS).sort((a, b) => a.atMs - b.atMs);
  }

  /** Mirrors the reset script: the line empties, the tail and held slots stay (see its comment). */
  async reset(queue: string, nowMs: number, policy: AdmissionPolicy, expectedEpoch?: number): Promise<ResetResult> {
    assertQueueName(queue);
    const p = checkPolicy(nowMs, policy);
    const expected = expectedEpoch === undefined ? undefined : checkNowMs(expectedEpoch);
    const q = this.#queue(queue);
    const applied = expected === undefined || expected === q.epoch;
    if (applied) {
      q.cursor = q.tail;
      q.lastPeriodStart = undefined;
      // Mirrors the reset script: the arrivals not yet in the totals are added before they go.
      for (const [member, at] of q.waits) {
        const waited = /:(\d+)$/.exec(member)?.[1];
        if (waited !== undefined && at >= (q.folded ?? 0) && !WALK_IN.test(member)) countWait(q.totals, Number(waited));
      }
      q.folded = p.nowMs + 1;
      q.uncounted = false;
      // The record stays (its points carry their epoch); so do the totals.
      for (const scores of [q.reserved, q.admits, q.waits, q.waiting, q.calls]) scores.clear();
      // Mirrors the reset script: the rate's own fields go (the next run starts the frontier at the cursor).
      q.lapseFrontier = undefined;
      q.rateWindow = [];
      for (const bits of [q.claimed, q.present]) {
        bits.base = undefined;
        bits.tickets.clear();
      }
      q.operatorRanges = [];
      q.lateClaims = [];
      q.callRuns = [];
      q.holes = undefined;
      removeUpTo(q.active, p.nowMs);
      q.event = undefined;
      q.epoch = p.nowMs;
    }
    return { ...readState(begin(q, p)), applied };
  }

  async peek(queue: string): Promise<QueuePeek> {
    assertQueueName(queue);
    // Reads without creating an entry, as GET does not create a key.
    const state = this.#queues.get(queue);
    const peeked = { tail: state?.tail ?? 0, cursor: state?.cursor ?? 0 };
    // Mirrors the peek script: the stored holes of this epoch and generation above the cursor,
    // whatever the method (it is given none).
    const holes = state === undefined ? [] : reportedHoles({ q: state, random: false });
    return holes.length > 0 ? { ...peeked, holes } : peeked;
  }

  /** Mirrors the create_vip script: every argument checked before anything is written. */
  async createVips(queue: string, codeHashes: readonly string[], code: VipCode, nowMs: number): Promise<boolean[]> {
    assertQueueName(queue);
    const hashes = checkVipBatch(codeHashes);
    const v = checkVipCode(code, nowMs);
    const codes = this.#vips.get(queue) ?? new Map<string, MemoryVip>();
    this.#vips.set(queue, codes);
    return hashes.map((codeHash) => {
      if (liveVip(codes, codeHash, v.nowMs) !== undefined) return false;
      codes.set(codeHash, { left: v.uses, expiresAtMs: v.expiresAtMs, dropAtMs: v.nowMs + v.keepMs });
      return true;
    });
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

  /**
   * Mirrors the audit_append script: newest first, the newest AUDIT_MAX_ENTRIES kept, AUDIT_KEEP_MS
   * past the last append; a run of one merge tag is one entry (the run's sum and length in it).
   */
  async appendAudit(queue: string, entry: string, nowMs: number, merge?: AuditMerge): Promise<AuditAppended> {
    assertQueueName(queue);
    const now = checkNowMs(nowMs);
    checkAuditEntry(entry);
    const { tag, add } = checkAuditMerge(merge);
    const trail = liveAudit(this.#audit, queue, now) ?? [];
    const run = this.#auditRuns.get(queue);
    const previous = run !== undefined && run.dropAtMs > now ? run : undefined;
    const keep = (entries: string[]) => this.#audit.set(queue, { entries, dropAtMs: now + AUDIT_KEEP_MS });
    if (tag === '') {
      trail.unshift(entry);
      this.#auditRuns.delete(queue);
      if (trail.length > AUDIT_MAX_ENTRIES) trail.length = AUDIT_MAX_ENTRIES;
      keep(trail);
      return { kept: trail.length, merged: false };
    }
    let merged = previous !== undefined && previous.tag === tag;
    const sum = merged ? previous!.sum + add : add;
    const calls = merged ? previous!.calls + 1 : 1;
    const text = entry.split('#SUM#').join(String(sum)).split('#CALLS#').join(String(calls));
    if (merged && trail.length > 0) trail[0] = text;
    else merged = false;
    if (!merged) {
      trail.unshift(text);
      if (trail.length > AUDIT_MAX_ENTRIES) trail.length = AUDIT_MAX_ENTRIES;
    }
    this.#auditRuns.set(queue, { tag, sum, calls, dropAtMs: now + AUDIT_KEEP_MS });
    keep(trail);
    return { kept: merged ? 0 : trail.length, merged };
  }

  /** Mirrors the audit_read script: the newest `limit`, newest first. */
  async readAudit(queue: string, limit: number, nowMs: number): Promise<readonly string[]> {
    assertQueueName(queue);
    const now = checkNowMs(nowMs);
    checkAuditLimit(limit);
    return (liveAudit(this.#audit, queue, now) ?? []).slice(0, limit);
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

/** A queue's audit trail unless it has lapsed (then it is dropped, as an expired key is). */
function liveAudit(audit: Map<string, { entries: string[]; dropAtMs: number }>, queue: string, nowMs: number): string[] | undefined {
  const trail = audit.get(queue);
  if (trail === undefined) return undefined;
  if (trail.dropAtMs <= nowMs) {
    audit.delete(queue);
    return undefined;
  }
  return trail.entries;
}

function emptyQueue(): MemoryQueue {
  return {
    tail: 0,
    cursor: 0,
    lastPeriodStart: undefined,
    active: new Map(),
    reserved: new Map(),
    admits: new Map(),
    waits: new Map(),
    waiting: new Map(),
    history: new Map(),
    totals: new Array<number>(TOTALS_LENGTH).fill(0),
    folded: undefined,
    uncounted: undefined,
    calls: new Map(),
    rateWindow: [],
    claimed: { base: undefined, tickets: new Set() },
    present: { base: undefined, tickets: new Set() },
    lapseFrontier: undefined,
    operatorRanges: [],
    lateClaims: [],
    callRuns: [],
    holes: undefined,
    paused: false,
    switch: undefined,
    maxActive: undefined,
    maxNewPerMinute: undefined,
    admitPerPeriod: undefined,
    event: undefined,
    epoch: 0,
    generation: 0,
    recoverUntil: 0,
    restored: undefined,
    idempotency: new Map(),
    joins: new Map(),
    ac: new Map(),
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

/** Mirrors read_controls, adaptive admission's step included (a second call in one run steps no more). */
function effective(q: MemoryQueue, p: CheckedPolicy, readOnly = false): Effective {
  let maxActive = q.maxActive ?? p.maxActive;
  let maxNewPerMinute = q.maxNewPerMinute ?? p.maxNewPerMinute;
  let count = q.admitPerPeriod ?? p.count;
  // Mirrors `recovering`: capacity mode admits nobody new while the recovery window is open.
  const recovering = p.nowMs < q.recoverUntil && (maxActive > 0 || maxNewPerMinute > 0);
  const paused = q.paused || q.switch === 'hold' || recovering;
  const step = { nowMs: p.nowMs, frozen: paused || q.switch !== undefined || !isOpen(p) || readOnly, waiting: q.tail > q.cursor };
  let knob = '';
  let adaptive: number | undefined;
  if (maxActive > 0) {
    knob = 'a';
    adaptive = adaptiveValue(q.ac, { ...step, base: maxActive });
    maxActive = adaptive ?? maxActive;
  } else if (maxNewPerMinute > 0) {
    knob = 'n';
    adaptive = adaptiveValue(q.ac, { ...step, base: maxNewPerMinute });
    maxNewPerMinute = adaptive ?? maxNewPerMinute;
  } else if (count > 0) {
    knob = 'r';
    adaptive = adaptiveValue(q.ac, { ...step, base: count });
    count = adaptive ?? count;
  }
  return { paused, maxActive, maxNewPerMinute, count, knob, adaptive };
}

/** A run's context, read after the run's control changes (as READ_QUEUE is). */
function begin(q: MemoryQueue, p: CheckedPolicy, readOnly = false): Run {
  if (!readOnly) ensureGeneration(q, p);
  return { q, p, e: effective(q, p, readOnly), open: isOpen(p), random: p.method === 'random', rng: createDrawRng(p.seed), readOnly };
}

/** The join ring's slot of a key: its first JOIN_SLOT_DIGITS hex digits (see scripts.ts, Joins). */
function joinSlot(key: string): number {
  return Number.parseInt(key.slice(0, JOIN_SLOT_DIGITS), 16);
}

/** Mirrors replay_join: the ticket again; a walk-in stays claimed (capacity: its slot renewed or taken again). */
function replayJoin(q: MemoryQueue, p: CheckedPolicy, entry: JoinEntry): JoinResult {
  prologue(q, p, q.tail);
  const r = begin(q, p);
  let claimed = false;
  if (entry.claimed) {
    if (isCapacity(r.e)) {
      expire(q, p.nowMs);
      claimed = takeSlot(r, entry.ticket, 0);
    } else {
      claimed = true;
    }
  } else if (r.random && q.waiting.has(entry.ticket)) {
    q.waiting.set(entry.ticket, p.nowMs);
  }
  return { ...readState(r), ticket: entry.ticket, claimed, replayed: true, ...(entry.last > 0 && { block: { from: entry.ticket, to: entry.last } }) };
}

/** Mirrors `ensure_gen`: the first writing run on an absent state gives it a generation. */
function ensureGeneration(q: MemoryQueue, p: CheckedPolicy): void {
  if (q.generation !== 0) return;
  q.generation = freshGeneration(p, 0);
  // Mirrors RESTORE: the caller's POP knew the queue, so its switch and pause come back at once.
  if (p.restore !== undefined) {
    const restored: ('open' | 'hold' | 'paused')[] = [];
    if (p.restore.switch !== undefined) {
      q.switch = p.restore.switch;
      restored.push(p.restore.switch);
    }
    if (p.restore.paused) {
      q.paused = true;
      restored.push('paused');
    }
    q.restored = { atMs: p.nowMs, restored };
  }
}

/** Mirrors `fresh_gen`: a generation from the seed and time, never `avoid`. */
function freshGeneration(p: CheckedPolicy, avoid: number): number {
  const g = ((p.seed + p.nowMs) % MAX_SEED) + 1;
  return g === avoid ? (g % MAX_SEED) + 1 : g;
}

/** Mirrors `foreign_gen`: a token's generation that is given and is not the store's. */
function isForeign(q: MemoryQueue, generation: string): boolean {
  return generation !== '' && Number(generation) !== q.generation;
}

/** A count above any period's quota (mirrors RATE_WINDOW_FULL). */
const RATE_WINDOW_FULL = 1_000_000_000;

/**
 * Mirrors `recovering` opening the window: capacity mode admits nobody new until it closes; rate
 * mode counts its rate window full from now, since what the lost state let in is unknown.
 */
function openRecovery(q: MemoryQueue, p: CheckedPolicy, recoverMs: number): void {
  q.recoverUntil = p.nowMs + recoverMs;
  if (!((q.maxActive ?? p.maxActive) > 0 || (q.maxNewPerMinute ?? p.maxNewPerMinute) > 0)) q.rateWindow = [[p.nowMs, RATE_WINDOW_FULL]];
}

function isCapacity(e: Effective): boolean {
  return e.maxActive > 0 || e.maxNewPerMinute > 0;
}

/**
 * Mirrors `prologue`: the first run at or after the event's start freezes the pre-queue (`tailBefore`
 * is the tail before the run's own ticket); in random mode lapsed presence leaves the draw.
 */
function prologue(q: MemoryQueue, p: CheckedPolicy, tailBefore: number): void {
  if (p.eventStartMs > 0 && p.nowMs >= p.eventStartMs && q.event?.start !== p.eventStartMs) {
    q.event = { start: p.eventStartMs, size: tailBefore, seed: p.seed };
  }
  if (p.method === 'random') removeUpTo(q.waiting, p.nowMs - p.presenceMs);
}

/** ZCOUNT key (min +inf. */
function countAfter<K>(scores: ReadonlyMap<K, number>, minExclusive: number): number {
  let n = 0;
  for (const score of scores.values()) if (score > minExclusive) n += 1;
  return n;
}

/** ZREMRANGEBYSCORE key -inf max. */
function removeUpTo<K>(scores: Map<K, number>, max: number): void {
  for (const [member, score] of scores) if (score <= max) scores.delete(member);
}

function trim<K>(scores: Map<K, number>, nowMs: number): void {
  removeUpTo(scores, nowMs - KEEP_MS);
}

/**
 * Mirrors `admitted_counts` (capacity mode, random method): arrivals. Admission entries by score,
 * except that every stored reservation's call-time entry is taken out and each live reservation
 * counts once instead, whatever its call time (a lapsed one, still stored, not at all).
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
  return { minute, five };
}

/**
 * Mirrors `called_counts` (rate FIFO): the tickets called in the last 60 s and 300 s, by call
 * bucket, counting only tickets that exist and are still called.
 */
function calledCounts(q: MemoryQueue, nowMs: number): { minute: number; five: number } {
  const limit = Math.min(q.tail, q.cursor);
  let minute = 0;
  let five = 0;
  for (const { bucket, from, to, lapsed } of q.calls.values()) {
    if (bucket + CALL_BUCKET_MS <= nowMs - KEEP_MS) continue;
    const n = Math.max(0, Math.min(to, limit) - from + 1) - lapsed;
    five += n;
    if (bucket + CALL_BUCKET_MS > nowMs - MINUTE_MS) minute += n;
  }
  return { minute: Math.max(0, minute), five: Math.max(0, five) };
}

/** Mirrors `calls_entry`: rate FIFO's calls from..to (none when from > to) and lapsed calls, merged into this bucket. */
function recordCalls(q: MemoryQueue, nowMs: number, from: number, to: number, lapsed = 0): void {
  const bucket = Math.floor(nowMs / CALL_BUCKET_MS) * CALL_BUCKET_MS;
  const slot = Math.floor(nowMs / CALL_BUCKET_MS) % CALL_SLOTS;
  const held = q.calls.get(slot);
  if (held?.bucket === bucket) {
    if (held.from <= held.to) {
      if (from <= to) from = Math.min(from, held.from);
      else [from, to] = [held.from, held.to];
    }
    lapsed += held.lapsed;
  }
  q.calls.set(slot, { bucket, from, to, lapsed });
}

/** Mirrors `read_state`: exact figures at now (the Lua reads them from ctl's book, or counts by score). */
function readState(r: Run): QueueState {
  const { q, p, e, random } = r;
  const nowMs = p.nowMs;
  const holes = reportedHoles(r);
  const callEntries = random || isCapacity(e);
  const figures = callEntries ? { active: countAfter(q.active, nowMs) + countAfter(q.reserved, nowMs), ...admittedCounts(q, nowMs) } : undefined;
  const { minute, five } = figures ?? calledCounts(q, nowMs);
  const event = p.eventStartMs > 0 && q.event?.start === p.eventStartMs ? q.event : undefined;
  return {
    tail: q.tail,
    cursor: q.cursor,
    // Mirrors read_state's mode: switched open reports not paused; switched to hold, paused; paused
    // by a recovery window alone, recovering.
    paused: q.switch === 'open' ? false : e.paused,
    ...(q.switch !== undefined && { switch: q.switch }),
    ...(q.switch === undefined && !q.paused && e.paused && { recovering: true as const }),
    maxActive: e.maxActive,
    maxNewPerMinute: e.maxNewPerMinute,
    // Rate FIFO holds no slots: an admitted visitor's token needs nothing from the store.
    active: figures?.active ?? 0,
    admittedLastMinute: minute,
    admittedLast5Minutes: five,
    eventSize: event?.size ?? 0,
    eventSeed: event?.seed ?? 0,
    waiting: random ? countAfter(q.waiting, nowMs - p.presenceMs) : 0,
    epoch: q.epoch,
    generation: q.generation,
    ...(holes.length > 0 && { holes }),
  };
}

/** Mirrors `unfolded_wait`: an arrival marked `w` (a walk-in, a collected draw) was counted by the run that wrote it. */
const WALK_IN = /^\d+w:/;

/** Mirrors `count_wait`: one visitor let in after `waited` ms, into ctl `rt`'s counts. */
function countWait(t: number[], waited: number): void {
  t[0] = (t[0] ?? 0) + 1;
  t[3] = (t[3] ?? 0) + waited;
  t[4] = Math.max(t[4] ?? 0, waited);
  const bucket = WAIT_BOUNDS_MS.findIndex((bound) => waited <= bound);
  const i = 5 + (bucket === -1 ? WAIT_BOUNDS_MS.length : bucket);
  t[i] = (t[i] ?? 0) + 1;
}

/** Mirrors `take_tally`: the edge's refusals and store errors, last in the totals. */
function takeTally(q: MemoryQueue, arg: string): void {
  if (arg === '') return;
  const counts = arg.slice(3).split(':').map(Number);
  counts.forEach((n, k) => {
    const i = TOTALS_LENGTH - counts.length + k;
    q.totals[i] = (q.totals[i] ?? 0) + n;
  });
}

/** The controls in force as the scripts' state reports them (see read_state's mode). */
function modeOf({ q, e }: Run): number {
  if (q.switch === 'open') return 3;
  if (q.switch === 'hold') return 2;
  if (q.paused) return 1;
  return e.paused ? 4 : 0;
}

/**
 * Mirrors `record_history`: the minute's first writing run keeps the state it returns and the
 * sale's totals in the record (capacity mode, and once after it wrote reservations: with the
 * arrivals since the last point that no run counted).
 */
function recordHistory(r: Run, state: QueueState): void {
  const { q, p, random } = r;
  const minute = Math.floor(p.nowMs / MINUTE_MS) * MINUTE_MS;
  if (q.history.has(minute) && q.history.get(minute)?.epoch === q.epoch) return;
  const capacity = isCapacity(r.e);
  if (capacity || q.uncounted === true || (q.folded !== undefined && q.uncounted === undefined)) {
    for (const [member, at] of q.waits) {
      const waited = /:(\d+)$/.exec(member)?.[1];
      if (waited !== undefined && at >= (q.folded ?? 0) && at < p.nowMs && !WALK_IN.test(member)) countWait(q.totals, Number(waited));
    }
    q.folded = p.nowMs;
    q.uncounted = capacity;
  }
  for (const at of q.history.keys()) if (at <= p.nowMs - RECORD_MS) q.history.delete(at);
  q.history.set(minute, {
    atMs: minute,
    tail: state.tail,
    cursor: state.cursor,
    waiting: random ? state.waiting : Math.max(0, state.tail - state.cursor - holesAbove(r, state.cursor)),
    active: state.active,
    admittedLastMinute: state.admittedLastMinute,
    epoch: q.epoch,
    mode: modeOf(r),
    totals: totalsFrom(q.totals),
  });
}

/** The state a writing run returns, recorded in the history. */
function finish(r: Run): QueueState {
  const state = readState(r);
  recordHistory(r, state);
  return state;
}

/** Redis's ZSET order: by score, then by member bytes (decimal ticket strings, ASCII). */
function zsetOrder([a, scoreA]: [number, number], [b, scoreB]: [number, number]): number {
  if (scoreA !== scoreB) return scoreA - scoreB;
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Mirrors `draw_tickets`: up to `n` present visitors, each by rank in ZSET order with the joiner
 * last, reserved as a call (the joiner, drawn, is not: `r.joiner` is cleared and the join collects it).
 */
function drawTickets(r: Run, n: number, operator = false): void {
  const { q, p } = r;
  const present = [...q.waiting].sort(zsetOrder).map(([ticket]) => ticket);
  if (r.joiner !== undefined) present.push(r.joiner);
  const k = Math.min(n, present.length);
  if (k < 1) return;
  for (let i = 0; i < k; i += 1) {
    const [ticket] = present.splice(r.rng.nextRank(present.length), 1);
    if (ticket === undefined) throw new Error('unreachable: rank out of range');
    if (ticket === r.joiner) {
      r.joiner = undefined;
      continue;
    }
    q.waiting.delete(ticket);
    // Mirrors OPERATOR_DRAW: the operator's draws half a ms short of the deadline (a score in .5).
    q.reserved.set(ticket, p.nowMs + p.reservationMs - (operator ? 0.5 : 0));
    q.admits.set(String(ticket), p.nowMs);
  }
  q.cursor += k;
}

/** The same rule as `auto_admit` in scripts.ts. */
function autoAdmit(r: Run): void {
  const { q, p } = r;
  const count = r.e.count;
  if (r.e.paused || count <= 0 || !r.open) return;
  const start = periodStart(p.nowMs, p.periodMs);
  if (q.lastPeriodStart !== undefined && start <= q.lastPeriodStart) return;
  q.lastPeriodStart = start;
  if (r.random) {
    drawTickets(r, count);
    return;
  }
  const { target, passed, spans } = passHoles(r, q.cursor, count, q.tail + count);
  if (target <= q.cursor) return;
  callsRun(q, p.nowMs, q.cursor + 1, target);
  recordCalls(q, p.nowMs, q.cursor + 1, target, passSpans(r, spans, passed));
  q.cursor = target;
}

const RATE_LATE_KEEP = 32;
const RATE_RUNS_KEEP = 256;

/** Mirrors `operator_range`: the operator's calls from..to, merged with the last range when they follow it. */
function operatorRange(q: MemoryQueue, from: number, to: number): void {
  if (from > to) return;
  const last = q.operatorRanges.at(-1);
  if (last !== undefined && last[1] + 1 === from) last[1] = to;
  else q.operatorRanges.push([from, to]);
}

function operatorCalled(q: MemoryQueue, ticket: number): boolean {
  return q.operatorRanges.some(([from, to]) => ticket >= from && ticket <= to);
}

function hasBit(bits: TicketBits, ticket: number): boolean {
  return bits.base !== undefined && ticket >= bits.base && bits.tickets.has(ticket);
}

/** Mirrors `set_claimed_bit`: the bitmap starts at the byte holding the frontier's next ticket. */
function setBit(bits: TicketBits, ticket: number, frontier: number): void {
  bits.base ??= Math.floor((frontier + 1) / 8) * 8;
  if (ticket >= bits.base) bits.tickets.add(ticket);
}

/**
 * Mirrors `rate_gate`: a claim already counted is let in again; an operator's call whatever the
 * window holds; any other only while the window holds fewer than the period's quota (see the header
 * of scripts.ts, Rate window).
 */
function rateGate(r: Run, ticket: number, waited = 0): boolean {
  const { q, p } = r;
  const now = p.nowMs;
  if (hasBit(q.claimed, ticket)) return true;
  const frontier = q.lapseFrontier ?? 0;
  const late: [number, number][] = [];
  if (ticket <= frontier) {
    for (const [t, at] of q.lateClaims) {
      if (at <= now - p.periodMs) continue;
      if (t === ticket) return true;
      late.push([t, at]);
    }
  }
  if (!operatorCalled(q, ticket) && !windowRoom(r)) {
    // Its holder came: the call holds until the window lets it in.
    if (ticket > frontier) setBit(q.present, ticket, frontier);
    return false;
  }
  windowTake(r);
  // Let in now: counted in the sale's totals, with its wait (a walk-in waited 0).
  countWait(q.totals, waited);
  if (ticket > frontier || (q.claimed.base !== undefined && ticket >= q.claimed.base)) {
    setBit(q.claimed, ticket, frontier);
  } else {
    late.push([ticket, now]);
    q.lateClaims = late.slice(-RATE_LATE_KEEP);
  }
  return true;
}

/** Mirrors `window_room`: no quota, or the rate window (its admissions of the last period) under it. */
function windowRoom({ q, p, e }: Run): boolean {
  return e.count <= 0 || q.rateWindow.filter(([last]) => last > p.nowMs - p.periodMs).reduce((n, [, count]) => n + count, 0) < e.count;
}

/** Mirrors `window_take`: one admission now, in the step of PERIOD_MS/16 it falls in. */
function windowTake({ q, p }: Run): void {
  const now = p.nowMs;
  const log = q.rateWindow.filter(([at]) => at > now - p.periodMs);
  const step = Math.max(1, Math.ceil(p.periodMs / 16));
  const last = log.at(-1);
  if (last !== undefined && (Math.floor(last[0] / step) === Math.floor(now / step) || now < last[0])) {
    last[0] = Math.max(last[0], now);
    last[1] += 1;
  } else {
    log.push([now, 1]);
  }
  q.rateWindow = log;
}

/** Mirrors `outstanding_calls`: rate FIFO's calls neither claimed nor lapsed yet. */
function outstandingCalls(q: MemoryQueue): number {
  let n = 0;
  for (let t = (q.lapseFrontier ?? 0) + 1; t <= Math.min(q.tail, q.cursor); t += 1) if (!hasBit(q.claimed, t) && !hasBit(q.present, t)) n += 1;
  return n;
}

/** Mirrors `calls_run`: a run's calls from..to, whose claim deadlines are reservationMs from now. */
function callsRun(q: MemoryQueue, nowMs: number, from: number, to: number): void {
  const runs = q.callRuns;
  if (runs.length === 0 && q.lapseFrontier !== undefined && q.lapseFrontier < from - 1) q.lapseFrontier = from - 1;
  const last = runs.at(-1);
  if (last !== undefined && last[0] === nowMs) last[1] = Math.max(last[1], to);
  else runs.push([nowMs, to]);
  if (runs.length > RATE_RUNS_KEEP) {
    const [first, second] = runs;
    if (first !== undefined && second !== undefined) second[1] = Math.max(first[1], second[1]);
    runs.shift();
  }
}

/** Mirrors `process_lapses`: rate FIFO calls past their claim deadline, unclaimed, hand their admissions on, never past the tail. */
function processLapses(r: Run): void {
  const { q, p } = r;
  if (r.e.paused || !r.open) return;
  const limit = Math.min(q.tail, q.cursor);
  const from = q.lapseFrontier;
  if (from === undefined) {
    q.lapseFrontier = limit;
    return;
  }
  if (from >= limit) return;
  let to = from;
  const kept: [number, number][] = [];
  for (const run of q.callRuns) {
    if (kept.length === 0 && run[0] + p.reservationMs <= p.nowMs) {
      to = Math.max(to, Math.min(run[1], limit));
      if (run[1] > to) kept.push(run);
    } else if (run[1] > to) {
      kept.push(run);
    }
  }
  if (to <= from) return;
  let lapsed = 0;
  let lapsedOperator = 0;
  for (let t = from + 1; t <= to; t += 1) {
    if (hasBit(q.claimed, t) || hasBit(q.present, t)) continue;
    lapsed += 1;
    if (operatorCalled(q, t)) lapsedOperator += 1;
  }
  const base = Math.floor((to + 1) / 8) * 8;
  for (const bits of [q.claimed, q.present]) {
    if (bits.base === undefined || base <= bits.base) continue;
    for (const t of bits.tickets) if (t < base) bits.tickets.delete(t);
    bits.base = base;
  }
  q.callRuns = kept;
  q.operatorRanges = q.operatorRanges.filter(([, end]) => end > to).map(([start, end]): [number, number] => [Math.max(start, to + 1), end]);
  q.lapseFrontier = to;
  q.totals[1] = (q.totals[1] ?? 0) + lapsed;
  if (lapsed === 0) return;
  const { target, passed, spans } = passHoles(r, q.cursor, lapsed, q.tail);
  const n = target - q.cursor - passed;
  if (n < 1) {
    recordCalls(q, p.nowMs, q.cursor + 1, q.cursor, lapsed);
    return;
  }
  const nOperator = Math.min(lapsedOperator, n);
  if (nOperator > 0) operatorRange(q, q.cursor + 1, passHoles(r, q.cursor, nOperator, q.tail).target);
  callsRun(q, p.nowMs, q.cursor + 1, target);
  recordCalls(q, p.nowMs, q.cursor + 1, target, lapsed + passSpans(r, spans, passed));
  q.cursor = target;
}

/** Mirrors `expire`; returns how many reservations lapsed (the Lua `lapsed_calls`). */
/** Mirrors `expire`; `keepOld`: the trims of admits and waits are left to a later run (a join). */
function expire(q: MemoryQueue, nowMs: number, keepOld = false): number {
  let lapsed = 0;
  for (const [ticket, expiry] of q.reserved) {
    if (expiry <= nowMs) {
      q.reserved.delete(ticket);
      q.admits.delete(String(ticket));
      lapsed += 1;
    }
  }
  // Mirrors expire_lapsed: the lapsed calls counted in the sale's totals.
  q.totals[1] = (q.totals[1] ?? 0) + lapsed;
  removeUpTo(q.active, nowMs);
  if (keepOld) return lapsed;
  trim(q.admits, nowMs);
  trim(q.waits, nowMs);
  return lapsed;
}

/** Mirrors `walk_in`: FIFO capacity mode, nobody waiting ahead: the join's ticket takes its slot if both thresholds leave room. */
function walkIn(r: Run, ticket: number): boolean {
  const { q, p, e } = r;
  expire(q, p.nowMs, true);
  if (freeSlots(q, p.nowMs, e) < 1) return false;
  q.admits.set(String(ticket), p.nowMs);
  q.active.set(ticket, p.nowMs + p.sessionMs);
  // Mirrors walk_in: the arrival marked `w`, counted in the totals by the join itself.
  q.waits.set(`${ticket}w:0`, p.nowMs);
  countWait(q.totals, 0);
  q.cursor = ticket;
  return true;
}

/** Mirrors `redraw`: random rate mode draws again as many as lapsed uncollected in this call. */
function redraw(r: Run, lapsed: number): void {
  if (r.e.paused || !r.open || lapsed < 1) return;
  drawTickets(r, lapsed);
}

function freeSlots(q: MemoryQueue, nowMs: number, e: Effective): number {
  let free = Number.POSITIVE_INFINITY;
  if (e.maxActive > 0) free = e.maxActive - q.active.size - q.reserved.size;
  if (e.maxNewPerMinute > 0) free = Math.min(free, e.maxNewPerMinute - admittedCounts(q, nowMs).minute);
  return free;
}

/** Mirrors `reserve_tickets`: from..to hold a reservation until their claim deadline; `callEntries` also writes each call's admission entry (capacity, random). */
function reserveTickets(q: MemoryQueue, p: CheckedPolicy, from: number, to: number, callEntries = false, spans: readonly [number, number][] = []): void {
  for (let t = from; t <= to; t += 1) {
    if (spans.some(([a, b]) => t >= a && t <= b)) continue;
    q.reserved.set(t, p.nowMs + p.reservationMs);
    if (callEntries) q.admits.set(String(t), p.nowMs);
  }
}

/** Mirrors `call_tickets`: capacity and random reserve from..to; rate FIFO counts the calls, the operator's. Moves the cursor. */
function callTickets(r: Run, from: number, to: number, callEntries: boolean, spans: readonly [number, number][] = [], passed = 0): void {
  const { q, p } = r;
  if (callEntries) {
    reserveTickets(q, p, from, to, true, spans);
    if (spans.length > 0) takeHoles(r, to);
  } else {
    operatorRange(q, from, to);
    callsRun(q, p.nowMs, from, to);
    recordCalls(q, p.nowMs, from, to, passSpans(r, spans, passed));
  }
  q.cursor = to;
}

function advance(r: Run): void {
  const from = r.q.cursor;
  callIntoRoom(r);
  // Mirrors mark_uncounted: claims of these reservations count nowhere until a point folds them.
  if (r.q.cursor > from) r.q.uncounted = true;
}

/** Mirrors `call_into_room`. */
function callIntoRoom(r: Run): void {
  const { q, p, e } = r;
  if (e.paused || !r.open) return;
  if (r.random) {
    drawTickets(r, freeSlots(q, p.nowMs, e));
    return;
  }
  const free = freeSlots(q, p.nowMs, e);
  if (free < 1 || q.cursor >= q.tail) return;
  // Mirrors advance: as many real tickets as there is room for, holes passed over.
  const { target, passed, spans } = passHoles(r, q.cursor, free, q.tail);
  if (target <= q.cursor) return;
  callTickets(r, q.cursor + 1, target, true, spans, passed);
}

/** Mirrors `holes`: the stored holes when they are of this epoch and generation (FIFO only). */
function holesOf({ q, random }: Pick<Run, 'q' | 'random'>): [number, number][] {
  if (random || q.holes === undefined || q.holes.epoch !== q.epoch || q.holes.generation !== q.generation) return [];
  return q.holes.ranges;
}

/** Mirrors `holes_text`: the reported holes above the cursor, as a state (or a peek) reports them. */
function reportedHoles(r: Pick<Run, 'q' | 'random'>): TicketRange[] {
  const { cursor } = r.q;
  return holesOf(r)
    .filter(([, to]) => to > cursor)
    .map(([from, to]) => ({ from: Math.max(from, cursor + 1), to }));
}

/** Mirrors `holes_above`: the holes among the numbers above `cursor`. */
function holesAbove(r: Run, cursor: number): number {
  let n = 0;
  for (const [a, b] of holesOf(r)) if (b > cursor) n += b - Math.max(a, cursor + 1) + 1;
  return n;
}

/** Mirrors `pass_holes`: where the cursor goes to pass n real numbers (and the holes right after), never past limit. */
function passHoles(r: Run, cursor: number, n: number, limit: number): { target: number; passed: number; spans: [number, number][] } {
  let target = cursor;
  let left = n;
  let passed = 0;
  const spans: [number, number][] = [];
  for (const [from, to] of holesOf(r)) {
    if (to <= target) continue;
    const a = Math.max(from, target + 1);
    if (a > limit || left < a - target - 1) break;
    left -= a - target - 1;
    const b = Math.min(to, limit);
    spans.push([a, b]);
    passed += b - a + 1;
    target = b;
    if (b < to) return { target, passed, spans };
  }
  return { target: Math.min(target + left, limit), passed, spans };
}

/** Mirrors `take_holes`: the stored holes at or below `cursor` go. */
function takeHoles(r: Run, cursor: number): void {
  const h = holesOf(r);
  if (h.length === 0 || r.q.holes === undefined) return;
  r.q.holes.ranges = h.filter(([, b]) => b > cursor).map(([a, b]): [number, number] => [Math.max(a, cursor + 1), b]);
}

/** Mirrors `pass_spans`: rate FIFO marks the holes it passed claimed; returns how many, for the figures' lapsed. */
function passSpans(r: Run, spans: readonly [number, number][], passed = spans.reduce((n, [a, b]) => n + b - a + 1, 0)): number {
  const last = spans.at(-1);
  if (last === undefined) return 0;
  const frontier = r.q.lapseFrontier ?? 0;
  for (const [a, b] of spans) for (let t = a; t <= b; t += 1) setBit(r.q.claimed, t, frontier);
  takeHoles(r, last[1]);
  return passed;
}

/** Mirrors `add_holes`: a join's report, of this epoch and generation, clipped above the cursor and to the tail, merged in. */
function addHoles(q: MemoryQueue, p: CheckedPolicy, holes: BlockHoles | undefined): void {
  if (holes === undefined || holes.ranges.length === 0) return;
  if (holes.epoch !== q.epoch || holes.generation !== q.generation) return;
  // Mirrors add_holes: an event's pre-queue is called by place, so its holes are left to lapse.
  let low = q.cursor;
  if (p.eventStartMs > 0) {
    if (!isOpen(p) || q.event?.start !== p.eventStartMs) return;
    low = Math.max(q.cursor, q.event.size);
  }
  const kept = q.holes !== undefined && q.holes.epoch === q.epoch && q.holes.generation === q.generation ? q.holes.ranges : [];
  const all: [number, number][] = [...kept.map(([a, b]): [number, number] => [a, b])];
  for (const { from, to } of holes.ranges) {
    const a = Math.max(from, low + 1);
    const b = Math.min(to, q.tail);
    if (a <= b) all.push([a, b]);
  }
  all.sort((x, y) => x[0] - y[0]);
  const merged: [number, number][] = [];
  for (const [a, b] of all) {
    const last = merged.at(-1);
    if (last !== undefined && a <= last[1] + 1) last[1] = Math.max(last[1], b);
    else if (merged.length < MAX_STORED_HOLE_RANGES) merged.push([a, b]);
  }
  q.holes = { epoch: q.epoch, generation: q.generation, ranges: merged };
}

/** `lapsed`: reservations an earlier expire in the same call removed (the Lua `lapsed_calls`). */
function admissionStep(r: Run, lapsed = 0): void {
  if (isCapacity(r.e)) {
    expire(r.q, r.p.nowMs);
    advance(r);
  } else {
    if (r.random) redraw(r, lapsed + expire(r.q, r.p.nowMs));
    else processLapses(r);
    autoAdmit(r);
  }
}

/**
 * Mirrors `take_slot`; runs after `expire`, so whatever is stored is live. Claiming a reservation
 * re-times its admission entry to now: the arrival. No direct slot in random mode or before the start.
 */
function takeSlot(r: Run, ticket: number, waited: number): boolean {
  const { q, p, e } = r;
  const now = p.nowMs;
  if (q.active.has(ticket)) {
    q.active.set(ticket, now + p.sessionMs);
    return true;
  }
  if (q.reserved.delete(ticket)) {
    q.admits.set(String(ticket), now);
  } else {
    if (r.random || !r.open || ticket > q.cursor || ticket > q.tail || e.paused || freeSlots(q, now, e) < 1) return false;
    let member = `${ticket}@${now}`;
    for (let k = 1; q.admits.has(member); k += 1) member = `${ticket}@${now}#${k}`;
    q.admits.set(member, now);
  }
  q.active.set(ticket, now + p.sessionMs);
  q.waits.set(`${ticket}:${waited}`, now);
  return true;
}

/**
 * Mirrors `collect`: random rate mode, the holder of a live reservation is let in, once, counted in
 * the totals by this run (its arrival marked `w`, as a walk-in's).
 */
function collect(q: MemoryQueue, nowMs: number, ticket: number, waited: number): void {
  q.reserved.delete(ticket);
  q.admits.set(String(ticket), nowMs);
  q.waits.set(`${ticket}w:${waited}`, nowMs);
  countWait(q.totals, waited);
}

type Settled = Pick<DrawResult, 'outcome' | 'claimed'>;

/** Mirrors the draw script's `settle`: a ticket holding a (live) slot or reservation; undefined otherwise. */
function settle(r: Run, ticket: number, waited: number): Settled | undefined {
  const { q } = r;
  if (q.active.has(ticket) || (isCapacity(r.e) && q.reserved.has(ticket))) {
    return takeSlot(r, ticket, waited) ? { outcome: 'drawn', claimed: true } : { outcome: 'front', claimed: false };
  }
  const score = q.reserved.get(ticket);
  if (score !== undefined) {
    // Mirrors the draw script: the rate window decides (the operator's draws aside); held back, the
    // draw is renewed to a full claim deadline.
    if (score % 1 === 0 && !windowRoom(r)) {
      q.reserved.set(ticket, r.p.nowMs + r.p.reservationMs);
      return { outcome: 'front', claimed: false };
    }
    collect(q, r.p.nowMs, ticket, waited);
    windowTake(r);
    return { outcome: 'drawn', claimed: false };
  }
  return undefined;
}
