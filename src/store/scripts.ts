/**
 * The store's contract with Redis: key layout, argument checks, and the Lua scripts that make every
 * queue operation one atomic round trip. The in-memory store imports the argument checks from here
 * too, so both stores accept and reject exactly the same input.
 *
 * Key layout, per queue (the `{queue}` hash tag keeps a queue's keys in one slot on a cluster):
 *   `${prefix}:{${queue}}:tail`    last ticket handed out (absent = 0)
 *   `${prefix}:{${queue}}:cursor`  highest ticket let in (absent = 0)
 *   `${prefix}:{${queue}}:period`  start, in ms since the epoch, of the last period whose automatic
 *                                  admission ran (absent = never). A start time rather than a period
 *                                  index, so that changing `periodMs` cannot make the stored value
 *                                  look far in the future and stall admission for a long time.
 *
 * Scripts: every one starts with `#!lua flags=allow-key-locking` (Upstash then locks only the keys in
 * KEYS, so queues do not wait on each other) and therefore touches only keys passed in KEYS. They are
 * deterministic: the time comes in ARGV, nothing reads the clock or a random source. They run in
 * Redis 7's shebang mode, so they declare no `no-writes` flag (most of them write) and return only
 * integers (Lua numbers are truncated to integers on the way out anyway).
 *
 * The SHA-1 of each script is pinned as a literal so that EVALSHA needs no hashing at the edge; a
 * test asserts each pin equals both node:crypto's SHA-1 and `SCRIPT LOAD`. If you edit a script,
 * recompute its pin (`sha1(text)`) and update the literal: the contract test will tell you.
 */

import type { AutoAdmission } from '../core/ports';

/** @default key prefix for every store key. */
export const DEFAULT_KEY_PREFIX = 'wr';

/** Queue names the stores accept (the caller validates them first; the stores assert it again). */
export const QUEUE_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** Key prefixes the stores accept: no braces (they would move the hash tag), no spaces. */
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

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
  return { tail: `${base}:tail`, cursor: `${base}:cursor`, period: `${base}:period` };
}

/** Automatic admission after validation; `periodMs` is only meaningful when `count > 0`. */
export interface CheckedAuto {
  readonly nowMs: number;
  readonly count: number;
  readonly periodMs: number;
}

/** Validates the inputs of join/poll. `nowMs` may carry a fraction; it is floored. */
export function checkAuto(nowMs: number, auto: AutoAdmission): CheckedAuto {
  if (typeof nowMs !== 'number' || !Number.isFinite(nowMs) || nowMs < 0 || nowMs > Number.MAX_SAFE_INTEGER) {
    throw new StoreArgumentError(`invalid nowMs ${String(nowMs)}: expected a finite time in ms since the epoch`);
  }
  const count: unknown = auto?.count;
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
    throw new StoreArgumentError(`invalid auto.count ${String(count)}: expected an integer >= 0`);
  }
  const periodMs: unknown = auto.periodMs;
  if (count > 0 && (typeof periodMs !== 'number' || !Number.isSafeInteger(periodMs) || periodMs < 1)) {
    throw new StoreArgumentError(`invalid auto.periodMs ${String(periodMs)}: expected an integer >= 1`);
  }
  return { nowMs: Math.floor(nowMs), count, periodMs: count > 0 ? (periodMs as number) : 0 };
}

export function assertAdmitCount(count: number): void {
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1) {
    throw new StoreArgumentError(`invalid admit count ${String(count)}: expected an integer >= 1`);
  }
}

/** Start (ms) of the period containing `nowMs`; the same arithmetic as the Lua `period_start`. */
export function periodStart(nowMs: number, periodMs: number): number {
  return Math.floor(nowMs / periodMs) * periodMs;
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

// '%.0f' prints any integer below 2^53 exactly and never in exponent form.
const AUTO_ADMIT = `
local function auto_admit(tail, cursor)
  local count = tonumber(ARGV[2])
  if count <= 0 then return cursor end
  local period_ms = tonumber(ARGV[3])
  local start = math.floor(tonumber(ARGV[1]) / period_ms) * period_ms
  local last = read_int(KEYS[3])
  if last ~= nil and start <= last then return cursor end
  redis.call('SET', KEYS[3], string.format('%.0f', start))
  local target = math.min(cursor + count, tail + count)
  if target <= cursor then return cursor end
  redis.call('SET', KEYS[2], string.format('%.0f', target))
  return target
end
`;

/**
 * Take the next ticket, then run automatic admission.
 * KEYS: tail, cursor, period. ARGV: now ms, count, period ms. Returns {tail, cursor}; the ticket
 * taken is the new tail.
 */
export const JOIN_SCRIPT = `${SHEBANG}
-- wr join: KEYS tail, cursor, period; ARGV now_ms, count, period_ms; returns {tail, cursor}
${READ_INT}${AUTO_ADMIT}
local tail = redis.call('INCR', KEYS[1])
local cursor = auto_admit(tail, read_int(KEYS[2]) or 0)
return {tail, cursor}
`;

/**
 * Read the queue and run automatic admission.
 * KEYS: tail, cursor, period. ARGV: now ms, count, period ms. Returns {tail, cursor}.
 */
export const POLL_SCRIPT = `${SHEBANG}
-- wr poll: KEYS tail, cursor, period; ARGV now_ms, count, period_ms; returns {tail, cursor}
${READ_INT}${AUTO_ADMIT}
local tail = read_int(KEYS[1]) or 0
local cursor = auto_admit(tail, read_int(KEYS[2]) or 0)
return {tail, cursor}
`;

/**
 * Let up to `count` waiting visitors in; the cursor never passes the tail here.
 * KEYS: tail, cursor. ARGV: count (integer >= 1). Returns {tail, cursor, admitted}.
 */
export const ADMIT_SCRIPT = `${SHEBANG}
-- wr admit: KEYS tail, cursor; ARGV count; returns {tail, cursor, admitted}
${READ_INT}
local count = tonumber(ARGV[1])
if not count or count < 1 or count ~= math.floor(count) then
  return redis.error_reply('ERR wr admit: count must be an integer >= 1')
end
local tail = read_int(KEYS[1]) or 0
local cursor = read_int(KEYS[2]) or 0
local target = math.min(cursor + count, tail)
if target <= cursor then return {tail, cursor, 0} end
redis.call('SET', KEYS[2], string.format('%.0f', target))
return {tail, target, target - cursor}
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

export const JOIN_SHA1 = '09f1d190c7d6cc136d15703ad658547e6744dfab';
export const POLL_SHA1 = '392040f7d9efec73b1c36e0793414a0d9f49542d';
export const ADMIT_SHA1 = '36678a3fce1d2c37c39cd3d5f39832e03c0e4664';
export const PEEK_SHA1 = '904d517423da8edf0c920a3730fa05b89debc1ea';

export interface StoreScript {
  readonly name: 'join' | 'poll' | 'admit' | 'peek';
  readonly text: string;
  readonly sha1: string;
}

export const JOIN: StoreScript = { name: 'join', text: JOIN_SCRIPT, sha1: JOIN_SHA1 };
export const POLL: StoreScript = { name: 'poll', text: POLL_SCRIPT, sha1: POLL_SHA1 };
export const ADMIT: StoreScript = { name: 'admit', text: ADMIT_SCRIPT, sha1: ADMIT_SHA1 };
export const PEEK: StoreScript = { name: 'peek', text: PEEK_SCRIPT, sha1: PEEK_SHA1 };

/** Every script the stores use, for tests and for warming a script cache. */
export const STORE_SCRIPTS: readonly StoreScript[] = [JOIN, POLL, ADMIT, PEEK];
