/**
 * The configuration reference (docs/configuration.md), generated from the schema itself: each
 * setting's kind, bounds and default are what `parseConfig` reads (it reports them through its
 * `observe` hook), and only the meaning is written here, one sentence per key — TypeScript refuses a
 * key without one. `npm run docs` writes the tables; test/config-reference.test.ts fails when the
 * file and the schema differ. Not part of either host's bundle.
 */
import { CONFIG_KEYS, SECRET_KEYS, parseConfig, type SettingShape } from './config';
import { MAX_TICKET_BLOCK } from './ports';

/** One sentence per setting (Markdown, links relative to docs/); bounds and defaults come from the schema. */
const SETTING_MEANINGS: Record<(typeof CONFIG_KEYS)[number], string> = {
  queues: 'optional JSON document of several queues (see [Several queues](queues-and-events.md#several-queues)); without it the service is one queue made of these settings',
  queue_name: 'name of the queue: in every store key and in the cookie\'s claims (`a-z0-9_-`, up to 32)',
  path_prefix: 'the waiting room\'s own paths',
  queue_paths: 'comma-separated path patterns the queue covers (`/shop/*` covers `/shop` and below; `*` within a segment)',
  bypass_paths: 'path patterns that always go to the origin',
  bypass_ips: 'client addresses or CIDRs (IPv4 and IPv6) that always go to the origin',
  bypass_cookie: 'name of a cookie that bypasses the queue, only when it holds a bypass pass signed by us (`POST /__wr/api/bypass-pass`); empty = off',
  bypass_crawlers: '`on`: let verified search-engine crawlers through (see [How a request is decided](architecture.md#how-a-request-is-decided))',
  crawler_ips: 'the crawlers\' published address ranges (required with `bypass_crawlers`)',
  cookie_name: 'name of the queue cookie; for a new deployment `__Host-waiting_room` is recommended, which browsers accept only host-only, `Secure` and for `Path=/`, so no sibling subdomain can plant one (see [Several cookies of ours](architecture.md#several-cookies-of-ours)); renaming it on a live queue drops every waiting visitor\'s place and every session',
  session_seconds: 'inactivity timeout: how long an admitted visitor keeps access (and, in capacity mode, a slot) after their last activity; activity slides it (30 s – 7 days)',
  session_max_seconds: 'longest session from admission whatever the activity, in every mode (the access token carries the admission time, renewals keep it); `0` = no maximum',
  max_active: 'capacity mode: most admitted visitors holding a slot at once; `0` = no limit',
  max_new_per_minute: 'capacity mode: most visitors admitted in any 60-second window; `0` = no limit',
  activity_refresh_seconds: 'capacity mode: a visitor\'s slot is refreshed in the store at most this often (by requests through the edge or the heartbeat script); at most half of `session_seconds`',
  leave_grace_seconds: 'capacity mode: after the heartbeat script\'s beacon (tab hidden), the slot lapses after this grace unless the next page keeps it',
  end_session_header: 'response header by which the origin ends the visitor\'s session (freeing the slot at once); removed before the response reaches the visitor',
  queue_timeout_seconds: 'how long a waiting ticket lives without a poll; at least 3 × `refresh_seconds`',
  refresh_seconds: 'holding page refresh interval',
  state_cache_seconds: 'lifetime of the per-POP cache of the queue\'s state, whole seconds (`0` = off); waiting polls within it cost no store call, admissions reach every POP within it',
  ticket_blocks: 'FIFO only, with `state_cache_seconds` above 0: while a line waits, one join takes a block of consecutive tickets, which the serving instance (a reused Fastly sandbox, the Node host) hands to its next arrivals without a store call for at most `ticket_block_ms`, so an arrival costs a fraction of a join; `auto` takes blocks of up to 100, a number sets the largest, and either way a block is sized from the recent arrivals (one ticket while they are slow); see [Ticket blocks](capacity-and-cost.md#ticket-blocks)',
  ticket_block_ms: 'with `ticket_blocks` on (another value than the default is refused without it): how long a block\'s numbers are handed out after its join was sent, ms; a block is sized to fill in half of it. Longer blocks take fewer joins (a cheaper surge) and loosen the order kept: a visitor who arrived more than this plus a join\'s round trip before another is let in first; 900 keeps that within one second',
  queue_method: '`fifo` (in order of arrival) or `random` (each time room opens, visitors are drawn among those waiting and still polling); see [Events and queueing methods](queues-and-events.md#events-and-queueing-methods)',
  event_start: 'a scheduled event\'s start, ISO 8601 with a zone (`2026-12-01T09:00:00Z`): before it visitors get the pre-queue page and nobody is let in; empty = none',
  event_end: 'the event\'s end (same format, after `event_start`); then `event_after` applies; empty = none',
  event_order: 'at the start, the pre-queue is `shuffle`d (a lottery) or kept in `arrival` order',
  event_after: 'after the end: `closed` (an "event over" page, status 410, for everyone not admitted; admitted visitors keep their session) or `pass` (everyone through)',
  admit_per_period: 'visitors let in automatically per period; `0` = only by admin or origin',
  admit_period_seconds: 'length of an automatic-admission period',
  adaptive_admission: '`off`; `standby` (the edge counts the origin\'s answers, the console can switch the controller on); `on` (the controller tunes `admit_per_period`, `max_active` or `max_new_per_minute`, whichever the mode uses, from the origin\'s errors and slow answers); see [Adaptive admission](adaptive-admission.md)',
  adaptive_min: 'the least value adaptive admission sets the knob to',
  adaptive_max: 'the most value adaptive admission sets the knob to (`0` = twice the knob\'s configured value); the step up is (max − min) / 20',
  adaptive_error_percent: 'over this share of failed origin answers (5xx, 429, no answer), percent, adaptive admission turns the knob down',
  adaptive_slow_ms: 'an origin answer whose first byte comes later than this (ms) is slow',
  adaptive_slow_percent: 'over this share of slow origin answers, percent, adaptive admission turns the knob down',
  json_paths: 'path patterns whose held requests get JSON instead of the holding page (so do clients that accept JSON but not HTML)',
  hold_status: 'status of the holding page: `200`, `429` or `503` (the latter two with `Retry-After`)',
  store_failure: 'when the store fails, visitors without access are `hold` (holding page) or `pass` (to the origin)',
  lost_state_sign: 'what tells capacity mode the store lost its state (it then holds new admissions for one activity refresh interval): `cookie`, only a visitor\'s cookie of the lost generation; `pop`, also the first join at a POP that served the queue in the last 6 hours finding the state absent. `cookie` suits a store emptied on purpose between events',
  store_timeout_ms: 'timeout of one store call (50 – 30,000)',
  store_retries: 'retries of a store request after a network error (0 – 3; each is one more backend request of Fastly\'s 32)',
  upstash_url: 'Upstash REST URL (required on Fastly; its host is the `upstash` backend)',
  store_shards: 'databases one queue spreads over (1 – 8): each visitor\'s ticket is in one of them, picked at random per instance, and admission is split between them exactly; past about 3,150 arrivals a second per database. FIFO only, without `event_start` or adaptive admission; see [Several databases](capacity-and-cost.md#several-databases)',
  upstash_shard_urls: 'with `store_shards` above 1 on Upstash: the other databases\' REST URLs, comma-separated, in order (`store_shards` − 1 of them; on Fastly each is the backend `upstash_2`, `upstash_3`, …); their tokens are the secret `upstash_shard_tokens`',
  admin_user: 'admin page user name',
  auth_failure_limit: 'failed sign-ins (admin password or origin bearer token, together) one client may make within `auth_failure_window_seconds`; the one that reaches it holds the client (1 – 100; see [Guessing is throttled](bots.md#guessing-is-throttled))',
  auth_failure_window_seconds: 'the span failures are counted over: `10`, `20`, `30`, `40`, `50` or `60` (what Fastly\'s Edge Rate Limiting counts over)',
  auth_penalty_minutes: 'how long a client that reached the limit is held, in whole minutes (1 – 60, the penalty box\'s granularity): its sign-ins get `429` without being checked, the right password included',
  ticket_limit: 'new tickets one client may take in this queue within `ticket_window_seconds`; the request over it gets no ticket (`429`, no store call) and holds the client for `ticket_penalty_minutes`; `0` turns the limit off (0 – 100,000; see [One client cannot take the crowd\'s tickets](bots.md#one-client-cannot-take-the-crowds-tickets))',
  ticket_window_seconds: 'the span over which a client\'s new tickets are counted: 10, 20, 30, 40, 50 or 60 seconds',
  ticket_penalty_minutes: 'how long a client over `ticket_limit` gets no new ticket, in whole minutes (1 – 60)',
  client_ipv4_prefix: "how an IPv4 client is grouped for `ticket_limit`: `32` (its address) or `24` (its /24); an IPv6 client is always its /64 (a 6to4 or IPv4-mapped one the IPv4 address it carries), and its /48 is counted besides with 16 × the limit (see [One client cannot take the crowd's tickets](bots.md#one-client-cannot-take-the-crowds-tickets))",
  failed_proof: 'what a visitor whose proof of work failed (forged, wrong, replayed, another client\'s), or whose challenge token the provider refused, gets: `challenge` (a new one) or `shadow` (the "infinite queue": a place that never moves, no ticket)',
  challenge_provider: 'a challenge provider\'s check before a ticket: `none`, `turnstile` or `hcaptcha` (see [A challenge provider before a ticket](bots.md#a-challenge-provider-before-a-ticket)); needs `challenge_site_key`, the secret `challenge_secret` and, on Fastly, the backend `challenge`',
  challenge_site_key: 'the provider\'s site key (public)',
  challenge_verify_url: 'the siteverify URL (https; `http://127.0.0.1` only for a local test provider); empty = the provider\'s own',
  challenge_script_url: 'the widget\'s script; empty = the provider\'s own',
  challenge_widget_class: 'the class the widget\'s script renders into; empty = the provider\'s (`cf-turnstile`, `h-captcha`)',
  challenge_timeout_ms: 'how long the edge waits for siteverify (100 – 10,000); no answer is the provider down',
  challenge_unavailable: 'while the provider is down: `hold` (no new ticket, the page tries again) or `pass` (new tickets unchecked, logged)',
  pow_difficulty: 'a proof of work before a ticket: `0` off, else the leading zero bits the solution\'s SHA-256 must have (1 – 24; 14 is about 16,000 tries, a third of a second on a phone; see [A proof of work before a ticket](bots.md#a-proof-of-work-before-a-ticket))',
  admission_header: 'the request header that carries the signed admission to the origin, or `off` (see [The origin can trust the edge](origin-protection.md)); a header of this name from the client is always removed',
  admission_audience: 'the admission\'s `aud`, what the origin checks',
  admission_claims: 'what an admission carries besides `iss`, `aud`, `iat`, `exp`: any of `queue`, `ticket`, `admitted_at`, `session_expires`, `via`',
  admission_lifetime_seconds: 'how long an admission is valid (30 – 3,600), never past the visitor\'s session',
  admission_carry: 'how an admitted visitor\'s admission goes on between signatures: `cookie` (an HttpOnly cookie bound to its access token; signed once per half lifetime; the visitor could read it from its own cookie jar) or `none` (it never leaves the edge: signed on every request on Fastly, once per half lifetime on a host that remembers it)',
  page_title: 'the site\'s name, above the holding page\'s heading and in its title, in `page_language`; empty = none (the heading, in the visitor\'s language, says what the page is; a name equal to the heading is not shown twice). Another language\'s own goes in `page_texts`, else this one is shown',
  page_message: 'the message under the heading, in `page_language`; empty = a sentence in the visitor\'s language ("We are letting visitors in a few at a time to keep the site fast for everyone.", before the opening "Once the line opens, we will let visitors in…"). Another language\'s own goes in `page_texts`, else this one is shown',
  page_logo_url: 'logo on the holding page: an https URL or a path on the site; empty = the built-in logo',
  page_accent_color: 'accent colour (`#rrggbb`) of the holding page; refused unless it reaches 4.5:1 contrast against white (WCAG AA)',
  page_background_color: 'background colour (`#rrggbb`) around the page\'s card',
  page_language: 'language for browsers that ask for none of ours, and the language of `page_title` and `page_message`: `en`, `de`, `fr`, `es`, `it`, `pt`, `nl`, `tr`, `ja`, `zh`, `ko`, `ar` (right to left), or one added in `page_texts`',
  page_texts: 'optional JSON of texts by language, up to 8,000 characters: a language\'s own `page_title` and `page_message`, any built-in text replaced, or a language added; see [Languages and texts](operating.md#languages-and-texts). Each mistake is named by its place (`page_texts.de.in_lin: unknown text; did you mean in_line?`)',
  webhooks: 'optional JSON array of signed webhooks, service-wide: each `{"name", "url"}` (Node host) or `{"name", "backend", "path"}` (Fastly, a declared backend), or both, with the `"events"` it gets (`["*"]` for all) and optionally the `"queues"` whose events; see [Webhooks](webhooks.md). Signed with the secret `webhook_secret`',
};
/** One sentence per secret (secrets have no defaults: the Secret Store holds them, see parseSecrets). */
const SECRET_MEANINGS: Record<(typeof SECRET_KEYS)[number], string> = {
  signing_keys: 'the cookie key ring, `kid:secret[,kid:secret…]`. Each secret must look random, or the service refuses to start: at least 32 bytes, at least 8 different characters, no character more than 6 times in a row, not a repeated pattern (`openssl rand -base64 32` makes one). No token is signed with a ring key itself: each kind (waiting ticket, access token, admin form, bypass pass) has its own key, HMAC-SHA256(ring key, `wr/v1/<purpose>`), so one kind can never pass for another. The first key signs new tokens; every listed key verifies. **Rotate** by putting a new key first and keeping the old one until its tokens have expired (`session_seconds`). **Emergency reset**: remove a key, and every token signed with it stops working at once (those visitors queue again).',
  admin_password: 'admin page password (12+ characters): one admin account named `admin_user`; the console is refused until it or `admin_accounts` is set',
  admin_api_token: 'bearer token of the origin\'s admit API (24+ characters, random-looking as above); the API is refused until it is set. Refused if it is, or contains, the admin password or a signing key',
  upstash_token: 'Upstash REST token',
  upstash_shard_tokens: 'with `store_shards` above 1 on Upstash: the REST tokens of the databases of `upstash_shard_urls`, comma-separated, in the same order',
  admission_keys: 'the signed admission\'s keys: a JSON array of private P-256 JWKs, each with a `kid` (`npm run keys` makes one); the first signs, all are published at `<prefix>.well-known/jwks.json`. Read only when an admission is signed or the JWKS served',
  challenge_secret: 'the challenge provider\'s secret key (only with `challenge_provider`); on Fastly read only when a token is verified',
  webhook_secret: 'the HMAC-SHA256 key that signs webhook deliveries (32+ characters, random-looking; not a signing key nor the admin password): every receiver holds it to verify them. Read only when a delivery is sent; see [Webhooks](webhooks.md)',
  admin_accounts: 'named console accounts: a JSON object of name → `{"role": "viewer" | "operator" | "admin", "hash": "pbkdf2-sha256$…"}` (`npm run keys -- hash-password` makes a hash; the password itself is never stored). A viewer sees everything and changes nothing, an operator also admits, pauses, switches and sets limits, VIP codes and pins, an admin also resets; see [Accounts](operating.md#accounts-and-the-audit-trail)',
};

/** Where the generated tables sit in docs/configuration.md. */
export const GENERATED_BEGIN = '<!-- generated from src/core/config.ts by `npm run docs`: edit the schema or src/core/config-reference.ts, not this table -->';
export const GENERATED_END = '<!-- end of generated reference -->';

/** `queues` is a JSON document read by src/core/queues.ts, not by `parseConfig`. */
const QUEUES_SHAPE: SettingShape = { key: 'queues', kind: 'text', fallback: '' };

/** Every setting's shape as the parser reads it, in the documented order (`CONFIG_KEYS`). */
export function describeSettings(): SettingShape[] {
  const seen = new Map<string, SettingShape>();
  parseConfig(() => undefined, (shape) => {
    if (seen.has(shape.key)) throw new Error(`the schema reads ${shape.key} twice`);
    seen.set(shape.key, shape);
  });
  seen.set('queues', QUEUES_SHAPE);
  const unknown = [...seen.keys()].filter((key) => !(CONFIG_KEYS as readonly string[]).includes(key));
  const unread = CONFIG_KEYS.filter((key) => !seen.has(key));
  if (unknown.length > 0 || unread.length > 0) {
    throw new Error(`CONFIG_KEYS and the schema differ: read but not listed ${unknown.join(', ') || 'none'}; listed but never read ${unread.join(', ') || 'none'}`);
  }
  return CONFIG_KEYS.map((key) => seen.get(key)!);
}

const number = (n: number): string => n.toLocaleString('en-US');

function values(shape: SettingShape): string {
  switch (shape.kind) {
    case 'integer':
      return `whole number, ${number(shape.min)} – ${number(shape.max)}`;
    case 'choice':
      return shape.choices.map((c) => `\`${c}\``).join(', ');
    case 'list':
      return 'comma-separated list';
    case 'instant':
      return 'date and time with a zone';
    case 'url':
      return 'URL';
    case 'text':
      if (shape.key === 'ticket_blocks') return `\`off\`, \`auto\`, or a whole number, 1 – ${number(MAX_TICKET_BLOCK)}`;
      return shape.key === 'queues' || shape.key === 'webhooks' ? 'JSON' : 'text';
  }
}

/** The generated part of docs/configuration.md: the settings table and the secrets table. */
export function renderConfigurationReference(): string {
  const rows = describeSettings().map((shape) => {
    const fallback = shape.fallback === '' ? (shape.key === 'queues' || shape.key === 'webhooks' ? 'none' : 'empty') : `\`${shape.fallback}\``;
    return `| \`${shape.key}\` | ${SETTING_MEANINGS[shape.key as (typeof CONFIG_KEYS)[number]]} | ${values(shape)} | ${fallback} |`;
  });
  const secrets = SECRET_KEYS.map((key) => `| \`${key}\` | ${SECRET_MEANINGS[key]} |`);
  return [
    GENERATED_BEGIN,
    '',
    `### Settings (${rows.length})`,
    '',
    '| key | meaning | values | default |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
    `### Secrets (${secrets.length})`,
    '',
    '| secret | meaning |',
    '| --- | --- |',
    ...secrets,
    '',
    GENERATED_END,
  ].join('\n');
}

/** `text` with its generated part replaced by `generated`; throws when the markers are missing. */
export function replaceGenerated(text: string, generated: string): string {
  const begin = text.indexOf(GENERATED_BEGIN);
  const end = text.indexOf(GENERATED_END);
  if (begin < 0 || end < begin) throw new Error('docs/configuration.md has lost the markers of its generated reference');
  return text.slice(0, begin) + generated + text.slice(end + GENERATED_END.length);
}
