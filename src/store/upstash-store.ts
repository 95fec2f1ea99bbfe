/**
 * QueueStore over Upstash Redis (REST). Each call is one EVALSHA of a pinned script: one round trip
 * and atomic in Redis. Only on NOSCRIPT (the script cache was flushed, or a fresh database) does a
 * call take a second request, an EVAL that also re-caches the script.
 *
 * Depends on nothing but `evalsha` and `eval` of an `@upstash/redis` client, imported as a type only,
 * so the same class works with the Node client and with `@upstash/redis/fastly`.
 *
 * Timeouts: the caller races each store call against its own deadline (src/core/store-call.ts).
 * That race alone does not end the request: on Node, `createNodeUpstashOptions` (src/platform/node.ts)
 * gives the client a signal that aborts each request at the same deadline, so no request outlives
 * its timeout and sockets do not pile up behind a hanging store. The Fastly engine has no
 * AbortController: there the `upstash` backend's own timeouts bound a request (see docs/architecture.md,
 * "Store timeouts"). A request aborted after it reached the store may still have been applied:
 * operator actions are idempotent for that reason (admit keys, reset's expected epoch).
 */

import type { Redis } from '@upstash/redis';
import type {
  AdmissionPolicy,
  AuditAppended,
  AuditMerge,
  AdmitResult,
  ClaimResult,
  DrawResult,
  HistoryPoint,
  RecordPoint,
  JoinOptions,
  JoinResult,
  QueuePeek,
  QueueState,
  QueueStats,
  QueueStore,
  ResetResult,
  RuntimeControl,
  StatsOptions,
  TicketRange,
  VipCode,
  VipUse,
} from '../core/ports';
import {
  ADMIT,
  CLAIM,
  CONTROL,
  AUDIT_APPEND,
  AUDIT_READ,
  auditKey,
  auditMergeKey,
  checkAuditEntry,
  checkAuditMerge,
  checkAuditLimit,
  CREATE_VIP,
  DEFAULT_KEY_PREFIX,
  DRAW,
  DRAW_OUTCOMES,
  HISTORY,
  RECORD,
  parseRecordPoint,
  parseTotals,
  tallyArg,
  blockArgv,
  checkRecordSpan,
  JOIN,
  LEAVE,
  PEEK,
  POLL,
  RESET,
  STATE_LENGTH,
  STATE_HOLES_INDEX,
  STATS,
  TOUCH,
  USE_VIP,
  VIP_MAX_USES,
  VIP_REFUSALS,
  assertAdmitCount,
  assertKeyPrefix,
  averageWaitSeconds,
  buildQueueKeys,
  checkControl,
  checkGraceMs,
  checkNowMs,
  checkPolicy,
  checkFloor,
  checkJoinKey,
  checkRecoverMs,
  checkTicket,
  checkUntilMs,
  checkVipBatch,
  checkVipCode,
  checkWaitedMs,
  controlArgv,
  generationArg,
  checkIdempotencyKey,
  policyArgv,
  policyKeys,
  restoreArgv,
  checkAdaptive,
  vipCreateArgv,
  vipKey,
  type StoreScript,
} from './scripts';
import { parseAdaptiveStatus } from './adaptive';
import { ScriptOutbox } from './outbox';

/** The narrow slice of the client this store needs. */
export type UpstashScriptClient = Pick<Redis, 'evalsha' | 'eval'>;

export interface UpstashQueueStoreOptions {
  /** A client built with `createUpstashClientOptions` (Node) or the same options plus `backend` (Fastly). */
  readonly redis: UpstashScriptClient;
  /**
   * First segment of every key, so several deployments or test runs can share one database.
   * @default "wr"
   */
  readonly keyPrefix?: string;
}

/** The store answered something other than the integers a script returns. */
export class StoreReplyError extends Error {
  readonly code = 'ERR_STORE_REPLY';
  constructor(
    readonly script: string,
    readonly reply: unknown,
  ) {
    super(`malformed reply from the ${script} script: ${describe(reply)}`);
    this.name = 'StoreReplyError';
  }
}

export class UpstashQueueStore implements QueueStore {
  readonly #redis: UpstashScriptClient;
  readonly #prefix: string;
  /** The webhook outbox, through the same client and under the same prefix. */
  readonly outbox: ScriptOutbox;

  constructor(options: UpstashQueueStoreOptions) {
    if (options?.redis === undefined || options.redis === null) {
      throw new TypeError('UpstashQueueStore: options.redis is required');
    }
    const prefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
    assertKeyPrefix(prefix);
    this.#redis = options.redis;
    this.#prefix = prefix;
    this.outbox = new ScriptOutbox(options.redis, prefix);
  }

  async join(queue: string, nowMs: number, policy: AdmissionPolicy, options: JoinOptions = {}): Promise<JoinResult> {
    const keys = this.#keys(queue);
    const recover = checkRecoverMs(options.recoverMs);
    const f = checkFloor(options.floor);
    const checked = checkPolicy(nowMs, policy);
    const argv = [
      ...policyArgv(checked),
      recover === 0 ? '' : String(recover),
      options.recoverIfNew === true ? 'new' : '',
      f === undefined ? '' : String(f.tail),
      f === undefined ? '' : String(f.generation),
      checkJoinKey(options.joinKey),
      checkAdaptive(policy.adaptive),
      tallyArg(policy.tally),
      ...blockArgv(options.block),
      ...restoreArgv(checked),
    ];
    // A block join's reply has its last number after the rest; an ordinary join's is as before blocks.
    const raw = await this.#run(JOIN, keys, argv);
    const blockTaken = options.block !== undefined && Array.isArray(raw) && raw.length === STATE_LENGTH + 4;
    const reply = parseStateReply(JOIN, raw, STATE_LENGTH + (blockTaken ? 4 : 3));
    const state = toState(JOIN, reply);
    const ticket = reply.int(STATE_LENGTH);
    const replayed = reply.flag(STATE_LENGTH + 2);
    const last = blockTaken ? reply.int(STATE_LENGTH + 3) : 0;
    // A new ticket is the tail the same script just incremented (a block's first number, its last
    // the tail); a replayed one is at most the tail; switched open, none (0), neither claimed nor replayed.
    const open = state.switch === 'open' && ticket === 0 && !replayed && !reply.flag(STATE_LENGTH + 1);
    const top = last === 0 ? ticket : last;
    if (!open && (ticket < 1 || (blockTaken && last <= ticket) || (replayed ? top > state.tail : top !== state.tail))) throw new StoreReplyError(JOIN.name, reply.raw);
    return { ...state, ticket, claimed: reply.flag(STATE_LENGTH + 1), replayed, ...(last > 0 && { block: { from: ticket, to: last } }) };
  }

  async poll(queue: string, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    const keys = this.#keys(queue);
    const checked = checkPolicy(nowMs, policy);
    const argv = [...policyArgv(checked), checkAdaptive(policy.adaptive), ...restoreArgv(checked)];
    return toState(POLL, parseStateReply(POLL, await this.#run(POLL, keys, argv), STATE_LENGTH));
  }

  async claim(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<ClaimResult> {
    const keys = this.#keys(queue);
    const checked = checkPolicy(nowMs, policy);
    const argv = [...policyArgv(checked), String(checkTicket(ticket)), String(checkWaitedMs(waitedMs)), generationArg(generation), ...restoreArgv(checked)];
    const reply = parseStateReply(CLAIM, await this.#run(CLAIM, keys, argv), STATE_LENGTH + 1);
    return { ...toState(CLAIM, reply), claimed: reply.flag(STATE_LENGTH) };
  }

  async touch(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, untilMs: number, generation?: number): Promise<boolean> {
    const keys = this.#keys(queue);
    const checked = checkPolicy(nowMs, policy);
    const argv = [...policyArgv(checked), String(checkTicket(ticket)), String(checkUntilMs(untilMs)), generationArg(generation), ...restoreArgv(checked)];
    return parseReply(TOUCH, await this.#run(TOUCH, keys, argv), 1).flag(0);
  }

  async leave(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, graceMs: number, generation?: number): Promise<boolean> {
    const keys = this.#keys(queue);
    const checked = checkPolicy(nowMs, policy);
    const argv = [...policyArgv(checked), String(checkTicket(ticket)), String(checkGraceMs(graceMs)), generationArg(generation), ...restoreArgv(checked)];
    return parseReply(LEAVE, await this.#run(LEAVE, keys, argv), 1).flag(0);
  }

  async admit(queue: string, count: number, nowMs: number, policy: AdmissionPolicy, idempotencyKey?: string): Promise<AdmitResult> {
    const keys = this.#keys(queue);
    const key = idempotencyKey === undefined ? '' : checkIdempotencyKey(idempotencyKey);
    const checked = checkPolicy(nowMs, policy);
    assertAdmitCount(count, idempotencyKey !== undefined);
    const reply = parseStateReply(ADMIT, await this.#run(ADMIT, keys, [...policyArgv(checked), String(count), key, ...restoreArgv(checked)]), STATE_LENGTH + 3);
    return { ...toState(ADMIT, reply), admitted: reply.int(STATE_LENGTH), replayed: reply.flag(STATE_LENGTH + 1), asked: reply.int(STATE_LENGTH + 2) };
  }

  async control(queue: string, change: RuntimeControl, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    const keys = this.#keys(queue);
    const checked = checkPolicy(nowMs, policy);
    const argv = [...policyArgv(checked), ...controlArgv(checkControl(change)), ...restoreArgv(checked)];
    const reply = parseStateReply(CONTROL, await this.#run(CONTROL, keys, argv), STATE_LENGTH + 1);
    return { ...toState(CONTROL, reply), admitPerPeriod: reply.int(STATE_LENGTH) };
  }

  async stats(queue: string, nowMs: number, policy: AdmissionPolicy, options?: StatsOptions): Promise<QueueStats> {
    const keys = this.#keys(queue);
    const withHistory = options?.history === true;
    const argv = [...policyArgv(checkPolicy(nowMs, policy)), withHistory ? '1' : ''];
    const raw = await this.#run(STATS, keys, argv);
    // The figures, the controller's fields, then (asked for) the history members: one script run
    // for the admin panel.
    const figures = Array.isArray(raw) ? raw.slice(0, STATE_LENGTH + 3) : raw;
    const reply = parseStateReply(STATS, figures, STATE_LENGTH + 3);
    const controller = Array.isArray(raw) ? raw[STATE_LENGTH + 3] : undefined;
    const restored = Array.isArray(raw) ? raw[STATE_LENGTH + 4] : undefined;
    const quota: unknown = Array.isArray(raw) ? raw[STATE_LENGTH + 5] : undefined;
    const totalsText: unknown = Array.isArray(raw) ? raw[STATE_LENGTH + 6] : undefined;
    if (typeof controller !== 'string' || typeof restored !== 'string' || typeof totalsText !== 'string') throw new StoreReplyError(STATS.name, raw);
    const totals = parseTotals(totalsText);
    if (totals === undefined) throw new StoreReplyError(STATS.name, raw);
    const admitPerPeriod = typeof quota === 'number' ? quota : typeof quota === 'string' && /^\d{1,16}$/.test(quota) ? Number(quota) : NaN;
    if (!Number.isSafeInteger(admitPerPeriod) || admitPerPeriod < 0) throw new StoreReplyError(STATS.name, raw);
    const adaptive = parseAdaptiveStatus(controller);
    const lostState = parseRestored(restored);
    if (lostState === null) throw new StoreReplyError(STATS.name, raw);
    return {
      ...toState(STATS, reply),
      reserved: reply.int(STATE_LENGTH),
      avgWaitSeconds: averageWaitSeconds(reply.int(STATE_LENGTH + 1), reply.int(STATE_LENGTH + 2)),
      ...(adaptive !== undefined ? { adaptive } : {}),
      ...(lostState !== undefined ? { lostState } : {}),
      admitPerPeriod,
      totals,
      ...(withHistory ? { history: parseHistory((raw as unknown[]).slice(STATE_LENGTH + 7)) } : {}),
    };
  }

  async draw(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<DrawResult> {
    const keys = this.#keys(queue);
    const checked = checkPolicy(nowMs, policy);
    const argv = [...policyArgv(checked), String(checkTicket(ticket)), String(checkWaitedMs(waitedMs)), generationArg(generation), ...restoreArgv(checked)];
    const reply = parseStateReply(DRAW, await this.#run(DRAW, keys, argv), STATE_LENGTH + 2);
    const outcome = DRAW_OUTCOMES[reply.int(STATE_LENGTH) as keyof typeof DRAW_OUTCOMES];
    const claimed = reply.flag(STATE_LENGTH + 1);
    // Only a drawn ticket holds a slot.
    if (outcome === undefined || (claimed && outcome !== 'drawn')) throw new StoreReplyError(DRAW.name, reply.raw);
    return { ...toState(DRAW, reply), outcome, claimed };
  }

  async history(queue: string, nowMs: number): Promise<readonly HistoryPoint[]> {
    const key = buildQueueKeys(this.#prefix, queue).ctl;
    const reply = await this.#run(HISTORY, [key], [String(checkNowMs(nowMs))]);
    return parseHistory(reply);
  }

  async record(queue: string, nowMs: number, fromMs: number, minutes: number): Promise<readonly RecordPoint[]> {
    const key = buildQueueKeys(this.#prefix, queue).ctl;
    const [from, count] = checkRecordSpan(fromMs, minutes);
    const reply = await this.#run(RECORD, [key], [String(checkNowMs(nowMs)), String(from), String(count)]);
    if (!Array.isArray(reply)) throw new StoreReplyError(RECORD.name, reply);
    const points: RecordPoint[] = [];
    for (const member of reply) {
      const point = typeof member === 'string' ? parseRecordPoint(member) : undefined;
      const last = points[points.length - 1];
      if (point === undefined || (last !== undefined && point.atMs <= last.atMs)) throw new StoreReplyError(RECORD.name, reply);
      points.push(point);
    }
    return points;
  }

  async reset(queue: string, nowMs: number, policy: AdmissionPolicy, expectedEpoch?: number): Promise<ResetResult> {
    const keys = this.#keys(queue);
    const checked = checkPolicy(nowMs, policy);
    const argv = [...policyArgv(checked), expectedEpoch === undefined ? '' : String(checkNowMs(expectedEpoch)), ...restoreArgv(checked)];
    const reply = parseStateReply(RESET, await this.#run(RESET, keys, argv), STATE_LENGTH + 1);
    return { ...toState(RESET, reply), applied: reply.flag(STATE_LENGTH) };
  }

  async peek(queue: string): Promise<QueuePeek> {
    const keys = buildQueueKeys(this.#prefix, queue);
    const reply = parseReply(PEEK, await this.#run(PEEK, [keys.ctl], []), 3, 2);
    const peeked = { tail: reply.int(0), cursor: reply.int(1) };
    const holes = holesAbove(PEEK, reply, peeked.cursor);
    return holes.length > 0 ? { ...peeked, holes } : peeked;
  }

  async createVips(queue: string, codeHashes: readonly string[], code: VipCode, nowMs: number): Promise<boolean[]> {
    const keys = checkVipBatch(codeHashes).map((hash) => vipKey(this.#prefix, queue, hash));
    const argv = vipCreateArgv(checkVipCode(code, nowMs));
    const reply = parseReply(CREATE_VIP, await this.#run(CREATE_VIP, keys, argv), keys.length);
    return keys.map((_, i) => reply.flag(i));
  }

  async useVip(queue: string, codeHash: string, nowMs: number): Promise<VipUse> {
    const key = vipKey(this.#prefix, queue, codeHash);
    const argv = [String(checkNowMs(nowMs))];
    const reply = parseReply(USE_VIP, await this.#run(USE_VIP, [key], argv), 2);
    const status = reply.int(0);
    const remaining = reply.int(1);
    if (status === 0) {
      if (remaining >= VIP_MAX_USES) throw new StoreReplyError(USE_VIP.name, reply.raw);
      return { ok: true, remaining };
    }
    const reason = VIP_REFUSALS[status as keyof typeof VIP_REFUSALS];
    if (reason === undefined || remaining !== 0) throw new StoreReplyError(USE_VIP.name, reply.raw);
    return { ok: false, reason };
  }

  async appendAudit(queue: string, entry: string, nowMs: number, merge?: AuditMerge): Promise<AuditAppended> {
    checkNowMs(nowMs);
    const { tag, add } = checkAuditMerge(merge);
    const keys = [auditKey(this.#prefix, queue), auditMergeKey(this.#prefix, queue)];
    const reply = parseReply(AUDIT_APPEND, await this.#run(AUDIT_APPEND, keys, [checkAuditEntry(entry), tag, String(add)]), 2);
    const merged = reply.flag(1);
    const kept = reply.int(0);
    if (merged !== (kept === 0)) throw new StoreReplyError(AUDIT_APPEND.name, reply.raw);
    return { kept, merged };
  }

  async readAudit(queue: string, limit: number, nowMs: number): Promise<readonly string[]> {
    checkNowMs(nowMs);
    const reply = await this.#run(AUDIT_READ, [auditKey(this.#prefix, queue)], [String(checkAuditLimit(limit))]);
    if (!Array.isArray(reply) || reply.length > limit || !reply.every((e) => typeof e === 'string')) throw new StoreReplyError(AUDIT_READ.name, reply);
    return reply as string[];
  }

  #keys(queue: string): string[] {
    return policyKeys(buildQueueKeys(this.#prefix, queue));
  }

  /** EVALSHA; on NOSCRIPT only, EVAL (which also puts the script back in the cache). */
  async #run(script: StoreScript, keys: string[], args: string[]): Promise<unknown> {
    try {
      return await this.#redis.evalsha(script.sha1, keys, args);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return await this.#redis.eval(script.text, keys, args);
    }
  }
}

/**
 * A reply checked to be a flat array of non-negative safe integers of the expected length, but for
 * a holes field (a state's STATE_HOLES_INDEX, a peek's third), a string of ranges.
 */
interface Reply {
  readonly raw: unknown;
  int(index: number): number;
  /** 0 or 1 as a boolean; anything else is a malformed reply. */
  flag(index: number): boolean;
  /** The reply's holes (empty when it has none): ascending, disjoint ranges, or a malformed reply. */
  holes(): TicketRange[];
}

/** A state's holes field: `<from>-<to>` ranges joined by commas, or '' for none. */
const HOLES_TEXT = /^(?:\d{1,16}-\d{1,16}(?:,\d{1,16}-\d{1,16})*)?$/;

/**
 * Integers may arrive as JSON numbers or, depending on client options and bridges, as numeric
 * strings; anything else (null, "Aborted", floats, negatives, the wrong length) is an error.
 */
/** A reply that starts with the state (every policy script's). */
function parseStateReply(script: StoreScript, reply: unknown, length: number): Reply {
  return parseReply(script, reply, length, STATE_HOLES_INDEX);
}

/** `holesAt`: the index of a holes field, if the reply has one. */
function parseReply(script: StoreScript, reply: unknown, length: number, holesAt?: number): Reply {
  if (!Array.isArray(reply) || reply.length !== length) throw new StoreReplyError(script.name, reply);
  const values = reply.map((item: unknown, index) => {
    if (index === holesAt) {
      if (typeof item !== 'string' || !HOLES_TEXT.test(item)) throw new StoreReplyError(script.name, reply);
      return 0;
    }
    const n = typeof item === 'number' ? item : typeof item === 'string' && /^\d{1,16}$/.test(item) ? Number(item) : NaN;
    if (!Number.isSafeInteger(n) || n < 0) throw new StoreReplyError(script.name, reply);
    return n;
  });
  const int = (index: number): number => {
    const n = values[index];
    if (n === undefined) throw new StoreReplyError(script.name, reply);
    return n;
  };
  return {
    raw: reply,
    int,
    flag(index) {
      const n = int(index);
      if (n !== 0 && n !== 1) throw new StoreReplyError(script.name, reply);
      return n === 1;
    },
    holes() {
      const text = holesAt === undefined ? undefined : reply[holesAt];
      if (typeof text !== 'string') throw new StoreReplyError(script.name, reply);
      const ranges: TicketRange[] = [];
      for (const part of text === '' ? [] : text.split(',')) {
        const [from, to] = part.split('-').map(Number) as [number, number];
        const last = ranges[ranges.length - 1];
        if (!Number.isSafeInteger(to) || from < 1 || from > to || (last !== undefined && from <= last.to)) throw new StoreReplyError(script.name, reply);
        ranges.push({ from, to });
      }
      return ranges;
    },
  };
}

/** The state every policy script returns first, in `read_state`'s order. */
/**
 * The stats script's lost-state mark (ctl `restored`, `<ms>:<what,...>`): undefined when the state
 * was never lost, null when the field is not of that shape.
 */
function parseRestored(value: string): QueueStats['lostState'] | null {
  if (value === '') return undefined;
  const match = /^(\d+):((?:open|hold|paused)(?:,(?:open|hold|paused))*)?$/.exec(value);
  if (match === null) return null;
  const restored = match[2] === undefined ? [] : (match[2].split(',') as ('open' | 'hold' | 'paused')[]);
  return { atMs: Number(match[1]), restored };
}

function toState(script: StoreScript, r: Reply): QueueState {
  // The controls' mode: 0 normal, 1 paused by the operator, 2 switched to hold (paused as well), 3
  // switched open, 4 paused by a recovery window alone.
  const mode = r.int(2);
  if (mode < 0 || mode > 4) throw new StoreReplyError(script.name, r.raw);
  const state: QueueState = {
    tail: r.int(0),
    cursor: r.int(1),
    paused: mode === 1 || mode === 2 || mode === 4,
    ...(mode === 2 && { switch: 'hold' as const }),
    ...(mode === 3 && { switch: 'open' as const }),
    ...(mode === 4 && { recovering: true as const }),
    maxActive: r.int(3),
    maxNewPerMinute: r.int(4),
    active: r.int(5),
    admittedLastMinute: r.int(6),
    admittedLast5Minutes: r.int(7),
    eventSize: r.int(8),
    eventSeed: r.int(9),
    waiting: r.int(10),
    epoch: r.int(11),
    generation: r.int(12),
  };
  const holes = holesAbove(script, r, state.cursor);
  return checkFigures(script, r, holes.length > 0 ? { ...state, holes } : state);
}

/** A reply's holes, which the script reports only above the cursor (holes_text): anything else is not what it sends. */
function holesAbove(script: StoreScript, r: Reply, cursor: number): TicketRange[] {
  const holes = r.holes();
  if (holes.length > 0 && holes[0]!.from <= cursor) throw new StoreReplyError(script.name, r.raw);
  return holes;
}

function checkFigures(script: StoreScript, r: Reply, state: QueueState): QueueState {
  // The minute is inside the five minutes: anything else means the reply is not what the script sends.
  if (state.admittedLastMinute > state.admittedLast5Minutes) throw new StoreReplyError(script.name, r.raw);
  return state;
}

/**
 * The history script's members, `<minute>:<tail>:<cursor>:<waiting>:<active>:<admitted_1m>`, in
 * ascending minute order; anything else (a non-array, another shape, minutes out of order or not on
 * a minute boundary) is a malformed reply.
 */
function parseHistory(reply: unknown): HistoryPoint[] {
  if (!Array.isArray(reply)) throw new StoreReplyError(HISTORY.name, reply);
  const points: HistoryPoint[] = [];
  for (const member of reply) {
    // A record point (see parseRecordPoint): the hour's history shows its first six fields.
    const point = typeof member === 'string' ? parseRecordPoint(member) : undefined;
    const last = points[points.length - 1];
    if (point === undefined || (last !== undefined && point.atMs <= last.atMs)) throw new StoreReplyError(HISTORY.name, reply);
    const { atMs, tail, cursor, waiting, active, admittedLastMinute } = point;
    points.push({ atMs, tail, cursor, waiting, active, admittedLastMinute });
  }
  return points;
}

/**
 * Redis's own NOSCRIPT reply, as Upstash relays it: an error whose message starts with the code.
 * Not any text that mentions it (a proxy's error page quoted in a parse error, say): that would
 * send the whole script again to a store that is already failing.
 */
function isNoScript(error: unknown): boolean {
  const message = error instanceof Error ? error.message : typeof error === 'string' ? error : '';
  return message.startsWith('NOSCRIPT');
}

function describe(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 120 ? `${text.slice(0, 120)}…` : text;
}

/**
 * The client options this project uses. Spread them into `new Redis(...)` from `@upstash/redis`
 * (Node) or `@upstash/redis/fastly` (add `backend`).
 *
 * - `retry: { retries: 1, backoff: () => 50 }`: the client retries only when `fetch` itself throws
 *   (connection refused or reset), so one retry covers a stale keep-alive connection while keeping a
 *   store call to at most 2 backend requests (4 with a NOSCRIPT fallback) out of Fastly's 32 per
 *   client request, and at most 50 ms of sleeping. The defaults (5 retries, exponential backoff)
 *   could sleep about 4.3 s. A retried request whose first attempt did reach Redis can burn a ticket
 *   nobody holds; that wastes one admission slot but never lets anyone skip the line.
 * - `enableAutoPipelining: false`: one command is one request to `/`, so NOSCRIPT comes back as a
 *   plain error and the one-request-per-call budget is exact.
 * - `responseEncoding: false`: replies are integer arrays; base64 would only add work.
 * - `automaticDeserialization: false`: the store parses its replies itself, strictly.
 * - `enableTelemetry: false`: no telemetry headers on every request.
 */
export interface UpstashClientOptions {
  readonly url: string;
  readonly token: string;
  readonly enableTelemetry: false;
  readonly enableAutoPipelining: false;
  readonly responseEncoding: false;
  readonly automaticDeserialization: false;
  readonly retry: { readonly retries: number; readonly backoff: (retryCount: number) => number };
}

export function createUpstashClientOptions(options: {
  url: string;
  token: string;
  /** @default 1 */
  retries?: number;
}): UpstashClientOptions {
  const retries = options.retries ?? 1;
  if (!Number.isSafeInteger(retries) || retries < 0 || retries > 3) {
    throw new RangeError(`invalid Upstash retries ${String(retries)}: expected an integer from 0 to 3`);
  }
  if (typeof options.url !== 'string' || !/^https?:\/\//.test(options.url)) {
    throw new RangeError('invalid Upstash URL: expected http(s)://…');
  }
  if (typeof options.token !== 'string' || options.token === '') {
    throw new RangeError('missing Upstash token');
  }

  return {
    url: options.url,
    token: options.token,
    enableTelemetry: false,
    enableAutoPipelining: false,
    responseEncoding: false,
    automaticDeserialization: false,
    retry: { retries, backoff: () => 50 },
  };
}
