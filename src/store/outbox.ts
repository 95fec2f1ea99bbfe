/**
 * The webhook outbox (see WebhookOutbox in src/core/ports.ts and docs/webhooks.md), in Redis through
 * three small scripts, and in memory (the same rules, call by call, for the embedded store).
 *
 * Key layout, per queue (the `{queue}` hash tag keeps them in the queue's slot on a cluster):
 *   `${prefix}:{${queue}}:hooks`       HASH: `b:<key>` the body of delivery `<key>` (`<event id>|<webhook>`),
 *                                      `a:<key>` its attempts so far, `g:<name>` a guard's mark.
 *   `${prefix}:{${queue}}:hooks_due`   ZSET delivery key → when it is due (ms): a delivery handed
 *                                      out is leased (due again only after the lease), one that
 *                                      failed is due at its retry.
 *   `${prefix}:{${queue}}:hooks_seen`  ZSET event id → when it was recorded (ms): the last
 *                                      OUTBOX_SEEN ids, so the same event found by two POPs is
 *                                      recorded once.
 *
 * These scripts are apart from the queue's (src/store/scripts.ts): they touch none of its keys and
 * run only when an event was found or a delivery is due, never on a visitor's request in the
 * steady state. Their SHA-1s are pinned here and checked against SCRIPT LOAD in
 * test/webhook-outbox.test.ts. Like every script, they read no clock: the caller passes it in.
 */
import type { OutboxDelivery, OutboxGuard, OutboxTake, WebhookOutbox } from '../core/ports';
import type { Redis } from '@upstash/redis';

/** EVALSHA and EVAL, as the queue's store gets them (ScriptClient). */
type ScriptClient = Pick<Redis, 'evalsha' | 'eval'>;

/** Most deliveries kept per queue; recording more pushes out those due first. */
export const OUTBOX_MAX = 200;
/** Event ids remembered per queue, for deduplication. */
export const OUTBOX_SEEN = 1000;

export const OUTBOX_ADD_LUA = `#!lua flags=allow-key-locking
-- wr outbox_add: KEYS hooks, hooks_due, hooks_seen; ARGV now_ms, id, body, guard, above, set, webhook...
local K_BOX, K_DUE, K_SEEN = KEYS[1], KEYS[2], KEYS[3]
local now, id = tonumber(ARGV[1]), ARGV[2]
if redis.call('ZSCORE', K_SEEN, id) then return {0, 0} end
if ARGV[4] ~= '' then
  local mark = tonumber(redis.call('HGET', K_BOX, 'g:' .. ARGV[4]) or '-1')
  if mark >= tonumber(ARGV[5]) then return {0, 0} end
  redis.call('HSET', K_BOX, 'g:' .. ARGV[4], ARGV[6])
end
redis.call('ZADD', K_SEEN, now, id)
if redis.call('ZCARD', K_SEEN) > ${OUTBOX_SEEN} then redis.call('ZREMRANGEBYRANK', K_SEEN, 0, -${OUTBOX_SEEN + 1}) end
local fields, scored = {}, {}
for i = 7, #ARGV do
  local key = id .. '|' .. ARGV[i]
  fields[#fields + 1] = 'b:' .. key
  fields[#fields + 1] = ARGV[3]
  scored[#scored + 1] = now
  scored[#scored + 1] = key
end
if #fields == 0 then return {1, 0} end
redis.call('HSET', K_BOX, unpack(fields))
redis.call('ZADD', K_DUE, unpack(scored))
local over = redis.call('ZCARD', K_DUE) - ${OUTBOX_MAX}
if over <= 0 then return {1, 0} end
local old = redis.call('ZRANGE', K_DUE, 0, over - 1)
local gone = {}
for _, key in ipairs(old) do
  gone[#gone + 1] = 'b:' .. key
  gone[#gone + 1] = 'a:' .. key
end
redis.call('HDEL', K_BOX, unpack(gone))
redis.call('ZREM', K_DUE, unpack(old))
return {1, #old}
`;

export const OUTBOX_TAKE_LUA = `#!lua flags=allow-key-locking
-- wr outbox_take: KEYS hooks, hooks_due; ARGV now_ms, limit, lease_ms; returns {next due, key, attempt, body, ...}
local K_BOX, K_DUE = KEYS[1], KEYS[2]
local now = tonumber(ARGV[1])
local keys = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local out = {'0'}
for _, key in ipairs(keys) do
  local body = redis.call('HGET', K_BOX, 'b:' .. key)
  if body then
    redis.call('ZADD', K_DUE, now + tonumber(ARGV[3]), key)
    out[#out + 1] = key
    out[#out + 1] = redis.call('HINCRBY', K_BOX, 'a:' .. key, 1)
    out[#out + 1] = body
  else
    redis.call('ZREM', K_DUE, key)
  end
end
local first = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
out[1] = first[2] or '0'
return out
`;

export const OUTBOX_SETTLE_LUA = `#!lua flags=allow-key-locking
-- wr outbox_settle: KEYS hooks, hooks_due; ARGV key, outcome, retry_at_ms; returns the next due
local K_BOX, K_DUE = KEYS[1], KEYS[2]
local key = ARGV[1]
if ARGV[2] == 'retry' then
  if redis.call('HEXISTS', K_BOX, 'b:' .. key) == 1 then redis.call('ZADD', K_DUE, tonumber(ARGV[3]), key) end
else
  redis.call('HDEL', K_BOX, 'b:' .. key, 'a:' .. key)
  redis.call('ZREM', K_DUE, key)
end
local first = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
return first[2] or '0'
`;

export const OUTBOX_ADD_SHA1 = 'b6be5b3a7abe5f52dd0bc783f2bc6f08c967a731';
export const OUTBOX_TAKE_SHA1 = '6c703b2c2d5032c196b8d49751b0fe15649ca9b4';
export const OUTBOX_SETTLE_SHA1 = '1adec181c843644c50068bd66ea0e9a6ac80261a';

export interface OutboxScript {
  readonly name: 'outbox_add' | 'outbox_take' | 'outbox_settle';
  readonly text: string;
  readonly sha1: string;
}

export const OUTBOX_ADD: OutboxScript = { name: 'outbox_add', text: OUTBOX_ADD_LUA, sha1: OUTBOX_ADD_SHA1 };
export const OUTBOX_TAKE: OutboxScript = { name: 'outbox_take', text: OUTBOX_TAKE_LUA, sha1: OUTBOX_TAKE_SHA1 };
export const OUTBOX_SETTLE: OutboxScript = { name: 'outbox_settle', text: OUTBOX_SETTLE_LUA, sha1: OUTBOX_SETTLE_SHA1 };
export const OUTBOX_SCRIPTS: readonly OutboxScript[] = [OUTBOX_ADD, OUTBOX_TAKE, OUTBOX_SETTLE];
const [ADD, TAKE, SETTLE] = [OUTBOX_ADD, OUTBOX_TAKE, OUTBOX_SETTLE];

/** Event ids, webhook names and guard names as the outbox accepts them. */
const ID_PATTERN = /^[A-Za-z0-9_.:-]{1,200}$/;
const NAME_PATTERN = /^[a-z0-9_-]{1,32}$/;

function checkAdd(id: string, hooks: readonly string[], body: string, nowMs: number, guard: OutboxGuard | undefined): void {
  if (!ID_PATTERN.test(id)) throw new RangeError(`invalid webhook event id ${JSON.stringify(id).slice(0, 60)}`);
  for (const hook of hooks) if (!NAME_PATTERN.test(hook)) throw new RangeError(`invalid webhook name ${JSON.stringify(hook).slice(0, 40)}`);
  if (typeof body !== 'string' || body.length > 16_384) throw new RangeError('a webhook body must be a string of at most 16 KiB');
  checkMs(nowMs);
  if (guard !== undefined && (!NAME_PATTERN.test(guard.name) || !Number.isSafeInteger(guard.above) || !Number.isSafeInteger(guard.set) || guard.set < 0)) {
    throw new RangeError('invalid outbox guard');
  }
}

function checkMs(ms: number): number {
  if (!Number.isSafeInteger(ms) || ms < 0) throw new RangeError(`invalid time ${String(ms)}`);
  return ms;
}

function toMs(value: unknown): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,16}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`malformed reply from the webhook outbox: ${JSON.stringify(value)?.slice(0, 80)}`);
  return n;
}

function outboxKeys(prefix: string, queue: string): [string, string, string] {
  return [`${prefix}:{${queue}}:hooks`, `${prefix}:{${queue}}:hooks_due`, `${prefix}:{${queue}}:hooks_seen`];
}

/** The outbox in Redis (Upstash through its REST API, or Redis itself), one script per call. */
export class ScriptOutbox implements WebhookOutbox {
  readonly #redis: ScriptClient;
  readonly #prefix: string;

  constructor(redis: ScriptClient, prefix: string) {
    this.#redis = redis;
    this.#prefix = prefix;
  }

  async add(queue: string, id: string, hooks: readonly string[], body: string, nowMs: number, guard?: OutboxGuard): Promise<{ added: boolean; dropped: number }> {
    checkAdd(id, hooks, body, nowMs, guard);
    const argv = [String(nowMs), id, body, guard?.name ?? '', String(guard?.above ?? 0), String(guard?.set ?? 0), ...hooks];
    const reply = await this.#run(ADD, outboxKeys(this.#prefix, queue), argv);
    if (!Array.isArray(reply) || reply.length !== 2) throw new Error('malformed reply from the webhook outbox');
    return { added: toMs(reply[0]) === 1, dropped: toMs(reply[1]) };
  }

  async take(queue: string, nowMs: number, limit: number, leaseMs: number): Promise<OutboxTake> {
    const [box, due] = outboxKeys(this.#prefix, queue);
    const reply = await this.#run(TAKE, [box, due], [String(checkMs(nowMs)), String(limit), String(checkMs(leaseMs))]);
    if (!Array.isArray(reply) || reply.length % 3 !== 1) throw new Error('malformed reply from the webhook outbox');
    const deliveries: OutboxDelivery[] = [];
    for (let i = 1; i < reply.length; i += 3) {
      deliveries.push({ key: String(reply[i]), attempt: toMs(reply[i + 1]), body: String(reply[i + 2]) });
    }
    return { due: deliveries, nextDueMs: toMs(reply[0]) };
  }

  async settle(queue: string, key: string, outcome: 'done' | 'drop' | 'retry', retryAtMs: number): Promise<number> {
    const [box, due] = outboxKeys(this.#prefix, queue);
    return toMs(await this.#run(SETTLE, [box, due], [key, outcome, String(checkMs(retryAtMs))]));
  }

  /** EVALSHA; on NOSCRIPT only, EVAL. */
  async #run(script: OutboxScript, keys: string[], args: string[]): Promise<unknown> {
    try {
      return await this.#redis.evalsha(script.sha1, keys, args);
    } catch (error) {
      if (!/NOSCRIPT/i.test(error instanceof Error ? error.message : String(error))) throw error;
      return await this.#redis.eval(script.text, keys, args);
    }
  }
}

/** The same outbox in this process's memory, step for step as the scripts. */
export class MemoryOutbox implements WebhookOutbox {
  readonly #queues = new Map<string, { bodies: Map<string, string>; attempts: Map<string, number>; guards: Map<string, number>; due: Map<string, number>; seen: Map<string, number> }>();

  #of(queue: string) {
    let q = this.#queues.get(queue);
    if (q === undefined) {
      q = { bodies: new Map(), attempts: new Map(), guards: new Map(), due: new Map(), seen: new Map() };
      this.#queues.set(queue, q);
    }
    return q;
  }

  /** Keys by due, then by key (a ZSET's order). */
  static #sorted(due: Map<string, number>): [string, number][] {
    return [...due].sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0));
  }

  #next(due: Map<string, number>): number {
    return MemoryOutbox.#sorted(due)[0]?.[1] ?? 0;
  }

  async add(queue: string, id: string, hooks: readonly string[], body: string, nowMs: number, guard?: OutboxGuard): Promise<{ added: boolean; dropped: number }> {
    checkAdd(id, hooks, body, nowMs, guard);
    const q = this.#of(queue);
    if (q.seen.has(id)) return { added: false, dropped: 0 };
    if (guard !== undefined) {
      if ((q.guards.get(guard.name) ?? -1) >= guard.above) return { added: false, dropped: 0 };
      q.guards.set(guard.name, guard.set);
    }
    q.seen.set(id, nowMs);
    if (q.seen.size > OUTBOX_SEEN) {
      for (const [old] of MemoryOutbox.#sorted(q.seen).slice(0, q.seen.size - OUTBOX_SEEN)) q.seen.delete(old);
    }
    if (hooks.length === 0) return { added: true, dropped: 0 };
    for (const hook of hooks) {
      const key = `${id}|${hook}`;
      q.bodies.set(key, body);
      q.due.set(key, nowMs);
    }
    const over = q.due.size - OUTBOX_MAX;
    if (over <= 0) return { added: true, dropped: 0 };
    for (const [key] of MemoryOutbox.#sorted(q.due).slice(0, over)) {
      q.bodies.delete(key);
      q.attempts.delete(key);
      q.due.delete(key);
    }
    return { added: true, dropped: over };
  }

  async take(queue: string, nowMs: number, limit: number, leaseMs: number): Promise<OutboxTake> {
    checkMs(nowMs);
    checkMs(leaseMs);
    const q = this.#of(queue);
    const deliveries: OutboxDelivery[] = [];
    for (const [key] of MemoryOutbox.#sorted(q.due).filter(([, at]) => at <= nowMs).slice(0, limit)) {
      const body = q.bodies.get(key);
      if (body === undefined) {
        q.due.delete(key);
        continue;
      }
      q.due.set(key, nowMs + leaseMs);
      const attempt = (q.attempts.get(key) ?? 0) + 1;
      q.attempts.set(key, attempt);
      deliveries.push({ key, attempt, body });
    }
    return { due: deliveries, nextDueMs: this.#next(q.due) };
  }

  async settle(queue: string, key: string, outcome: 'done' | 'drop' | 'retry', retryAtMs: number): Promise<number> {
    checkMs(retryAtMs);
    const q = this.#of(queue);
    if (outcome === 'retry') {
      if (q.bodies.has(key)) q.due.set(key, retryAtMs);
    } else {
      q.bodies.delete(key);
      q.attempts.delete(key);
      q.due.delete(key);
    }
    return this.#next(q.due);
  }
}
