/**
 * A local stand-in for the Upstash REST API over a real Redis, so the code that runs on Fastly
 * with `@upstash/redis` runs unchanged in the Node host and in tests.
 *
 * Speaks what the client speaks (https://upstash.com/docs/redis/features/restapi): `POST /`,
 * `POST /pipeline`, `POST /multi-exec`, a bearer token on every endpoint, `Upstash-Encoding: base64`
 * and the `upstash-sync-token` header. It also smooths over where Upstash differs from Redis 7:
 * Redis rejects Upstash's `allow-key-locking` script flag, so scripts are rewritten on the way in
 * while the client keeps seeing the SHA-1 of the text it sent.
 *
 * All requests share one Redis connection, as Upstash's REST API is stateless: commands that
 * would change that connection's state (SELECT, MULTI, SUBSCRIBE, blocking pops…) are refused.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis, ReplyError } from 'ioredis';
import { adaptScript } from '../store/script-flags';

// Kept importable from here, where the bridge's tests and users have always found it.
export { adaptScript };

export interface UpstashBridgeOptions {
  /** The Redis to forward to, e.g. `redis://127.0.0.1:6379`. */
  redisUrl: string;
  /** The bearer token clients must present on every request. */
  token: string;
  /** Port to listen on; 0 picks a free one. @default 0 */
  port?: number;
  /** Interface to listen on. @default '127.0.0.1' */
  host?: string;
}

export interface UpstashBridge {
  /** Base URL to give `new Redis({ url })`, e.g. `http://127.0.0.1:8079`. */
  url: string;
  port: number;
  /** Stops accepting requests, drops open connections and disconnects from Redis. */
  close(): Promise<void>;
}

/** Upstash's own default request limit is far above what this project sends; this only stops runaway bodies. */
const MAX_BODY_BYTES = 10 * 1024 * 1024;

/**
 * Commands that would change the state of the one shared connection, or stall it for every other
 * request. Upstash's REST API has no connection to hold such state either.
 */
const REFUSED_COMMANDS = new Set([
  'AUTH', 'HELLO', 'SELECT', 'QUIT', 'RESET', 'CLIENT', 'MONITOR',
  'MULTI', 'EXEC', 'DISCARD', 'WATCH', 'UNWATCH',
  'SUBSCRIBE', 'PSUBSCRIBE', 'SSUBSCRIBE', 'UNSUBSCRIBE', 'PUNSUBSCRIBE', 'SUNSUBSCRIBE',
  'BLPOP', 'BRPOP', 'BRPOPLPUSH', 'BLMOVE', 'BLMPOP', 'BZPOPMIN', 'BZPOPMAX', 'BZMPOP', 'WAIT',
]);

/**
 * Single commands that leave the sync token as it is. Anything else moves it: a token that moves
 * more often than needed costs nothing, since the client only echoes it back.
 */
const READ_ONLY_COMMANDS = new Set([
  'GET', 'MGET', 'GETRANGE', 'STRLEN', 'EXISTS', 'TYPE', 'TTL', 'PTTL', 'EXPIRETIME', 'PEXPIRETIME',
  'HGET', 'HMGET', 'HGETALL', 'HKEYS', 'HVALS', 'HLEN', 'HEXISTS', 'HSTRLEN',
  'LRANGE', 'LLEN', 'LINDEX', 'SMEMBERS', 'SISMEMBER', 'SMISMEMBER', 'SCARD',
  'ZRANGE', 'ZRANGEBYSCORE', 'ZREVRANGE', 'ZSCORE', 'ZMSCORE', 'ZCARD', 'ZCOUNT', 'ZRANK', 'ZREVRANK',
  'KEYS', 'SCAN', 'HSCAN', 'SSCAN', 'ZSCAN', 'DBSIZE', 'PING', 'ECHO', 'TIME', 'INFO',
]);

const OK = Buffer.from('OK');

/** A failure of the HTTP request itself, as opposed to an error Redis answered. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A command as it goes to Redis, and how to turn Redis's reply back into what the client expects. */
interface Prepared {
  argv: [string, ...string[]];
  fixReply?: (reply: unknown) => unknown;
  /** Sent just before, outside any transaction, with its reply ignored. */
  before?: [string, ...string[]];
}

type Outcome = { result: unknown } | { error: string };

export async function startUpstashBridge(options: UpstashBridgeOptions): Promise<UpstashBridge> {
  if (!options.token) throw new Error('startUpstashBridge: token must not be empty');
  const host = options.host ?? '127.0.0.1';

  const redis = new Redis(options.redisUrl, {
    lazyConnect: true,
    // Fail the HTTP request soon while Redis is down rather than hold it: the client owns retries.
    maxRetriesPerRequest: 1,
  });
  // Connection trouble reaches each affected request as a 500; without a listener ioredis would
  // also print every reconnect attempt.
  redis.on('error', () => {});
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    throw new Error(`startUpstashBridge: cannot reach Redis at ${options.redisUrl}: ${messageOf(error)}`);
  }

  const scripts = new ScriptShas();
  const expectedDigest = digest(options.token);
  let syncToken = 0;

  /** Runs one prepared command; a Redis error is an outcome, anything else (connection) throws. */
  async function run(prepared: Prepared): Promise<Outcome> {
    if (prepared.before) redis.callBuffer(...prepared.before).catch(() => {});
    try {
      const reply = await redis.callBuffer(...prepared.argv);
      return { result: prepared.fixReply ? prepared.fixReply(reply) : reply };
    } catch (error) {
      if (isReplyError(error)) return { error: error.message };
      throw error;
    }
  }

  async function runTransaction(batch: Prepared[]): Promise<Outcome[]> {
    const refused = batch.map((p) => refusal(p.argv[0])).find((r) => r !== undefined);
    // Upstash discards the whole transaction, with one error, when a command is unsupported.
    if (refused) throw new HttpError(400, refused);
    for (const p of batch) if (p.before) redis.callBuffer(...p.before).catch(() => {});
    const tx = redis.multi();
    for (const p of batch) tx.callBuffer(...p.argv);
    let replies: [Error | null, unknown][] | null;
    try {
      replies = await tx.exec();
    } catch (error) {
      // EXECABORT: a command failed to queue (unknown command, wrong arity). Like Upstash, the
      // transaction is discarded as a whole; the queueing error says more than EXECABORT.
      if (isReplyError(error)) {
        throw new HttpError(400, error.previousErrors?.[0]?.message ?? error.message);
      }
      throw error;
    }
    if (!replies) throw new HttpError(500, 'transaction aborted');
    return replies.map(([error, reply], i): Outcome => {
      if (error) return { error: error.message };
      const fix = batch[i]?.fixReply;
      return { result: fix ? fix(reply) : reply };
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!isAuthorized(req.headers.authorization, expectedDigest)) throw new HttpError(401, 'Unauthorized');
    const path = new URL(req.url ?? '/', 'http://bridge').pathname;
    if (path !== '/' && path !== '/pipeline' && path !== '/multi-exec') {
      throw new HttpError(404, `unknown endpoint ${path}: use POST /, /pipeline or /multi-exec`);
    }
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      throw new HttpError(405, `method ${req.method ?? ''} not allowed: use POST`);
    }
    const body = await readJsonBody(req);
    const base64 = String(req.headers['upstash-encoding'] ?? '').toLowerCase() === 'base64';

    if (path === '/') {
      const prepared = prepare(parseCommand(body), scripts);
      const refused = refusal(prepared.argv[0]);
      if (refused) throw new HttpError(400, refused);
      const outcome = await run(prepared);
      if (!READ_ONLY_COMMANDS.has(prepared.argv[0])) syncToken++;
      if ('error' in outcome) throw new HttpError(400, outcome.error);
      return send(res, 200, { result: toJson(outcome.result, base64) });
    }

    if (!Array.isArray(body) || body.length === 0) {
      throw new HttpError(400, `${path} takes a non-empty JSON array of commands`);
    }
    const batch = body.map((command) => prepare(parseCommand(command), scripts));
    let outcomes: Outcome[];
    if (path === '/pipeline') {
      // run() hands each command to ioredis before its first await, so they go out back to back,
      // in order, on one connection: Redis runs them in order, as Upstash does.
      outcomes = await Promise.all(
        batch.map((p) => {
          const refused = refusal(p.argv[0]);
          return refused ? { error: refused } : run(p);
        }),
      );
    } else {
      outcomes = await runTransaction(batch);
    }
    syncToken++;
    return send(
      res,
      200,
      outcomes.map((o) => ('error' in o ? o : { result: toJson(o.result, base64) })),
    );
  }

  // The token is read as the response is written, so it already counts this request's own writes.
  const send = (res: ServerResponse, status: number, payload: unknown): void => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const text = JSON.stringify(payload);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'upstash-sync-token': String(syncToken),
    });
    res.end(text);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (error instanceof HttpError) return send(res, error.status, { error: error.message });
      // Not an answer from Redis: the connection is down, or this is a bug in the bridge.
      send(res, 500, { error: `bridge failed: ${messageOf(error)}` });
    });
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    redis.disconnect();
    throw error;
  }
  const { port } = server.address() as AddressInfo;
  const urlHost = host.includes(':') ? `[${host}]` : host;

  let closing: Promise<void> | undefined;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    close() {
      closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          // The client keeps connections alive; without this, close() waits for them to time out.
          server.closeAllConnections();
        });
        await redis.quit().catch(() => redis.disconnect());
      })();
      return closing;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Requests

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Compares digests, not the tokens, so neither the content nor the length leaks through timing. */
function isAuthorized(header: string | undefined, expectedDigest: Buffer): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  // Still hash something, so a missing header costs the same as a wrong one.
  return timingSafeEqual(digest(match?.[1] ?? ''), expectedDigest) && match !== null;
}

async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'request body is not valid JSON');
  }
}

/**
 * Arguments keep their JSON types (`["set","k","v","ex",30]`); Redis only takes strings.
 * Booleans are accepted because the client passes `set(k, true)` through as JSON `true`.
 */
function parseCommand(value: unknown): [string, ...string[]] {
  if (!Array.isArray(value) || value.length === 0 || typeof value[0] !== 'string' || value[0] === '') {
    throw new HttpError(400, 'a command is a JSON array starting with the command name, e.g. ["get","key"]');
  }
  const argv = value.map((arg: unknown, i) => {
    if (typeof arg === 'string') return arg;
    if ((typeof arg === 'number' && Number.isFinite(arg)) || typeof arg === 'boolean') return String(arg);
    const kind = arg === null ? 'null' : Array.isArray(arg) ? 'an array' : typeof arg;
    throw new HttpError(400, `argument ${i} of ${String(value[0])} is ${kind}; only strings and numbers are allowed`);
  });
  return [argv[0]!.toUpperCase(), ...argv.slice(1)];
}

function refusal(name: string): string | undefined {
  return REFUSED_COMMANDS.has(name) ? `ERR ${name} is not supported over the REST API` : undefined;
}

/**
 * Results as Upstash writes them: integers as numbers, nil as null, and strings as UTF-8 text or,
 * under `Upstash-Encoding: base64`, as base64 of the raw bytes, except the "OK" status, which
 * Upstash leaves as it is (the client decodes both forms alike).
 */
function toJson(reply: unknown, base64: boolean): unknown {
  if (Buffer.isBuffer(reply)) {
    if (!base64) return reply.toString('utf8');
    return reply.equals(OK) ? 'OK' : reply.toString('base64');
  }
  if (Array.isArray(reply)) return reply.map((item) => toJson(item, base64));
  // An error nested in an array reply (a script returning one in a table) has no JSON form of its own.
  if (reply instanceof Error) return reply.message;
  if (typeof reply === 'string') return base64 ? Buffer.from(reply).toString('base64') : reply;
  return reply ?? null;
}

/** An error Redis answered, as opposed to a connection failure. ioredis types ReplyError as `any`. */
function isReplyError(error: unknown): error is Error & { previousErrors?: Error[] } {
  return error instanceof (ReplyError as new () => Error);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

// ---------------------------------------------------------------------------------------------
// Scripts

function sha1(text: string): string {
  return createHash('sha1').update(text, 'utf8').digest('hex');
}

/**
 * The client knows a script by the SHA-1 of the text it sent; Redis knows the adapted text by
 * another. This maps the one to the other. Entries never go stale (the mapping is a pure function
 * of the text), and an unknown SHA-1 passes through so Redis answers NOSCRIPT, which is what
 * triggers the client's EVAL fallback.
 */
class ScriptShas {
  private readonly redisSha = new Map<string, string>();
  private readonly redisShaReadOnly = new Map<string, string>();

  /** Returns the text to hand Redis, remembering the SHA-1s. */
  adapt(script: string, readOnly: boolean): string {
    const adapted = adaptScript(script, readOnly);
    if (adapted !== script) (readOnly ? this.redisShaReadOnly : this.redisSha).set(sha1(script), sha1(adapted));
    return adapted;
  }

  lookup(sha: string, readOnly: boolean): string {
    const key = sha.toLowerCase();
    return (readOnly ? this.redisShaReadOnly : this.redisSha).get(key) ?? sha;
  }

  /** For SCRIPT EXISTS: a script counts as loaded if either form of it is. */
  lookupAny(sha: string): string {
    const key = sha.toLowerCase();
    return this.redisSha.get(key) ?? this.redisShaReadOnly.get(key) ?? sha;
  }
}

function prepare(argv: [string, ...string[]], scripts: ScriptShas): Prepared {
  const [name, first, ...rest] = argv;
  if (first === undefined) return { argv };
  switch (name) {
    case 'EVAL':
    case 'EVAL_RO':
      return { argv: [name, scripts.adapt(first, name === 'EVAL_RO'), ...rest] };
    case 'EVALSHA':
    case 'EVALSHA_RO':
      return { argv: [name, scripts.lookup(first, name === 'EVALSHA_RO'), ...rest] };
    case 'SCRIPT': {
      const sub = first.toUpperCase();
      const [script] = rest;
      if (sub === 'LOAD' && script !== undefined && rest.length === 1) {
        const adapted = scripts.adapt(script, false);
        const readOnly = scripts.adapt(script, true);
        const clientSha = Buffer.from(sha1(script));
        return {
          argv: [name, first, adapted],
          fixReply: () => clientSha,
          // Loading the read-only form too lets a later EVALSHA_RO of the same SHA-1 succeed.
          ...(readOnly !== adapted ? { before: ['SCRIPT', 'LOAD', readOnly] } : {}),
        };
      }
      if (sub === 'EXISTS') return { argv: [name, first, ...rest.map((sha) => scripts.lookupAny(sha))] };
      return { argv };
    }
    default:
      return { argv };
  }
}
