/**
 * Fastly adapter: settings from the Config Store, secrets from the Secret Store, the origin and
 * Upstash as named backends, the log endpoint, the client's address and the POP. Everything else
 * is the core's.
 */
import { Backend } from 'fastly:backend';
import { CoreCache, SimpleCache } from 'fastly:cache';
import { vCpuTime } from 'fastly:compute';
import { ConfigStore } from 'fastly:config-store';
import { PenaltyBox, RateCounter } from 'fastly:edge-rate-limiter';
import { env } from 'fastly:env';
import { KVStore } from 'fastly:kv-store';
import { Logger } from 'fastly:logger';
import { SecretStore } from 'fastly:secret-store';
import { ConfigError, parseConfig, parseSecrets, parseShardTokens, placeholderProblem, parseSecretsOnDemand, parseSettingsDocument, SECRET_KEYS, SETTINGS_ITEM, upstashShardProblems, type Config, type ConfigProblem, type SettingSource } from '../core/config';
import { buildWithLastValid, type BuiltService, type SettingsMemory } from '../core/last-valid';
import { errorResponse, originTarget } from '../core/http';
import { checkingPageResponse } from '../core/holding';
import type { FailureLimiter, Logger as LogPort, OriginHeaders, OriginMeter, QueueStore, RequestLog, SiteVerifier, StateCache, TemplateSource, WebhookSender } from '../core/ports';
import { createUpstashScriptClient } from '../store/upstash-http';
import { ShardedStore } from '../store/sharded-store';
import { UpstashQueueStore, createUpstashClientOptions, type UpstashScriptClient } from '../store/upstash-store';
import { METER_SECONDS } from './memory-meter';

export const CONFIG_STORE = 'wr_config';
export const SECRET_STORE = 'wr_secrets';
export const ORIGIN_BACKEND = 'origin';
export const UPSTASH_BACKEND = 'upstash';
/** The challenge provider's siteverify host (`challenge_provider`): a backend the operator adds with the hook. */
export const CHALLENGE_BACKEND = 'challenge';
export const LOG_ENDPOINT = 'wr_log';
export const TEMPLATE_STORE = 'wr_templates';
/** Edge Rate Limiting: the POP's count of failed sign-ins per client, and its holds. */
export const AUTH_RATE_COUNTER = 'wr_auth_failures';
export const AUTH_PENALTY_BOX = 'wr_auth_held';
export const TICKET_RATE_COUNTER = 'wr_new_tickets';
export const TICKET_PENALTY_BOX = 'wr_ticket_held';
const DEFAULT_PREFIX = '/__wr/';

/**
 * The settings, read from the one `settings` item (a JSON object of every setting) when it is
 * there, else from one item per setting: the layout before the `settings` item, still accepted so
 * a service can move over. Parsed once per instance and kept by the item's text, so an instance
 * that serves several requests does not parse it again, and a changed item is picked up.
 */
interface SettingsRead {
  readonly text: string | undefined;
  readonly source: SettingSource;
  readonly problems: readonly ConfigProblem[];
}
let settingsRead: SettingsRead | undefined;

function readSettings(): SettingsRead {
  // Stores cannot be opened at module top level (they exist only while a request runs).
  const configStore = new ConfigStore(CONFIG_STORE);
  const text = configStore.get(SETTINGS_ITEM) ?? undefined;
  if (settingsRead !== undefined && settingsRead.text === text && text !== undefined) return settingsRead;
  if (text === undefined) {
    // The per-item layout: read as the settings are asked for (one lookup each), never kept.
    return { text, source: (key) => configStore.get(key) ?? undefined, problems: [] };
  }
  const document = parseSettingsDocument(text);
  settingsRead = { text, source: document.source, problems: document.problems };
  return settingsRead;
}

/**
 * The Secret Store, read afresh for every request but only the entries it may need: the signing
 * keys for every request; the Upstash token when the request makes its first store call (see
 * upstashToken), so an admitted visitor's request, which makes none, reads one entry and a new or
 * waiting visitor's two; every secret, all checked, for requests on the waiting room's own paths
 * (see ownPath). They are read again on each request, never kept across requests, so a removed
 * signing key (the emergency reset) or a rotated Upstash token takes effect at once even in an
 * instance that serves many requests; what is kept is the service built from them (see `built`).
 */
const secretValues = new Map<string, string | undefined>();

/**
 * This request's read of the Upstash token: made by its first store call and shared by every
 * other (concurrent ones included), so a request reads the entry at most once. Started afresh by
 * each request (fetchSecrets), never reused by the next. Work done after the response (see
 * afterResponse) still finds it, or reads the entry itself if the next request has begun.
 */
let upstashTokenRead: Promise<string | undefined> | undefined;

function upstashToken(): Promise<string | undefined> {
  return (upstashTokenRead ??= readSecretLater('upstash_token'));
}

/** The same for the secret `upstash_shard_tokens` (store_shards above 1): read by a request's first call to another database. */
let shardTokensRead: Promise<string | undefined> | undefined;

function upstashShardToken(index: number): Promise<string | undefined> {
  shardTokensRead ??= readSecretLater('upstash_shard_tokens');
  return shardTokensRead.then((text) => parseShardTokens(text)[index]);
}

/** The backend of database `k` (0 the first, `upstash`; then `upstash_2`, `upstash_3`, …). */
export function upstashBackendOf(k: number): string {
  return k === 0 ? UPSTASH_BACKEND : `${UPSTASH_BACKEND}_${k + 1}`;
}

/** Named on the waiting room's own paths (503) and in the log of a visitor's store call. */
const UPSTASH_TOKEN_MISSING: ConfigProblem = { key: 'upstash_token', message: 'secret is required on Fastly' };

/**
 * The Secret Store as this request opened it, for the entries it reads later (see readSecretLater).
 * Opened by each request: never at module top level (stores exist only while a request runs), and
 * replaced before a later request of a reused sandbox reads anything (see sandbox-reuse.ts).
 */
let requestSecretStore: SecretStore | undefined;

async function fetchSecrets(keys: readonly string[]): Promise<void> {
  secretValues.clear();
  upstashTokenRead = undefined;
  shardTokensRead = undefined;
  const store = (requestSecretStore = new SecretStore(SECRET_STORE));
  await Promise.all(
    keys.map(async (key) => {
      const entry = await store.get(key);
      secretValues.set(key, entry === null ? undefined : entry.plaintext());
    }),
  );
  // Read with the others (our own paths): the store uses this value rather than reading it again.
  if (secretValues.has('upstash_token')) upstashTokenRead = Promise.resolve(secretValues.get('upstash_token'));
  if (secretValues.has('upstash_shard_tokens')) shardTokensRead = Promise.resolve(secretValues.get('upstash_shard_tokens'));
}

const secretSource: SettingSource = (key) => {
  if (!secretValues.has(key)) throw new Error(`secret ${key} was asked for but not fetched for this request`);
  return secretValues.get(key);
};

/**
 * Whether a request may be for the admin page or API: any path that mentions the prefix, in any
 * case or place (`//__wr/admin` is read as ours too). Generous on purpose: a request that reaches
 * the admin code without its secrets fetched would be a 500.
 */
function ownPath(request: Request, prefix: string): boolean {
  return new URL(request.url).pathname.toLowerCase().includes(prefix.toLowerCase().replace(/\/+$/, ''));
}

/**
 * The Upstash store behind the `upstash` backend. Its URL is a setting, required when the service
 * is built; its token is a secret, read by a request's first store call (see upstashToken): an
 * admitted visitor's request makes no store call, so it reads no token and builds no client. A
 * token missing or empty there fails that call (a store failure, under `store_failure`, its log
 * naming `upstash_token`); our own paths check it before anything else (see serve).
 */
function createUpstashStore(config: Readonly<Config>): QueueStore {
  const url = config.upstashUrl;
  if (url === undefined) throw new ConfigError([{ key: 'upstash_url', message: 'is required on Fastly' }]);
  const first = upstashStoreAt(url, config, upstashBackendOf(0), async () => {
    const token = (await upstashToken())?.trim();
    if (token === undefined || token === '') throw new ConfigError([UPSTASH_TOKEN_MISSING]);
    return token;
  });
  if (config.storeShards === 1) return first;
  // Several databases: upstash_shard_urls, each through its backend (upstash_2, …), their tokens the
  // secret upstash_shard_tokens (counted on our own paths, see serve; a visitor's call without its
  // token fails as a store call, under store_failure).
  if (config.upstashShardUrls.length !== config.storeShards - 1) throw new ConfigError(upstashShardProblems(config, []).slice(0, 1));
  const others = config.upstashShardUrls.map((shardUrl, i) =>
    upstashStoreAt(shardUrl, config, upstashBackendOf(i + 1), async () => {
      const token = (await upstashShardToken(i))?.trim();
      if (token === undefined || token === '') throw new ConfigError([{ key: 'upstash_shard_tokens', message: `secret has no token for database ${i + 2} (${shardUrl})` }]);
      return token;
    }),
  );
  return new ShardedStore([first, ...others]);
}

/** One database's store: a lazy client through `backend`, made on the first call with the token read then. */
function upstashStoreAt(url: string, config: Readonly<Config>, backend: string, readToken: () => Promise<string>): UpstashQueueStore {
  // @upstash/redis's HTTP client without the `Redis` class (see upstash-http.ts), made on the
  // first store call with the token read then, and made again when a later request reads another
  // (a rotated token). No AbortController here: a timed-out call cannot be cancelled, so the
  // `upstash` backend's own timeouts (set on the service to store_timeout_ms, see the README) are
  // what end the request. Operator writes are idempotent for the same reason (admit keys, reset's
  // expected epoch).
  let client: { readonly token: string; readonly scripts: UpstashScriptClient } | undefined;
  const redis = async (): Promise<UpstashScriptClient> => {
    const token = await readToken();
    if (client?.token !== token) {
      const options = { ...createUpstashClientOptions({ url, token, retries: config.storeRetries }), backend };
      client = { token, scripts: createUpstashScriptClient(options) };
    }
    return client.scripts;
  };
  const lazy: UpstashScriptClient = {
    evalsha: async (sha1, keys, args) => (await redis()).evalsha(sha1, keys, args),
    eval: async (script, keys, args) => (await redis()).eval(script, keys, args),
  };
  return new UpstashQueueStore({ redis: lazy });
}

/**
 * The POP's cache. SimpleCache.getOrSet collapses concurrent misses in a POP into one `load`, so
 * a crowd polling at the moment an entry expires still makes one store call. Values are JSON.
 */
export const simpleCacheStateCache: StateCache = {
  async getOrLoad<T>(key: string, ttlSeconds: number, load: () => Promise<T>) {
    let loaded = false;
    const entry = await SimpleCache.getOrSet(key, async () => {
      loaded = true;
      return { value: JSON.stringify(await load()), ttl: ttlSeconds };
    });
    return { value: JSON.parse(await entry.text()) as T, hit: !loaded };
  },
  async peek<T>(key: string) {
    // A plain lookup: no transaction, so it never waits on another request's load.
    const entry = SimpleCache.get(key);
    return entry === null ? undefined : (JSON.parse(await entry.text()) as T);
  },
  async put<T>(key: string, value: T, ttlSeconds: number) {
    SimpleCache.set(key, JSON.stringify(value), ttlSeconds);
  },
};

/**
 * Template overrides from the KV Store `wr_templates`, when the service has one linked (it is
 * optional: without it the built-in templates are used and nothing is logged). Whether it is
 * linked is asked once, when the service is built (linking one makes a new service version, hence
 * new sandboxes); the store is opened again by each read, so a service kept by a reused sandbox
 * holds no handle from an earlier request (see sandbox-reuse.ts).
 */
export function kvTemplateSource(): TemplateSource | undefined {
  try {
    new KVStore(TEMPLATE_STORE);
  } catch {
    return undefined;
  }
  return {
    async get(key) {
      const entry = await new KVStore(TEMPLATE_STORE).get(key);
      return entry === null ? undefined : entry.text();
    },
  };
}

/**
 * The origin backend decides where a request goes; the request decides only the path and query it
 * asks for. A path that starts with `//` is sent with its leading slashes collapsed (see
 * originTarget), so an origin that resolves its request target against a base cannot read it as
 * another host. Any other request is sent as it came, body streamed.
 */
function forwardToOrigin(request: Request, replace?: OriginHeaders): Promise<Response> {
  const url = new URL(request.url);
  const target = originTarget(request.url);
  let init: { backend: string; headers?: Headers } = { backend: ORIGIN_BACKEND };
  // The headers are copied only to change them: to add ours, or to remove a client's copy.
  if (replace !== undefined && (replace.set !== undefined || replace.drop.some((name) => request.headers.has(name)))) {
    const headers = new Headers(request.headers);
    for (const name of replace.drop) headers.delete(name);
    if (replace.set !== undefined) headers.set(replace.set.name, replace.set.value);
    init = { backend: ORIGIN_BACKEND, headers };
  }
  if (target === `${url.pathname}${url.search}`) return fetch(request, init);
  return fetch(new Request(`${url.protocol}//${url.host}${target}`, request), init);
}

/**
 * The challenge provider's siteverify through the backend `challenge`. The engine cannot abort a
 * request: the core stops waiting after `challenge_timeout_ms`, and the backend's own timeouts end
 * the request itself.
 */
const backendSiteVerifier: SiteVerifier = {
  post(url, form) {
    return fetch(url, {
      method: 'POST',
      body: form.toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      backend: CHALLENGE_BACKEND,
    });
  },
};

/**
 * One secret read when a request needs it, not with every request (the Upstash token, the
 * challenge secret, the admission keys), through the store this request opened.
 */
async function readSecretLater(key: string): Promise<string | undefined> {
  const store = requestSecretStore ?? new SecretStore(SECRET_STORE);
  const entry = await store.get(key);
  return entry === null ? undefined : entry.plaintext();
}

/**
 * Failed sign-ins counted and held by the POP's Edge Rate Limiting: `RateCounter.increment` then
 * `lookupCount` over the window, and a `PenaltyBox` (whole minutes). Opened on use, so a visitor's
 * request never touches it, and never at module top level, where ERL cannot be used. A call that
 * fails (ERL not enabled on the service) throws, and the core compares the credential unthrottled
 * and logs why.
 */
function edgeLimiter(counterName: string, boxName: string): FailureLimiter {
  return {
    async isHeld(key) {
      return new PenaltyBox(boxName).has(key);
    },
    async countFailure(key, windowSeconds) {
      const counter = new RateCounter(counterName);
      counter.increment(key, 1);
      return counter.lookupCount(key, windowSeconds);
    },
    async hold(key, minutes) {
      new PenaltyBox(boxName).add(key, minutes);
    },
    async countOf(key, windowSeconds) {
      return new RateCounter(counterName).lookupCount(key, windowSeconds);
    },
  };
}
export const edgeFailureLimiter: FailureLimiter = edgeLimiter(AUTH_RATE_COUNTER, AUTH_PENALTY_BOX);
/** New tickets per client (see ticket-limit.ts): the same Edge Rate Limiting, its own counter and box. */
export const edgeTicketLimiter: FailureLimiter = edgeLimiter(TICKET_RATE_COUNTER, TICKET_PENALTY_BOX);

/** The Edge Rate Limiting counter of the origin's answers (adaptive admission). */
const ORIGIN_RATE_COUNTER = 'wr_origin';

/**
 * The origin's answers counted by the POP's Edge Rate Limiting (all POP instances share it): entry
 * `<queue>:r` counts every answer, `:e` the errors, `:s` the slow ones, so an answer that is neither
 * is one increment. Read back over 10 s, the shortest span ERL counts over. Throws when ERL is not
 * enabled on the service; the core then counts nothing.
 */
export const edgeOriginMeter: OriginMeter = {
  count(queue, outcome) {
    const counter = new RateCounter(ORIGIN_RATE_COUNTER);
    counter.increment(`${queue}:r`, 1);
    if (outcome === 'error') counter.increment(`${queue}:e`, 1);
    else if (outcome === 'slow') counter.increment(`${queue}:s`, 1);
  },
  recent(queue) {
    const counter = new RateCounter(ORIGIN_RATE_COUNTER);
    return { requests: counter.lookupCount(`${queue}:r`, METER_SECONDS), errors: counter.lookupCount(`${queue}:e`, METER_SECONDS), slow: counter.lookupCount(`${queue}:s`, METER_SECONDS) };
  },
};

const LAST_VALID_KEY = 'waiting-room:last-valid-settings';
/** How long a POP remembers the last valid settings. */
const LAST_VALID_MS = 7 * 86_400_000;

/**
 * The last settings that built a working service, kept in the POP's cache (never the secrets). The
 * snapshot is the entry's body and also its metadata, so the check made on every request (holds)
 * reads the metadata alone, without opening the body.
 */
export const coreCacheSettingsMemory: SettingsMemory = {
  async recall() {
    const entry = CoreCache.lookup(LAST_VALID_KEY);
    if (entry === null) return undefined;
    return new Response(entry.body()).text();
  },
  async remember(snapshot) {
    const writer = CoreCache.insert(LAST_VALID_KEY, { maxAge: LAST_VALID_MS, userMetadata: snapshot });
    writer.append(snapshot);
    writer.close();
  },
  async holds(snapshot) {
    const entry = CoreCache.lookup(LAST_VALID_KEY);
    return entry !== null && new TextDecoder().decode(entry.userMetadata()) === snapshot;
  },
};

/**
 * A configuration that cannot be used must not open the gates nor show visitors an error: they
 * get the "checking your place" page, operators get the problems on the waiting room's paths, and
 * the log says which keys are wrong.
 */
function configFailure(request: Request, error: ConfigError, logger: LogPort): Response {
  const path = new URL(request.url).pathname;
  logger.log({
    ts: new Date().toISOString(),
    method: request.method,
    path,
    status: 0,
    decision: 'config_invalid',
    reason: error.message,
    pop: env('FASTLY_POP'),
  });
  if (path.startsWith(DEFAULT_PREFIX)) return errorResponse(503, error.message);
  return checkingPageResponse(request, DEFAULT_PREFIX, Date.now());
}

/**
 * The request this sandbox is serving: its number in the sandbox (1 in a fresh one; more when
 * Fastly reuses it, see sandbox-reuse.ts) and the sandbox's vCPU time when it began. A sandbox
 * serves its requests one at a time.
 */
const current: { request: number; vcpuAtStart: number; later: (() => Promise<void>)[] | undefined } = { request: 0, vcpuAtStart: 0, later: undefined };

/** Work the core defers (webhooks): done after this request's response (see afterResponse). */
function deferToAfterResponse(work: () => Promise<void>): void {
  if (current.later !== undefined) current.later.push(work);
  else void work().catch(() => undefined);
}

/**
 * Webhook deliveries through the webhook's named backend (Compute fetches only declared ones), to
 * its path. The URL is made from the backend's own address, so the Host header is the receiver's.
 * The engine cannot abort a request: the core stops waiting after its timeout, and the backend's
 * own timeouts end the request itself.
 */
const backendWebhookSender: WebhookSender = {
  async send(target, body, headers) {
    if (target.backend === undefined) throw new Error('this webhook has no "backend": Fastly sends only through a declared backend');
    let origin = `https://${target.backend}`;
    try {
      const backend = Backend.fromName(target.backend);
      origin = `${backend.isSSL ? 'https' : 'http'}://${backend.target}:${backend.port}`;
    } catch {
      // Not readable here: the fetch names the backend, which routes it all the same.
    }
    const response = await fetch(`${origin}${target.path ?? '/'}`, { method: 'POST', body, headers, backend: target.backend });
    return response.status;
  },
};

/**
 * The Logger port over the log endpoint. Each record gets the vCPU time this request has used so
 * far (`vcpu_ms`: the runtime's count is the sandbox's, since it started, so a reused sandbox's
 * later requests are counted from their own start) and the request's number in its sandbox
 * (`sandbox_request`), which shows on Fastly whether sandboxes are reused and what that saves. The
 * endpoint is looked up by each record: the port lives in the service a reused sandbox keeps, and
 * must not hold an earlier request's handle.
 */
const logPort: LogPort = {
  log: (record: RequestLog) =>
    new Logger(LOG_ENDPOINT).log(JSON.stringify({ ...record, vcpu_ms: vCpuTime() - current.vcpuAtStart, sandbox_request: current.request })),
};

/**
 * The backends' hosts checked against fastly.toml's placeholders, once per instance (a backend's
 * address changes only with a new service version). A backend that cannot be read is left to the
 * request that uses it to report.
 */
let backendProblems: readonly ConfigProblem[] | undefined;
function placeholderBackends(): readonly ConfigProblem[] {
  if (backendProblems !== undefined) return backendProblems;
  const problems: ConfigProblem[] = [];
  for (const name of [ORIGIN_BACKEND, UPSTASH_BACKEND]) {
    try {
      const problem = placeholderProblem(`backend ${name}`, Backend.fromName(name).target);
      if (problem !== undefined) problems.push(problem);
    } catch {
      // No such backend, or no host to read: the request that needs it says so.
    }
  }
  return (backendProblems = problems);
}

/**
 * Work a request need not wait for (remembering the last valid settings: a cache lookup) is done
 * once its response is on its way: a timer set when the response is ready fires after the promise
 * reactions that hand it to the runtime, and waitUntil keeps the instance alive until it is done.
 * A store call made there gets the Upstash token as the request's own calls do (see upstashToken).
 */
function afterResponse(event: FetchEvent, later: readonly (() => Promise<void>)[]): void {
  if (later.length === 0) return;
  event.waitUntil(new Promise<void>((resolve) => setTimeout(resolve, 0)).then(async () => {
    for (const work of later) await work();
  }));
}

/**
 * The service built from one settings text and one key ring, kept for the instance: an instance
 * that serves several requests parses nothing again and keeps its derived signing keys, until the
 * settings item or the key ring changes. Not the Upstash token: the store reads it when a request
 * first calls it (see createUpstashStore), so a visitor's request need not read it to find this.
 */
let built: { readonly settings: SettingsRead; readonly signingKeys: string; readonly service: BuiltService } | undefined;

export async function handleFastlyRequest(event: FetchEvent): Promise<Response> {
  current.request += 1;
  current.vcpuAtStart = vCpuTime();
  const later: (() => Promise<void>)[] = [];
  current.later = later;
  try {
    return await serve(event, later);
  } finally {
    current.later = undefined;
    afterResponse(event, later);
  }
}

async function serve(event: FetchEvent, later: (() => Promise<void>)[]): Promise<Response> {
  const log = logPort;
  let service;
  try {
    const settings = readSettings();
    const placeholders = placeholderBackends();
    if (placeholders.length > 0) {
      // Named with whatever else is wrong, so a first deploy is fixed in one pass.
      let more: readonly ConfigProblem[] = [];
      try {
        parseConfig(settings.source);
      } catch (error) {
        if (error instanceof ConfigError) more = error.problems;
      }
      throw new ConfigError([...placeholders, ...settings.problems, ...more]);
    }
    const prefix = built?.service.service.config.pathPrefix ?? (settings.source('path_prefix') ?? DEFAULT_PREFIX).trim();
    if (ownPath(event.request, prefix)) {
      await fetchSecrets(SECRET_KEYS);
      // The waiting room's own paths (admin, API, health) check every secret, as before they were
      // read on demand: a weak admin password or a missing Upstash token is a 503 naming it there.
      const problems: ConfigProblem[] = [];
      try {
        parseSecrets(secretSource);
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        problems.push(...error.problems);
      }
      if ((secretValues.get('upstash_token') ?? '').trim() === '') problems.push(UPSTASH_TOKEN_MISSING);
      // Several databases: as many URLs and tokens as store_shards says (a bad setting is reported below).
      let service: Readonly<Config> | undefined;
      try {
        service = parseConfig(settings.source);
      } catch {
        service = undefined;
      }
      if (service !== undefined && service.storeShards > 1) problems.push(...upstashShardProblems(service, parseShardTokens(secretValues.get('upstash_shard_tokens'))));
      if (problems.length > 0) throw new ConfigError(problems);
    } else {
      await fetchSecrets(['signing_keys']);
    }
    // The service depends on the settings and the key ring (the store reads its token per request).
    const signingKeys = secretValues.get('signing_keys') ?? '';
    if (built === undefined || built.settings !== settings || built.signingKeys !== signingKeys || built.service.refused !== undefined) {
      // Refused settings are built again each request: the last valid ones may have been replaced.
      const result = await buildWithLastValid(
        settings.source,
        secretSource,
        {
          store: createUpstashStore,
          origin: { forward: forwardToOrigin },
          logger: log,
          clock: { now: () => Date.now() },
          cache: simpleCacheStateCache,
          templates: kvTemplateSource(),
          authLimiter: edgeFailureLimiter,
          ticketLimiter: edgeTicketLimiter,
          originMeter: edgeOriginMeter,
          meterName: env('FASTLY_POP'),
          siteVerifier: backendSiteVerifier,
          webhookSender: backendWebhookSender,
          defer: deferToAfterResponse,
          readSecrets: (source) => parseSecretsOnDemand(source, readSecretLater),
        },
        coreCacheSettingsMemory,
        settings.problems,
        (work) => later.push(work),
      );
      built = { settings, signingKeys, service: result };
    }
    service = built.service.service;
    if (built.service.refused !== undefined) {
      // Running on the last valid settings: say so on every request until the settings are fixed.
      log.log({
        ts: new Date().toISOString(),
        method: event.request.method,
        path: new URL(event.request.url).pathname,
        status: 0,
        decision: 'config_refused_using_last_valid',
        reason: built.service.refused.message,
        pop: env('FASTLY_POP'),
      });
    }
  } catch (error) {
    if (error instanceof ConfigError) return configFailure(event.request, error, log);
    return configFailure(event.request, new ConfigError([{ key: 'stores', message: String(error) }]), log);
  }
  try {
    return await service.handler(event.request, {
      address: event.client.address,
      pop: env('FASTLY_POP'),
      // Looked up only when asked for (queues chosen by country): a geolocation lookup per request otherwise.
      get country() {
        const country = event.client.geo?.country_code;
        return typeof country === 'string' && country !== '' ? country : undefined;
      },
    });
  } catch (error) {
    // A bad admin password or API token is found when an admin request first asks for it.
    if (error instanceof ConfigError) return configFailure(event.request, error, log);
    throw error;
  }
}
