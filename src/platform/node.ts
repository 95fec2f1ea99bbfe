/**
 * Node adapter: the origin reached over node:http(s) with both bodies streamed, a stdout logger,
 * the system clock and the local config file. Used by the `npm start` host and the tests.
 */
import { readFileSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { basename, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { Agent, setGlobalDispatcher } from 'undici';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import { CONFIG_KEYS, SECRET_KEYS, unknownNameProblem, type ConfigProblem, type SettingSource } from '../core/config';
import { originTarget } from '../core/http';
import { parseIp, type CidrRange } from '../core/ip';
import type { Clock, Logger, Origin, RequestLog, SiteVerifier, TemplateSource } from '../core/ports';
import { parseRedisUrls, type RedisTarget } from '../store/redis-store';
import { parseTrustedProxies, TRUSTED_PROXIES_ENV } from './trusted-proxies';
import { createUpstashClientOptions, type UpstashClientOptions } from '../store/upstash-store';

/** Headers that describe one hop, not the message; a proxy must not pass them on. */
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** The Node stream behind each lazy web body (see lazyWebBody) that nobody has read from yet. */
const nodeBodies = new WeakMap<ReadableStream<Uint8Array>, Readable>();

/**
 * A web stream over a Node stream that touches it only when first read. A body the core passes on
 * unread (an admitted visitor's request and the origin's answer) is then piped Node to Node by the
 * host (see untouchedNodeBody), without two web-stream conversions per body (measured: the larger
 * part of what the Node host spent per proxied request besides the parsers).
 */
export function lazyWebBody(source: Readable): ReadableStream<Uint8Array> {
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  const stream: ReadableStream<Uint8Array> = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        nodeBodies.delete(stream);
        reader ??= (Readable.toWeb(source) as unknown as ReadableStream<Uint8Array>).getReader();
        const chunk = await reader.read();
        if (chunk.done) controller.close();
        else controller.enqueue(chunk.value);
      },
      async cancel(reason) {
        nodeBodies.delete(stream);
        if (reader !== undefined) await reader.cancel(reason);
        else source.destroy();
      },
    },
    // No read ahead: pull runs only when somebody reads, so an unread body stays the Node stream's.
    { highWaterMark: 0 },
  );
  nodeBodies.set(stream, source);
  return stream;
}

/** The Node stream behind `body` when it is a lazy web body nobody has read: pipe that instead. */
export function untouchedNodeBody(body: ReadableStream<Uint8Array> | null): Readable | undefined {
  if (body === null || body.locked) return undefined;
  return nodeBodies.get(body);
}

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/**
 * The answer the Node host is writing for each request it took (a WeakMap, so nothing is kept):
 * the origin's request listens to it and ends when the visitor goes away first. A map rather than
 * an AbortSignal on the Request: undici's signal following costs 10–20 µs a request.
 */
const answers = new WeakMap<Request, http.ServerResponse>();

export function answerFor(request: Request, res: http.ServerResponse): void {
  answers.set(request, res);
}

/** How long the Node host waits on the origin: Fastly's defaults for a backend. */
export interface OriginTimeouts {
  /** From sending the request to the response's headers (Fastly's `first_byte_timeout`, 15 s). */
  readonly firstByteMs: number;
  /** Between two reads of the response's body (Fastly's `between_bytes_timeout`, 10 s). */
  readonly betweenBytesMs: number;
}

export const DEFAULT_ORIGIN_TIMEOUTS: OriginTimeouts = { firstByteMs: 15_000, betweenBytesMs: 10_000 };

/** The origin timeouts from ORIGIN_FIRST_BYTE_TIMEOUT_MS and ORIGIN_BETWEEN_BYTES_TIMEOUT_MS (1 to 600000 ms each), the defaults where unset. */
export function parseOriginTimeouts(env: Readonly<Record<string, string | undefined>>): { readonly ok: true; readonly timeouts: OriginTimeouts } | { readonly ok: false; readonly problems: readonly string[] } {
  const problems: string[] = [];
  const read = (name: string, fallback: number): number => {
    const text = env[name];
    if (text === undefined || text.trim() === '') return fallback;
    const value = /^[0-9]{1,6}$/.test(text.trim()) ? Number(text.trim()) : Number.NaN;
    if (!(value >= 1 && value <= 600_000)) problems.push(`${name} must be a whole number of milliseconds from 1 to 600000, got ${JSON.stringify(text).slice(0, 40)}`);
    return value;
  };
  const timeouts = {
    firstByteMs: read('ORIGIN_FIRST_BYTE_TIMEOUT_MS', DEFAULT_ORIGIN_TIMEOUTS.firstByteMs),
    betweenBytesMs: read('ORIGIN_BETWEEN_BYTES_TIMEOUT_MS', DEFAULT_ORIGIN_TIMEOUTS.betweenBytesMs),
  };
  return problems.length > 0 ? { ok: false, problems } : { ok: true, timeouts };
}

/**
 * An origin at `baseUrl`. node:http rather than fetch: Node's fetch decodes gzip bodies while
 * keeping `content-encoding`, which would corrupt a pass-through.
 *
 * An origin that stops answering fails the request at `timeouts`: before its headers, the visitor
 * gets the waiting room's "not answering" page (and adaptive admission counts an error); in the
 * body, the visitor's transfer ends. A request whose visitor has gone (its answer closed before
 * it was written, see answerFor) is ended at once, so an origin that hangs does not hold a socket
 * per visitor who gave up.
 */
export function createHttpOrigin(baseUrl: string, options: { readonly agent?: http.Agent; readonly timeouts?: OriginTimeouts } = {}): Origin {
  const { agent, timeouts = DEFAULT_ORIGIN_TIMEOUTS } = options;
  const base = new URL(baseUrl);
  const client = base.protocol === 'https:' ? https : http;
  // Where every request goes: the configured scheme, host and port, fixed here once. The request
  // contributes only its path and query, as a string (see originTarget), never a host.
  const destination = {
    protocol: base.protocol,
    hostname: base.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: base.port === '' ? (base.protocol === 'https:' ? 443 : 80) : Number(base.port),
  };
  return {
    forward(request, replace) {
      const path = originTarget(request.url);
      const headers: Record<string, string | string[]> = {};
      const drop = replace?.drop ?? [];
      request.headers.forEach((value, name) => {
        if (!HOP_BY_HOP.has(name) && name !== 'host' && !drop.includes(name)) headers[name] = value;
      });
      if (replace?.set !== undefined) headers[replace.set.name] = replace.set.value;
      return new Promise<Response>((resolve, reject) => {
        const outgoing = client.request({ ...destination, path, method: request.method, headers, agent }, (res) => {
          // The headers came: from here on, a stall is a gap between two reads of the body.
          outgoing.setTimeout(0);
          res.setTimeout(timeouts.betweenBytesMs, () => res.destroy(new Error(`the origin sent nothing for ${timeouts.betweenBytesMs} ms`)));
          const responseHeaders = new Headers();
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
            const name = res.rawHeaders[i]!.toLowerCase();
            if (!HOP_BY_HOP.has(name)) responseHeaders.append(name, res.rawHeaders[i + 1]!);
          }
          const status = res.statusCode ?? 502;
          const noBody = NULL_BODY_STATUSES.has(status) || request.method === 'HEAD';
          if (noBody) res.resume();
          const body = noBody ? null : lazyWebBody(res);
          resolve(new Response(body, { status, statusText: res.statusMessage ?? '', headers: responseHeaders }));
        });
        outgoing.setTimeout(timeouts.firstByteMs, () => outgoing.destroy(new Error(`no answer from the origin within ${timeouts.firstByteMs} ms`)));
        outgoing.on('error', reject);
        const answer = answers.get(request);
        if (answer !== undefined) {
          const gone = (): void => {
            if (!answer.writableFinished) outgoing.destroy(new Error('the visitor went away'));
          };
          if (answer.closed) gone();
          else answer.once('close', gone);
          outgoing.once('close', () => answer.off('close', gone));
        }
        if (request.body === null) {
          outgoing.end();
        } else {
          const source = untouchedNodeBody(request.body) ?? Readable.fromWeb(request.body as unknown as NodeReadableStream<Uint8Array>);
          source.on('error', (error) => outgoing.destroy(error));
          source.pipe(outgoing);
        }
      });
    },
  };
}

export const systemClock: Clock = { now: () => Date.now() };

export function createStreamLogger(write: (line: string) => void = (line) => process.stdout.write(line)): Logger {
  return { log: (record: RequestLog) => write(`${JSON.stringify(record)}\n`) };
}

/** The Node host's own environment variables (not settings): how `npm start` runs. */
export const HOST_ENV = {
  /**
   * The store: the embedded in-memory one, Upstash at `upstash_url` (e.g. the local bridge), or
   * Redis 7+ itself at REDIS_URL (self-hosting: several Node hosts share one Redis or Redis Cluster).
   */
  WR_STORE: ['memory', 'upstash', 'redis'],
  /** With WR_STORE=redis: REDIS_URL is a Redis Cluster even when it names one node (its configuration endpoint). */
  WR_REDIS_CLUSTER: ['true', 'false'],
  /** A deployment may use a Redis without a password on another machine (a private network the operator vouches for). */
  WR_REDIS_ALLOW_NO_AUTH: ['true', 'false'],
  /** A directory of template overrides, named as the KV Store keys are. */
  WR_TEMPLATES_DIR: undefined,
  /** `npm start`'s demo origin refuses (403) requests without the waiting room's signed admission. */
  WR_DEMO_PROTECTED: ['0', '1'],
  /** `npm start`'s demo origin slows down above this many requests a second, and fails above 1.5 × it (src/node/start.ts checks the value). */
  WR_DEMO_CAPACITY: undefined,
  /**
   * Ports of the local commands (src/node/local-ports.ts, which checks their values): the demo
   * origin (`npm start`, `serve:fastly`), the Upstash bridge and the redis-server `serve:fastly`
   * starts. Known here so that one shell can set them all and still run `npm start`.
   */
  WR_ORIGIN_PORT: undefined,
  WR_BRIDGE_PORT: undefined,
  WR_REDIS_PORT: undefined,
} as const satisfies Record<string, readonly string[] | undefined>;

export interface HostOptions {
  readonly store: 'memory' | 'upstash' | 'redis';
  /** With store `redis`: where (REDIS_URL, WR_REDIS_CLUSTER); undefined otherwise or when REDIS_URL is not valid. */
  readonly redis: RedisTarget | undefined;
  /**
   * With store `redis` and `store_shards` above 1: the second and later databases (REDIS_SHARD_URLS,
   * one Redis each, in order); empty otherwise.
   */
  readonly redisShards: readonly RedisTarget[];
  readonly templatesDir: string | undefined;
  /** The address the waiting room listens on (HOST): 127.0.0.1 unless set. */
  readonly bind: string;
  /**
   * The proxies in front whose X-Forwarded-For is believed (TRUSTED_PROXIES): the client address
   * is the right-most one they did not add (see chooseClientAddress). None unless set: the
   * socket's address is the client's.
   */
  readonly trustedProxies: readonly CidrRange[];
  /**
   * Anything but the zero-configuration demo (the memory store, listening on loopback only): a
   * deployment. Its secrets come from the environment alone, never from devconfig.json's published
   * development values, and each is checked as a production secret (see readLocalConfig).
   */
  readonly deployment: boolean;
}

/**
 * HOST, not a WR_ name (process managers and platforms set it): the address to listen on, an IP
 * address (0.0.0.0 or :: for every interface).
 */
export const BIND_ENV = 'HOST';

/** Whether `host` (an address, or `localhost`) is this machine only. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare) || bare === '::ffff:127.0.0.1';
}

/** The marker every development value published with the project carries (devconfig.json). */
const PUBLISHED_DEV_VALUE = /dev[-_ ]?only/i;

/** How to make a secret of each kind, for the refusal that asks for one. */
const MAKE_SECRET: Record<(typeof SECRET_KEYS)[number], string> = {
  signing_keys: 'e.g. k1:$(openssl rand -base64 32)',
  admin_password: 'e.g. $(openssl rand -base64 18)',
  admin_api_token: 'e.g. $(openssl rand -base64 32)',
  upstash_token: "your database's REST token",
  upstash_shard_tokens: "the other databases' REST tokens, comma-separated",
  challenge_secret: "your challenge provider's secret key",
  admission_keys: '`npm run keys` makes one',
  webhook_secret: 'e.g. $(openssl rand -base64 32)',
  admin_accounts: 'JSON of name → {role, hash}; `npm run keys -- hash-password` makes a hash',
};

/** Not a WR_ name: the variable most Redis hosting sets. One URL, or a cluster's nodes separated by commas. */
export const REDIS_URL_ENV = 'REDIS_URL';
/** With WR_STORE=redis and store_shards above 1: the other databases' URLs, comma-separated, in order. */
export const REDIS_SHARD_URLS_ENV = 'REDIS_SHARD_URLS';

export interface LocalConfig {
  readonly settings: SettingSource;
  readonly secrets: SettingSource;
  readonly host: HostOptions;
  /**
   * What is wrong in the file or the environment before any value is read: names that are not
   * ours (misspelt settings), host options with a value not allowed. Each problem says where.
   */
  readonly problems: readonly ConfigProblem[];
  /** Where a setting or secret's value comes from, for messages: `environment variable WR_X` or `devconfig.json key config.x`. */
  readonly describe: (key: string) => string | undefined;
}

const FILE_SECTIONS = ['config', 'dev_secrets'] as const;
const isComment = (key: string) => key.startsWith('//');

/**
 * Reads `devconfig.json`: `config` holds Config Store settings and `dev_secrets` the values that
 * stand in for the Secret Store locally. Environment variables `WR_<KEY>` override either. Every
 * name is checked: a key of the file or a `WR_` variable that is not ours is a problem (with the
 * nearest spelling), never silently ignored. Keys starting with `//` are comments.
 */
export function readLocalConfig(path: string, env: NodeJS.ProcessEnv = process.env): LocalConfig {
  const file = basename(path);
  const problems: ConfigProblem[] = [];
  let parsed: unknown = {};
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    problems.push({ key: file, message: `is not JSON: ${error.message}` });
  }
  const root = (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : {}) as Record<string, unknown>;
  if (root !== parsed) problems.push({ key: file, message: 'must be a JSON object with "config" and "dev_secrets"' });
  for (const key of Object.keys(root)) {
    if (!isComment(key) && !(FILE_SECTIONS as readonly string[]).includes(key)) problems.push(unknownNameProblem(`${file} key ${key}`, key, FILE_SECTIONS, 'a section (config, dev_secrets)'));
  }
  const section = (name: (typeof FILE_SECTIONS)[number]): Record<string, unknown> => {
    const value = root[name];
    if (value === undefined) return {};
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    problems.push({ key: `${file} key ${name}`, message: 'must be an object of names and values' });
    return {};
  };
  const config = section('config');
  const secrets = section('dev_secrets');
  for (const key of Object.keys(config)) {
    if (isComment(key) || (CONFIG_KEYS as readonly string[]).includes(key)) continue;
    if ((SECRET_KEYS as readonly string[]).includes(key)) {
      problems.push({ key: `${file} key config.${key}`, message: 'is a secret: put it under dev_secrets (on Fastly: the Secret Store)' });
    } else {
      problems.push(unknownNameProblem(`${file} key config.${key}`, key, CONFIG_KEYS));
    }
  }
  for (const key of Object.keys(secrets)) {
    if (isComment(key) || (SECRET_KEYS as readonly string[]).includes(key)) continue;
    if ((CONFIG_KEYS as readonly string[]).includes(key)) {
      problems.push({ key: `${file} key dev_secrets.${key}`, message: 'is a setting, not a secret: put it under config' });
    } else {
      problems.push(unknownNameProblem(`${file} key dev_secrets.${key}`, key, SECRET_KEYS, 'a secret of the waiting room'));
    }
  }
  const envName = (key: string) => `WR_${key.toUpperCase()}`;
  const knownEnv = [...CONFIG_KEYS, ...SECRET_KEYS].map(envName);
  const hostNames = Object.keys(HOST_ENV);
  for (const name of Object.keys(env).filter((n) => n.toUpperCase().startsWith('WR_')).sort()) {
    if (knownEnv.includes(name)) continue;
    if (!name.startsWith('WR_')) {
      // Read as the upper-case name only: `wr_admit_per_period=5` would otherwise be silently ignored.
      const upper = name.toUpperCase();
      const known = knownEnv.includes(upper) || hostNames.includes(upper);
      problems.push({
        key: `environment variable ${name}`,
        message: `is not read: the waiting room's variables are upper case${known ? `; did you mean ${upper}?` : ` (${unknownNameProblem('', upper, [...knownEnv, ...hostNames]).message})`}`,
      });
      continue;
    }
    const allowed = (HOST_ENV as Record<string, readonly string[] | undefined>)[name];
    if (hostNames.includes(name)) {
      if (allowed !== undefined && !allowed.includes(env[name] ?? '')) {
        problems.push({ key: `environment variable ${name}`, message: `must be one of ${allowed.join(', ')}, got ${JSON.stringify(env[name])}` });
      }
      continue;
    }
    problems.push(unknownNameProblem(`environment variable ${name}`, name, [...knownEnv, ...hostNames]));
  }
  const store = env['WR_STORE'] === 'upstash' || env['WR_STORE'] === 'redis' ? env['WR_STORE'] : 'memory';
  const bind = (env[BIND_ENV] ?? '').trim() === '' ? '127.0.0.1' : env[BIND_ENV]!.trim();
  if (bind !== 'localhost' && parseIp(bind.replace(/^\[|\]$/g, '')) === undefined) {
    problems.push({ key: `environment variable ${BIND_ENV}`, message: `must be the IP address to listen on (127.0.0.1, 0.0.0.0 or :: for every interface, or one of this machine's), got ${JSON.stringify(bind)}` });
  }
  const deployment = store !== 'memory' || !isLoopbackHost(bind);
  const proxies = parseTrustedProxies(env[TRUSTED_PROXIES_ENV]);
  if (!proxies.ok) problems.push({ key: `environment variable ${TRUSTED_PROXIES_ENV}`, message: proxies.problem });
  const lookup = (values: Record<string, unknown>, fromFile = true) => (key: string) => {
    const fromEnv = env[envName(key)];
    if (fromEnv !== undefined) return fromEnv;
    if (!fromFile) return undefined;
    const value = values[key];
    return typeof value === 'string' ? value : value === undefined ? undefined : String(value);
  };
  // A deployment takes its secrets from the environment alone: devconfig.json's dev_secrets are
  // published with the project, so a host that fell back to them could be forged and entered by
  // anyone. Values that are those development values, by the marker they carry or by equality, are
  // refused too (`WR_SIGNING_KEYS=<the dev key>`), naming the variable and how to make a real one.
  if (deployment) {
    for (const key of SECRET_KEYS) {
      const value = env[envName(key)];
      if (value === undefined || value === '') continue;
      const published = secrets[key];
      if (PUBLISHED_DEV_VALUE.test(value) || (typeof published === 'string' && published !== '' && value === published)) {
        problems.push({ key: `environment variable ${envName(key)}`, message: `is the development value published in devconfig.json, which anyone can read: set it to a secret of your own (${MAKE_SECRET[key]})` });
      }
    }
  }
  let redis: RedisTarget | undefined;
  let redisShards: RedisTarget[] = [];
  if (store === 'redis') {
    // REDIS_URL is read only with WR_STORE=redis: elsewhere it may well be set for something else.
    const urls = parseRedisUrls(env[REDIS_URL_ENV]);
    if (typeof urls === 'string') problems.push({ key: `environment variable ${REDIS_URL_ENV}`, message: urls });
    else redis = { urls, cluster: urls.length > 1 || env['WR_REDIS_CLUSTER'] === 'true' };
    const extra = env[REDIS_SHARD_URLS_ENV];
    if (extra !== undefined && extra.trim() !== '') {
      const shardUrls = parseRedisUrls(extra);
      if (typeof shardUrls === 'string') problems.push({ key: `environment variable ${REDIS_SHARD_URLS_ENV}`, message: shardUrls });
      else redisShards = shardUrls.map((url) => ({ urls: [url], cluster: false }));
    }
  }
  // Whoever reaches a Redis without a password can move the cursor, flip the switches and mint VIP
  // codes: a deployment uses one only on this machine, or when the operator says the network is theirs.
  if (deployment && redis !== undefined && env['WR_REDIS_ALLOW_NO_AUTH'] !== 'true') {
    for (const url of [...redis.urls, ...redisShards.flatMap((t) => t.urls)]) {
      const parsed = new URL(url);
      if (parsed.password === '' && !isLoopbackHost(parsed.hostname)) {
        problems.push({
          key: `environment variable ${REDIS_URL_ENV}`,
          message: `names ${parsed.host} without a password: give it one (redis://:PASSWORD@host:port, or rediss:// for TLS) or, on a private network you trust, set WR_REDIS_ALLOW_NO_AUTH=true`,
        });
      }
    }
  }
  const host: HostOptions = {
    store,
    redis,
    redisShards,
    templatesDir: env['WR_TEMPLATES_DIR'] === undefined || env['WR_TEMPLATES_DIR'] === '' ? undefined : resolve(env['WR_TEMPLATES_DIR']),
    bind,
    trustedProxies: proxies.ok ? proxies.ranges : [],
    deployment,
  };
  if (host.templatesDir !== undefined && !isDirectory(host.templatesDir)) {
    problems.push({ key: 'environment variable WR_TEMPLATES_DIR', message: `is not a directory: ${host.templatesDir}` });
  }
  const describe = (key: string): string | undefined => {
    if (env[envName(key)] !== undefined) return `environment variable ${envName(key)}`;
    if (config[key] !== undefined) return `${file} key config.${key}`;
    if (secrets[key] !== undefined && !deployment) return `${file} key dev_secrets.${key}`;
    if ((SECRET_KEYS as readonly string[]).includes(key)) return `environment variable ${envName(key)}, not set`;
    return undefined;
  };
  return { settings: lookup(config), secrets: lookup(secrets, !deployment), host, problems, describe };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Template overrides from a directory, named as the KV Store keys are (`holding.html`,
 * `<queue>/holding.html`, `style.css`): what the KV Store `wr_templates` is on Fastly.
 */
export function directoryTemplateSource(dir: string): TemplateSource {
  return {
    async get(key) {
      if (!/^(?:[a-z0-9][a-z0-9_-]{0,31}\/)?[a-z0-9._-]+$/.test(key) || key.includes('..')) return undefined;
      try {
        return await readFile(join(dir, key), 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw error;
      }
    },
  };
}

/**
 * The Upstash client options on Node, plus a signal that aborts each request at the store timeout:
 * racing a timeout alone leaves the request open, and behind a hanging store those pile up (one
 * socket per call). A function rather than one signal: the client then calls it per request, and
 * rethrows an abort as an error instead of returning a fake `"Aborted"` result, and does not retry
 * it. A NOSCRIPT fallback is a second request with its own signal.
 */
export function createNodeUpstashOptions(
  options: Parameters<typeof createUpstashClientOptions>[0] & { readonly timeoutMs: number },
): UpstashClientOptions & { readonly signal: () => AbortSignal } {
  const { timeoutMs } = options;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new RangeError(`invalid store timeout ${String(timeoutMs)}: expected an integer number of ms >= 1`);
  }
  return { ...createUpstashClientOptions(options), signal: () => AbortSignal.timeout(timeoutMs) };
}

/** STORE_KEEPALIVE_MS unless set: how long an idle connection to the store (and any fetch) is kept for reuse. */
export const DEFAULT_STORE_KEEPALIVE_MS = 2_000;

/**
 * Caps how long Node's fetch keeps an idle keep-alive connection for reuse, whatever the server's
 * `Keep-Alive` hint says. A store front that drops idle connections without a word (Upstash does
 * after a while, as do NATs and balancers) leaves dead sockets in the pool, and a call sent on one
 * fails (`socket hang up`); the client's one retry may pick another dead one. Closing them first
 * on our side means a call after an idle spell opens a fresh connection. Node's fetch reads the
 * dispatcher that undici's setGlobalDispatcher sets. STORE_KEEPALIVE_MS: 100 to 600000.
 */
export function capIdleConnections(text: string | undefined): { readonly ok: true; readonly ms: number } | { readonly ok: false; readonly problem: string } {
  const trimmed = text?.trim() ?? '';
  const ms = trimmed === '' ? DEFAULT_STORE_KEEPALIVE_MS : Number(trimmed);
  if (!/^[0-9]*$/.test(trimmed) || !Number.isSafeInteger(ms) || ms < 100 || ms > 600_000) {
    return { ok: false, problem: `STORE_KEEPALIVE_MS must be a whole number of ms from 100 to 600000, got ${JSON.stringify(text).slice(0, 40)}` };
  }
  setGlobalDispatcher(new Agent({ keepAliveTimeout: ms, keepAliveMaxTimeout: ms }));
  return { ok: true, ms };
}

/**
 * The challenge provider's siteverify over Node's fetch: the form as `application/x-www-form-urlencoded`,
 * abandoned after `timeoutMs`.
 */
export const fetchSiteVerifier: SiteVerifier = {
  post(url, form, timeoutMs) {
    return fetch(url, {
      method: 'POST',
      body: form.toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      signal: AbortSignal.timeout(timeoutMs),
    });
  },
};
