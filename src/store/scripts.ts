/**
 * The store's contract with Redis: key layout, argument checks, and the Lua scripts that make every
 * queue operation one atomic round trip. The in-memory store imports the argument checks from here
 * too, so both stores accept and reject exactly the same input.
 *
 * Key layout, per queue (the `{queue}` hash tag keeps a queue's keys in one slot on a cluster):
 *   `${prefix}:{${queue}}:tail`     last ticket handed out (absent = 0)
 *   `${prefix}:{${queue}}:cursor`   highest ticket called (absent = 0)
 *   `${prefix}:{${queue}}:period`   rate mode: start, in ms since the epoch, of the last period whose
 *                                   automatic admission ran (absent = never). A start time rather
 *                                   than a period index, so that changing `periodMs` cannot make the
 *                                   stored value look far in the future and stall admission.
 *   `${prefix}:{${queue}}:active`   capacity mode: ZSET ticket → slot expiry (ms). A slot is live
 *                                   while its expiry is > now.
 *   `${prefix}:{${queue}}:reserved` ZSET ticket → reservation expiry (ms), in every mode: a called
 *                                   (drawn) ticket's slot (capacity mode) or admission (rate mode),
 *                                   held for its holder for `reservationMs`: its claim deadline.
 *   `${prefix}:{${queue}}:admits`   ZSET member → admission time (ms), kept 300 s: the sliding-minute
 *                                   limit and the measured rate. Members: `<ticket>` for a ticket
 *                                   called or drawn (reserved, or walked in under rate mode), written
 *                                   at the call (rate FIFO: at the claim or the walk-in's join, none
 *                                   at the call); re-timed to the claim (or random rate mode's
 *                                   collection) when its reservation is taken up (the visitor's
 *                                   arrival; written anew if the 300 s trim took it), and removed
 *                                   again when its reservation lapses or is left unclaimed, which
 *                                   gives the per-minute budget back;
 *                                   `<ticket>@<now>[#k]` for a slot taken directly (a late claim
 *                                   after the reservation lapsed, or a returning holder), unique so
 *                                   that two admissions never collapse into one. The entry of a
 *                                   ticket still reserved is not counted by its score: see Figures.
 *   `${prefix}:{${queue}}:batches`  ZSET `<from>-<to>` → time (ms), kept 300 s: the range of tickets
 *                                   a rate-mode step called before calls had a claim deadline. No
 *                                   script writes it any more; the figures still count what an
 *                                   older version wrote until the 300-s trim takes it.
 *   `${prefix}:{${queue}}:waits`    ZSET `<ticket>:<waitedMs>` → time (ms), kept 300 s: how long
 *                                   each claimed slot's (or collected draw's) holder waited, for the
 *                                   average wait.
 *   `${prefix}:{${queue}}:ctl`      HASH of runtime controls: `paused` ("1" or absent),
 *                                   `max_active`, `max_new_per_minute` (overrides; absent = the
 *                                   configured value); the event's frozen pre-queue: `ev_start`
 *                                   (the start it was frozen for), `ev_size`, `ev_seed` (see
 *                                   Events); `epoch` (ms of the last reset; absent = 0, never);
 *                                   `gen`, the generation (see Generations); `recover_until` (ms,
 *                                   the recovery window after a lost state; see Recovery).
 *   `${prefix}:{${queue}}:waiting`  random method: ZSET ticket → last poll time (ms): the visitors
 *                                   taking part in draws. A member is present while its score is
 *                                   > now - presenceMs; every writing random-mode script first
 *                                   removes the others. A drawn ticket leaves it for good.
 *   `${prefix}:{${queue}}:history`  ZSET minute start (ms) → `<minute>:<tail>:<cursor>:<waiting>:
 *                                   <active>:<admitted_1m>`, one member per minute: the state the
 *                                   minute's first join, poll, claim, draw, admit or control
 *                                   returned (after its admission step). `waiting` is `tail -
 *                                   cursor` (at least 0) in FIFO, the present visitors in random.
 *                                   Members whose minute is <= now - HISTORY_MS are trimmed.
 *   `${prefix}:{${queue}}:vip:<hash>`  HASH, one per VIP access code; `<hash>` is the lower-case hex
 *                                   SHA-256 the caller made of the code (the store never sees a
 *                                   code). Fields: `left` (uses left; kept at 0 once used up, so a
 *                                   spent code reads as used up rather than unknown) and `exp`
 *                                   (expiry in ms; absent = none). A Redis TTL cleans it up:
 *                                   VIP_KEEP_EXPIRED_MS after its expiry, or VIP_TTL_MS after its
 *                                   creation when it has none. The TTL is relative (PEXPIRE of
 *                                   `exp - now + keep`), so it needs no agreement between the
 *                                   caller's clock and Redis's. Only the two VIP scripts touch it.
 *   `${prefix}:{${queue}}:admit:<key>`  STRING, an explicit admit's idempotency key → the number it
 *                                   admitted, kept IDEMPOTENCY_MS (PX). Only the admit script
 *                                   touches it, as its KEYS[12].
 *
 * Modes: capacity mode while the effective `maxActive > 0 || maxNewPerMinute > 0`, else rate mode
 * (the period step, exactly as before thresholds existed). Figures are counted by score (a slot or
 * reservation whose expiry is <= now is not counted even before a script removes it), so `stats`
 * needs no writes and every script reports the same numbers.
 *
 * Figures: admissions are ARRIVALS. In capacity mode a visitor arrives when it claims its slot (a
 * walk-in at its join, a called ticket at its claim, a late claim or returning holder at that
 * claim), not when its ticket is called: the call only reserves. So `admittedLastMinute` = claims
 * whose claim time is in the last 60 s + live reservations (called, not yet claimed, WHATEVER their
 * call time: each is one arrival still to come, counted exactly once), and `admittedLast5Minutes`
 * the same over 300 s. Rate mode counts the same way: a FIFO call or a random draw is a
 * reservation, counted while live and then at its claim (collection); a walk-in counts at its join.
 * `maxNewPerMinute` keeps that minute figure <= the limit (explicit admits aside): a reservation is
 * counted from its call until it becomes a claim (then counted at its claim time) or lapses (then
 * counted no more), so the visitors who actually arrive in ANY 60 s window never exceed the limit,
 * however long a reservation lasts.
 *
 * Claims in every mode (why: a ticket whose holder never got the cookie — a join that timed out
 * after the store took the ticket — or who walked away must not use up an admission). A called
 * ticket holds a reservation until its claim deadline, `reservationMs` after the call (the handler
 * passes (refresh + cache) s + 5 s: the holder notices the call on its next poll once its POP's
 * cache expires). The holder's claim turns the reservation into an arrival (counted once per ticket:
 * two tabs count once). A reservation that lapses unclaimed gives its admission to the next ticket:
 *   - capacity mode: expire() frees the slot and its per-minute share, advance() calls as many next
 *     tickets as there is room, in one step (k phantoms called together lapse and are replaced
 *     together; k phantoms called one after another into one slot hold it k × reservationMs);
 *   - rate FIFO: replace_lapsed() calls one next waiting ticket per lapsed call, at once, in the
 *     poll, claim, admit and control scripts (not the join: a join pays nothing for calls awaiting
 *     their claim). An explicit admit of N therefore lets in N people who show up, given N waiting;
 *   - random rate mode: redraw() draws as many again among the present visitors.
 * No banking, restated with the credit: a period step moves the cursor by at most the count and
 * never more than the count past the tail; a lapsed call's admission is spent at once on a ticket
 * that exists (never past the tail) or dropped, never stored for later. So in any period, calls
 * live or claimed from that period's step <= the count, plus replacements one-for-one for calls
 * that lapsed. Paused or before the event's start: rate FIFO keeps lapsed calls stored (they count
 * for nothing) and replaces them when admission may run again; random rate mode drops them.
 * FIFO order: a lapsed ticket is skipped, never admitted ahead of an earlier waiting ticket, since
 * replacements are the next tickets after the cursor. A skipped holder who comes back after its
 * deadline: rate mode lets it in (its turn came; it already waited) and counts one more arrival, so
 * admissions can exceed the rate by the number of such late holders; capacity mode lets it take a
 * slot only if there is room (take_slot), else it waits at the front. Walk-ins (a ticket called by
 * or before its own join) are claimed at the join: if that join's answer is lost, a rate-mode
 * walk-in uses one of its period's admissions, and a capacity-mode walk-in holds its slot until the
 * session's inactivity timeout, as any visitor who leaves without saying so.
 *
 * Events (both methods): with an event start S > 0 in the policy and now < S, no script admits
 * anybody: no period step (the period key is not consumed), no call into free room, no walk-in, no
 * direct slot, explicit admits admit 0, no draw. Joins still take tickets (and, in rate FIFO mode, a
 * cursor left ahead of the tail by an earlier period step is pulled back to the tail, since those
 * calls were for tickets nobody held: the first pre-queue visitors must not walk in). Holding a
 * slot or a reservation from before stays valid. The first writing script (join, poll, claim, draw,
 * admit, control, leave) run at now >= S whose `ev_start` is not S freezes the pre-queue: `ev_start`
 * = S, `ev_size` = the tail before that run's own ticket, `ev_seed` = its ARGV seed. A rescheduled S
 * freezes anew. Every state reports `ev_size`/`ev_seed` when `ev_start` = S, else 0 (stats the same,
 * writing nothing). touch neither freezes nor lapses presence.
 *
 * Methods: FIFO (0) calls tickets in order by moving the cursor. Random (1) draws among the present
 * members of `waiting` instead: a draw of n tickets runs a Park–Miller minimal standard generator
 * seeded from ARGV seed (state = (seed mod 2147483646) + 1; next = state * 16807 mod 2147483647,
 * exact in doubles; one stream per script run), and picks rank r = floor(next / 2147483647 * N)
 * among the N members of `waiting` in ZSET order (score, then member bytes), removes it, N - 1,
 * n times. Each drawn ticket is reserved exactly as a FIFO call (reserved + admits at now) and the
 * cursor counts the draws, so `tail - cursor` is still the number not yet called. Capacity mode
 * draws min(free room, N); rate mode's period step draws min(count, N) (same period rules; lapsed
 * reservations are expired as in capacity mode); admit(count) draws min(count, N). In random mode a
 * slot is taken only through a live reservation (or renewed), never directly from free room, and a
 * rate-mode reservation is "collected" by its holder's draw (ZREM reserved, admits re-timed to now,
 * wait recorded): a ticket drawn and collected cannot be drawn again, so nobody is admitted twice.
 *
 * Method switches mid-queue are not smoothed over: a FIFO ticket never entered `waiting` (its draw
 * answers unknown), and in random mode the cursor counts draws, not a ticket number, so a switch back
 * to FIFO would call tickets by number again. In FIFO the draw script answers from the cursor (see
 * DRAW_SCRIPT); the handler uses it in random mode only.
 *
 * Reset empties the line, not the site: ticket numbers are never handed out twice, so the tail stays
 * and the cursor moves up to it; held slots stay (their holders' access tokens still pass, so they
 * must keep counting against max_active until they lapse). Reservations, figures, the draw, history
 * and the period go, `ev_*` is cleared in ctl, the controls stay; `epoch` = now so the caller can void
 * waiting tickets from before. It admits nobody. It takes the epoch the caller saw and does nothing
 * when that is no longer current, so a retried reset applies once.
 *
 * Generations: ctl `gen` identifies the life of the queue's state. The first script that finds it
 * absent (the state was lost: a restart without persistence, a failover, a flush; or a new queue)
 * writes a fresh one from its seed and time, and every state reports it, so the caller carries it in
 * every token. A token whose generation is not the store's is from a lost state, in which ticket
 * numbers restarted at 1: its number may be someone else's now. claim and draw refuse such a ticket
 * (read-only; the caller gives the visitor a new ticket); touch registers such a holder's slot again
 * under the member `<ticket>@g<generation>`, distinct from every plain ticket, so capacity counts it
 * again without taking or renewing anybody else's slot; leave frees only that member. Tokens without
 * a generation (issued before it existed) count as current.
 *
 * Recovery: the holders of a lost state are still on the site, but the store no longer counts them
 * until each refreshes its slot (touch, above). A join that brings the first evidence of the loss (a
 * visitor whose token is of another generation; join's ARGV 12 = the window, ms) opens a window:
 * ctl `recover_until` = now + window, once per generation. While it is open, capacity mode admits
 * nobody new (as if paused: no call, no walk-in, no direct slot; explicit admits still work), so
 * every holder refreshes into the count before any room is handed out. Rate mode is not held: it
 * has no slots to count.
 *
 * Scripts: every one starts with `#!lua flags=allow-key-locking` (Upstash then locks only the keys in
 * KEYS, so queues do not wait on each other) and therefore touches only keys passed in KEYS: they
 * are bound once to `K_*` locals at the top. They are deterministic: the time comes in ARGV, nothing
 * reads the clock or a random source. They run in Redis 7's shebang mode, so they declare no
 * `no-writes` flag and return only flat integer arrays (Lua numbers are truncated to integers on the
 * way out anyway), except `history`, which returns its members as stored (strings the store parses).
 *
 * Policy scripts share KEYS (policyKeys) and ARGV 1..11 (policyArgv): now, auto count, period ms,
 * max active, max new per minute, session ms, reservation ms, event start ms (0 = none), seed
 * (0..2^48-1), method (0 fifo, 1 random), presence ms (>= 1 in random). Their own ARGV follow at
 * 12+. They return the state first: {tail, cursor, paused, max_active, max_new_per_minute, active,
 * admitted_1m, admitted_5m, event_size, event_seed, waiting, epoch, generation} (STATE_LENGTH
 * values), extras from 14 on.
 *
 * The SHA-1 of each script is pinned as a literal so that EVALSHA needs no hashing at the edge; a
 * test asserts each pin equals both node:crypto's SHA-1 and `SCRIPT LOAD`. If you edit a script,
 * recompute its pin (`sha1(text)`) and update the literal: the contract test will tell you.
 */

import { IDEMPOTENCY_KEY_PATTERN, type AdmissionPolicy, type RuntimeControl } from '../core/ports';

/** @default key prefix for every store key. */
export const DEFAULT_KEY_PREFIX = 'wr';

/** Queue names the stores accept (the caller validates them first; the stores assert it again). */
export const QUEUE_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** Key prefixes the stores accept: no braces (they would move the hash tag), no spaces. */
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

/** The sliding window of `maxNewPerMinute` and of `admittedLastMinute`, ms. */
export const MINUTE_MS = 60_000;

/** How long admissions and waits are kept: the window of `admittedLast5Minutes` and `avgWaitSeconds`, ms. */
export const KEEP_MS = 300_000;

/** How long the per-minute history is kept, ms (one hour). */
export const HISTORY_MS = 3_600_000;

/** @default presence window of the random method when the policy has none, ms. */
export const DEFAULT_PRESENCE_MS = 30_000;

/** The largest seed a policy may carry: 2^48 - 1 (exact in a double, and in Lua). */
export const MAX_SEED = 281_474_976_710_655;

/** How long an explicit admit's idempotency key remembers its result, ms (10 minutes). */
export const IDEMPOTENCY_MS = 600_000;

/** Idempotency keys the stores accept: the same pattern the admin API checks. */
export { IDEMPOTENCY_KEY_PATTERN };

/** Length of the state every policy script returns first (see the header). */
export const STATE_LENGTH = 13;

/** Thrown for input a store refuses; nothing has been changed when it is thrown. */
export class StoreArgumentError extends RangeError {
  readonly code = 'ERR_STORE_ARGUMENT';
  constructor(message: string) {
    super(message);
    this.name = 'StoreArgumentError';
  }
}

export interface QueueKeys {
  readonly tail: string;
  readonly cursor: string;
  readonly period: string;
  readonly active: string;
  readonly reserved: string;
  readonly admits: string;
  readonly batches: string;
  readonly waits: string;
  readonly ctl: string;
  readonly waiting: string;
  readonly history: string;
}

export function assertQueueName(queue: string): void {
  if (typeof queue !== 'string' || !QUEUE_NAME_PATTERN.test(queue)) {
    throw new StoreArgumentError(`invalid queue name ${JSON.stringify(queue)}: expected ${QUEUE_NAME_PATTERN}`);
  }
}

export function assertKeyPrefix(prefix: string): void {
  if (typeof prefix !== 'string' || !KEY_PREFIX_PATTERN.test(prefix)) {
    throw new StoreArgumentError(`invalid key prefix ${JSON.stringify(prefix)}: expected ${KEY_PREFIX_PATTERN}`);
  }
}

export function buildQueueKeys(prefix: string, queue: string): QueueKeys {
  assertKeyPrefix(prefix);
  assertQueueName(queue);
  const base = `${prefix}:{${queue}}`;
  return {
    tail: `${base}:tail`,
    cursor: `${base}:cursor`,
    period: `${base}:period`,
    active: `${base}:active`,
    reserved: `${base}:reserved`,
    admits: `${base}:admits`,
    batches: `${base}:batches`,
    waits: `${base}:waits`,
    ctl: `${base}:ctl`,
    waiting: `${base}:waiting`,
    history: `${base}:history`,
  };
}

/** KEYS of every policy script, in the order the Lua binds them to `K_*`. */
export function policyKeys(keys: QueueKeys): string[] {
  return [
    keys.tail,
    keys.cursor,
    keys.period,
    keys.active,
    keys.reserved,
    keys.admits,
    keys.batches,
    keys.waits,
    keys.ctl,
    keys.waiting,
    keys.history,
  ];
}

/** An admission policy after validation, with the time it applies to. */
export interface CheckedPolicy {
  /** Floored to whole ms. */
  readonly nowMs: number;
  /** Rate mode: visitors per period (0 = off). */
  readonly count: number;
  /** Rate mode: period length; only meaningful when `count > 0` (0 otherwise). */
  readonly periodMs: number;
  /** Configured thresholds (runtime overrides live in the store). */
  readonly maxActive: number;
  readonly maxNewPerMinute: number;
  readonly sessionMs: number;
  readonly reservationMs: number;
  /** 0 = no event. */
  readonly eventStartMs: number;
  /** 0 .. MAX_SEED. */
  readonly seed: number;
  readonly method: 'fifo' | 'random';
  /** >= 1; DEFAULT_PRESENCE_MS when the policy has none. */
  readonly presenceMs: number;
}

function isSafeCount(value: unknown, min: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min;
}

function checkTime(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > Number.MAX_SAFE_INTEGER) {
    throw new StoreArgumentError(`invalid ${name} ${String(value)}: expected a finite time in ms since the epoch`);
  }
  return Math.floor(value);
}

/** Validates the time and policy every policy-bound method takes. `nowMs` may carry a fraction; it is floored. */
export function checkPolicy(nowMs: number, policy: AdmissionPolicy): CheckedPolicy {
  const now = checkTime('nowMs', nowMs);
  const count: unknown = policy?.auto?.count;
  if (!isSafeCount(count, 0)) {
    throw new StoreArgumentError(`invalid auto.count ${String(count)}: expected an integer >= 0`);
  }
  const periodMs: unknown = policy.auto.periodMs;
  if (count > 0 && !isSafeCount(periodMs, 1)) {
    throw new StoreArgumentError(`invalid auto.periodMs ${String(periodMs)}: expected an integer >= 1`);
  }
  const maxActive: unknown = policy.thresholds?.maxActive;
  if (!isSafeCount(maxActive, 0)) {
    throw new StoreArgumentError(`invalid thresholds.maxActive ${String(maxActive)}: expected an integer >= 0`);
  }
  const maxNewPerMinute: unknown = policy.thresholds.maxNewPerMinute;
  if (!isSafeCount(maxNewPerMinute, 0)) {
    throw new StoreArgumentError(`invalid thresholds.maxNewPerMinute ${String(maxNewPerMinute)}: expected an integer >= 0`);
  }
  const sessionMs: unknown = policy.sessionMs;
  if (!isSafeCount(sessionMs, 1)) {
    throw new StoreArgumentError(`invalid sessionMs ${String(sessionMs)}: expected an integer >= 1`);
  }
  const reservationMs: unknown = policy.reservationMs;
  if (!isSafeCount(reservationMs, 1)) {
    throw new StoreArgumentError(`invalid reservationMs ${String(reservationMs)}: expected an integer >= 1`);
  }
  const eventStartMs: unknown = policy.eventStartMs ?? 0;
  if (!isSafeCount(eventStartMs, 0)) {
    throw new StoreArgumentError(`invalid eventStartMs ${String(eventStartMs)}: expected an integer time in ms since the epoch, or 0 for none`);
  }
  const seed: unknown = policy.seed ?? 0;
  if (!isSafeCount(seed, 0) || seed > MAX_SEED) {
    throw new StoreArgumentError(`invalid seed ${String(seed)}: expected an integer from 0 to ${MAX_SEED}`);
  }
  const method: unknown = policy.method ?? 'fifo';
  if (method !== 'fifo' && method !== 'random') {
    throw new StoreArgumentError(`invalid method ${String(method)}: expected fifo or random`);
  }
  const presenceMs: unknown = policy.presenceMs ?? DEFAULT_PRESENCE_MS;
  if (!isSafeCount(presenceMs, 1)) {
    throw new StoreArgumentError(`invalid presenceMs ${String(presenceMs)}: expected an integer >= 1`);
  }
  return {
    nowMs: now,
    count,
    periodMs: count > 0 ? (periodMs as number) : 0,
    maxActive,
    maxNewPerMinute,
    sessionMs,
    reservationMs,
    eventStartMs,
    seed,
    method,
    presenceMs,
  };
}

/** Whether admission may run at `nowMs`: no event, or its start has come. */
export function isOpen(p: CheckedPolicy): boolean {
  return p.eventStartMs === 0 || p.nowMs >= p.eventStartMs;
}

const MINSTD_MODULUS = 2_147_483_647;

/**
 * The random method's generator, the same arithmetic as `next_rank` in the Lua (Park–Miller minimal
 * standard, every step exact in doubles): `nextRank(n)` picks a rank in 0..n-1. One per script run.
 */
export function createDrawRng(seed: number): { nextRank(n: number): number } {
  let state = (seed % (MINSTD_MODULUS - 1)) + 1;
  return {
    nextRank(n: number): number {
      state = (state * 16_807) % MINSTD_MODULUS;
      return Math.min(Math.floor((state / MINSTD_MODULUS) * n), n - 1);
    },
  };
}

/** A draw's outcome by the code the draw script returns. */
export const DRAW_OUTCOMES = { 0: 'waiting', 1: 'drawn', 2: 'front', 3: 'unknown' } as const;

export function checkTicket(ticket: number): number {
  if (!isSafeCount(ticket, 1)) {
    throw new StoreArgumentError(`invalid ticket ${String(ticket)}: expected an integer >= 1`);
  }
  return ticket;
}

/**
 * `waitedMs` is a difference of two clocks (the join time in the visitor's token, possibly stamped by
 * another POP, and now), so a small negative value is clock skew rather than bad input: it counts as
 * 0. Fractions are floored. Only a non-number, NaN or infinity is refused.
 */
export function checkWaitedMs(waitedMs: number): number {
  if (typeof waitedMs !== 'number' || !Number.isFinite(waitedMs)) {
    throw new StoreArgumentError(`invalid waitedMs ${String(waitedMs)}: expected a finite number of ms`);
  }
  return Math.min(Math.max(0, Math.floor(waitedMs)), Number.MAX_SAFE_INTEGER);
}

/** `untilMs` caps a renewed slot (the end of the visitor's session); +Infinity means no cap. */
export function checkUntilMs(untilMs: number): number {
  if (typeof untilMs !== 'number' || Number.isNaN(untilMs) || untilMs < 0) {
    throw new StoreArgumentError(`invalid untilMs ${String(untilMs)}: expected a time in ms since the epoch`);
  }
  return Math.min(Math.floor(untilMs), Number.MAX_SAFE_INTEGER);
}

export function checkGraceMs(graceMs: number): number {
  if (!isSafeCount(graceMs, 0)) {
    throw new StoreArgumentError(`invalid graceMs ${String(graceMs)}: expected an integer >= 0`);
  }
  return graceMs;
}

export function assertAdmitCount(count: number): void {
  if (!isSafeCount(count, 1)) {
    throw new StoreArgumentError(`invalid admit count ${String(count)}: expected an integer >= 1`);
  }
}

/** Most uses one VIP code may have. */
export const VIP_MAX_USES = 1_000_000;

/** A VIP code without an expiry of its own is forgotten this long after its creation, ms (30 days). */
export const VIP_TTL_MS = 30 * 24 * 3_600_000;

/**
 * A VIP code with an expiry is kept this long past it (ms, one day), so that using it then reads
 * `expired` rather than `unknown`; after that it is forgotten.
 */
export const VIP_KEEP_EXPIRED_MS = 24 * 3_600_000;

/** What the stores accept as a code's hash: lower-case hex SHA-256. */
export const VIP_HASH_PATTERN = /^[0-9a-f]{64}$/;

/** Validates a bare time (the VIP methods take no policy); floored to whole ms. */
export function checkNowMs(nowMs: number): number {
  return checkTime('nowMs', nowMs);
}

export function checkVipHash(codeHash: string): string {
  if (typeof codeHash !== 'string' || !VIP_HASH_PATTERN.test(codeHash)) {
    throw new StoreArgumentError('invalid VIP code hash: expected 64 lower-case hex digits (SHA-256)');
  }
  return codeHash;
}

/** The key of one VIP code, under its queue's hash tag; validates prefix, queue and hash. */
export function vipKey(prefix: string, queue: string, codeHash: string): string {
  assertKeyPrefix(prefix);
  assertQueueName(queue);
  return `${prefix}:{${queue}}:vip:${checkVipHash(codeHash)}`;
}

/** Validates an idempotency key (IDEMPOTENCY_KEY_PATTERN). */
export function checkIdempotencyKey(key: string): string {
  if (typeof key !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw new StoreArgumentError(`invalid idempotency key: expected 1-64 of A-Z, a-z, 0-9, ".", "_", ":", "-"`);
  }
  return key;
}

/** The store key of an explicit admit's idempotency key, under its queue's hash tag. */
export function idempotencyStoreKey(prefix: string, queue: string, key: string): string {
  assertKeyPrefix(prefix);
  assertQueueName(queue);
  return `${prefix}:{${queue}}:admit:${checkIdempotencyKey(key)}`;
}

/** join's recovery window, ms: undefined or 0 for none, else an integer >= 1. */
export function checkRecoverMs(recoverMs: number | undefined): number {
  if (recoverMs === undefined || recoverMs === 0) return 0;
  if (!isSafeCount(recoverMs, 1)) throw new StoreArgumentError(`invalid recoverMs ${String(recoverMs)}: expected an integer >= 1`);
  return recoverMs;
}

/** A token's generation as an optional ARGV: '' for none (a token from before generations). */
export function generationArg(generation: number | undefined): string {
  if (generation === undefined || generation === 0) return '';
  if (!isSafeCount(generation, 1)) throw new StoreArgumentError(`invalid generation ${String(generation)}: expected an integer >= 1`);
  return String(generation);
}

/** A VIP code to create, after validation, with the time it is created at. */
export interface CheckedVip {
  /** Floored to whole ms. */
  readonly nowMs: number;
  readonly uses: number;
  readonly expiresAtMs: number | null;
  /** How long the store keeps the code from now, ms: see VIP_TTL_MS and VIP_KEEP_EXPIRED_MS. */
  readonly keepMs: number;
}

const VIP_FIELDS = new Set(['uses', 'expiresAtMs']);

/**
 * Validates a VIP code before anything is written: `uses` an integer 1..VIP_MAX_USES, `expiresAtMs`
 * null or a safe integer later than `nowMs`. Both fields are required and no others are accepted, so
 * a misspelt expiry cannot create a code that never expires.
 */
export function checkVipCode(code: { readonly uses: number; readonly expiresAtMs: number | null }, nowMs: number): CheckedVip {
  const now = checkTime('nowMs', nowMs);
  if (typeof code !== 'object' || code === null || Array.isArray(code)) {
    throw new StoreArgumentError('invalid VIP code: expected an object');
  }
  for (const field of Object.keys(code)) {
    if (!VIP_FIELDS.has(field)) {
      throw new StoreArgumentError(`invalid VIP code field ${JSON.stringify(field)}: expected uses and expiresAtMs`);
    }
  }
  const uses: unknown = code.uses;
  if (!isSafeCount(uses, 1) || uses > VIP_MAX_USES) {
    throw new StoreArgumentError(`invalid VIP uses ${String(uses)}: expected an integer from 1 to ${VIP_MAX_USES}`);
  }
  const expiresAtMs: unknown = code.expiresAtMs;
  if (expiresAtMs !== null && (!isSafeCount(expiresAtMs, 0) || expiresAtMs <= nowMs)) {
    throw new StoreArgumentError(`invalid VIP expiresAtMs ${String(expiresAtMs)}: expected null or an integer time in ms after now`);
  }
  return {
    nowMs: now,
    uses,
    expiresAtMs,
    keepMs: expiresAtMs === null ? VIP_TTL_MS : expiresAtMs - now + VIP_KEEP_EXPIRED_MS,
  };
}

/** ARGV of the create_vip script: now, uses, expiry ('' = none). */
export function vipCreateArgv(v: CheckedVip): string[] {
  return [String(v.nowMs), String(v.uses), v.expiresAtMs === null ? '' : String(v.expiresAtMs)];
}

/** Why a VIP use was refused, by the status the use_vip script returns (0 is success). */
export const VIP_REFUSALS = { 1: 'unknown', 2: 'expired', 3: 'used_up' } as const;

/** A runtime change after validation: `undefined` leaves a control as it is, `null` removes an override. */
export interface CheckedControl {
  readonly paused: boolean | undefined;
  readonly maxActive: number | null | undefined;
  readonly maxNewPerMinute: number | null | undefined;
}

const CONTROL_FIELDS = new Set(['paused', 'maxActive', 'maxNewPerMinute']);

/**
 * Validates a runtime change before anything is written. Unknown fields are refused rather than
 * ignored: a misspelt `maxactive` must not look like it was applied.
 */
export function checkControl(change: RuntimeControl): CheckedControl {
  if (typeof change !== 'object' || change === null || Array.isArray(change)) {
    throw new StoreArgumentError('invalid control change: expected an object');
  }
  for (const field of Object.keys(change)) {
    if (!CONTROL_FIELDS.has(field)) {
      throw new StoreArgumentError(`invalid control field ${JSON.stringify(field)}: expected paused, maxActive or maxNewPerMinute`);
    }
  }
  const { paused, maxActive, maxNewPerMinute } = change;
  if (paused !== undefined && typeof paused !== 'boolean') {
    throw new StoreArgumentError(`invalid paused ${String(paused)}: expected true or false`);
  }
  for (const [name, value] of [['maxActive', maxActive], ['maxNewPerMinute', maxNewPerMinute]] as const) {
    if (value !== undefined && value !== null && !isSafeCount(value, 0)) {
      throw new StoreArgumentError(`invalid ${name} ${String(value)}: expected an integer >= 0, or null for the configured value`);
    }
  }
  return { paused, maxActive, maxNewPerMinute };
}

/** Start (ms) of the period containing `nowMs`; the same arithmetic as the Lua `auto_admit`. */
export function periodStart(nowMs: number, periodMs: number): number {
  return Math.floor(nowMs / periodMs) * periodMs;
}

/**
 * ARGV 1..11 of every policy script, as strings so no JSON number formatting (exponents, fractions)
 * reaches Lua: now, auto count, period ms, configured max active, configured max new per minute,
 * session ms, reservation ms, event start ms, seed, method (0 fifo, 1 random), presence ms.
 */
export function policyArgv(p: CheckedPolicy): string[] {
  return [
    p.nowMs,
    p.count,
    p.periodMs,
    p.maxActive,
    p.maxNewPerMinute,
    p.sessionMs,
    p.reservationMs,
    p.eventStartMs,
    p.seed,
    p.method === 'random' ? 1 : 0,
    p.presenceMs,
  ].map(String);
}

/** ARGV 12..14 of the control script: '' = leave as it is, 'del' = back to configured / unpause. */
export function controlArgv(c: CheckedControl): string[] {
  const threshold = (v: number | null | undefined): string => (v === undefined ? '' : v === null ? 'del' : String(v));
  return [c.paused === undefined ? '' : c.paused ? '1' : '0', threshold(c.maxActive), threshold(c.maxNewPerMinute)];
}

/** The mean wait, in seconds with one decimal, from the sum and count the stores keep; null for none. */
export function averageWaitSeconds(sumMs: number, count: number): number | null {
  return count > 0 ? Math.round(sumMs / count / 100) / 10 : null;
}

// ---------------------------------------------------------------------------------------------
// Lua. Composed from fragments at module load; the pinned hashes cover the composed text.

const SHEBANG = '#!lua flags=allow-key-locking';

// GET as a number; nil when the key is absent. A key holding something else is a loud error rather
// than a silent 0, since it means something other than this store wrote it.
const READ_INT = `
local function read_int(key)
  local v = redis.call('GET', key)
  if not v then return nil end
  local n = tonumber(v)
  if not n then error('wr: key ' .. key .. ' does not hold a number') end
  return n
end
`;

// Recovery (see the header): RECOVER_MS > 0 when this run brings the first evidence that a state
// was lost (join's ARGV 12). The first such run of a generation opens the window (recover_until in
// ctl, read with the controls' HMGET); while it is open, capacity mode admits nobody new, as if
// paused, so the holders of the lost state can register their slots again before any room is given.
const RECOVERY = `
local RECOVER_MS = 0
local function recovering(recover_until, max_active, max_new)
  if RECOVER_MS > 0 and recover_until == 0 and not GEN_READ_ONLY then
    recover_until = NOW + RECOVER_MS
    redis.call('HSET', K_CTL, 'recover_until', fmt(recover_until))
  end
  return NOW < recover_until and (max_active > 0 or max_new > 0)
end
`;

// The generation (see the header): read with the controls' HMGET every policy script already runs,
// so it costs no command of its own; written once, by the first run that finds it absent (the
// queue's state was lost, or never existed). A stats run (GEN_READ_ONLY) reports 0 instead of writing.
// The value mixes the caller's seed and time, so two generations differ even when seed is 0.
// foreign_gen(i): ARGV[i] carries a token's generation ('' or 0 = a token from before generations,
// taken as current) and it is not this one: the ticket number in that token means nothing here.
// foreign_member: the slot member of such a token's holder, distinct from every ticket of this
// generation (tickets are plain numbers), so the holder is counted without taking anybody's slot.
const GENERATION = `
local GEN, GEN_READ_ONLY = 0, false
local function ensure_gen(v)
  local g = tonumber(v)
  if g then return g end
  if GEN_READ_ONLY then return 0 end
  g = ((SEED + NOW) % ${MAX_SEED}) + 1
  redis.call('HSET', K_CTL, 'gen', fmt(g))
  return g
end
local function foreign_gen(i)
  local g = tonumber(ARGV[i] or '')
  return g ~= nil and g > 0 and g ~= GEN
end
local function foreign_member(ticket, i)
  return fmt(ticket) .. '@g' .. fmt(tonumber(ARGV[i]))
end
${RECOVERY}`;

// Every key bound once from KEYS, and the policy from ARGV 1..11 (validated again: the TS side
// checks first, this only keeps a foreign caller from corrupting state). '%.0f' prints any integer
// below 2^53 exactly and never in exponent form.
const PRELUDE = `
local K_TAIL, K_CURSOR, K_PERIOD = KEYS[1], KEYS[2], KEYS[3]
local K_ACTIVE, K_RESERVED, K_ADMITS = KEYS[4], KEYS[5], KEYS[6]
local K_BATCHES, K_WAITS, K_CTL = KEYS[7], KEYS[8], KEYS[9]
local K_WAITING, K_HISTORY = KEYS[10], KEYS[11]
local MINUTE_MS, KEEP_MS, HISTORY_MS = ${MINUTE_MS}, ${KEEP_MS}, ${HISTORY_MS}
local function fmt(n) return string.format('%.0f', n) end
local function arg_int(i, min, max)
  max = max or 9007199254740991
  local n = tonumber(ARGV[i])
  if not n or n ~= math.floor(n) or n < min or n > max then
    error('wr: ARGV[' .. i .. '] must be an integer from ' .. fmt(min) .. ' to ' .. fmt(max))
  end
  return n
end
local NOW = arg_int(1, 0)
local AUTO_COUNT = arg_int(2, 0)
local PERIOD_MS = arg_int(3, 0)
local CFG_MAX_ACTIVE = arg_int(4, 0)
local CFG_MAX_NEW = arg_int(5, 0)
local SESSION_MS = arg_int(6, 1)
local RESERVATION_MS = arg_int(7, 1)
local EVENT_START = arg_int(8, 0)
local SEED = arg_int(9, 0, ${MAX_SEED})
local RANDOM = arg_int(10, 0, 1) == 1
local PRESENCE_MS = arg_int(11, RANDOM and 1 or 0)
if AUTO_COUNT > 0 and PERIOD_MS < 1 then error('wr: ARGV[3] must be >= 1 when ARGV[2] > 0') end
-- Admission may run: no event, or its start has come.
local OPEN = EVENT_START == 0 or NOW >= EVENT_START
${READ_INT}
local function read_override(v, configured)
  if not v then return configured end
  local n = tonumber(v)
  if not n then error('wr: key ' .. K_CTL .. ' holds a non-numeric threshold') end
  return n
end
${GENERATION}
-- paused, effective max active, effective max new per minute; sets GEN (see GENERATION). Paused
-- also while recovering (see RECOVERY).
local function read_controls()
  local c = redis.call('HMGET', K_CTL, 'paused', 'max_active', 'max_new_per_minute', 'gen', 'recover_until')
  GEN = ensure_gen(c[4])
  local max_active, max_new = read_override(c[2], CFG_MAX_ACTIVE), read_override(c[3], CFG_MAX_NEW)
  return c[1] == '1' or recovering(tonumber(c[5]) or 0, max_active, max_new), max_active, max_new
end
`;

// Events and presence (see the header). read_event: the pre-queue frozen for this start (0, 0 when
// none is) and the epoch. prologue: every writing script but touch runs it first, with the tail
// before its own ticket: the first run at or after the start freezes the pre-queue, and in random
// mode the visitors whose last poll is presenceMs old leave the draw.
const EVENTS = `
local function read_event()
  local c = redis.call('HMGET', K_CTL, 'ev_start', 'ev_size', 'ev_seed', 'epoch')
  local size, seed = 0, 0
  if EVENT_START > 0 and tonumber(c[1]) == EVENT_START then
    size, seed = tonumber(c[2]) or 0, tonumber(c[3]) or 0
  end
  return size, seed, tonumber(c[4]) or 0
end
local function prologue(tail_before)
  if EVENT_START > 0 and NOW >= EVENT_START and tonumber(redis.call('HGET', K_CTL, 'ev_start')) ~= EVENT_START then
    redis.call('HSET', K_CTL, 'ev_start', fmt(EVENT_START), 'ev_size', fmt(tail_before), 'ev_seed', fmt(SEED))
  end
  if RANDOM then redis.call('ZREMRANGEBYSCORE', K_WAITING, '-inf', fmt(NOW - PRESENCE_MS)) end
end
`;

// Figures (arrivals, see the header), counted by score so they are right whether or not lapsed
// entries were removed yet. Every stored reservation's call-time entry in admits is taken out of the
// count (it is no arrival yet); a live reservation then counts once, whatever its call time; a
// lapsed one that is still stored (rate mode, or stats) not at all. Claimed entries count by their
// claim time. record_history: the minute's first writing run keeps its state (see the header).
const FIGURES = `
local function count_after(key, min_exclusive)
  return redis.call('ZCOUNT', key, '(' .. fmt(min_exclusive), '+inf')
end
local function admitted_counts(call_entries)
  local minute = count_after(K_ADMITS, NOW - MINUTE_MS)
  local five = count_after(K_ADMITS, NOW - KEEP_MS)
  local members, live = {}, 0
  if call_entries then
    local reserved = redis.call('ZRANGE', K_RESERVED, 0, -1, 'WITHSCORES')
    for i = 1, #reserved, 2 do
      members[#members + 1] = reserved[i]
      if tonumber(reserved[i + 1]) > NOW then live = live + 1 end
    end
  else
    -- Rate FIFO calls write no entry at the call (see call_tickets): nothing to take out, so the
    -- live ones are counted without reading them (an admit of thousands stays cheap to count).
    live = count_after(K_RESERVED, NOW)
  end
  for i = 1, #members, 500 do
    for _, s in ipairs(redis.call('ZMSCORE', K_ADMITS, unpack(members, i, math.min(i + 499, #members)))) do
      if s then
        s = tonumber(s)
        if s > NOW - MINUTE_MS then minute = minute - 1 end
        if s > NOW - KEEP_MS then five = five - 1 end
      end
    end
  end
  minute = minute + live
  five = five + live
  local rows = redis.call('ZRANGEBYSCORE', K_BATCHES, '(' .. fmt(NOW - KEEP_MS), '+inf', 'WITHSCORES')
  for i = 1, #rows, 2 do
    local from, to = string.match(rows[i], '^(%d+)-(%d+)$')
    if from then
      local size = tonumber(to) - tonumber(from) + 1
      five = five + size
      if tonumber(rows[i + 1]) > NOW - MINUTE_MS then minute = minute + size end
    end
  end
  return minute, five
end
-- {tail, cursor, paused, max_active, max_new_per_minute, active, admitted_1m, admitted_5m,
--  event_size, event_seed, waiting, epoch, generation}
local function read_state(tail, cursor, paused, max_active, max_new)
  local call_entries = RANDOM or max_active > 0 or max_new > 0
  local slots = count_after(K_ACTIVE, NOW)
  -- A rate FIFO reservation is an admission to come, not a slot.
  if call_entries then slots = slots + count_after(K_RESERVED, NOW) end
  local minute, five = admitted_counts(call_entries)
  local ev_size, ev_seed, epoch = read_event()
  local waiting = 0
  if RANDOM then waiting = count_after(K_WAITING, NOW - PRESENCE_MS) end
  return {tail, cursor, paused and 1 or 0, max_active, max_new, slots, minute, five, ev_size, ev_seed, waiting, epoch, GEN}
end
local function record_history(state)
  local minute = math.floor(NOW / MINUTE_MS) * MINUTE_MS
  if redis.call('ZCOUNT', K_HISTORY, fmt(minute), fmt(minute)) > 0 then return end
  redis.call('ZREMRANGEBYSCORE', K_HISTORY, '-inf', fmt(NOW - HISTORY_MS))
  local waiting = state[11]
  if not RANDOM then waiting = math.max(0, state[1] - state[2]) end
  local member = {fmt(minute), fmt(state[1]), fmt(state[2]), fmt(waiting), fmt(state[6]), fmt(state[7])}
  redis.call('ZADD', K_HISTORY, fmt(minute), table.concat(member, ':'))
end
`;

// Random method: the generator (Park–Miller minimal standard from ARGV seed; every step is exact in
// doubles, and createDrawRng in TS does the same arithmetic) and the draw. draw_tickets draws up to
// n of the present visitors (prologue removed the others) by rank in ZSET order: each leaves the
// draw, gets a reservation and an admission entry as a FIFO call does, and the cursor counts it.
const DRAWS = `
local rng_state = (SEED % 2147483646) + 1
local function next_rank(n)
  rng_state = (rng_state * 16807) % 2147483647
  local r = math.floor(rng_state / 2147483647 * n)
  if r >= n then r = n - 1 end
  return r
end
local function draw_tickets(cursor, n)
  local present = redis.call('ZCARD', K_WAITING)
  local k = math.min(n, present)
  if k < 1 then return cursor end
  for _ = 1, k do
    local r = fmt(next_rank(present))
    local m = redis.call('ZRANGE', K_WAITING, r, r)[1]
    redis.call('ZREM', K_WAITING, m)
    redis.call('ZADD', K_RESERVED, fmt(NOW + RESERVATION_MS), m)
    redis.call('ZADD', K_ADMITS, fmt(NOW), m)
    present = present - 1
  end
  redis.call('SET', K_CURSOR, fmt(cursor + k))
  return cursor + k
end
`;

// Rate mode: the period step (see Claims in the header). The first call of each period calls the next count tickets, never
// moving the cursor more than count past the tail (no banking); in random mode it draws
// min(count, present) instead. Paused or before the event's start: nothing moves and the period is
// not used up. FIFO: the existing tickets a step calls get a reservation (their claim deadline,
// see call_tickets), except `walk_in`, the join's own ticket, which is claimed at the join;
// tickets called before they exist walk in at their join (see JOIN). The step also trims the
// 300-s sets once per period, so claims need not.
//
// call_tickets: reserve from..to (ZADD per 500) and move the cursor. `call_entries`: also write
// each one's admission entry at the call (capacity, random), re-timed at the claim or removed at the
// lapse. Rate FIFO writes none: the claim writes it, so a call costs the join's figures nothing.
//
// replace_lapsed (rate FIFO): called tickets whose claim deadline passed unclaimed give their
// admissions to the next waiting tickets at once (one ZCOUNT when none lapsed). Never past the
// tail: a lapsed call's admission is spent on a ticket that exists or dropped, never banked. Paused
// or before the start: left stored (figures ignore them by score) until admission may run.
const RATE_MODE = `
local function trim(key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(NOW - KEEP_MS))
end
local function call_tickets(from, to, call_entries)
  local reserve, admit = {}, {}
  for t = from, to do
    reserve[#reserve + 1] = fmt(NOW + RESERVATION_MS)
    reserve[#reserve + 1] = fmt(t)
    admit[#admit + 1] = fmt(NOW)
    admit[#admit + 1] = fmt(t)
    if #reserve >= 1000 or t == to then
      redis.call('ZADD', K_RESERVED, unpack(reserve))
      if call_entries then redis.call('ZADD', K_ADMITS, unpack(admit)) end
      reserve, admit = {}, {}
    end
  end
  redis.call('SET', K_CURSOR, fmt(to))
end
local function replace_lapsed(tail, cursor, paused)
  if paused or not OPEN then return cursor end
  local lapsed = redis.call('ZCOUNT', K_RESERVED, '-inf', fmt(NOW))
  if lapsed == 0 then return cursor end
  redis.call('ZREMRANGEBYSCORE', K_RESERVED, '-inf', fmt(NOW))
  local n = math.min(lapsed, tail - cursor)
  if n < 1 then return cursor end
  call_tickets(cursor + 1, cursor + n, false)
  return cursor + n
end
local function auto_admit(tail, cursor, paused, walk_in)
  if paused or AUTO_COUNT <= 0 or not OPEN then return cursor end
  local start = math.floor(NOW / PERIOD_MS) * PERIOD_MS
  local last = read_int(K_PERIOD)
  if last ~= nil and start <= last then return cursor end
  redis.call('SET', K_PERIOD, fmt(start))
  if RANDOM then return draw_tickets(cursor, AUTO_COUNT) end
  local target = math.min(cursor + AUTO_COUNT, tail + AUTO_COUNT)
  if target <= cursor then return cursor end
  trim(K_ADMITS)
  trim(K_BATCHES)
  local last_reserved = math.min(target, tail)
  if walk_in and last_reserved == walk_in then last_reserved = walk_in - 1 end
  if last_reserved > cursor then call_tickets(cursor + 1, last_reserved, false) end
  redis.call('SET', K_CURSOR, fmt(target))
  return target
end
`;

// Capacity mode. expire: lapsed slots leave; lapsed reservations leave and take their admission
// entry with them (the slot and the per-minute budget come back); history older than 300 s goes.
// free_slots: room under both thresholds (math.huge for an unlimited one); under the per-minute
// limit that is the limit - claims of the last 60 s - live reservations. advance: unless paused or
// before the event's start, call the next tickets into the room (random: draw them), each with a
// reservation and an admission entry at now. Random rate mode expires reservations the same way.
const CAPACITY_MODE = `
local function zrem_many(key, members)
  for i = 1, #members, 500 do
    redis.call('ZREM', key, unpack(members, i, math.min(i + 499, #members)))
  end
end
-- How many reservations this run's expire() removed: random rate mode redraws as many (see redraw).
local lapsed_calls = 0
local function expire()
  local lapsed = redis.call('ZRANGEBYSCORE', K_RESERVED, '-inf', fmt(NOW))
  lapsed_calls = lapsed_calls + #lapsed
  if #lapsed > 0 then
    redis.call('ZREMRANGEBYSCORE', K_RESERVED, '-inf', fmt(NOW))
    zrem_many(K_ADMITS, lapsed)
  end
  redis.call('ZREMRANGEBYSCORE', K_ACTIVE, '-inf', fmt(NOW))
  trim(K_ADMITS)
  trim(K_BATCHES)
  trim(K_WAITS)
end
local function free_slots(max_active, max_new)
  local free = math.huge
  if max_active > 0 then
    free = max_active - redis.call('ZCARD', K_ACTIVE) - redis.call('ZCARD', K_RESERVED)
  end
  if max_new > 0 then
    local minute = admitted_counts(true)
    free = math.min(free, max_new - minute)
  end
  return free
end
local function advance(tail, cursor, paused, max_active, max_new)
  if paused or not OPEN then return cursor end
  if RANDOM then return draw_tickets(cursor, free_slots(max_active, max_new)) end
  local n = math.min(tail - cursor, free_slots(max_active, max_new))
  if n < 1 then return cursor end
  call_tickets(cursor + 1, cursor + n, true)
  return cursor + n
end
-- Random rate mode: the draws that lapsed uncollected in this run are drawn again among the present
-- visitors, so an admission goes to someone who shows up (paused or before the start: dropped).
local function redraw(cursor, paused)
  local n = lapsed_calls
  lapsed_calls = 0
  if paused or not OPEN or n < 1 then return cursor end
  return draw_tickets(cursor, n)
end
local function admission_step(tail, cursor, paused, max_active, max_new)
  if max_active > 0 or max_new > 0 then
    expire()
    return advance(tail, cursor, paused, max_active, max_new)
  end
  if RANDOM then
    expire()
    cursor = redraw(cursor, paused)
  else
    cursor = replace_lapsed(tail, cursor, paused)
  end
  return auto_admit(tail, cursor, paused, nil)
end
-- A ticket takes its slot: renew a slot it holds, claim its live reservation (its admission entry is
-- moved to now, the arrival: the live reservation it was counted as becomes a claim counted from
-- now, so the figures do not move), or (FIFO, the event started, called, not paused, room under both
-- thresholds) take a slot directly with an admission of its own. Runs after expire(), so whatever is
-- stored is live.
local function take_slot(ticket, tail, cursor, paused, max_active, max_new, waited)
  local m = fmt(ticket)
  if redis.call('ZSCORE', K_ACTIVE, m) then
    redis.call('ZADD', K_ACTIVE, fmt(NOW + SESSION_MS), m)
    return 1
  end
  if redis.call('ZSCORE', K_RESERVED, m) then
    redis.call('ZREM', K_RESERVED, m)
    redis.call('ZADD', K_ADMITS, fmt(NOW), m)
  else
    if RANDOM or not OPEN or ticket > cursor or ticket > tail or paused or free_slots(max_active, max_new) < 1 then return 0 end
    local member = m .. '@' .. fmt(NOW)
    local k = 0
    while redis.call('ZSCORE', K_ADMITS, member) do
      k = k + 1
      member = m .. '@' .. fmt(NOW) .. '#' .. k
    end
    redis.call('ZADD', K_ADMITS, fmt(NOW), member)
  end
  redis.call('ZADD', K_ACTIVE, fmt(NOW + SESSION_MS), m)
  redis.call('ZADD', K_WAITS, fmt(NOW), m .. ':' .. fmt(waited))
  return 1
end
-- Random rate mode: the holder of a live reservation collects it. The reservation goes, its
-- admission entry is re-timed to now (the arrival) and the wait is recorded; the ticket left the draw
-- when it was drawn, so it is never admitted again.
local function collect(ticket, waited)
  local m = fmt(ticket)
  redis.call('ZREM', K_RESERVED, m)
  redis.call('ZADD', K_ADMITS, fmt(NOW), m)
  redis.call('ZADD', K_WAITS, fmt(NOW), m .. ':' .. fmt(waited))
end
`;

const POLICY_HEADER = `${PRELUDE}${EVENTS}${FIGURES}${DRAWS}${RATE_MODE}${CAPACITY_MODE}`;

const READ_QUEUE = `
local tail = read_int(K_TAIL) or 0
local cursor = read_int(K_CURSOR) or 0
local paused, max_active, max_new = read_controls()
local capacity = max_active > 0 or max_new > 0
`;

// claim and draw, ARGV 14: a ticket of a lost generation is nobody's here (its number may be a new
// visitor's). Answered read-only: the state, then `extras` (claim: claimed 0; draw: unknown, 0), so
// the caller takes the visitor a new ticket.
const refuseForeign = (extras: string): string => `
if foreign_gen(14) then
  local state = read_state(tail, cursor, paused, max_active, max_new)
  for i, v in ipairs({${extras}}) do state[${STATE_LENGTH} + i] = v end
  return state
end`;

// Explicit admits may carry an idempotency key: KEYS[12] (the key's own store key, under the queue's
// hash tag). A run that finds it recorded writes nothing and answers the current state with the
// admitted count recorded by the run that applied it, then replayed = 1; otherwise the run admits
// and records its count there for IDEMPOTENCY_MS. A retry of a timed-out admit (or a late arrival
// of the first attempt after its retry ran) therefore admits once.
const IDEMPOTENT_REPLAY = `
local K_IDEM = KEYS[12]
if K_IDEM then
  local done = redis.call('GET', K_IDEM)
  if done then
    local state = read_state(tail, cursor, paused, max_active, max_new)
    state[${STATE_LENGTH} + 1] = tonumber(done) or 0
    state[${STATE_LENGTH} + 2] = 1
    return state
  end
end`;
const IDEMPOTENT_RECORD = `
if K_IDEM then redis.call('SET', K_IDEM, fmt(state[${STATE_LENGTH} + 1]), 'PX', ${IDEMPOTENCY_MS}) end
state[${STATE_LENGTH} + 2] = 0`;

const KEYS_DOC =
  'KEYS tail, cursor, period, active, reserved, admits, batches, waits, ctl, waiting, history; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms';

/**
 * Take the next ticket and run admission (before the event's start: nothing is admitted). Random
 * method: the ticket joins the draw first. Capacity mode: a ticket called (drawn) in this call, or
 * (FIFO) one called before it existed, claims its slot at once (a walk-in, wait 0). Rate mode: the
 * period step (no replacement of lapsed calls: that is left to the poll); FIFO: a ticket the cursor
 * had already passed, or that this join's own step called, walks in (admitted now, claimed); random:
 * a ticket drawn in this call is collected at once and reported claimed. Returns the state, then
 * ticket and claimed (0/1). ARGV 12: the recovery window, ms ('' = none; see Recovery).
 */
export const JOIN_SCRIPT = `${SHEBANG}
-- wr join: ${KEYS_DOC}, recover_ms; returns {state..., ticket, claimed}
${POLICY_HEADER}
if (ARGV[12] or '') ~= '' then RECOVER_MS = arg_int(12, 1) end
local ticket = redis.call('INCR', K_TAIL)
prologue(ticket - 1)
if RANDOM then redis.call('ZADD', K_WAITING, fmt(NOW), fmt(ticket)) end
local tail = ticket
local cursor = read_int(K_CURSOR) or 0
local paused, max_active, max_new = read_controls()
local claimed = 0
if max_active > 0 or max_new > 0 then
  expire()
  cursor = advance(tail, cursor, paused, max_active, max_new)
  claimed = take_slot(ticket, tail, cursor, paused, max_active, max_new, 0)
elseif RANDOM then
  cursor = admission_step(tail, cursor, paused, max_active, max_new)
  if redis.call('ZSCORE', K_RESERVED, fmt(ticket)) then
    collect(ticket, 0)
    claimed = 1
  end
else
  if not OPEN and cursor > ticket - 1 then
    cursor = ticket - 1
    redis.call('SET', K_CURSOR, fmt(cursor))
  end
  cursor = auto_admit(tail, cursor, paused, ticket)
  if ticket <= cursor then
    -- Called before it existed, or by this join's own step: it walks in, and arrives now.
    trim(K_ADMITS)
    redis.call('ZADD', K_ADMITS, fmt(NOW), fmt(ticket))
    claimed = 1
  end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
state[14] = ticket
state[15] = claimed
return state
`;

/** Run admission (capacity: expire and call or draw into free room; rate: the period step). Returns the state. */
export const POLL_SCRIPT = `${SHEBANG}
-- wr poll: ${KEYS_DOC}; returns {state...}
${POLICY_HEADER}${READ_QUEUE}
prologue(tail)
cursor = admission_step(tail, cursor, paused, max_active, max_new)
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
return state
`;

/**
 * Capacity mode: the ticket takes its slot (see take_slot; random: only through its live
 * reservation), then admission runs. Rate mode, FIFO: lapsed calls are replaced first (no period
 * step), then claimed when the cursor has passed the ticket, its arrival counted once (see Claims
 * in the header); random: when the ticket holds a live reservation (it is not collected: that is
 * draw's job). ARGV 12 ticket, 13 waited ms, 14 the token's generation ('' = none; one of another
 * generation is refused, see Generations). Returns the state, then claimed (0/1).
 */
export const CLAIM_SCRIPT = `${SHEBANG}
-- wr claim: ${KEYS_DOC}, ticket, waited_ms, generation; returns {state..., claimed}
${POLICY_HEADER}${READ_QUEUE}
local ticket = arg_int(12, 1)
local waited = arg_int(13, 0)
${refuseForeign('0')}
prologue(tail)
local claimed = 0
if capacity then
  expire()
  claimed = take_slot(ticket, tail, cursor, paused, max_active, max_new, waited)
  cursor = advance(tail, cursor, paused, max_active, max_new)
elseif RANDOM then
  local score = redis.call('ZSCORE', K_RESERVED, fmt(ticket))
  if score and tonumber(score) > NOW then claimed = 1 end
else
  cursor = replace_lapsed(tail, cursor, paused)
  if ticket <= cursor then
    claimed = 1
    -- The arrival is counted once per ticket: a live reservation becomes a claim; a ticket with no
    -- entry (its reservation lapsed, it was replaced, and the holder came back late) is admitted
    -- and counted now; one already counted (a second tab, a walk-in) is not counted again.
    local m = fmt(ticket)
    if redis.call('ZREM', K_RESERVED, m) == 1 or not redis.call('ZSCORE', K_ADMITS, m) then
      redis.call('ZADD', K_ADMITS, fmt(NOW), m)
    end
  end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
state[14] = claimed
return state
`;

/**
 * Capacity mode: a live slot's expiry becomes min(now + session, until); a slot that is gone (or
 * whose new expiry is not in the future) answers 0 and no slot is ever created. Rate mode: 1.
 * Neither freezes an event nor lapses presence. ARGV 12 ticket, 13 until ms, 14 the token's
 * generation (another generation's holder is registered again, see Generations). Returns {held}.
 */
export const TOUCH_SCRIPT = `${SHEBANG}
-- wr touch: ${KEYS_DOC}, ticket, until_ms, generation; returns {held}
${POLICY_HEADER}
local ticket = arg_int(12, 1)
local until_ms = arg_int(13, 0)
local paused, max_active, max_new = read_controls()
if not (max_active > 0 or max_new > 0) then return {1} end
local m = fmt(ticket)
local score
if foreign_gen(14) then
  -- A holder from a lost generation: its slot is registered again, under a member of its own.
  m = foreign_member(ticket, 14)
  score = redis.call('ZSCORE', K_ACTIVE, m) or fmt(NOW + 1)
else
  score = redis.call('ZSCORE', K_ACTIVE, m)
end
if not score or tonumber(score) <= NOW then return {0} end
local expiry = math.min(NOW + SESSION_MS, until_ms)
redis.call('ZADD', K_ACTIVE, fmt(expiry), m)
if expiry > NOW then return {1} end
return {0}
`;

/**
 * Capacity mode: grace 0 removes the ticket's slot and any reservation (an unclaimed reservation
 * also gives its admission back, as when it lapses) and calls the next tickets into the room;
 * grace > 0 shortens the slot (or reservation) to expire within the grace. Rate mode: 0, nothing
 * written but the prologue. ARGV 12 ticket, 13 grace ms, 14 the token's generation (another
 * generation's holder frees only its own member). Returns {held}: whether a live slot or
 * reservation was there.
 */
export const LEAVE_SCRIPT = `${SHEBANG}
-- wr leave: ${KEYS_DOC}, ticket, grace_ms, generation; returns {held}
${POLICY_HEADER}${READ_QUEUE}
local ticket = arg_int(12, 1)
local grace = arg_int(13, 0)
prologue(tail)
if not capacity then return {0} end
local m = fmt(ticket)
if foreign_gen(14) then
  -- A holder from a lost generation leaves the slot registered for it (see touch), nobody else's.
  m = foreign_member(ticket, 14)
  if grace == 0 then return {redis.call('ZREM', K_ACTIVE, m)} end
  local score = redis.call('ZSCORE', K_ACTIVE, m)
  if not score or tonumber(score) <= NOW then return {0} end
  if tonumber(score) > NOW + grace then redis.call('ZADD', K_ACTIVE, fmt(NOW + grace), m) end
  return {1}
end
if grace == 0 then
  expire()
  local held = redis.call('ZREM', K_ACTIVE, m)
  if redis.call('ZREM', K_RESERVED, m) == 1 then
    redis.call('ZREM', K_ADMITS, m)
    held = 1
  end
  advance(tail, cursor, paused, max_active, max_new)
  return {held}
end
local held = 0
local until_ms = NOW + grace
for _, key in ipairs({K_ACTIVE, K_RESERVED}) do
  local score = redis.call('ZSCORE', key, m)
  if score and tonumber(score) > NOW then
    held = 1
    if tonumber(score) > until_ms then redis.call('ZADD', key, fmt(until_ms), m) end
  end
end
return {held}
`;

/**
 * The operator's or origin's explicit admission (0 before the event's start). FIFO: the cursor
 * moves by up to count, never past the tail; random: min(count, present) visitors are drawn.
 * Each ticket called gets a reservation (capacity mode and random: and an admission entry), even
 * beyond the thresholds (explicit admits are the operator's decision; automatic admission then
 * waits until the usage is back under them). Rate mode first hands lapsed calls on (FIFO: replaced,
 * random: redrawn), not counted in `admitted`. Works while paused. ARGV 12 count (>= 1); KEYS[12],
 * optional, the idempotency key's store key (see IDEMPOTENT_REPLAY). Returns the state, then
 * admitted and replayed (0/1).
 */
export const ADMIT_SCRIPT = `${SHEBANG}
-- wr admit: ${KEYS_DOC}, idempotency; ARGV ..., count; returns {state..., admitted, replayed}
${POLICY_HEADER}${READ_QUEUE}
local count = arg_int(12, 1)
${IDEMPOTENT_REPLAY}
prologue(tail)
if capacity or RANDOM then expire() end
local admitted = 0
if OPEN and RANDOM then
  if not capacity then cursor = redraw(cursor, paused) end
  local before = cursor
  cursor = draw_tickets(cursor, count)
  admitted = cursor - before
elseif OPEN then
  if not capacity then cursor = replace_lapsed(tail, cursor, paused) end
  local target = math.min(cursor + count, tail)
  if target > cursor then
    call_tickets(cursor + 1, target, capacity)
    admitted = target - cursor
    cursor = target
  end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
state[14] = admitted
${IDEMPOTENT_RECORD}
return state
`;

/**
 * Change runtime controls, then run admission with them (resuming or raising a threshold calls
 * tickets at once). ARGV 12 paused ('' keep, '0', '1'), 13 max active and 14 max new per minute
 * ('' keep, 'del' back to configured, integer >= 0 override). Returns the state.
 */
export const CONTROL_SCRIPT = `${SHEBANG}
-- wr control: ${KEYS_DOC}, paused, max_active, max_new_per_minute; returns {state...}
${POLICY_HEADER}
local function check_threshold(i)
  local v = ARGV[i]
  if v ~= '' and v ~= 'del' then arg_int(i, 0) end
  return v
end
local p = ARGV[12]
if p ~= '' and p ~= '0' and p ~= '1' then error('wr: ARGV[12] must be empty, 0 or 1') end
local changes = {{'max_active', check_threshold(13)}, {'max_new_per_minute', check_threshold(14)}}
prologue(read_int(K_TAIL) or 0)
if p == '1' then redis.call('HSET', K_CTL, 'paused', '1') elseif p == '0' then redis.call('HDEL', K_CTL, 'paused') end
for _, c in ipairs(changes) do
  if c[2] == 'del' then
    redis.call('HDEL', K_CTL, c[1])
  elseif c[2] ~= '' then
    redis.call('HSET', K_CTL, c[1], fmt(tonumber(c[2])))
  end
end
${READ_QUEUE}
cursor = admission_step(tail, cursor, paused, max_active, max_new)
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
return state
`;

/**
 * Read the figures, writing nothing. Returns the state, then reserved (live reservations), and the
 * sum (ms) and count of the waits recorded in the last 300 s.
 */
export const STATS_SCRIPT = `${SHEBANG}
-- wr stats: ${KEYS_DOC}; returns {state..., reserved, wait_sum_ms, wait_count}
${POLICY_HEADER}
GEN_READ_ONLY = true
${READ_QUEUE}
local state = read_state(tail, cursor, paused, max_active, max_new)
state[14] = count_after(K_RESERVED, NOW)
local sum, n = 0, 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', K_WAITS, '(' .. fmt(NOW - KEEP_MS), '+inf')) do
  local waited = tonumber(string.match(m, ':(%d+)$'))
  if waited then
    sum = sum + waited
    n = n + 1
  end
end
state[15] = sum
state[16] = n
return state
`;

/**
 * A waiting visitor's poll. Random method: the prologue lapses presence; a ticket holding a live
 * slot renews it (drawn, claimed); one holding a live reservation claims its slot (capacity: drawn
 * and claimed, or front when take_slot cannot) or is collected (rate: drawn); one still in the draw
 * renews its presence to now, admission runs, and if it was drawn just now it is settled the same
 * way, else it is waiting; anything else is unknown and nothing is written for it. Admission runs in
 * every case. FIFO (not used by the handler): admission runs, then capacity mode tries take_slot;
 * drawn when claimed (capacity) or called (rate), front when called but not claimed (capacity),
 * waiting when issued and not called, unknown when above the tail. ARGV 12 ticket, 13 waited ms,
 * 14 the token's generation (another generation's ticket is unknown, and nothing runs).
 * Returns the state, then outcome (DRAW_OUTCOMES) and claimed (0/1).
 */
export const DRAW_SCRIPT = `${SHEBANG}
-- wr draw: ${KEYS_DOC}, ticket, waited_ms, generation; returns {state..., outcome, claimed}
${POLICY_HEADER}${READ_QUEUE}
local ticket = arg_int(12, 1)
local waited = arg_int(13, 0)
${refuseForeign('3, 0')}
local WAITING, DRAWN, FRONT, UNKNOWN = 0, 1, 2, 3
local m = fmt(ticket)
prologue(tail)
local function settle()
  if redis.call('ZSCORE', K_ACTIVE, m) or (capacity and redis.call('ZSCORE', K_RESERVED, m)) then
    if take_slot(ticket, tail, cursor, paused, max_active, max_new, waited) == 1 then return DRAWN, 1 end
    return FRONT, 0
  end
  if redis.call('ZSCORE', K_RESERVED, m) then
    collect(ticket, waited)
    return DRAWN, 0
  end
  return nil, 0
end
local outcome, claimed = nil, 0
if RANDOM then
  expire()
  outcome, claimed = settle()
  if not outcome and redis.call('ZSCORE', K_WAITING, m) then
    redis.call('ZADD', K_WAITING, fmt(NOW), m)
    cursor = admission_step(tail, cursor, paused, max_active, max_new)
    outcome, claimed = settle()
    if not outcome then outcome = WAITING end
  else
    cursor = admission_step(tail, cursor, paused, max_active, max_new)
    if not outcome then outcome = UNKNOWN end
  end
else
  cursor = admission_step(tail, cursor, paused, max_active, max_new)
  if capacity then claimed = take_slot(ticket, tail, cursor, paused, max_active, max_new, waited) end
  if claimed == 1 then
    outcome = DRAWN
  elseif ticket <= cursor and ticket <= tail then
    outcome = capacity and FRONT or DRAWN
  elseif ticket <= tail then
    outcome = WAITING
  else
    outcome = UNKNOWN
  end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
state[14] = outcome
state[15] = claimed
return state
`;

/**
 * Empty the line (see the header): the waiting are let go, the seated stay. The tail stays (ticket
 * numbers are never handed out twice) and the cursor moves to it; held slots (K_ACTIVE) stay and
 * keep counting until they lapse, since their holders' access tokens still pass; reservations,
 * figures, the draw, history and the period go; ctl loses the event's frozen pre-queue and gets
 * epoch = now; the controls and the generation stay. Nothing is admitted.
 * ARGV 12: the epoch the caller saw ('' = any). When it is given and is not the current epoch,
 * nothing is written (the reset it asked for happened already, or somebody else reset since), so a
 * retried reset applies once. Returns the state, then applied (0/1).
 */
export const RESET_SCRIPT = `${SHEBANG}
-- wr reset: ${KEYS_DOC}, expected_epoch; returns {state..., applied}
${POLICY_HEADER}
local expected = ARGV[12] or ''
if expected ~= '' then arg_int(12, 0) end
local epoch = tonumber(redis.call('HGET', K_CTL, 'epoch')) or 0
local applied = 0
if expected == '' or tonumber(expected) == epoch then
  local tail = read_int(K_TAIL) or 0
  redis.call('DEL', K_PERIOD, K_RESERVED, K_ADMITS, K_BATCHES, K_WAITS, K_WAITING, K_HISTORY)
  if tail > 0 then redis.call('SET', K_CURSOR, fmt(tail)) else redis.call('DEL', K_CURSOR) end
  redis.call('ZREMRANGEBYSCORE', K_ACTIVE, '-inf', fmt(NOW))
  redis.call('HDEL', K_CTL, 'ev_start', 'ev_size', 'ev_seed')
  redis.call('HSET', K_CTL, 'epoch', fmt(NOW))
  applied = 1
end
${READ_QUEUE}
local state = read_state(tail, cursor, paused, max_active, max_new)
state[${STATE_LENGTH} + 1] = applied
return state
`;

/**
 * The per-minute history of the last hour, oldest first, writing nothing: the members (strings, see
 * the header) whose minute is > now - HISTORY_MS. KEYS history; ARGV now_ms.
 */
export const HISTORY_SCRIPT = `${SHEBANG}
-- wr history: KEYS history; ARGV now_ms; returns {member...}
local K_HISTORY = KEYS[1]
local function fmt(n) return string.format('%.0f', n) end
local NOW = tonumber(ARGV[1])
if not NOW or NOW ~= math.floor(NOW) or NOW < 0 or NOW > 9007199254740991 then
  error('wr: ARGV[1] must be an integer from 0 to 9007199254740991')
end
return redis.call('ZRANGEBYSCORE', K_HISTORY, '(' .. fmt(NOW - ${HISTORY_MS}), '+inf')
`;

/**
 * Read tail and cursor, writing nothing (a script rather than MGET so the store needs nothing from
 * the client but EVALSHA/EVAL). KEYS: tail, cursor. Returns {tail, cursor}.
 */
export const PEEK_SCRIPT = `${SHEBANG}
-- wr peek: KEYS tail, cursor; returns {tail, cursor}
${READ_INT}
return {read_int(KEYS[1]) or 0, read_int(KEYS[2]) or 0}
`;

// The VIP scripts' one key and their time, from KEYS[1] and ARGV 1 (validated again, as in PRELUDE).
const VIP_PRELUDE = `
local K_VIP = KEYS[1]
local function fmt(n) return string.format('%.0f', n) end
local function arg_int(i, min, max)
  local n = tonumber(ARGV[i])
  if not n or n ~= math.floor(n) or n < min or n > max then
    error('wr: ARGV[' .. i .. '] must be an integer from ' .. fmt(min) .. ' to ' .. fmt(max))
  end
  return n
end
local NOW = arg_int(1, 0, 9007199254740991)
`;

/**
 * Create a VIP code unless its key exists (in any state, even used up or expired): `left` = uses,
 * `exp` = expiry when there is one, and the TTL documented in the header. ARGV now_ms, uses
 * (1..VIP_MAX_USES), expires_at_ms ('' = none, else > now). Returns {created}.
 */
export const CREATE_VIP_SCRIPT = `${SHEBANG}
-- wr create_vip: KEYS vip; ARGV now_ms, uses, expires_at_ms ('' = none); returns {created}
${VIP_PRELUDE}
local uses = arg_int(2, 1, ${VIP_MAX_USES})
local exp = nil
if ARGV[3] ~= '' then exp = arg_int(3, NOW + 1, 9007199254740991) end
if redis.call('EXISTS', K_VIP) == 1 then return {0} end
if exp then
  redis.call('HSET', K_VIP, 'left', fmt(uses), 'exp', fmt(exp))
  redis.call('PEXPIRE', K_VIP, fmt(exp - NOW + ${VIP_KEEP_EXPIRED_MS}))
else
  redis.call('HSET', K_VIP, 'left', fmt(uses))
  redis.call('PEXPIRE', K_VIP, fmt(${VIP_TTL_MS}))
end
return {1}
`;

/**
 * Spend one use of a VIP code. Checked in this order: no key → unknown (1); now >= expiry → expired
 * (2); no use left → used up (3); else one use is taken (the key and its TTL stay, at 0 when it was
 * the last). ARGV now_ms. Returns {status, remaining}: status 0 with the uses left after this one,
 * or a refusal's status (VIP_REFUSALS) with 0.
 */
export const USE_VIP_SCRIPT = `${SHEBANG}
-- wr use_vip: KEYS vip; ARGV now_ms; returns {status, remaining}
${VIP_PRELUDE}
local v = redis.call('HMGET', K_VIP, 'left', 'exp')
if not v[1] then return {1, 0} end
local left, exp = tonumber(v[1]), v[2] and tonumber(v[2])
if not left or (v[2] and not exp) then error('wr: key ' .. K_VIP .. ' is not a VIP code') end
if exp and NOW >= exp then return {2, 0} end
if left < 1 then return {3, 0} end
return {0, redis.call('HINCRBY', K_VIP, 'left', -1)}
`;

export const JOIN_SHA1 = 'f1175bafc9d5efd6ec04b31c803a9b30c3419fef';
export const POLL_SHA1 = '49bd17b5ae2ab33f2d246298c6d72f547153267d';
export const CLAIM_SHA1 = 'ec1dc1b10cb22d4b353e45862a9acc7ea909e87b';
export const TOUCH_SHA1 = '98c0fcc85b8c24f936c2e2c36f24208a9a6779ed';
export const LEAVE_SHA1 = 'aa5643ee23ef6241ce3556e2550122e6498bddff';
export const ADMIT_SHA1 = '538e5f502854553c95dcc626555f6103bbeca927';
export const CONTROL_SHA1 = 'c3212d50682fd9a8d9fe2bc2a9523c98fe115c48';
export const STATS_SHA1 = '4e7103f8ebe068e9d3cc4da099425d07a79e6a18';
export const PEEK_SHA1 = '904d517423da8edf0c920a3730fa05b89debc1ea';
export const CREATE_VIP_SHA1 = '0a048ade72bb09f7fffa196b2a436673f931ab27';
export const USE_VIP_SHA1 = '512ff4ccf1962982ba759a2c32693f4d8079b512';
export const DRAW_SHA1 = 'bc78e7e3e7c21e9830002b189ed1efb1bd953998';
export const RESET_SHA1 = 'ad71d41cfe87c3875f754f6ae15dccb683c89b1f';
export const HISTORY_SHA1 = '477f9424e713adddf354af016672c744b539c5b3';

export interface StoreScript {
  readonly name:
    | 'join'
    | 'poll'
    | 'claim'
    | 'touch'
    | 'leave'
    | 'admit'
    | 'control'
    | 'stats'
    | 'draw'
    | 'reset'
    | 'history'
    | 'peek'
    | 'create_vip'
    | 'use_vip';
  readonly text: string;
  readonly sha1: string;
}

export const JOIN: StoreScript = { name: 'join', text: JOIN_SCRIPT, sha1: JOIN_SHA1 };
export const POLL: StoreScript = { name: 'poll', text: POLL_SCRIPT, sha1: POLL_SHA1 };
export const CLAIM: StoreScript = { name: 'claim', text: CLAIM_SCRIPT, sha1: CLAIM_SHA1 };
export const TOUCH: StoreScript = { name: 'touch', text: TOUCH_SCRIPT, sha1: TOUCH_SHA1 };
export const LEAVE: StoreScript = { name: 'leave', text: LEAVE_SCRIPT, sha1: LEAVE_SHA1 };
export const ADMIT: StoreScript = { name: 'admit', text: ADMIT_SCRIPT, sha1: ADMIT_SHA1 };
export const CONTROL: StoreScript = { name: 'control', text: CONTROL_SCRIPT, sha1: CONTROL_SHA1 };
export const STATS: StoreScript = { name: 'stats', text: STATS_SCRIPT, sha1: STATS_SHA1 };
export const PEEK: StoreScript = { name: 'peek', text: PEEK_SCRIPT, sha1: PEEK_SHA1 };
export const CREATE_VIP: StoreScript = { name: 'create_vip', text: CREATE_VIP_SCRIPT, sha1: CREATE_VIP_SHA1 };
export const USE_VIP: StoreScript = { name: 'use_vip', text: USE_VIP_SCRIPT, sha1: USE_VIP_SHA1 };
export const DRAW: StoreScript = { name: 'draw', text: DRAW_SCRIPT, sha1: DRAW_SHA1 };
export const RESET: StoreScript = { name: 'reset', text: RESET_SCRIPT, sha1: RESET_SHA1 };
export const HISTORY: StoreScript = { name: 'history', text: HISTORY_SCRIPT, sha1: HISTORY_SHA1 };

/** Every script the stores use, for tests and for warming a script cache. */
export const STORE_SCRIPTS: readonly StoreScript[] = [
  JOIN,
  POLL,
  CLAIM,
  TOUCH,
  LEAVE,
  ADMIT,
  CONTROL,
  STATS,
  DRAW,
  RESET,
  HISTORY,
  PEEK,
  CREATE_VIP,
  USE_VIP,
];
