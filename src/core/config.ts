/**
 * The service's settings: one schema for the Fastly Config Store, `devconfig.json` and the Node
 * host. Parsed once into a frozen object; a bad value is one error that names every bad key.
 * Secrets are parsed apart (`parseSecrets`), because they come from the Secret Store.
 */
import { parseAdmissionKeys } from './admission-keys';
import { CHALLENGE_PROVIDERS } from './challenge-providers';
import { parseCidrList, type CidrRange } from './ip';
import { parsePathPatterns, type PathPattern } from './path-pattern';
import { LOCALES, parseLanguageTexts, type LanguageTexts, type Locale } from './i18n';
import { MAX_TICKET_BLOCK, type FailureWindow } from './ports';
import { DEFAULT_BLOCK_SETTINGS } from './ticket-blocks';
import { parseWebhookTargets, type WebhookTarget } from './webhook-targets';
import { parseKeyRing, parseKeyRingEntries, passphraseWeakness, placeholderWeakness, secretWeakness, SECRET_RULE, type KeyRing } from './tokens';
import { parseAccounts, type Account } from './accounts';

/** Reads one raw setting; `undefined` when it is not set. */
export type SettingSource = (key: string) => string | undefined;

export interface Config {
  /**
   * Name of the queue: part of every store key and of the cookie's claims.
   * @default "default"
   */
  readonly queueName: string;
  /**
   * Reserved path prefix for the waiting room's own pages, assets and APIs; never forwarded.
   * @default "/__wr/"
   */
  readonly pathPrefix: string;
  /**
   * Paths the queue covers (comma-separated patterns; `/shop/*` covers `/shop` and below).
   * @default "/*"
   */
  readonly queuePaths: readonly PathPattern[];
  /**
   * Paths that always go straight to the origin (health checks, robots.txt, static assets).
   * @default "/robots.txt,/favicon.ico"
   */
  readonly bypassPaths: readonly PathPattern[];
  /**
   * Client addresses (IPv4/IPv6 CIDRs, comma-separated) that go straight to the origin.
   * @default ""
   */
  readonly bypassIps: readonly CidrRange[];
  /**
   * Name of a cookie that bypasses the queue, but only when its value is a bypass token signed by
   * us (minted with the admin API); a plain cookie name would be trivially forged. Empty: off.
   * @default ""
   */
  readonly bypassCookie: string;
  /**
   * Let verified search-engine crawlers through: the user agent must name a known crawler AND
   * the client address must be in `crawler_ips` (the ranges the search engines publish).
   * @default false
   */
  readonly bypassCrawlers: boolean;
  /**
   * Published address ranges of the search engines' crawlers, for `bypass_crawlers`.
   * @default ""
   */
  readonly crawlerIps: readonly CidrRange[];
  /**
   * Name of the queue cookie.
   * @default "waiting_room"
   */
  readonly cookieName: string;
  /**
   * How long an admitted visitor keeps access (and, in capacity mode, a slot) after their last
   * activity, in seconds: the inactivity timeout. Activity slides it.
   * @default 300
   */
  readonly sessionSeconds: number;
  /**
   * Longest session from admission whatever the activity, in seconds; 0 = no maximum.
   * @default 0
   */
  readonly sessionMaxSeconds: number;
  /**
   * Capacity mode: a slot is refreshed in the store at most this often per visitor, by requests
   * through the edge or by the heartbeat script; the time of the last refresh rides in the cookie.
   * @default 30
   */
  readonly activityRefreshSeconds: number;
  /**
   * Capacity mode: when a tab goes away (the heartbeat script's beacon), its slot lapses after this
   * grace unless the visitor's next page touches it (navigation also hides a page).
   * @default 10
   */
  readonly leaveGraceSeconds: number;
  /**
   * Most admitted visitors holding a slot at once; 0 = no limit. With this or `max_new_per_minute`
   * above 0 the queue runs in capacity mode (and `admit_per_period` is not used).
   * @default 0
   */
  readonly maxActive: number;
  /**
   * Most visitors admitted in any 60-second window; 0 = no limit.
   * @default 0
   */
  readonly maxNewPerMinute: number;
  /**
   * Response header by which the origin ends the visitor's session (frees the slot at once); it
   * is removed before the response reaches the visitor.
   * @default "x-waiting-room-end-session"
   */
  readonly endSessionHeader: string;
  /**
   * How long a waiting ticket stays valid without a poll, in seconds. A visitor who stops polling
   * for longer loses the place.
   * @default 600
   */
  readonly queueTimeoutSeconds: number;
  /**
   * How often the holding page refreshes itself, in seconds.
   * @default 20
   */
  readonly refreshSeconds: number;
  /**
   * Lifetime of the per-POP cache of the queue's state, in whole seconds (Fastly's SimpleCache
   * counts in seconds); 0 turns the cache off. Waiting visitors' polls within a lifetime cost no
   * store call; admissions reach every POP within one lifetime.
   * @default 1
   */
  readonly stateCacheSeconds: number;
  /**
   * How waiting visitors are let in: `fifo` (in order of arrival; polls are served from the POP
   * cache) or `random` (each time room opens, visitors are drawn at random among those waiting and
   * still polling; every waiting visitor's poll is then one store call).
   * @default "fifo"
   */
  readonly queueMethod: 'fifo' | 'random';
  /**
   * Ticket blocks (FIFO only): the most numbers one join may take for this instance to hand to its
   * next arrivals itself, without a store call, while a line is waiting (see
   * docs/capacity-and-cost.md, "Ticket blocks"). 0 = off: every arrival joins. `auto` in the
   * settings is TICKET_BLOCKS_AUTO. A block's numbers are handed out for at most `ticketBlockMs`
   * after its join was sent, so a visitor who arrived that much (plus a join's round trip) before
   * another is called first.
   * @default "off" (0)
   */
  readonly ticketBlocks: number;
  /**
   * Ticket blocks: how long a block's numbers are handed out after its join was sent, ms
   * (TICKET_BLOCK_MS_MIN .. TICKET_BLOCK_MS_MAX); a block is sized to fill in half of it. Longer
   * blocks cost fewer joins and loosen the order bound (this plus a join's round trip). A value other
   * than the default is refused while ticket blocks are off.
   * @default 500
   */
  readonly ticketBlockMs: number;
  /**
   * A scheduled event's start (ISO 8601 with a zone, e.g. `2026-12-01T09:00:00Z`); empty = none.
   * Before it, visitors get the pre-queue page and a place in the pre-queue; nobody is let in.
   * @default ""
   */
  readonly eventStartMs: number;
  /**
   * The event's end (ISO 8601 with a zone); empty = none. After it, `event_after` applies.
   * @default ""
   */
  readonly eventEndMs: number;
  /**
   * At the start, the pre-queue is `shuffle`d (a lottery: arriving at 09:59:59 gains nothing over
   * 09:30) or kept in `arrival` order.
   * @default "shuffle"
   */
  readonly eventOrder: 'shuffle' | 'arrival';
  /**
   * After the end: `closed` shows the "event over" page to everyone not yet admitted (admitted
   * visitors keep their session); `pass` lets everyone through.
   * @default "closed"
   */
  readonly eventAfter: 'closed' | 'pass';
  /**
   * Visitors let in automatically per period; 0 turns automatic admission off.
   * @default 0
   */
  readonly admitPerPeriod: number;
  /**
   * Length of an automatic-admission period, in seconds.
   * @default 60
   */
  readonly admitPeriodSeconds: number;
  /**
   * Adaptive admission (docs/adaptive-admission.md): `off`, nothing counted and the console cannot
   * switch it on; `standby`, the edge counts the origin's answers and the console can switch the
   * controller on; `on`, the controller tunes the knob of the mode (admit_per_period, max_active,
   * or max_new_per_minute) between adaptive_min and adaptive_max from those answers.
   * @default "off"
   */
  readonly adaptiveAdmission: 'off' | 'standby' | 'on';
  /**
   * The least value the controller sets the knob to.
   * @default 1
   */
  readonly adaptiveMin: number;
  /**
   * The most value the controller sets the knob to; 0 = twice the knob's configured value.
   * @default 0
   */
  readonly adaptiveMax: number;
  /**
   * Over this share of failed origin answers (5xx, 429, none), percent, the knob goes down.
   * @default 2
   */
  readonly adaptiveErrorPercent: number;
  /**
   * An origin answer whose first byte takes longer than this, ms, is slow.
   * @default 1000
   */
  readonly adaptiveSlowMs: number;
  /**
   * Over this share of slow origin answers, percent, the knob goes down.
   * @default 10
   */
  readonly adaptiveSlowPercent: number;
  /**
   * Paths whose held requests get a JSON answer instead of the HTML page (as does any request
   * that accepts JSON but not HTML).
   * @default ""
   */
  readonly jsonPaths: readonly PathPattern[];
  /**
   * HTTP status of the holding page: 200, 429 or 503 (the latter two carry `Retry-After`).
   * @default 200
   */
  readonly holdStatus: 200 | 429 | 503;
  /**
   * What a visitor without an access token gets when the store fails: `hold` (holding page) or
   * `pass` (straight to the origin, unqueued).
   * @default "hold"
   */
  readonly storeFailure: 'hold' | 'pass';
  /**
   * What tells capacity mode that the store lost its state, so that it holds new admissions until
   * the old holders have refreshed into the count: `cookie`, only a visitor's cookie of the lost
   * generation; `pop`, also a POP that served the queue finding its state absent (the first such
   * join, before it could walk in). `cookie` suits a deployment that empties its store on purpose
   * between events while the edge still remembers the queue.
   * @default "pop"
   */
  readonly lostStateSign: 'cookie' | 'pop';
  /**
   * Timeout of one store call, in milliseconds.
   * @default 1000
   */
  readonly storeTimeoutMs: number;
  /**
   * Retries of a store request after a network error (each retry is one more backend request).
   * @default 1
   */
  readonly storeRetries: number;
  /**
   * REST URL of the Upstash database (not a secret; the token is).
   * @default undefined (required on Fastly)
   */
  readonly upstashUrl: string | undefined;
  /**
   * Databases the queue spreads over (see docs/capacity-and-cost.md, "Several databases"): each
   * visitor's ticket is in one of them, picked per instance. FIFO rate or capacity mode only.
   * @default 1
   */
  readonly storeShards: number;
  /**
   * With `store_shards` above 1 on Upstash: the REST URLs of the second and later databases, in
   * order (their tokens: the secret `upstash_shard_tokens`, in the same order).
   * @default []
   */
  readonly upstashShardUrls: readonly string[];
  /**
   * User name of the admin page (the password is the `admin_password` secret).
   * @default "admin"
   */
  readonly adminUser: string;
  /**
   * Failed sign-ins (admin password or origin bearer token) one client may make within
   * `auth_failure_window_seconds`; the failure that reaches it holds the client for
   * `auth_penalty_minutes`. A client is its address, an IPv6 client its /64.
   * @default 10
   */
  readonly authFailureLimit: number;
  /**
   * The span over which a client's failed sign-ins are counted, seconds: 10, 20, 30, 40, 50 or 60
   * (what Fastly's Edge Rate Limiting counts over).
   * @default 60
   */
  readonly authFailureWindowSeconds: FailureWindow;
  /**
   * How long a client that reached `auth_failure_limit` is held, in whole minutes (1 – 60, the
   * granularity of Fastly's penalty box). While held, its sign-ins get a 429 without being checked,
   * the right password included.
   * @default 5
   */
  readonly authPenaltyMinutes: number;
  /**
   * New tickets one client may take within `ticket_window_seconds` in this queue (0: no limit). The
   * request over it gets no ticket (a 429 with Retry-After, no store call) and holds the client for
   * `ticket_penalty_minutes`; a client is its address (an IPv6 client its /64; see
   * `client_ipv4_prefix`). Visitors with a ticket or an access token are never counted.
   * @default 60
   */
  readonly ticketLimit: number;
  /**
   * The span over which a client's new tickets are counted, seconds: 10, 20, 30, 40, 50 or 60.
   * @default 10
   */
  readonly ticketWindowSeconds: FailureWindow;
  /**
   * How long a client over `ticket_limit` gets no new ticket, whole minutes (1 – 60).
   * @default 1
   */
  readonly ticketPenaltyMinutes: number;
  /**
   * How many leading bits of an IPv4 address make one client for `ticket_limit`: 32 (the address)
   * or 24 (its /24, for bots that spread over a subnet; it also groups the visitors of a small
   * network). IPv6 clients are always their /64.
   * @default 32
   */
  readonly clientIpv4Prefix: 24 | 32;
  /**
   * A proof-of-work gate before a ticket: 0 = off, else the number of leading zero bits a solution's
   * SHA-256 must have (1 – 24; each bit doubles the client's work; 16 is about 65,000 hashes). A new
   * visitor without a valid solution gets a challenge the holding page's script solves, and then its
   * ticket. See proof-of-work.ts.
   * @default 0
   */
  readonly powDifficulty: number;
  /**
   * What a visitor whose proof of work or challenge failed (forged, wrong, replayed, another
   * client's; a token the provider refused) gets: `challenge`, a new challenge; `shadow`, the
   * "infinite queue": a holding page with a place that never moves, no ticket, no store call, so a
   * bot cannot tell it failed. A visitor who simply has no proof or token yet, or one that expired,
   * always gets a challenge.
   * @default "challenge"
   */
  readonly failedProof: 'challenge' | 'shadow';
  /**
   * A CAPTCHA-style check before a ticket (see challenge.ts): `none`, `turnstile` (Cloudflare) or
   * `hcaptcha`, or any provider with the same siteverify form through the URL and widget settings
   * below. Needs `challenge_site_key` and the secret `challenge_secret`; on Fastly, the backend
   * `challenge` (the siteverify host).
   * @default "none"
   */
  readonly challengeProvider: 'none' | 'turnstile' | 'hcaptcha';
  /**
   * The provider's site key (public; the widget is made for it).
   * @default ""
   */
  readonly challengeSiteKey: string;
  /**
   * The provider's siteverify URL; empty = the provider's own.
   * @default ""
   */
  readonly challengeVerifyUrl: string;
  /**
   * The script that renders the widget; empty = the provider's own.
   * @default ""
   */
  readonly challengeScriptUrl: string;
  /**
   * The class the widget's script looks for; empty = the provider's (`cf-turnstile`, `h-captcha`).
   * @default ""
   */
  readonly challengeWidgetClass: string;
  /**
   * How long the edge waits for siteverify, ms (100 – 10,000); no answer counts as the provider down.
   * @default 3000
   */
  readonly challengeTimeoutMs: number;
  /**
   * While the provider is down: `hold` (no new ticket; the "checking" page tries again) or `pass`
   * (new visitors get their ticket unchecked, and the log says so).
   * @default "hold"
   */
  readonly challengeUnavailable: 'hold' | 'pass';
  /**
   * The request header that carries the signed admission to the origin (see admission.ts), or `off`.
   * A header of this name from the client is always removed.
   * @default "waiting-room-admission"
   */
  readonly admissionHeader: string;
  /**
   * The audience (`aud`) of every admission: what the origin checks it against.
   * @default "origin"
   */
  readonly admissionAudience: string;
  /**
   * The claims an admission carries besides `iss`, `aud`, `iat` and `exp`: any of `queue`, `ticket`,
   * `admitted_at`, `session_expires`, `via`, comma-separated.
   * @default "queue,ticket,admitted_at,session_expires,via"
   */
  readonly admissionClaims: readonly AdmissionClaim[];
  /**
   * How long an admission is valid, seconds (30 – 3,600); never past the visitor's session.
   * @default 120
   */
  readonly admissionLifetimeSeconds: number;
  /**
   * How an admitted visitor's admission goes on between signatures: `cookie`, carried in an HttpOnly
   * cookie bound to the access token (signed once per half lifetime; the visitor could read it from
   * its own cookie jar), or `none`: it never leaves the edge (signed on every request on Fastly,
   * once per half lifetime on a long-lived host that remembers it).
   * @default "cookie"
   */
  readonly admissionCarry: 'cookie' | 'none';
  /**
   * The site's name, shown above the holding page's heading and in its title; empty = none (the
   * heading, in the visitor's language, says what the page is).
   * @default ""
   */
  readonly pageTitle: string;
  /**
   * Message under the heading of the holding page; empty = a sentence in the visitor's language
   * ("We are letting visitors in a few at a time to keep the site fast for everyone.").
   * @default ""
   */
  readonly pageMessage: string;
  /**
   * Logo of the holding page: an https URL, or a path on this site; empty = the built-in logo.
   * @default ""
   */
  readonly pageLogoUrl: string;
  /**
   * Accent colour of the holding page (`#rrggbb`): the big figure, the progress bar. It must reach
   * WCAG AA contrast (4.5:1) against white, since text is drawn in it.
   * @default "#2456c7"
   */
  readonly pageAccentColor: string;
  /**
   * Background colour around the page's card (`#rrggbb`).
   * @default "#eef2f8"
   */
  readonly pageBackgroundColor: string;
  /**
   * The language of visitors whose browser asks for none we have: a built-in one (en, de, fr, es,
   * it, pt, nl, tr, ja, zh, ko, ar) or one added in `page_texts`. `page_title` and `page_message`
   * are in this language: another language without its own shows them.
   * @default "en"
   */
  readonly pageLanguage: Locale;
  /**
   * Texts by language, from the JSON of `page_texts`: a language's own `page_title` and
   * `page_message`, built-in texts replaced, or a language added (see i18n.ts, TEXT_KEYS).
   * @default {}
   */
  readonly pageTexts: LanguageTexts;
  /**
   * Signed webhooks (see docs/webhooks.md, webhook-targets.ts): who gets which events, from the
   * JSON of `webhooks`. Service-wide. The HMAC key is the secret `webhook_secret`.
   * @default []
   */
  readonly webhooks: readonly WebhookTarget[];
}

/** The claims an admission may carry (see admission.ts). */
export type AdmissionClaim = 'queue' | 'ticket' | 'admitted_at' | 'session_expires' | 'via';
const ADMISSION_CLAIMS: readonly AdmissionClaim[] = ['queue', 'ticket', 'admitted_at', 'session_expires', 'via'];

export interface Secrets {
  /** Signing keys for the queue cookie; the first is current (secret `signing_keys`). */
  readonly keyRing: KeyRing;
  /** Admin page password; admin is refused until it is set (secret `admin_password`). */
  readonly adminPassword: string | undefined;
  /** Bearer token of the origin's admit API; the API is refused until set (secret `admin_api_token`). */
  readonly adminApiToken: string | undefined;
  /**
   * Named console accounts with roles and password hashes (secret `admin_accounts`, see accounts.ts);
   * empty when unset. The `admin_password` account is not among them (see consoleAccounts in admin.ts).
   */
  readonly adminAccounts: readonly Account[];
  /** Upstash REST token (secret `upstash_token`). */
  readonly upstashToken: string | undefined;
  /** The tokens of the Upstash databases after the first (secret `upstash_shard_tokens`, see upstash_shard_urls). */
  readonly upstashShardTokens: readonly string[];
  /**
   * The challenge provider's secret (secret `challenge_secret`), read when a token is verified (on
   * Fastly one Secret Store lookup then, never on other requests).
   */
  challengeSecret(): Promise<string | undefined>;
  /**
   * The admission keys (secret `admission_keys`, see admission.ts) as text, read when an admission is
   * signed or the JWKS served (on Fastly one Secret Store lookup then).
   */
  admissionKeys(): Promise<string | undefined>;
  /**
   * The key that signs webhook deliveries (secret `webhook_secret`, see docs/webhooks.md), read
   * when a delivery is sent (on Fastly one Secret Store lookup then, after the response).
   */
  webhookSecret(): Promise<string | undefined>;
}

export interface ConfigProblem {
  readonly key: string;
  readonly message: string;
}

/** Thrown for a configuration that cannot be used; names every bad key at once. */
export class ConfigError extends Error {
  readonly code = 'ERR_CONFIG';
  readonly problems: readonly ConfigProblem[];
  constructor(problems: readonly ConfigProblem[]) {
    super(`invalid configuration: ${problems.map((p) => `${p.key}: ${p.message}`).join('; ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** The keys of the Config Store, in the order docs/configuration.md documents them. */
export const CONFIG_KEYS = [
  'queues',
  'queue_name',
  'path_prefix',
  'queue_paths',
  'bypass_paths',
  'bypass_ips',
  'bypass_cookie',
  'bypass_crawlers',
  'crawler_ips',
  'cookie_name',
  'session_seconds',
  'session_max_seconds',
  'activity_refresh_seconds',
  'leave_grace_seconds',
  'max_active',
  'max_new_per_minute',
  'end_session_header',
  'queue_timeout_seconds',
  'refresh_seconds',
  'state_cache_seconds',
  'queue_method',
  'ticket_blocks',
  'ticket_block_ms',
  'event_start',
  'event_end',
  'event_order',
  'event_after',
  'admit_per_period',
  'admit_period_seconds',
  'adaptive_admission',
  'adaptive_min',
  'adaptive_max',
  'adaptive_error_percent',
  'adaptive_slow_ms',
  'adaptive_slow_percent',
  'json_paths',
  'hold_status',
  'store_failure',
  'lost_state_sign',
  'store_timeout_ms',
  'store_retries',
  'upstash_url',
  'store_shards',
  'upstash_shard_urls',
  'admin_user',
  'auth_failure_limit',
  'auth_failure_window_seconds',
  'auth_penalty_minutes',
  'ticket_limit',
  'ticket_window_seconds',
  'ticket_penalty_minutes',
  'client_ipv4_prefix',
  'pow_difficulty',
  'failed_proof',
  'challenge_provider',
  'challenge_site_key',
  'challenge_verify_url',
  'challenge_script_url',
  'challenge_widget_class',
  'challenge_timeout_ms',
  'challenge_unavailable',
  'admission_header',
  'admission_audience',
  'admission_claims',
  'admission_lifetime_seconds',
  'admission_carry',
  'page_title',
  'page_message',
  'page_logo_url',
  'page_accent_color',
  'page_background_color',
  'page_language',
  'page_texts',
  'webhooks',
] as const;

/** The keys of the Secret Store. */
export const SECRET_KEYS = ['signing_keys', 'admin_password', 'admin_api_token', 'upstash_token', 'upstash_shard_tokens', 'challenge_secret', 'admission_keys', 'webhook_secret', 'admin_accounts'] as const;

/**
 * The known name nearest to `name` (case aside), within an edit distance of 2: what a misspelt key
 * (`max_activ`, `WR_STROE`) was most likely meant to be. Undefined when nothing is that close.
 */
export function nearestName(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase(), bestDistance);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/**
 * A problem for a name that is none of ours, keyed by where it came from (`environment variable
 * WR_MAX_ACTIV`, `devconfig.json key config.max_activ`, `Config Store item max_activ`), with the
 * nearest known spelling when one is close: a misspelt setting must never be silently ignored.
 */
export function unknownNameProblem(where: string, name: string, known: readonly string[], what = 'a setting of the waiting room'): ConfigProblem {
  const near = nearestName(name, known);
  return { key: where, message: `is not ${what}${near === undefined ? '' : `; did you mean ${near}?`}` };
}

/** Problems for every Config Store item that is not a setting (the items a listing of the store returns). */
export function unknownSettingProblems(names: Iterable<string>, where: (name: string) => string = (name) => `Config Store item ${name}`): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const name of names) {
    if ((CONFIG_KEYS as readonly string[]).includes(name)) continue;
    if ((SECRET_KEYS as readonly string[]).includes(name)) {
      problems.push({ key: where(name), message: 'is a secret: it belongs in the Secret Store (wr_secrets), never with the settings' });
    } else {
      problems.push(unknownNameProblem(where(name), name, CONFIG_KEYS));
    }
  }
  return problems;
}

/**
 * The Config Store item that holds every setting as one JSON object (`{"max_active": "500", …}`):
 * one lookup per request instead of one per setting.
 */
export const SETTINGS_ITEM = 'settings';

/** The settings of one JSON document, and what is wrong with the document itself. */
export interface SettingsDocument {
  readonly source: SettingSource;
  /** Broken JSON, a value of the wrong type, names that are not settings: each named. */
  readonly problems: readonly ConfigProblem[];
}

/**
 * Reads the `settings` item. Values are strings as in the per-item layout; numbers and booleans
 * are taken as their text (`500`, `true`), and `queues` may be the JSON array itself rather than
 * its text. A name that is not a setting is a problem, never silently ignored: with one item the
 * service can see every name, which a Config Store of separate items cannot list at runtime.
 */
export function parseSettingsDocument(text: string, item = `Config Store item ${SETTINGS_ITEM}`): SettingsDocument {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    return { source: () => undefined, problems: [{ key: item, message: `must be a JSON object of settings: ${error instanceof Error ? error.message : String(error)}` }] };
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    return { source: () => undefined, problems: [{ key: item, message: 'must be a JSON object of settings ({"name": "value", …})' }] };
  }
  const values = new Map<string, string>();
  const names: string[] = [];
  const problems: ConfigProblem[] = [];
  for (const [name, value] of Object.entries(document as Record<string, unknown>)) {
    if (!(CONFIG_KEYS as readonly string[]).includes(name)) {
      names.push(name);
      continue;
    }
    if (typeof value === 'string') values.set(name, value);
    else if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'boolean') values.set(name, String(value));
    else if (name === 'queues' && typeof value === 'object' && value !== null) values.set(name, JSON.stringify(value));
    else problems.push({ key: name, message: `must be a string, number or boolean in ${item}, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}` });
  }
  problems.push(...unknownSettingProblems(names, (name) => `${item} key ${name}`));
  return { source: (key) => values.get(key), problems };
}

/** Levenshtein distance, giving up (returning `limit`) once it cannot be below `limit`. */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) >= limit) return limit;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const value = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      current.push(value);
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin >= limit) return limit;
    previous = current;
  }
  return Math.min(previous[b.length]!, limit);
}

export const QUEUE_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const COOKIE_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const PREFIX_PATTERN = /^\/[A-Za-z0-9_.~-]+(\/[A-Za-z0-9_.~-]+)*\/$/;

/**
 * What the schema says of one setting, as the parser reads it: its kind, its default (as written
 * in the settings) and its bounds. `describeSettings` collects these for the generated reference.
 */
export type SettingShape =
  | { readonly key: string; readonly kind: 'integer'; readonly fallback: string; readonly min: number; readonly max: number }
  | { readonly key: string; readonly kind: 'choice'; readonly fallback: string; readonly choices: readonly string[] }
  | { readonly key: string; readonly kind: 'text' | 'list' | 'instant' | 'url'; readonly fallback: string };

/** Collects problems while each key is read, so one error can name them all. */
class Reader {
  readonly problems: ConfigProblem[] = [];
  constructor(
    private readonly source: SettingSource,
    /** Told the shape of each key as it is read (the generated configuration reference). */
    readonly observe?: (shape: SettingShape) => void,
  ) {}

  raw(key: string): string | undefined {
    const value = this.source(key);
    if (value === undefined) return undefined;
    const trimmed = value.trim();
    return trimmed === '' ? undefined : trimmed;
  }

  string(key: string, fallback: string, check?: (v: string) => string | undefined): string {
    this.observe?.({ key, kind: 'text', fallback });
    const value = this.raw(key);
    // A default passes its own check (the settings with nothing set parse: test/config), and the
    // checks are not free on the edge, where every request parses the settings.
    if (value === undefined) return fallback;
    const problem = check?.(value);
    if (problem !== undefined) this.problems.push({ key, message: problem });
    return value;
  }

  integer(key: string, fallback: number, min: number, max: number): number {
    this.observe?.({ key, kind: 'integer', fallback: String(fallback), min, max });
    const text = this.raw(key);
    if (text === undefined) return fallback;
    if (!/^[0-9]+$/.test(text)) {
      this.problems.push({ key, message: `must be a whole number, got ${JSON.stringify(text)}` });
      return fallback;
    }
    const value = Number(text);
    if (value < min || value > max) {
      this.problems.push({ key, message: `must be between ${min} and ${max}, got ${value}` });
      return fallback;
    }
    return value;
  }

  oneOf<T extends string>(key: string, fallback: T, allowed: readonly T[]): T {
    this.observe?.({ key, kind: 'choice', fallback, choices: allowed });
    const text = this.raw(key);
    if (text === undefined) return fallback;
    if ((allowed as readonly string[]).includes(text)) return text as T;
    this.problems.push({ key, message: `must be one of ${allowed.join(', ')}, got ${JSON.stringify(text)}` });
    return fallback;
  }

  parsed<T>(key: string, fallback: string, parse: (text: string) => T, empty: T): T {
    this.observe?.({ key, kind: 'list', fallback });
    const text = this.source(key) ?? fallback;
    try {
      return parse(text);
    } catch (error) {
      this.problems.push({ key, message: error instanceof Error ? error.message : String(error) });
      return empty;
    }
  }
}

const DAY = 86_400;

/** `webhooks`: every problem in its JSON is named by its place (`webhooks[0].events[1]: …`). */
function readWebhooks(r: Reader): readonly WebhookTarget[] {
  r.observe?.({ key: 'webhooks', kind: 'text', fallback: '' });
  const parsed = parseWebhookTargets(r.raw('webhooks'));
  if (parsed.ok) return parsed.targets;
  r.problems.push(...parsed.problems);
  return [];
}

/** `page_texts`: every problem in its JSON is named by its place (`page_texts.de.in_lin: …`). */
function readPageTexts(r: Reader): LanguageTexts {
  r.observe?.({ key: 'page_texts', kind: 'text', fallback: '' });
  const text = r.raw('page_texts');
  if (text === undefined) return {};
  const parsed = parseLanguageTexts(text);
  if (parsed.ok) return parsed.texts;
  for (const message of parsed.errors) {
    // "page_texts.de.x: …" names its own place; an error of the whole names the key.
    const own = /^(page_texts\.[^:]+): (.*)$/s.exec(message);
    r.problems.push(own === null ? { key: 'page_texts', message } : { key: own[1]!, message: own[2]! });
  }
  return {};
}

/** The holding page's built-in colours (also used where there is no configuration to read). */
export const DEFAULT_ACCENT_COLOR = '#2456c7';
export const DEFAULT_BACKGROUND_COLOR = '#eef2f8';

/**
 * Parses the Config Store settings; throws `ConfigError` naming every bad key. `observe` is told
 * the shape of every key read (see `describeSettings`).
 */
export function parseConfig(source: SettingSource, observe?: (shape: SettingShape) => void): Readonly<Config> {
  const r = new Reader(source, observe);
  const pageTexts = readPageTexts(r);
  const config: Config = {
    queueName: r.string('queue_name', 'default', (v) =>
      QUEUE_NAME_PATTERN.test(v) ? undefined : 'must be 1-32 of a-z, 0-9, _ and -, starting with a letter or digit',
    ),
    pathPrefix: r.string('path_prefix', '/__wr/', (v) =>
      PREFIX_PATTERN.test(v) ? undefined : 'must look like /__wr/ (leading and trailing slash, URL-safe characters)',
    ),
    queuePaths: r.parsed('queue_paths', '/*', parsePathPatterns, []),
    bypassPaths: r.parsed('bypass_paths', '/robots.txt,/favicon.ico', parsePathPatterns, []),
    bypassIps: r.parsed('bypass_ips', '', parseCidrList, []),
    bypassCookie: r.string('bypass_cookie', '', (v) => (v === '' || COOKIE_NAME_PATTERN.test(v) ? undefined : 'must be 1-64 of A-Z, a-z, 0-9, _ and -')),
    bypassCrawlers: r.oneOf('bypass_crawlers', 'off', ['on', 'off']) === 'on',
    crawlerIps: r.parsed('crawler_ips', '', parseCidrList, []),
    cookieName: r.string('cookie_name', 'waiting_room', (v) =>
      COOKIE_NAME_PATTERN.test(v) ? undefined : 'must be 1-64 of A-Z, a-z, 0-9, _ and -',
    ),
    sessionSeconds: r.integer('session_seconds', 300, 30, 7 * DAY),
    sessionMaxSeconds: r.integer('session_max_seconds', 0, 0, 7 * DAY),
    activityRefreshSeconds: r.integer('activity_refresh_seconds', 30, 5, 3600),
    leaveGraceSeconds: r.integer('leave_grace_seconds', 10, 0, 600),
    maxActive: r.integer('max_active', 0, 0, 10_000_000),
    maxNewPerMinute: r.integer('max_new_per_minute', 0, 0, 10_000_000),
    endSessionHeader: r.string('end_session_header', 'x-waiting-room-end-session', (v) =>
      /^[a-z0-9-]{1,64}$/.test(v) ? undefined : 'must be a lower-case header name (a-z, 0-9, -)',
    ),
    queueTimeoutSeconds: r.integer('queue_timeout_seconds', 600, 30, DAY),
    refreshSeconds: r.integer('refresh_seconds', 20, 1, 600),
    stateCacheSeconds: r.integer('state_cache_seconds', 1, 0, 60),
    queueMethod: r.oneOf('queue_method', 'fifo', ['fifo', 'random']),
    ticketBlocks: readTicketBlocks(r),
    ticketBlockMs: r.integer('ticket_block_ms', DEFAULT_BLOCK_SETTINGS.maxAgeMs, TICKET_BLOCK_MS_MIN, TICKET_BLOCK_MS_MAX),
    eventStartMs: readInstant(r, 'event_start'),
    eventEndMs: readInstant(r, 'event_end'),
    eventOrder: r.oneOf('event_order', 'shuffle', ['shuffle', 'arrival']),
    eventAfter: r.oneOf('event_after', 'closed', ['closed', 'pass']),
    admitPerPeriod: r.integer('admit_per_period', 0, 0, 1_000_000),
    admitPeriodSeconds: r.integer('admit_period_seconds', 60, 1, DAY),
    adaptiveAdmission: r.oneOf('adaptive_admission', 'off', ['off', 'standby', 'on']),
    adaptiveMin: r.integer('adaptive_min', 1, 1, 10_000_000),
    adaptiveMax: r.integer('adaptive_max', 0, 0, 10_000_000),
    adaptiveErrorPercent: r.integer('adaptive_error_percent', 2, 0, 100),
    adaptiveSlowMs: r.integer('adaptive_slow_ms', 1000, 1, 60_000),
    adaptiveSlowPercent: r.integer('adaptive_slow_percent', 10, 0, 100),
    jsonPaths: r.parsed('json_paths', '', parsePathPatterns, []),
    holdStatus: Number(r.oneOf('hold_status', '200', ['200', '429', '503'])) as 200 | 429 | 503,
    storeFailure: r.oneOf('store_failure', 'hold', ['hold', 'pass']),
    lostStateSign: r.oneOf('lost_state_sign', 'pop', ['cookie', 'pop']),
    storeTimeoutMs: r.integer('store_timeout_ms', 1000, 50, 30_000),
    storeRetries: r.integer('store_retries', 1, 0, 3),
    upstashUrl: checkUrl(r, 'upstash_url'),
    storeShards: r.integer('store_shards', 1, 1, 8),
    upstashShardUrls: r.parsed('upstash_shard_urls', '', parseShardUrls, []),
    adminUser: r.string('admin_user', 'admin', (v) =>
      v.includes(':') || v.length > 64 ? 'must be at most 64 characters and contain no colon' : undefined,
    ),
    authFailureLimit: r.integer('auth_failure_limit', 10, 1, 100),
    authFailureWindowSeconds: Number(r.oneOf('auth_failure_window_seconds', '60', ['10', '20', '30', '40', '50', '60'])) as FailureWindow,
    authPenaltyMinutes: r.integer('auth_penalty_minutes', 5, 1, 60),
    ticketLimit: r.integer('ticket_limit', 60, 0, 100_000),
    ticketWindowSeconds: Number(r.oneOf('ticket_window_seconds', '10', ['10', '20', '30', '40', '50', '60'])) as FailureWindow,
    ticketPenaltyMinutes: r.integer('ticket_penalty_minutes', 1, 1, 60),
    clientIpv4Prefix: Number(r.oneOf('client_ipv4_prefix', '32', ['32', '24'])) as 24 | 32,
    powDifficulty: r.integer('pow_difficulty', 0, 0, 24),
    failedProof: r.oneOf('failed_proof', 'challenge', ['challenge', 'shadow']),
    ...readChallenge(r),
    admissionHeader: r.string('admission_header', 'waiting-room-admission', (v) =>
      v === 'off' || /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/.test(v) ? undefined : 'must be off or a header name (letters, digits, -)',
    ).toLowerCase(),
    admissionAudience: r.string('admission_audience', 'origin', (v) => (/^[\x21-\x7e]{1,200}$/.test(v) ? undefined : 'must be 1-200 printable characters without spaces')),
    admissionClaims: r.parsed('admission_claims', 'queue,ticket,admitted_at,session_expires,via', parseAdmissionClaims, [...ADMISSION_CLAIMS]),
    admissionLifetimeSeconds: r.integer('admission_lifetime_seconds', 120, 30, 3600),
    admissionCarry: r.oneOf('admission_carry', 'cookie', ['cookie', 'none']),
    pageTitle: r.string('page_title', '', (v) => (v.length > 120 ? 'must be at most 120 characters' : undefined)),
    pageMessage: r.string('page_message', '', (v) => (v.length > 500 ? 'must be at most 500 characters' : undefined)),
    pageLogoUrl: r.string('page_logo_url', '', (v) =>
      v === '' || /^(https:\/\/[A-Za-z0-9.-]+(:\d+)?)?\/[A-Za-z0-9._~!$&'()*+,;=:@%\/-]*$/.test(v)
        ? undefined
        : 'must be an https URL or a path starting with /, without quotes, spaces or a query',
    ),
    pageAccentColor: r.string('page_accent_color', DEFAULT_ACCENT_COLOR, (v) => checkColor(v, true)),
    pageBackgroundColor: r.string('page_background_color', DEFAULT_BACKGROUND_COLOR, (v) => checkColor(v, false)),
    pageLanguage: r.oneOf('page_language', 'en', [...LOCALES, ...Object.keys(pageTexts).filter((l) => !LOCALES.includes(l))]),
    pageTexts,
    webhooks: readWebhooks(r),
  };
  // A ticket must outlive at least two missed refreshes, or a slow connection loses its place.
  if (config.queueTimeoutSeconds < config.refreshSeconds * 3) {
    r.problems.push({
      key: 'queue_timeout_seconds',
      message: `must be at least 3 × refresh_seconds (${config.refreshSeconds * 3})`,
    });
  }
  if (config.bypassCrawlers && config.crawlerIps.length === 0) {
    r.problems.push({ key: 'crawler_ips', message: 'is required with bypass_crawlers = on: a user agent alone proves nothing' });
  }
  if (config.bypassCookie !== '' && config.bypassCookie === config.cookieName) {
    r.problems.push({ key: 'bypass_cookie', message: 'must differ from cookie_name' });
  }
  if (config.activityRefreshSeconds * 2 > config.sessionSeconds) {
    r.problems.push({
      key: 'activity_refresh_seconds',
      message: `must be at most half of session_seconds (${Math.floor(config.sessionSeconds / 2)}), or a slot lapses between refreshes`,
    });
  }
  if (config.sessionMaxSeconds !== 0 && config.sessionMaxSeconds < config.sessionSeconds) {
    r.problems.push({ key: 'session_max_seconds', message: 'must be 0 (no maximum) or at least session_seconds' });
  }
  if ((config.maxActive > 0 || config.maxNewPerMinute > 0) && config.admitPerPeriod > 0) {
    r.problems.push({
      key: 'admit_per_period',
      message: 'must be 0 when max_active or max_new_per_minute is set: the thresholds decide admission in capacity mode',
    });
  }
  if (config.adaptiveAdmission !== 'off') {
    if (adaptiveKnob(config) === 0) {
      r.problems.push({ key: 'adaptive_admission', message: 'needs a knob to tune: set admit_per_period, max_active or max_new_per_minute' });
    } else if (adaptiveBounds(config).max < config.adaptiveMin) {
      r.problems.push({ key: 'adaptive_max', message: `must be 0 (twice the knob's value) or at least adaptive_min (${config.adaptiveMin})` });
    }
  }
  if (config.ticketBlocks > 0 && config.queueMethod === 'random') {
    r.problems.push({ key: 'ticket_blocks', message: 'must be off with queue_method = random: a draw keeps every ticket in the store, so a block would save nothing' });
  } else if (config.ticketBlocks > 0 && config.stateCacheSeconds === 0) {
    r.problems.push({ key: 'ticket_blocks', message: 'needs state_cache_seconds above 0: a number handed out of a block is answered from the POP\'s cached state' });
  }
  // A block age that would change nothing is refused, as a mistake: the default given explicitly
  // stands for a missing key, as every default does.
  if (config.ticketBlocks === 0 && config.ticketBlockMs !== DEFAULT_BLOCK_SETTINGS.maxAgeMs) {
    r.problems.push({ key: 'ticket_block_ms', message: `is the age of a ticket block and changes nothing while ticket_blocks is off: set ticket_blocks (auto or the largest block) with it, or remove it (got ${config.ticketBlockMs})` });
  }
  r.problems.push(...shardProblems(config));
  if (config.eventStartMs > 0 && config.eventEndMs > 0 && config.eventEndMs <= config.eventStartMs) {
    r.problems.push({ key: 'event_end', message: 'must be later than event_start' });
  }
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return Object.freeze(config);
}

/**
 * What several databases (`store_shards` above 1) cannot do: a draw and a scheduled event's
 * pre-queue need every ticket in one place; adaptive admission would learn a value per database;
 * and each database needs at least 1 of every figure split over them (0 would mean no limit).
 */
export function shardProblems(config: Pick<Config, 'storeShards' | 'queueMethod' | 'eventStartMs' | 'adaptiveAdmission' | 'admitPerPeriod' | 'maxActive' | 'maxNewPerMinute'>): ConfigError['problems'][number][] {
  const n = config.storeShards;
  if (n <= 1) return [];
  const problems: ConfigError['problems'][number][] = [];
  const why = `with store_shards = ${n}`;
  if (config.queueMethod !== 'fifo') problems.push({ key: 'store_shards', message: `must be 1 with queue_method = random: a draw needs every waiting visitor in one database` });
  if (config.eventStartMs > 0) problems.push({ key: 'store_shards', message: 'must be 1 with a scheduled event (event_start): its pre-queue is shuffled in one database' });
  if (config.adaptiveAdmission !== 'off') problems.push({ key: 'store_shards', message: 'must be 1 with adaptive_admission: each database would learn a value of its own' });
  for (const [key, value] of [['admit_per_period', config.admitPerPeriod], ['max_active', config.maxActive], ['max_new_per_minute', config.maxNewPerMinute]] as const) {
    if (value > 0 && value < n) problems.push({ key, message: `must be 0 or at least ${n} ${why}: it is split over the databases and each needs at least 1` });
  }
  return problems;
}

/** `upstash_shard_urls`: http(s) URLs separated by commas, at most 7 (the databases after the first). */
function parseShardUrls(text: string): readonly string[] {
  const urls = text.split(',').map((u) => u.trim()).filter((u) => u !== '');
  if (urls.length > 7) throw new Error(`names ${urls.length} databases: at most 7 (store_shards is at most 8, the first is upstash_url)`);
  for (const url of urls) {
    let host = '';
    try {
      host = /^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(url) ? new URL(url).hostname : '';
    } catch {
      host = '';
    }
    if (host === '') throw new Error(`must be http(s) URLs separated by commas, got ${JSON.stringify(url)}`);
  }
  return urls;
}

/**
 * The problem, if any, with the Upstash databases after the first: `store_shards` − 1 of them in
 * `upstash_shard_urls`, and as many tokens in the secret `upstash_shard_tokens`.
 */
export function upstashShardProblems(config: Pick<Config, 'storeShards' | 'upstashShardUrls'>, tokens: readonly string[]): ConfigProblem[] {
  const want = config.storeShards - 1;
  const problems: ConfigProblem[] = [];
  if (config.upstashShardUrls.length !== want) problems.push({ key: 'upstash_shard_urls', message: `names ${config.upstashShardUrls.length} database${config.upstashShardUrls.length === 1 ? '' : 's'}, but store_shards = ${config.storeShards} needs ${want} besides upstash_url` });
  if (tokens.length !== want) problems.push({ key: 'upstash_shard_tokens', message: `secret holds ${tokens.length} token${tokens.length === 1 ? '' : 's'}, but store_shards = ${config.storeShards} needs ${want} (one per upstash_shard_urls entry, in order)` });
  return problems;
}

/** The secret `upstash_shard_tokens`: tokens separated by commas, in the order of upstash_shard_urls. */
export function parseShardTokens(text: string | undefined): readonly string[] {
  return (text ?? '').split(',').map((t) => t.trim()).filter((t) => t !== '');
}

/** The configured value of the knob adaptive admission moves: max active, else max new per minute, else the count per period. */
export function adaptiveKnob(config: Pick<Config, 'maxActive' | 'maxNewPerMinute' | 'admitPerPeriod'>): number {
  return config.maxActive > 0 ? config.maxActive : config.maxNewPerMinute > 0 ? config.maxNewPerMinute : config.admitPerPeriod;
}

/** Adaptive admission's bounds: adaptive_max 0 is twice the knob's configured value. */
export function adaptiveBounds(config: Pick<Config, 'maxActive' | 'maxNewPerMinute' | 'admitPerPeriod' | 'adaptiveMin' | 'adaptiveMax'>): { readonly min: number; readonly max: number } {
  return { min: config.adaptiveMin, max: config.adaptiveMax > 0 ? config.adaptiveMax : Math.max(config.adaptiveMin, 2 * adaptiveKnob(config)) };
}

/**
 * `ticket_block_ms`'s bounds. The order promise is that a visitor who arrived more than a second
 * before another is never let in after them, and the bound blocks keep is their age plus a join's
 * round trip: 900 ms leaves a tenth of a second for that trip. Below 100 ms a block would barely
 * outlive the join that took it.
 */
export const TICKET_BLOCK_MS_MIN = 100;
export const TICKET_BLOCK_MS_MAX = 900;

/** The largest block `ticket_blocks = auto` asks for: the allocator's own default. */
export const TICKET_BLOCKS_AUTO = DEFAULT_BLOCK_SETTINGS.maxSize;

/** `ticket_blocks`: `off` (0), `auto`, or the largest block, 1 .. MAX_TICKET_BLOCK (1 takes one number a join: off). */
function readTicketBlocks(r: Reader): number {
  r.observe?.({ key: 'ticket_blocks', kind: 'text', fallback: 'off' });
  const text = r.raw('ticket_blocks');
  if (text === undefined || text === 'off') return 0;
  if (text === 'auto') return TICKET_BLOCKS_AUTO;
  const value = /^[0-9]+$/.test(text) ? Number(text) : Number.NaN;
  if (!(value >= 1 && value <= MAX_TICKET_BLOCK)) {
    r.problems.push({ key: 'ticket_blocks', message: `must be off, auto or the largest block, a whole number from 1 to ${MAX_TICKET_BLOCK}, got ${JSON.stringify(text)}` });
    return 0;
  }
  return value === 1 ? 0 : value;
}

const INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

/** An ISO 8601 date and time with a zone (`Z` or `±hh:mm`), as ms since the epoch; 0 when unset. */
function readInstant(r: Reader, key: string): number {
  r.observe?.({ key, kind: 'instant', fallback: '' });
  const text = r.raw(key);
  if (text === undefined) return 0;
  const match = INSTANT.exec(text);
  const ms = match === null ? Number.NaN : Date.parse(text);
  // Date.parse rolls 2026-02-30 over to March; reading the fields back catches it.
  const valid =
    match !== null &&
    Number.isFinite(ms) &&
    Number(match[2]) >= 1 &&
    Number(match[2]) <= 12 &&
    Number(match[3]) >= 1 &&
    Number(match[3]) <= daysInMonth(Number(match[1]), Number(match[2])) &&
    Number(match[4]) <= 23 &&
    Number(match[5]) <= 59 &&
    Number(match[6] ?? 0) <= 59;
  if (!valid || ms <= 0) {
    r.problems.push({ key, message: `must be a date and time with a zone, like 2026-12-01T09:00:00Z, got ${JSON.stringify(text)}` });
    return 0;
  }
  return ms;
}

/** `#rrggbb`; an accent must reach 4.5:1 against white (WCAG AA for normal text). */
function checkColor(value: string, accent: boolean): string | undefined {
  if (!/^#[0-9a-fA-F]{6}$/.test(value)) return `must be a colour like #2456c7, got ${JSON.stringify(value)}`;
  if (!accent) return undefined;
  const ratio = contrastRatio(value, '#ffffff');
  return ratio >= 4.5 ? undefined : `must reach a contrast of 4.5:1 against white (WCAG AA), ${value} has ${ratio.toFixed(2)}:1`;
}

/** WCAG 2 contrast ratio of two `#rrggbb` colours. */
export function contrastRatio(a: string, b: string): number {
  const luminance = (hex: string): number => {
    const channel = (i: number): number => {
      const c = parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16) / 255;
      return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
  };
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

function parseAdmissionClaims(text: string): AdmissionClaim[] {
  const names = text.split(',').map((n) => n.trim()).filter((n) => n !== '');
  for (const name of names) {
    if (!(ADMISSION_CLAIMS as readonly string[]).includes(name)) throw new Error(`${JSON.stringify(name)} is not a claim; choose among ${ADMISSION_CLAIMS.join(', ')}`);
  }
  return [...new Set(names as AdmissionClaim[])];
}

/** A challenge provider's URL: https, or http to this machine (a local fake provider in tests). */
const CHALLENGE_URL = /^(https:\/\/[A-Za-z0-9.-]+(:\d+)?|http:\/\/(127\.0\.0\.1|localhost)(:\d+)?)\/[A-Za-z0-9._~!$&'()*+,;=:@%\/-]*$/;

function readChallenge(r: Reader): Pick<
  Config,
  'challengeProvider' | 'challengeSiteKey' | 'challengeVerifyUrl' | 'challengeScriptUrl' | 'challengeWidgetClass' | 'challengeTimeoutMs' | 'challengeUnavailable'
> {
  const provider = r.oneOf('challenge_provider', 'none', ['none', 'turnstile', 'hcaptcha']);
  const url = (key: string) =>
    r.string(key, '', (v) => (v === '' || CHALLENGE_URL.test(v) ? undefined : 'must be an https URL (or http://127.0.0.1 for a local test provider), without quotes or spaces'));
  const siteKey = r.string('challenge_site_key', '', (v) => (v === '' || /^[A-Za-z0-9._:-]{1,128}$/.test(v) ? undefined : 'must be the provider\'s site key: 1-128 of A-Z, a-z, 0-9, . _ : -'));
  const verifyUrl = url('challenge_verify_url');
  const scriptUrl = url('challenge_script_url');
  const widgetClass = r.string('challenge_widget_class', '', (v) => (v === '' || /^[a-z][a-z0-9-]{0,63}$/.test(v) ? undefined : 'must be a CSS class name (a-z, 0-9, -)'));
  const timeoutMs = r.integer('challenge_timeout_ms', 3000, 100, 10_000);
  const unavailable = r.oneOf('challenge_unavailable', 'hold', ['hold', 'pass']);
  if (provider !== 'none' && siteKey === '') r.problems.push({ key: 'challenge_site_key', message: `is required with challenge_provider = ${provider}` });
  const preset = provider === 'none' ? undefined : CHALLENGE_PROVIDERS[provider];
  return {
    challengeProvider: provider,
    challengeSiteKey: siteKey,
    challengeVerifyUrl: verifyUrl || (preset?.verifyUrl ?? ''),
    challengeScriptUrl: scriptUrl || (preset?.scriptUrl ?? ''),
    challengeWidgetClass: widgetClass || (preset?.widgetClass ?? ''),
    challengeTimeoutMs: timeoutMs,
    challengeUnavailable: unavailable,
  };
}

function checkUrl(r: Reader, key: string): string | undefined {
  r.observe?.({ key, kind: 'url', fallback: '' });
  const text = r.raw(key);
  if (text === undefined) return undefined;
  if (!/^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(text)) {
    r.problems.push({ key, message: `must be an http(s) URL, got ${JSON.stringify(text)}` });
    return undefined;
  }
  // The pattern lets through what URL parsing refuses (a host like `<name>-<id>.upstash.io`, the
  // guide's own example): that is a problem named like any other, never an error of its own.
  let host: string;
  try {
    host = new URL(text).hostname;
  } catch {
    r.problems.push({ key, message: `must be an http(s) URL with a valid host name, got ${JSON.stringify(text)}` });
    return undefined;
  }
  const placeholder = placeholderProblem(key, host);
  if (placeholder !== undefined) {
    r.problems.push(placeholder);
    return undefined;
  }
  return text.replace(/\/+$/, '');
}

/**
 * The host names fastly.toml's `[setup]` offers as examples, with what to put there instead. A
 * first `fastly compute publish` that took the offered value would otherwise run a service that
 * points at nobody's origin or database; it is refused, naming what is missing.
 */
export const PLACEHOLDER_HOSTS: Readonly<Record<string, string>> = {
  'origin.example.com': 'the host name of your site\'s origin (npx fastly service backend update --version latest --autoclone --name origin --address <host> --override-host <host>)',
  'your-db.upstash.io': 'your Upstash database\'s REST host (Upstash console: the database, REST API, UPSTASH_REDIS_REST_URL)',
};

/** A problem when `host`, given for `what` (a setting or `backend NAME`), is one of the placeholders. */
export function placeholderProblem(what: string, host: string): ConfigProblem | undefined {
  const instead = PLACEHOLDER_HOSTS[host.toLowerCase()];
  return instead === undefined ? undefined : { key: what, message: `is still the placeholder ${host} from fastly.toml: set it to ${instead}` };
}

/**
 * Parses the Secret Store entries; throws `ConfigError` naming every bad key (never its value).
 * Weak secrets are refused: a signing key must look random (see `SECRET_RULE`), and no secret may
 * be, or contain, another: an origin API token that contains the admin password gives the
 * password away to everyone who holds the token, and one equal to a signing key lets them mint cookies.
 */
export function parseSecrets(source: SettingSource): Readonly<Secrets> {
  const r = new Reader(source);
  const signing = r.raw('signing_keys');
  let keyRing: KeyRing | undefined;
  let signingSecrets: string[] = [];
  if (signing === undefined) {
    r.problems.push({ key: 'signing_keys', message: 'is required (e.g. "k1:<at least 32 random characters>")' });
  } else {
    try {
      signingSecrets = parseKeyRingEntries(signing).map((entry) => entry.secret);
      keyRing = parseKeyRing(signing);
    } catch (error) {
      r.problems.push({ key: 'signing_keys', message: error instanceof Error ? error.message : String(error) });
    }
  }
  const adminPassword = r.raw('admin_password');
  const passwordWeak = adminPassword === undefined ? undefined : passwordWeakness(adminPassword);
  if (adminPassword !== undefined && adminPassword.length < 12) {
    r.problems.push({ key: 'admin_password', message: 'must be at least 12 characters' });
  } else if (passwordWeak !== undefined) {
    r.problems.push({ key: 'admin_password', message: passwordWeak });
  } else if (adminPassword !== undefined && signingSecrets.some((secret) => overlaps(secret, adminPassword))) {
    r.problems.push({ key: 'admin_password', message: 'must not be, or be part of, a signing key: whoever knows one would know both' });
  }
  const adminApiToken = r.raw('admin_api_token');
  if (adminApiToken !== undefined) {
    const weakness = placeholderWeakness(adminApiToken) ?? secretWeakness(adminApiToken) ?? passphraseWeakness(adminApiToken);
    if (adminApiToken.length < 24) {
      r.problems.push({ key: 'admin_api_token', message: 'must be at least 24 characters' });
    } else if (weakness !== undefined) {
      r.problems.push({ key: 'admin_api_token', message: weakness });
    } else if (adminPassword !== undefined && overlaps(adminApiToken, adminPassword)) {
      r.problems.push({ key: 'admin_api_token', message: 'must not be, or contain, the admin password: the origin holds this token, and the password opens the admin page' });
    } else if (signingSecrets.some((secret) => overlaps(adminApiToken, secret))) {
      r.problems.push({ key: 'admin_api_token', message: 'must not be, or contain, a signing key: the origin holds this token, and a signing key mints cookies' });
    }
  }
  let adminAccounts: readonly Account[] = [];
  const accountsText = r.raw('admin_accounts');
  if (accountsText !== undefined) {
    try {
      adminAccounts = parseAccounts(accountsText);
    } catch (error) {
      r.problems.push({ key: 'admin_accounts', message: error instanceof Error ? error.message : String(error) });
    }
  }
  // Secrets that come from a provider (Upstash, the challenge provider) are theirs to make random;
  // a template's placeholder left in place is ours to catch.
  for (const key of ['upstash_token', 'upstash_shard_tokens', 'challenge_secret'] as const) {
    const value = r.raw(key);
    const placeholder = value === undefined ? undefined : placeholderWeakness(value);
    if (placeholder !== undefined) r.problems.push({ key, message: placeholder });
  }
  const webhookSecret = r.raw('webhook_secret');
  if (webhookSecret !== undefined) {
    const weakness = placeholderWeakness(webhookSecret) ?? secretWeakness(webhookSecret);
    if (webhookSecret.length < 32) r.problems.push({ key: 'webhook_secret', message: 'must be at least 32 characters (receivers hold it to verify deliveries)' });
    else if (weakness !== undefined) r.problems.push({ key: 'webhook_secret', message: weakness });
    else if (signingSecrets.some((secret) => overlaps(secret, webhookSecret)) || (adminPassword !== undefined && overlaps(webhookSecret, adminPassword))) {
      r.problems.push({ key: 'webhook_secret', message: 'must not be, or contain, a signing key or the admin password: every receiver holds it' });
    }
  }
  if (r.problems.length > 0 || keyRing === undefined) throw new ConfigError(r.problems);
  const challengeSecret = r.raw('challenge_secret');
  const admissionKeys = r.raw('admission_keys');
  if (admissionKeys !== undefined) {
    try {
      parseAdmissionKeys(admissionKeys);
    } catch (error) {
      r.problems.push({ key: 'admission_keys', message: error instanceof Error ? error.message : String(error) });
      throw new ConfigError(r.problems);
    }
  }
  return Object.freeze({
    keyRing,
    adminPassword,
    adminApiToken,
    adminAccounts,
    upstashToken: r.raw('upstash_token'),
    upstashShardTokens: parseShardTokens(r.raw('upstash_shard_tokens')),
    challengeSecret: async () => challengeSecret,
    admissionKeys: async () => admissionKeys,
    webhookSecret: async () => webhookSecret,
  });
}

/**
 * The secrets as a request needs them: the signing keys at once (every token check needs them,
 * and a broken key ring is a ConfigError now, as with parseSecrets), the others only when asked
 * for, each time: a visitor's token check reads `signing_keys` alone from `source`. The admin password and the origin's API token are validated together, with
 * every check of parseSecrets (they are checked against each other and the signing keys), by the
 * requests that ask for either: the admin paths. Asking then throws the ConfigError naming
 * the bad secret; visitors' requests never ask, so they keep flowing.
 */
export function parseSecretsOnDemand(source: SettingSource, readLater?: (key: string) => Promise<string | undefined>): Readonly<Secrets> {
  const r = new Reader(source);
  const signing = r.raw('signing_keys');
  let keyRing: KeyRing;
  try {
    if (signing === undefined) throw new Error('is required (e.g. "k1:<at least 32 random characters>")');
    keyRing = parseKeyRing(signing);
  } catch (error) {
    throw new ConfigError([{ key: 'signing_keys', message: error instanceof Error ? error.message : String(error) }]);
  }
  // Not kept: each ask reads the source again, so a service kept across requests sees the
  // current admin password and API token of the request that asks.
  const checked = (): Readonly<Secrets> => parseSecrets(source);
  return Object.freeze({
    keyRing,
    get adminPassword() {
      return checked().adminPassword;
    },
    get adminApiToken() {
      return checked().adminApiToken;
    },
    get adminAccounts() {
      return checked().adminAccounts;
    },
    get upstashToken() {
      return r.raw('upstash_token');
    },
    get upstashShardTokens() {
      return parseShardTokens(r.raw('upstash_shard_tokens'));
    },
    challengeSecret: async () => (readLater === undefined ? r.raw('challenge_secret') : readLater('challenge_secret')),
    admissionKeys: async () => (readLater === undefined ? r.raw('admission_keys') : readLater('admission_keys')),
    webhookSecret: async () => (readLater === undefined ? r.raw('webhook_secret') : readLater('webhook_secret')),
  });
}

/**
 * The first words of the passwords people pick first, by what is left of them once digits and
 * symbols are taken out: `password1234`, `Admin!2024`, `qwerty-123456` all reduce to one of these.
 */
const GUESSED_FIRST = new Set(['password', 'passw', 'passwort', 'motdepasse', 'admin', 'administrator', 'root', 'letmein', 'welcome', 'qwerty', 'qwertz', 'azerty', 'asdf', 'asdfgh', 'abc', 'abcdef', 'secret', 'changeme', 'default', 'login', 'master', 'iloveyou', 'monkey', 'dragon', 'football', 'sunshine', 'test', 'guest', 'user', 'waitingroom']);

/**
 * Why an admin password would fall to a guess (or undefined): a placeholder, the diversity rule of
 * the API token (`aaaaaaaaaaaa`, `abcabcabcabc`), or one of the first passwords people try with
 * digits or symbols added (`password1234`). Never names the value.
 */
export function passwordWeakness(password: string): string | undefined {
  const placeholder = placeholderWeakness(password);
  if (placeholder !== undefined) return placeholder;
  const weakness = secretWeakness(password);
  if (weakness !== undefined) return weakness;
  const letters = password.toLowerCase().replace(/[^a-z]/g, '');
  if (GUESSED_FIRST.has(letters)) return `is among the first passwords anyone tries, with digits or symbols added; use ${SECRET_RULE}`;
  return undefined;
}

/** Whether one secret is, or contains, the other (compared without case: `Secret` hides nothing from `secret`). */
function overlaps(a: string, b: string): boolean {
  const [x, y] = [a.toLowerCase(), b.toLowerCase()];
  return x.includes(y) || y.includes(x);
}
