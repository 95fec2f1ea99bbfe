/**
 * What every step of the request path needs from its queue, built once per handler: the ports, the
 * queue's settings and the figures derived from them, and the few helpers every step shares (a
 * timed store call, a signed cookie). The steps (visit.ts, respond.ts, own-paths.ts, rules.ts) are
 * plain functions of this context, so a test can build one without building a handler.
 */
import { adaptiveBounds, type Config, type Secrets } from './config';
import { serializeCookie } from './cookies';
import { LOCALES, negotiateLocale, type Locale } from './i18n';
import type { Branding } from './pages';
import { JOIN_KEEP_SECONDS, type AdaptivePolicy, type AdmissionPolicy, type OriginMeter, type Clock, type FailureLimiter, type Logger, type Origin, type CurrentQueue, type QueueOverview, type QueueStore, type SiteVerifier, type StateCache, type TemplateSource } from './ports';
import { countStoreError } from './metrics';
import { callStore, type StoreOutcome } from './store-call';
import { signToken, type TokenClaims } from './tokens';
import type { Trace } from './types';

export interface HandlerDeps {
  readonly config: Readonly<Config>;
  readonly secrets: Readonly<Secrets>;
  readonly store: QueueStore;
  readonly origin: Origin;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The per-POP cache of the queue's state (`state_cache_seconds`). */
  readonly cache: StateCache;
  /**
   * Fresh randomness for one store call, an integer 0 .. 2^48 - 1 (random draws, the event's shuffle
   * seed). Defaults to `crypto.getRandomValues`; tests inject a seeded generator.
   */
  readonly randomSeed?: () => number;
  /** Template overrides (Fastly's KV Store); a broken one is logged and the built-in one served. */
  readonly templates?: TemplateSource | undefined;
  /**
   * The admission header names of every queue of the service (lower case): a client's copies of
   * all of them are removed from every request passed to the origin, whichever queue passes it.
   * Default: this queue's own, unless `admission_header = off`.
   */
  readonly admissionHeaders?: readonly string[] | undefined;
  /** With several queues: every queue's figures, for the admin page's list. */
  readonly overview?: (nowMs: number, current: CurrentQueue) => Promise<readonly QueueOverview[]>;
  /**
   * Counts failed sign-ins per client and holds guessers (the POP's Edge Rate Limiting on Fastly,
   * memory on the Node host). Without it failures are logged and nobody is held.
   */
  readonly authLimiter?: FailureLimiter | undefined;
  /**
   * Counts new tickets per client and holds clients over `ticket_limit` (the POP's Edge Rate
   * Limiting on Fastly, memory on the Node host; see ticket-limit.ts). Without it nobody is limited.
   */
  readonly ticketLimiter?: FailureLimiter | undefined;
  /** Asks the challenge provider about a token (`challenge_provider`); fetch by default. */
  readonly siteVerifier?: SiteVerifier | undefined;
  /**
   * Counts the origin's answers for adaptive admission (the POP's Edge Rate Limiting on Fastly,
   * memory on the Node host). Without it, or with `adaptive_admission = off`, nothing is counted.
   */
  readonly originMeter?: OriginMeter | undefined;
  /** The name this POP (or Node host) reports its counts under: 1-32 of A-Z a-z 0-9 _ . - */
  readonly meterName?: string | undefined;
}

/** The claims a cookie may carry beyond the queue, kind, ticket and times. */
export interface Extra {
  readonly j?: number | undefined;
  readonly s?: number | undefined;
  readonly r?: number | undefined;
  readonly f?: number | undefined;
  readonly g?: number | undefined;
  readonly gen?: number | undefined;
  /** A pending join's key (waiting tokens of ticket 0 only: see TokenClaims.p). */
  readonly p?: string | undefined;
  /** A shadow ticket (see TokenClaims.x). */
  readonly x?: 1 | undefined;
  /** An access token of a visitor that walked in (see TokenClaims.v). */
  readonly v?: 1 | undefined;
  /** The visitor's database when it is not the first (see TokenClaims.sh): set by withShard's `issue`. */
  readonly sh?: number | undefined;
}

export interface HandlerContext extends Pick<HandlerDeps, 'config' | 'secrets' | 'store' | 'origin' | 'logger' | 'clock' | 'cache'> {
  /** The handler's inputs as given (the admin routes take them whole). */
  readonly deps: HandlerDeps;
  readonly queue: string;
  /** The admission policy of the configuration, without a seed. */
  readonly basePolicy: AdmissionPolicy;
  /** The header names a client may not send to the origin (see HandlerDeps.admissionHeaders). */
  readonly admissionHeaders: readonly string[];
  readonly randomSeed: () => number;
  /** The random method (a draw) rather than FIFO. */
  readonly random: boolean;
  /** An event whose pre-queue is shuffled at the start (FIFO only). */
  readonly shuffled: boolean;
  readonly cacheKey: string;
  /**
   * With several databases (`store_shards`): the visitor's database, which every store call of this
   * context names (AdmissionPolicy.shard) and every token it issues carries; see withShard.
   * Undefined with one database, and in the context of the queue as a whole.
   */
  readonly shard?: number | undefined;
  /** With several databases: where this instance sends its new visitors (see shardForNewVisitor). */
  readonly homeShard: number;
  /** The settings edge-blocks.ts keys an instance's blocks by: the queue's, or per database. */
  readonly blockScope: Pick<Config, 'queueName' | 'ticketBlocks' | 'ticketBlockMs' | 'queueMethod'>;
  readonly assetPrefix: string;
  /** Rate mode: an access token is renewed once this old. */
  readonly renewAfterMs: number;
  /** Capacity mode: a slot is refreshed in the store at most this often. */
  readonly refreshAfterMs: number;
  /** After a lost state: how long capacity mode holds new admissions while holders register again. */
  readonly recoverMs: number;
  readonly branding: Branding;
  readonly statusUrl: string;
  /** The policy for one store call: fresh randomness each time (draws; the shuffle seed at the start). */
  policyNow(): AdmissionPolicy;
  /** policyNow with this POP's report of the origin's answers: for the calls that load the state (join, poll). */
  statePolicy(): AdmissionPolicy;
  /** Counts an answer of the origin (adaptive admission), `ms` after the request went to it; undefined: none came. */
  meterOrigin(status: number | undefined, ms: number): void;
  /** One store call under the store timeout, its time and failure noted on the trace. */
  storeCall<T>(trace: Trace, call: () => Promise<T>): Promise<StoreOutcome<T>>;
  /** A signed cookie of ours: a waiting ticket (`w`) or an access token (`a`). */
  issue(kind: 'w' | 'a', ticket: number, nowMs: number, extra: Extra): Promise<string>;
  /** When a token `issue` makes now would expire, seconds. */
  expiryOf(kind: 'w' | 'a', nowMs: number, extra: Pick<Extra, 's' | 'p'>): number;
  /** The Set-Cookie that removes our cookie. */
  clearCookie(): string;
  localeOf(request: Request): Locale;
}

/** A called ticket's reservation outlives the holder's next poll by this much. */
export const RESERVATION_SLACK_MS = 5000;

/** 48 random bits from the platform's cryptographic generator (Fastly and Node both have it). */
function cryptoSeed(): number {
  const words = new Uint32Array(2);
  crypto.getRandomValues(words);
  return (words[0]! & 0xffff) * 0x100000000 + words[1]!;
}

/** Adaptive admission's settings from the configuration; undefined when it is off there. */
export function adaptivePolicy(config: Readonly<Config>): AdaptivePolicy | undefined {
  if (config.adaptiveAdmission === 'off') return undefined;
  return { enabled: config.adaptiveAdmission === 'on', ...adaptiveBounds(config), errorPercent: config.adaptiveErrorPercent, slowPercent: config.adaptiveSlowPercent };
}

/** A POP name as the store keeps it: what the platform calls it, cut to the allowed characters. */
export function meterNameOf(name: string | undefined): string {
  const clean = (name ?? '').replace(/[^A-Za-z0-9_.-]/g, '').slice(0, 32);
  return clean === '' ? 'edge' : clean;
}

/** The admission header names these queues' settings use, lower case, each once (`off` is none). */
export function admissionHeaderNames(configs: readonly Readonly<Config>[]): readonly string[] {
  return [...new Set(configs.filter((c) => c.admissionHeader !== 'off').map((c) => c.admissionHeader.toLowerCase()))];
}

export function admissionPolicy(config: Readonly<Config>): AdmissionPolicy {
  const adaptive = adaptivePolicy(config);
  return {
    ...(adaptive !== undefined && { adaptive }),
    auto: { count: config.admitPerPeriod, periodMs: config.admitPeriodSeconds * 1000 },
    thresholds: { maxActive: config.maxActive, maxNewPerMinute: config.maxNewPerMinute },
    sessionMs: config.sessionSeconds * 1000,
    // The holder notices the call on a poll (every refresh_seconds) once its POP's cache expires.
    reservationMs: (config.refreshSeconds + config.stateCacheSeconds) * 1000 + RESERVATION_SLACK_MS,
    eventStartMs: config.eventStartMs,
    method: config.queueMethod,
    // A waiting visitor polls every refresh_seconds; missing two polls in a row leaves the draw.
    presenceMs: (2 * config.refreshSeconds + 5) * 1000,
  };
}

export function createContext(deps: HandlerDeps): HandlerContext {
  const { config, secrets, store, origin, logger, clock, cache } = deps;
  const queue = config.queueName;
  const basePolicy = admissionPolicy(config);
  const meterName = meterNameOf(deps.meterName);
  const randomSeed = deps.randomSeed ?? cryptoSeed;
  // The built-in languages and those the operator added (`page_texts`), for negotiation.
  const added = Object.keys(config.pageTexts).filter((l) => !LOCALES.includes(l));
  const languages = added.length === 0 ? LOCALES : [...LOCALES, ...added];
  const policyNow = (): AdmissionPolicy => ({ ...basePolicy, seed: randomSeed() });
  const random = config.queueMethod === 'random';
  const assetPrefix = `${config.pathPrefix}assets/`;

  function storeCall<T>(trace: Trace, call: () => Promise<T>): Promise<StoreOutcome<T>> {
    return callStore(call, config.storeTimeoutMs, clock).then(async (outcome) => {
      trace.storeMs = (trace.storeMs ?? 0) + outcome.ms;
      if (!outcome.ok) {
        trace.storeError = `${outcome.reason}: ${outcome.message}`;
        // Counted where the request is served, for the metrics (no store call, of course).
        await countStoreError(deps.ticketLimiter, queue);
      }
      return outcome;
    });
  }

  function lifetimeOf(kind: 'w' | 'a', iat: number, extra: Pick<Extra, 's' | 'p'>): number {
    let lifetime = kind === 'a' ? config.sessionSeconds : config.queueTimeoutSeconds;
    if (kind === 'a' && extra.s !== undefined && config.sessionMaxSeconds > 0) {
      lifetime = Math.max(0, Math.min(lifetime, extra.s + config.sessionMaxSeconds - iat));
    }
    // A pending join is worth keeping only while the store remembers its key.
    if (extra.p !== undefined) lifetime = Math.min(lifetime, JOIN_KEEP_SECONDS);
    return lifetime;
  }

  async function issue(kind: 'w' | 'a', ticket: number, nowMs: number, extra: Extra): Promise<string> {
    const iat = Math.floor(nowMs / 1000);
    const lifetime = lifetimeOf(kind, iat, extra);
    const claims: TokenClaims = {
      q: queue,
      k: kind,
      t: ticket,
      iat,
      exp: iat + lifetime,
      ...(extra.j !== undefined && { j: extra.j }),
      ...(extra.s !== undefined && { s: extra.s }),
      ...(extra.r !== undefined && { r: extra.r }),
      ...(extra.f !== undefined && { f: extra.f }),
      ...(extra.g !== undefined && extra.g !== 0 && { g: extra.g }),
      ...(extra.gen !== undefined && extra.gen !== 0 && { gen: extra.gen }),
      ...(extra.p !== undefined && { p: extra.p }),
      ...(extra.x !== undefined && { x: extra.x }),
      ...(extra.v !== undefined && { v: extra.v }),
      ...(extra.sh !== undefined && extra.sh > 0 && { sh: extra.sh }),
    };
    return serializeCookie(config.cookieName, await signToken(secrets.keyRing, claims), { maxAge: lifetime });
  }

  return {
    deps,
    config,
    secrets,
    store,
    origin,
    logger,
    clock,
    cache,
    queue,
    basePolicy,
    admissionHeaders: deps.admissionHeaders ?? admissionHeaderNames([config]),
    randomSeed,
    random,
    shuffled: config.eventStartMs > 0 && config.eventOrder === 'shuffle' && !random,
    cacheKey: `queue-state:${queue}`,
    // Picked once for the life of this handler (a reused sandbox, a Node process), as the surge
    // simulation measured: an instance's blocks all come from one database.
    homeShard: config.storeShards > 1 ? randomSeed() % config.storeShards : 0,
    blockScope: config,
    assetPrefix,
    // Rate mode: an access token is renewed on activity, but not on every request (that would add
    // a Set-Cookie to every response). Once a minute keeps the session sliding.
    renewAfterMs: Math.min(60, Math.floor(config.sessionSeconds / 4)) * 1000,
    refreshAfterMs: config.activityRefreshSeconds * 1000,
    // After a lost state, every holder has refreshed its slot (once per activity refresh, seen through
    // a cache of up to state_cache_seconds) by the end of this window.
    recoverMs: (config.activityRefreshSeconds + config.stateCacheSeconds) * 1000 + RESERVATION_SLACK_MS,
    branding: {
      logoUrl: config.pageLogoUrl === '' ? `${assetPrefix}logo.svg` : config.pageLogoUrl,
      accent: config.pageAccentColor,
      background: config.pageBackgroundColor,
    },
    statusUrl: `${config.pathPrefix}status?queue=${encodeURIComponent(queue)}`,
    policyNow,
    statePolicy() {
      const policy = policyNow();
      const meter = deps.originMeter;
      if (policy.adaptive === undefined || meter === undefined) return policy;
      try {
        return { ...policy, adaptive: { ...policy.adaptive, report: { pop: meterName, ...meter.recent(queue) } } };
      } catch {
        // The POP's counter failed (Edge Rate Limiting not enabled): the settings go without a report.
        return policy;
      }
    },
    meterOrigin(status, ms) {
      const meter = deps.originMeter;
      if (basePolicy.adaptive === undefined || meter === undefined) return;
      const outcome = status === undefined || status >= 500 || status === 429 ? 'error' : ms > config.adaptiveSlowMs ? 'slow' : 'ok';
      try {
        meter.count(queue, outcome);
      } catch {
        // Not counted: the controller then sees fewer answers from this POP, nothing worse.
      }
    },
    expiryOf: (kind, nowMs, extra) => Math.floor(nowMs / 1000) + lifetimeOf(kind, Math.floor(nowMs / 1000), extra),
    storeCall,
    issue,
    clearCookie: () => serializeCookie(config.cookieName, '', { maxAge: 0 }),
    localeOf: (request) => negotiateLocale(request.headers.get('accept-language'), config.pageLanguage, languages),
  };
}

/** Contexts per database of a queue's context, made once each (see withShard). */
const shardContexts = new WeakMap<HandlerContext, HandlerContext[]>();

/**
 * The context of a visitor whose ticket is in database `shard` of a queue over several databases:
 * its store calls name that database, its tokens carry it (`sh`, absent for the first), and the
 * POP's cached state, failure marks and this instance's ticket blocks are that database's. With one
 * database, the context itself.
 */
export function withShard(ctx: HandlerContext, shard: number): HandlerContext {
  if (ctx.config.storeShards <= 1 || ctx.shard !== undefined) return ctx;
  let made = shardContexts.get(ctx);
  if (made === undefined) {
    made = [];
    shardContexts.set(ctx, made);
  }
  const known = made[shard];
  if (known !== undefined) return known;
  const named = (policy: AdmissionPolicy): AdmissionPolicy => ({ ...policy, shard });
  const derived: HandlerContext = {
    ...ctx,
    shard,
    basePolicy: named(ctx.basePolicy),
    policyNow: () => named(ctx.policyNow()),
    statePolicy: () => named(ctx.statePolicy()),
    issue: (kind, ticket, nowMs, extra) => ctx.issue(kind, ticket, nowMs, shard > 0 ? { ...extra, sh: shard } : extra),
    cacheKey: shard === 0 ? ctx.cacheKey : `${ctx.cacheKey}:s${shard}`,
    blockScope: shard === 0 ? ctx.blockScope : { ...ctx.blockScope, queueName: `${ctx.queue}#${shard}` },
  };
  made[shard] = derived;
  return derived;
}

/**
 * The database a new visitor's ticket goes to: with ticket blocks this instance's own (its blocks
 * come from one database), else one at random per join (an even spread from one Node process too).
 */
export function shardForNewVisitor(ctx: HandlerContext): number {
  const n = ctx.config.storeShards;
  if (n <= 1) return 0;
  return ctx.config.ticketBlocks >= 2 ? ctx.homeShard : ctx.randomSeed() % n;
}
