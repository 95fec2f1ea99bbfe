/**
 * QueueStore over Upstash Redis (REST). Each call is one EVALSHA of a pinned script: one round trip
 * and atomic in Redis. Only on NOSCRIPT (the script cache was flushed, or a fresh database) does a
 * call take a second request, an EVAL that also re-caches the script.
 *
 * Depends on nothing but `evalsha` and `eval` of an `@upstash/redis` client, imported as a type only,
 * so the same class works with the Node client and with `@upstash/redis/fastly`.
 *
 * No timeout here: the caller races each store call against its own deadline (the Fastly engine has
 * no AbortController, and the client turns an aborted static signal into a fake `"Aborted"` result,
 * which the reply parser below would reject anyway).
 */

import type { Redis } from '@upstash/redis';
import type { AdmitResult, AutoAdmission, JoinResult, QueueState, QueueStore } from '../core/ports';
import {
  ADMIT,
  DEFAULT_KEY_PREFIX,
  JOIN,
  PEEK,
  POLL,
  assertAdmitCount,
  assertKeyPrefix,
  buildQueueKeys,
  checkAuto,
  type StoreScript,
} from './scripts';

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

  constructor(options: UpstashQueueStoreOptions) {
    if (options?.redis === undefined || options.redis === null) {
      throw new TypeError('UpstashQueueStore: options.redis is required');
    }
    const prefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
    assertKeyPrefix(prefix);
    this.#redis = options.redis;
    this.#prefix = prefix;
  }

  async join(queue: string, nowMs: number, auto: AutoAdmission): Promise<JoinResult> {
    const keys = buildQueueKeys(this.#prefix, queue);
    const a = checkAuto(nowMs, auto);
    const reply = await this.#run(JOIN, [keys.tail, keys.cursor, keys.period], autoArgs(a));
    const [tail, cursor] = parseIntegers(JOIN, reply, 2);
    return { ticket: tail, tail, cursor };
  }

  async poll(queue: string, nowMs: number, auto: AutoAdmission): Promise<QueueState> {
    const keys = buildQueueKeys(this.#prefix, queue);
    const a = checkAuto(nowMs, auto);
    const reply = await this.#run(POLL, [keys.tail, keys.cursor, keys.period], autoArgs(a));
    const [tail, cursor] = parseIntegers(POLL, reply, 2);
    return { tail, cursor };
  }

  async admit(queue: string, count: number): Promise<AdmitResult> {
    const keys = buildQueueKeys(this.#prefix, queue);
    assertAdmitCount(count);
    const reply = await this.#run(ADMIT, [keys.tail, keys.cursor], [String(count)]);
    const [tail, cursor, admitted] = parseIntegers(ADMIT, reply, 3);
    return { tail, cursor, admitted };
  }

  async peek(queue: string): Promise<QueueState> {
    const keys = buildQueueKeys(this.#prefix, queue);
    const reply = await this.#run(PEEK, [keys.tail, keys.cursor], []);
    const [tail, cursor] = parseIntegers(PEEK, reply, 2);
    return { tail, cursor };
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

/** ARGV as strings, so no JSON number formatting (exponents, fractions) reaches Lua. */
function autoArgs(a: { nowMs: number; count: number; periodMs: number }): string[] {
  return [String(a.nowMs), String(a.count), String(a.periodMs)];
}

function isNoScript(error: unknown): boolean {
  const message = error instanceof Error ? error.message : typeof error === 'string' ? error : '';
  return message.includes('NOSCRIPT');
}

/**
 * Integers may arrive as JSON numbers or, depending on client options and bridges, as numeric
 * strings; anything else (null, "Aborted", floats, negatives, the wrong length) is an error.
 */
function parseIntegers(script: StoreScript, reply: unknown, length: 2): [number, number];
function parseIntegers(script: StoreScript, reply: unknown, length: 3): [number, number, number];
function parseIntegers(script: StoreScript, reply: unknown, length: number): number[] {
  if (!Array.isArray(reply) || reply.length !== length) throw new StoreReplyError(script.name, reply);
  return reply.map((item: unknown) => {
    const n = typeof item === 'number' ? item : typeof item === 'string' && /^\d{1,16}$/.test(item) ? Number(item) : NaN;
    if (!Number.isSafeInteger(n) || n < 0) throw new StoreReplyError(script.name, reply);
    return n;
  });
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
