/**
 * The one request path. In order: the waiting room's own paths, bypass rules, whether the queue
 * covers the request, the visitor's cookie, then ticket, poll or claim, then pass or hold. The
 * same handler runs on Fastly and in the Node host; everything that differs is behind the ports.
 *
 * Two admission modes, decided by the thresholds in effect (configured or set at runtime):
 * - rate mode: a called ticket (`ticket <= cursor`) claims its admission in the store (one call per
 *   admitted visitor, so that a call nobody takes up in time goes to the next ticket), then becomes
 *   an access token;
 * - capacity mode (`max_active` / `max_new_per_minute`): a called ticket claims a slot in the store
 *   (one call), the access token then carries the slot, refreshed at most once per
 *   `activity_refresh_seconds`, and the slot is freed when the visitor leaves or the origin says so.
 */
import { handleAdminRoute } from './admin';
import type { Config, Secrets } from './config';
import { readCookieValues, serializeCookie } from './cookies';
import { describeEstimate, estimateWait, type WaitEstimate } from './estimate';
import { errorResponse, jsonResponse } from './http';
import { isAddressInCidrs } from './ip';
import { blankHoldView, holdingCsp, holdTexts } from './holding';
import { messages, negotiateLocale, type Locale } from './i18n';
import { ASSETS, renderHoldingPage, type Branding } from './pages';
import { bypassApplies, queueApplies, readPath, reservedPrefixMatch, sameSiteLocation, withoutQueryParam } from './path-canon';
import { matchesAnyPath } from './path-pattern';
import type { AdmissionPolicy, ClientInfo, Clock, FailureLimiter, Logger, Origin, QueueOverview, QueueState, QueueStore, StateCache, TemplateSource } from './ports';
import { createShuffle } from './shuffle';
import { callStore, type StoreOutcome } from './store-call';
import { signToken, verifyToken, type TokenClaims, type TokenKind, type VerifyFailure } from './tokens';
import { hashVipCode, normalizeVipCode, VIP_PARAM } from './vip';

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
  /** With several queues: every queue's figures, for the admin page's list. */
  readonly overview?: (nowMs: number) => Promise<readonly QueueOverview[]>;
  /**
   * Counts failed sign-ins per client and holds guessers (the POP's Edge Rate Limiting on Fastly,
   * memory on the Node host). Without it failures are logged and nobody is held.
   */
  readonly authLimiter?: FailureLimiter | undefined;
}

export type Handler = (request: Request, client: ClientInfo) => Promise<Response>;

/** What one request did, for its log line. Filled in as the request goes along. */
export interface Trace {
  decision: string;
  reason?: string;
  ticket?: number;
  cursor?: number;
  tail?: number;
  storeMs?: number;
  storeError?: string;
  cache?: 'hit' | 'miss';
  /** The client's throttle key, on failed sign-ins and held clients (see auth-throttle.ts). */
  client?: string;
  /** The client's address as the platform gave it, for the sign-in throttle; not logged. */
  readonly from?: string | undefined;
}

/** Carries a store failure out of a cache load, so it is not cached and every waiter sees it. */
class StoreUnavailable extends Error {
  constructor(readonly outcome: StoreOutcome<never>) {
    super(outcome.ok ? 'store unavailable' : outcome.message);
  }
}

/** The outcome of looking at a visitor's cookie and, if needed, asking the store. */
export type Visit =
  /** A valid access token. `slot`: it holds a capacity slot. `cookie`: a renewed token, if any. */
  | {
      readonly kind: 'access';
      readonly ticket: number;
      readonly slot: boolean;
      readonly cookie: string | undefined;
      /** The store generation the token's ticket belongs to (absent: a token from before generations). */
      readonly generation?: number | undefined;
    }
  /** The visitor's ticket was called (and in capacity mode its slot claimed): the cookie becomes an access token. */
  | { readonly kind: 'admitted'; readonly ticket: number; readonly slot: boolean; readonly cookie: string }
  /**
   * In line: `ahead` visitors are before this one (FIFO), or `ahead` others are in the draw with it
   * (`draw`, the random method). `front`: called, waiting for a slot to free. `first`: the place
   * it was first shown (the start of its progress).
   */
  | {
      readonly kind: 'waiting';
      readonly ticket: number;
      readonly ahead: number;
      readonly front: boolean;
      readonly draw: boolean;
      readonly first: number;
      readonly state: QueueState;
      readonly cookie: string;
    }
  /** Before the event's start (or while its places are being drawn): a place in the pre-queue. */
  | { readonly kind: 'prequeue'; readonly ticket: number; readonly cookie: string }
  /** The store did not answer; `ticket` is known when the visitor already held one. */
  | { readonly kind: 'unavailable'; readonly ticket: number | undefined; readonly cookie: string | undefined }
  /** No valid token and none was to be taken (the status endpoint never takes a ticket). */
  | { readonly kind: 'none' };

/** The most tokens of ours one request may carry that we verify (duplicates are legal). */
const MAX_COOKIES_CHECKED = 4;
/** Bypass passes are not tied to a queue. */
export const BYPASS_QUEUE = '*';
/** The queue cookie holds a waiting ticket or an access token, never another kind. */
const VISITOR_KINDS: readonly TokenKind[] = ['w', 'a'];
/** User agents of the search engines' crawlers (a claim to be checked against their address ranges). */
const CRAWLER_AGENT = /\b(?:Googlebot|Google-InspectionTool|bingbot|Applebot|DuckDuckBot|YandexBot|Baiduspider)\b/i;
/** How long a POP keeps a template override before asking the KV Store again, seconds. */
export const TEMPLATE_CACHE_SECONDS = 30;
/** The largest template override accepted, bytes of text. */
const MAX_TEMPLATE_CHARS = 64 * 1024;
/** A called ticket's reservation outlives the holder's next poll by this much. */
const RESERVATION_SLACK_MS = 5000;

/** Before the event's start, during it, or after its end. */
export type EventPhase = 'before' | 'open' | 'over';

export function eventPhase(config: Pick<Config, 'eventStartMs' | 'eventEndMs'>, nowMs: number): EventPhase {
  if (config.eventStartMs > 0 && nowMs < config.eventStartMs) return 'before';
  if (config.eventEndMs > 0 && nowMs >= config.eventEndMs) return 'over';
  return 'open';
}

/** 48 random bits from the platform's cryptographic generator (Fastly and Node both have it). */
function cryptoSeed(): number {
  const words = new Uint32Array(2);
  crypto.getRandomValues(words);
  return (words[0]! & 0xffff) * 0x100000000 + words[1]!;
}

/** What a waiting visitor is shown, as the page, the status JSON and the JSON for programs all need it. */
export interface HoldView {
  /** `waiting` in line or in the draw; `prequeue` before the start; `checking`: the store did not answer; `over`: the event ended. */
  readonly state: 'waiting' | 'prequeue' | 'checking' | 'over';
  readonly ticket: number | null;
  /** FIFO: the place in line (1 = next), and how many are ahead. */
  readonly place: number | null;
  readonly ahead: number | null;
  /** FIFO: the place first shown, where the progress bar starts. */
  readonly first: number | null;
  /** Called, waiting for a slot to free. */
  readonly front: boolean;
  readonly paused: boolean;
  /** The random method: how many visitors (this one included) are in the draw. */
  readonly inDraw: number | null;
  readonly estimate: WaitEstimate | null;
  /** Before the start: when the line opens, and whether places are then drawn or kept in arrival order. */
  readonly startsAtMs: number | null;
  readonly order: 'shuffle' | 'arrival' | null;
  /** Seconds until the next update (shortened to reach the start promptly). */
  readonly refreshSeconds: number;
  readonly nowMs: number;
}

export function isCapacityMode(state: Pick<QueueState, 'maxActive' | 'maxNewPerMinute'>): boolean {
  return state.maxActive > 0 || state.maxNewPerMinute > 0;
}

/** An access token holds a capacity slot when it carries the time of the slot's last refresh. */
function holdsSlot(token: TokenClaims): boolean {
  return token.r !== undefined;
}

/** When an access token's session began, seconds: `s`, or its issue time for tokens issued at admission without one. */
function sessionStart(token: TokenClaims): number {
  return token.s ?? token.iat;
}

export function admissionPolicy(config: Readonly<Config>): AdmissionPolicy {
  return {
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

/** Which life of the queue a ticket belongs to: the reset epoch and the store generation. */
interface Era {
  readonly epoch: number;
  readonly generation: number;
}

/**
 * A ticket's generation is not the store's: the store lost its state since it was taken. A token
 * without one (issued before generations existed) counts as current, and so does a state without one.
 */
function isForeign(generation: number | undefined, state: Pick<QueueState, 'generation'>): boolean {
  return generation !== undefined && generation !== 0 && state.generation !== 0 && generation !== state.generation;
}

export function createHandler(deps: HandlerDeps): Handler {
  const { config, secrets, store, origin, logger, clock, cache } = deps;
  const queue = config.queueName;
  const basePolicy = admissionPolicy(config);
  const randomSeed = deps.randomSeed ?? cryptoSeed;
  const random = config.queueMethod === 'random';
  const shuffled = config.eventStartMs > 0 && config.eventOrder === 'shuffle' && !random;
  /** The policy for one store call: fresh randomness each time (draws; the shuffle seed at the start). */
  const policyNow = (): AdmissionPolicy => ({ ...basePolicy, seed: randomSeed() });
  const cacheKey = `queue-state:${queue}`;
  const assetPrefix = `${config.pathPrefix}assets/`;
  // Rate mode: an access token is renewed on activity, but not on every request (that would add
  // a Set-Cookie to every response). Once a minute keeps the session sliding.
  const renewAfterMs = Math.min(60, Math.floor(config.sessionSeconds / 4)) * 1000;
  const refreshAfterMs = config.activityRefreshSeconds * 1000;
  // After a lost state, every holder has refreshed its slot (once per activity refresh, seen through
  // a cache of up to state_cache_seconds) by the end of this window.
  const recoverMs = (config.activityRefreshSeconds + config.stateCacheSeconds) * 1000 + RESERVATION_SLACK_MS;

  function storeCall<T>(trace: Trace, call: () => Promise<T>): Promise<StoreOutcome<T>> {
    return callStore(call, config.storeTimeoutMs, clock).then((outcome) => {
      trace.storeMs = (trace.storeMs ?? 0) + outcome.ms;
      if (!outcome.ok) trace.storeError = `${outcome.reason}: ${outcome.message}`;
      return outcome;
    });
  }

  /**
   * A waiting visitor's poll: from the per-POP cache when it holds a fresh state, else one store
   * call (which also runs admission) whose answer the cache keeps for its lifetime.
   */
  async function pollState(trace: Trace, nowMs: number): Promise<StoreOutcome<QueueState>> {
    const direct = () => storeCall(trace, () => store.poll(queue, nowMs, policyNow()));
    if (config.stateCacheSeconds === 0) return direct();
    try {
      const { value, hit } = await cache.getOrLoad(cacheKey, config.stateCacheSeconds, async () => {
        const outcome = await direct();
        if (!outcome.ok) throw new StoreUnavailable(outcome);
        return outcome.value;
      });
      trace.cache = hit ? 'hit' : 'miss';
      return { ok: true, value, ms: trace.storeMs ?? 0 };
    } catch (error) {
      trace.cache = 'miss';
      if (error instanceof StoreUnavailable) return error.outcome;
      // The cache itself failed: the store still answers, one call per poll.
      trace.reason = `cache: ${error instanceof Error ? error.message : String(error)}`;
      return direct();
    }
  }

  interface Extra {
    readonly j?: number | undefined;
    readonly s?: number | undefined;
    readonly r?: number | undefined;
    readonly f?: number | undefined;
    readonly g?: number | undefined;
    readonly gen?: number | undefined;
  }

  async function issue(kind: 'w' | 'a', ticket: number, nowMs: number, extra: Extra): Promise<string> {
    const iat = Math.floor(nowMs / 1000);
    let lifetime = kind === 'a' ? config.sessionSeconds : config.queueTimeoutSeconds;
    if (kind === 'a' && extra.s !== undefined && config.sessionMaxSeconds > 0) {
      lifetime = Math.max(0, Math.min(lifetime, extra.s + config.sessionMaxSeconds - iat));
    }
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
    };
    return serializeCookie(config.cookieName, await signToken(secrets.keyRing, claims), { maxAge: lifetime });
  }

  const clearCookie = () => serializeCookie(config.cookieName, '', { maxAge: 0 });

  /** The best valid token among the cookies sent: an access token first, else the earliest ticket. */
  async function readToken(request: Request, nowMs: number, trace: Trace): Promise<TokenClaims | undefined> {
    const values = readCookieValues(request.headers.get('cookie'), config.cookieName).slice(0, MAX_COOKIES_CHECKED);
    if (values.length === 0) return undefined;
    const results = await Promise.all(values.map((v) => verifyToken(secrets.keyRing, v, queue, nowMs, VISITOR_KINDS)));
    let best: TokenClaims | undefined;
    let failure: VerifyFailure | undefined;
    for (const result of results) {
      if (!result.ok) {
        failure ??= result.reason;
        continue;
      }
      const claims = result.claims;
      if (best === undefined || rank(claims) < rank(best)) best = claims;
    }
    if (best === undefined && failure !== undefined) trace.reason = `token_${failure}`;
    return best;
  }

  function rank(claims: TokenClaims): number {
    return claims.k === 'a' ? -1 : claims.t;
  }

  function record(trace: Trace, state: QueueState, ticket: number): void {
    trace.ticket = ticket;
    trace.cursor = state.cursor;
    trace.tail = state.tail;
  }

  /**
   * A waiting ticket's cookie: the arrival ticket, the join time, the first place shown, and the
   * queue's epoch and store generation the ticket belongs to (from a state, or kept from the token).
   */
  function waitingCookie(ticket: number, joined: number, nowMs: number, first: number | undefined, era: Era): Promise<string> {
    return issue('w', ticket, nowMs, { j: joined, f: first, g: era.epoch, gen: era.generation });
  }

  /** The era a token's ticket belongs to, to carry it unchanged into a renewed cookie. */
  function tokenEra(token: TokenClaims): Era {
    return { epoch: token.g ?? 0, generation: token.gen ?? 0 };
  }

  /**
   * An access token for a visitor let in now. It always carries when the session began (`s`), so
   * session_max_seconds holds in every mode; `slot`: it also holds a capacity slot, so it carries
   * when the slot was last refreshed in the store (`r`, now).
   */
  function admittedCookie(ticket: number, joined: number, nowMs: number, slot: boolean, generation: number): Promise<string> {
    const now = Math.floor(nowMs / 1000);
    return issue('a', ticket, nowMs, slot ? { j: joined, s: now, r: now, gen: generation } : { j: joined, s: now, gen: generation });
  }

  /**
   * A called place claims its admission (one call, never cached): in capacity mode its slot; in rate
   * mode its arrival, so that the store hands the call of a ticket nobody takes up in time to the
   * next one. The store knows the visitor by its place (`place`, which is its ticket unless an
   * event's pre-queue was shuffled); the waiting cookie keeps the arrival ticket.
   */
  async function claimSlot(trace: Trace, ticket: number, place: number, joined: number, nowMs: number, state: QueueState): Promise<Visit> {
    const slot = isCapacityMode(state);
    // The ticket belongs to the state's generation (the caller checked the token against it): a
    // store that lost its state since then refuses the number, which may be someone else's now.
    const claimed = await storeCall(trace, () => store.claim(queue, place, nowMs, policyNow(), Math.max(0, nowMs - joined * 1000), state.generation));
    if (!claimed.ok) {
      // Rate mode: the state said this place was called, and a rate-mode admission needs nothing
      // from the store afterwards; only the count of the arrival is lost (its call lapses and is
      // handed on, one admission more than the rate).
      if (!slot) {
        trace.reason = 'claim_unrecorded';
        return { kind: 'admitted', ticket: place, slot: false, cookie: await admittedCookie(place, joined, nowMs, false, state.generation) };
      }
      return { kind: 'unavailable', ticket, cookie: await waitingCookie(ticket, joined, nowMs, undefined, state) };
    }
    record(trace, claimed.value, place);
    if (claimed.value.claimed) {
      // The mode the claim ran under, should the thresholds have changed since the cached state.
      const held = isCapacityMode(claimed.value);
      return { kind: 'admitted', ticket: place, slot: held, cookie: await admittedCookie(place, joined, nowMs, held, claimed.value.generation) };
    }
    if (isForeign(state.generation, claimed.value)) {
      trace.reason = 'ticket_from_lost_state';
      return newVisit(trace, nowMs, true);
    }
    trace.reason = 'called_no_room';
    const cookie = await waitingCookie(ticket, joined, nowMs, 1, state);
    return { kind: 'waiting', ticket, ahead: 0, front: true, draw: false, first: 1, state, cookie };
  }

  /**
   * Where a ticket's place is. Without a shuffled event it is the ticket; with one, the pre-queue's
   * tickets 1..eventSize are permuted by the seed frozen at the start (every POP computes the same
   * places from the cached state), and later tickets keep their number.
   */
  function placeOf(ticket: number, state: QueueState): number {
    if (!shuffled || ticket > state.eventSize) return ticket;
    return createShuffle(state.eventSize, state.eventSeed).place(ticket);
  }

  /** FIFO: where a ticket stands against a state: called (rate or capacity mode) or still waiting. */
  async function settle(trace: Trace, state: QueueState, ticket: number, joined: number, first: number | undefined, nowMs: number): Promise<Visit> {
    // A cached state from just before the start has no frozen pre-queue yet: places are being drawn.
    if (shuffled && state.eventSize === 0 && state.cursor === 0 && joined * 1000 < config.eventStartMs) {
      trace.ticket = ticket;
      trace.reason = 'drawing_places';
      return { kind: 'prequeue', ticket, cookie: await waitingCookie(ticket, joined, nowMs, undefined, state) };
    }
    const place = placeOf(ticket, state);
    record(trace, state, place);
    if (place > state.cursor) {
      const ahead = place - state.cursor - 1;
      // The progress bar starts at the first place shown; a shuffle at the start may move it back.
      const start = first === undefined || first < ahead + 1 ? ahead + 1 : first;
      const cookie = await waitingCookie(ticket, joined, nowMs, start, state);
      return { kind: 'waiting', ticket, ahead, front: false, draw: false, first: start, state, cookie };
    }
    return claimSlot(trace, ticket, place, joined, nowMs, state);
  }

  /**
   * A new ticket. `lostState`: the visitor's token was of a lost generation, which tells the store
   * its state was lost: capacity mode then holds new admissions for one activity refresh interval
   * (see `recoverMs`), while the lost state's holders register their slots again.
   */
  async function newVisit(trace: Trace, nowMs: number, lostState = false): Promise<Visit> {
    const joined = await storeCall(trace, () => store.join(queue, nowMs, policyNow(), lostState ? recoverMs : undefined));
    if (!joined.ok) return { kind: 'unavailable', ticket: undefined, cookie: undefined };
    const result = joined.value;
    const now = Math.floor(nowMs / 1000);
    if (result.claimed) {
      record(trace, result, result.ticket);
      trace.reason = 'walk_in';
      const slot = isCapacityMode(result);
      return { kind: 'admitted', ticket: result.ticket, slot, cookie: await admittedCookie(result.ticket, now, nowMs, slot, result.generation) };
    }
    if (eventPhase(config, nowMs) === 'before') {
      record(trace, result, result.ticket);
      return { kind: 'prequeue', ticket: result.ticket, cookie: await waitingCookie(result.ticket, now, nowMs, undefined, result) };
    }
    if (random) return drawn(trace, result, 'waiting', result.ticket, now, nowMs);
    if (isCapacityMode(result) && result.ticket <= result.cursor) {
      // Called by the same step but not claimed (paused meanwhile): it claims on the next poll.
      record(trace, result, result.ticket);
      const cookie = await waitingCookie(result.ticket, now, nowMs, 1, result);
      return { kind: 'waiting', ticket: result.ticket, ahead: 0, front: true, draw: false, first: 1, state: result, cookie };
    }
    return settle(trace, result, result.ticket, now, undefined, nowMs);
  }

  /** The random method: what a draw said about a ticket still waiting, or called without room. */
  async function drawn(trace: Trace, state: QueueState, outcome: 'waiting' | 'front', ticket: number, joined: number, nowMs: number): Promise<Visit> {
    record(trace, state, ticket);
    const cookie = await waitingCookie(ticket, joined, nowMs, undefined, state);
    if (eventPhase(config, nowMs) === 'before') return { kind: 'prequeue', ticket, cookie };
    const front = outcome === 'front';
    return { kind: 'waiting', ticket, ahead: front ? 0 : Math.max(0, state.waiting - 1), front, draw: !front, first: 1, state, cookie };
  }

  /**
   * The random method: every waiting poll is one store call (`draw`), which keeps the visitor in
   * the draw and tells whether it was drawn. A ticket the draw no longer knows (its presence
   * lapsed, or the queue was reset) gets a new one: in a lottery that costs the visitor nothing.
   */
  async function drawVisit(trace: Trace, token: TokenClaims, joined: number, nowMs: number, takeTicket: boolean): Promise<Visit> {
    const result = await storeCall(trace, () => store.draw(queue, token.t, nowMs, policyNow(), Math.max(0, nowMs - joined * 1000), token.gen));
    if (!result.ok) {
      trace.ticket = token.t;
      return { kind: 'unavailable', ticket: token.t, cookie: await waitingCookie(token.t, joined, nowMs, undefined, tokenEra(token)) };
    }
    const r = result.value;
    if (r.outcome === 'unknown' || (token.g ?? 0) !== r.epoch || isForeign(token.gen, r)) {
      trace.reason = isForeign(token.gen, r) ? 'ticket_from_lost_state' : 'not_in_draw';
      return takeTicket ? newVisit(trace, nowMs, isForeign(token.gen, r)) : { kind: 'none' };
    }
    if (r.outcome === 'drawn') {
      record(trace, r, token.t);
      return { kind: 'admitted', ticket: token.t, slot: r.claimed, cookie: await admittedCookie(token.t, joined, nowMs, r.claimed, r.generation) };
    }
    return drawn(trace, r, r.outcome, token.t, joined, nowMs);
  }

  async function accessVisit(trace: Trace, token: TokenClaims, nowMs: number, takeTicket: boolean): Promise<Visit> {
    trace.ticket = token.t;
    // A token without `s` was issued at its admission (a VIP link, or one from before `s` was
    // carried in rate mode): its session began when it was issued, and renewals carry that on.
    const start = sessionStart(token);
    const untilMs = config.sessionMaxSeconds > 0 ? (start + config.sessionMaxSeconds) * 1000 : Number.MAX_SAFE_INTEGER;
    if (nowMs >= untilMs) {
      // The token's expiry is capped at the maximum already; this also ends sessions when the
      // maximum was lowered after the token was issued.
      trace.reason = 'session_max';
      return takeTicket ? newVisit(trace, nowMs) : { kind: 'none' };
    }
    if (!holdsSlot(token)) {
      const renew = nowMs - token.iat * 1000 >= renewAfterMs;
      return { kind: 'access', ticket: token.t, slot: false, cookie: renew ? await issue('a', token.t, nowMs, { j: token.j, s: start, gen: token.gen }) : undefined };
    }
    // Capacity mode: the slot is refreshed in the store at most once per activity_refresh_seconds.
    const lastRefreshMs = (token.r ?? start) * 1000;
    const generation = token.gen;
    if (nowMs - lastRefreshMs < refreshAfterMs) return { kind: 'access', ticket: token.t, slot: true, cookie: undefined, generation };
    // A holder from a lost generation keeps its generation: the store registers its slot again
    // under a member of its own (see scripts.ts, Generations) and renews that one from then on.
    const touched = await storeCall(trace, () => store.touch(queue, token.t, nowMs, basePolicy, untilMs, generation));
    // The token is self-contained: a store that does not answer does not end the session.
    if (!touched.ok) return { kind: 'access', ticket: token.t, slot: true, cookie: undefined, generation };
    if (!touched.value) {
      trace.reason = 'slot_ended';
      return takeTicket ? newVisit(trace, nowMs) : { kind: 'none' };
    }
    const now = Math.floor(nowMs / 1000);
    return { kind: 'access', ticket: token.t, slot: true, cookie: await issue('a', token.t, nowMs, { j: token.j, s: start, r: now, gen: generation }), generation };
  }

  /** Steps 4 and 5 of the request path: the cookie, then what the store must say. */
  async function visit(request: Request, trace: Trace, takeTicket: boolean): Promise<Visit> {
    const nowMs = clock.now();
    const token = await readToken(request, nowMs, trace);
    if (token?.k === 'a') return accessVisit(trace, token, nowMs, takeTicket);
    if (token !== undefined) {
      const joined = token.j ?? token.iat;
      if (random) return drawVisit(trace, token, joined, nowMs, takeTicket);
      if (eventPhase(config, nowMs) === 'before') {
        // Nothing moves before the start: the pre-queue page needs no store call.
        trace.ticket = token.t;
        return { kind: 'prequeue', ticket: token.t, cookie: await waitingCookie(token.t, joined, nowMs, undefined, tokenEra(token)) };
      }
      const polled = await pollState(trace, nowMs);
      if (!polled.ok) {
        trace.ticket = token.t;
        // The outage is not the visitor's fault: keep the ticket alive while it lasts.
        return { kind: 'unavailable', ticket: token.t, cookie: await waitingCookie(token.t, joined, nowMs, token.f, tokenEra(token)) };
      }
      if (isForeign(token.gen, polled.value)) {
        // The store lost its state since this ticket was taken: numbers restarted, so this one may
        // be a newer visitor's. The visitor rejoins at the back (see the README, "When the store
        // loses its state"). Checked before the epoch, which the loss reset too.
        trace.reason = 'ticket_from_lost_state';
        return takeTicket ? newVisit(trace, nowMs, true) : { kind: 'none' };
      }
      if ((token.g ?? 0) !== polled.value.epoch) {
        // The queue was reset since this ticket was taken: it stands for nothing any more.
        trace.reason = 'ticket_before_reset';
        return takeTicket ? newVisit(trace, nowMs) : { kind: 'none' };
      }
      return settle(trace, polled.value, token.t, joined, token.f, nowMs);
    }
    if (!takeTicket) return { kind: 'none' };
    return newVisit(trace, nowMs);
  }

  /** Programs get JSON: a path configured for it, or a client that accepts JSON but not HTML. */
  function wantsJson(request: Request, path: string): boolean {
    if (config.jsonPaths.length > 0 && matchesAnyPath(path, config.jsonPaths)) return true;
    const accept = request.headers.get('accept') ?? '';
    return /application\/(?:[a-z.+-]*\+)?json/i.test(accept) && !/text\/html/i.test(accept);
  }

  /** What a held visitor is shown, from its visit: in line, in the draw, in the pre-queue, or unknown (store down). */
  function holdView(v: Extract<Visit, { kind: 'waiting' | 'prequeue' | 'unavailable' }> | undefined, nowMs: number): HoldView {
    const base = blankHoldView('checking', nowMs, config.refreshSeconds);
    if (v === undefined || v.kind === 'unavailable') return { ...base, ticket: v?.ticket ?? null };
    if (v.kind === 'prequeue') {
      // Wake up at the start, spread over a few seconds so that the pre-queue is not one burst.
      const untilStart = Math.ceil(Math.max(0, config.eventStartMs - nowMs) / 1000);
      const spread = 1 + (randomSeed() % Math.min(5, config.refreshSeconds));
      return {
        ...base,
        state: 'prequeue',
        ticket: v.ticket,
        startsAtMs: config.eventStartMs > 0 ? config.eventStartMs : null,
        order: random ? 'shuffle' : config.eventOrder,
        refreshSeconds: Math.min(config.refreshSeconds, untilStart + spread),
      };
    }
    const quiet = v.front || v.state.paused;
    return {
      ...base,
      state: 'waiting',
      ticket: v.ticket,
      place: v.draw ? null : v.ahead + 1,
      ahead: v.draw ? null : v.ahead,
      first: v.draw ? null : v.first,
      front: v.front,
      paused: v.state.paused,
      inDraw: v.draw ? v.ahead + 1 : null,
      estimate: quiet ? null : estimateWait(v.ahead, v.state, config),
    };
  }

  const overView = (nowMs: number): HoldView => blankHoldView('over', nowMs, config.refreshSeconds);

  /** The sentence that sums the view up, for programs and the page. */
  function holdMessage(view: HoldView): string {
    switch (view.state) {
      case 'checking':
        return 'We are checking your place in line.';
      case 'over':
        return 'This event has ended.';
      case 'prequeue':
        return view.startsAtMs !== null && view.startsAtMs > view.nowMs
          ? `The line opens at ${new Date(view.startsAtMs).toISOString()}.`
          : 'Places are being drawn.';
      case 'waiting':
        if (view.paused) return 'Admission is paused for a moment; you keep your place.';
        if (view.front) return 'You are at the front: you go in as soon as someone leaves.';
        return describeEstimate(view.estimate ?? { seconds: null, basis: 'none' });
    }
  }

  /** The figures of a view, shared by the status endpoint and the JSON answer for programs. */
  function viewFields(view: HoldView): Record<string, unknown> {
    return {
      queue,
      ticket: view.ticket,
      place: view.place,
      position: view.place,
      ahead: view.ahead,
      first_place: view.first,
      front: view.front,
      paused: view.paused,
      in_draw: view.inDraw,
      method: config.queueMethod,
      estimated_wait_seconds: view.estimate?.seconds ?? null,
      estimate_basis: view.estimate?.basis ?? 'none',
      starts_at: view.startsAtMs === null ? null : new Date(view.startsAtMs).toISOString(),
      starts_in_seconds: view.startsAtMs === null ? null : Math.max(0, Math.ceil((view.startsAtMs - view.nowMs) / 1000)),
      order: view.order,
      message: holdMessage(view),
      updated_at: new Date(view.nowMs).toISOString(),
    };
  }

  /** The status code of a held request: the queue's own, except "event over", which is final. */
  const holdStatusOf = (view: HoldView): number => (view.state === 'over' ? 410 : config.holdStatus);

  function holdingJson(view: HoldView, cookie: string | undefined, locale: Locale): Response {
    const body = { status: view.state, ...viewFields(view), texts: holdTexts(view, locale), retry_after_seconds: view.refreshSeconds };
    const headers: Record<string, string> = view.state === 'over' ? {} : { 'retry-after': String(view.refreshSeconds) };
    const response = jsonResponse(holdStatusOf(view), body, headers);
    if (cookie !== undefined) response.headers.append('set-cookie', cookie);
    return response;
  }

  const branding: Branding = {
    logoUrl: config.pageLogoUrl === '' ? `${assetPrefix}logo.svg` : config.pageLogoUrl,
    accent: config.pageAccentColor,
    background: config.pageBackgroundColor,
  };
  const statusUrl = `${config.pathPrefix}status?queue=${encodeURIComponent(queue)}`;
  const localeOf = (request: Request): Locale => negotiateLocale(request.headers.get('accept-language'), config.pageLanguage);

  /**
   * An override of a template from the operator's KV Store, cached in the POP for
   * TEMPLATE_CACHE_SECONDS; undefined when there is none, it is too large, or the store fails
   * (then the request's log line says why and the built-in template is used).
   */
  async function override(key: string, trace: Trace): Promise<string | undefined> {
    const templates = deps.templates;
    if (templates === undefined) return undefined;
    try {
      const { value } = await cache.getOrLoad(`template:${queue}:${key}`, TEMPLATE_CACHE_SECONDS, async () => {
        const text = (await templates.get(`${queue}/${key}`)) ?? (await templates.get(key));
        return text ?? '';
      });
      if (value === '') return undefined;
      if (value.length > MAX_TEMPLATE_CHARS) {
        trace.reason = `template_broken: ${key} is larger than ${MAX_TEMPLATE_CHARS} characters; the built-in one was served`;
        return undefined;
      }
      return value;
    } catch (error) {
      trace.reason = `template_unavailable: ${key}: ${error instanceof Error ? error.message : String(error)}`;
      return undefined;
    }
  }

  async function holdingPage(view: HoldView, cookie: string | undefined, locale: Locale, trace: Trace): Promise<Response> {
    const nonce = randomSeed().toString(36);
    const headers = new Headers({
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'x-robots-tag': 'noindex',
      'content-language': messages(locale).htmlLang,
      vary: 'accept-language',
      'content-security-policy': holdingCsp(nonce, branding.logoUrl),
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
      'x-content-type-options': 'nosniff',
      // Fastly compresses the body on the way out when the client accepts it; the Node host does the same.
      'x-compress-hint': 'on',
    });
    if (view.state !== 'over') headers.set('refresh', String(view.refreshSeconds));
    if (config.holdStatus !== 200 && view.state !== 'over') headers.set('retry-after', String(view.refreshSeconds));
    if (cookie !== undefined) headers.append('set-cookie', cookie);
    const page = {
      view,
      texts: holdTexts(view, locale),
      locale: messages(locale),
      title: config.pageTitle,
      message: config.pageMessage,
      branding,
      assetPrefix,
      statusUrl,
      nonce,
    };
    const custom = await override('holding.html', trace);
    let html: string | undefined;
    if (custom !== undefined) {
      try {
        html = renderHoldingPage(page, custom);
      } catch (error) {
        // A typo in an operator's template must never cost a visitor the page.
        trace.reason = `template_broken: holding.html: ${error instanceof Error ? error.message : String(error)}; the built-in one was served`;
      }
    }
    html ??= renderHoldingPage(page);
    return new Response(html, { status: holdStatusOf(view), headers });
  }

  async function pass(request: Request, v: Extract<Visit, { kind: 'access' | 'admitted' }> | undefined, trace: Trace): Promise<Response> {
    let response: Response;
    try {
      response = await origin.forward(request);
    } catch (error) {
      trace.reason = `origin: ${error instanceof Error ? error.message : String(error)}`;
      return errorResponse(502, 'the site is not answering; please try again shortly');
    }
    const endsSession = response.headers.has(config.endSessionHeader);
    const cookie = endsSession && v !== undefined ? clearCookie() : v?.cookie;
    if (endsSession && v?.slot) {
      const ticket = v.ticket;
      const generation = v.kind === 'access' ? v.generation : undefined;
      // A failed call is no loss: the slot then lapses with its session.
      await storeCall(trace, () => store.leave(queue, ticket, clock.now(), basePolicy, 0, generation));
    }
    if (endsSession) trace.reason = 'origin_ended_session';
    if (cookie === undefined && !endsSession) return response;
    // Status, headers and the streamed body stay the origin's; we add Set-Cookie and remove only
    // the origin's end-session signal, which is meant for us.
    const headers = new Headers(response.headers);
    headers.delete(config.endSessionHeader);
    if (cookie !== undefined) headers.append('set-cookie', cookie);
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }

  /** What the status endpoint says of a held visitor: the view's figures and texts in its language. */
  function statusBody(view: HoldView, request: Request): Record<string, unknown> {
    return { state: view.state, ...viewFields(view), texts: holdTexts(view, localeOf(request)), refresh_seconds: view.refreshSeconds };
  }

  async function status(request: Request, trace: Trace): Promise<Response> {
    const nowMs = clock.now();
    if (eventPhase(config, nowMs) === 'over') {
      const over = await afterEnd(request, trace, nowMs);
      if (over !== 'over') return jsonResponse(200, { state: 'admitted', refresh_seconds: config.refreshSeconds });
      return jsonResponse(200, statusBody(overView(nowMs), request));
    }
    const v = await visit(request, trace, false);
    trace.decision = `status_${v.kind}`;
    let body: Record<string, unknown>;
    switch (v.kind) {
      case 'access':
      case 'admitted':
        body = { state: 'admitted', refresh_seconds: config.refreshSeconds };
        break;
      case 'none':
        body = { state: 'none', refresh_seconds: config.refreshSeconds };
        break;
      default:
        body = statusBody(holdView(v, nowMs), request);
    }
    const response = jsonResponse(200, body);
    if ('cookie' in v && v.cookie !== undefined) response.headers.append('set-cookie', v.cookie);
    return response;
  }

  /**
   * After the event's end: an admitted visitor keeps its session; everyone else is let through
   * (`event_after = pass`) or told the event is over. No ticket is taken and, for visitors without
   * an access token, no store call is made.
   */
  async function afterEnd(request: Request, trace: Trace, nowMs: number): Promise<'pass' | 'over' | Extract<Visit, { kind: 'access' }>> {
    const token = await readToken(request, nowMs, trace);
    if (token?.k === 'a') {
      const v = await accessVisit(trace, token, nowMs, false);
      if (v.kind === 'access') return v;
    }
    return config.eventAfter === 'pass' ? 'pass' : 'over';
  }

  /** The heartbeat script's calls: keep a slot while the tab is open, give it up when it goes. */
  async function session(request: Request, action: 'heartbeat' | 'leave', trace: Trace): Promise<Response> {
    if (request.method !== 'POST') return errorResponse(405, 'use POST', { allow: 'POST' });
    const nowMs = clock.now();
    const token = await readToken(request, nowMs, trace);
    trace.decision = action;
    if (token?.k !== 'a') return jsonResponse(200, { state: 'none' });
    trace.ticket = token.t;
    if (!holdsSlot(token)) return jsonResponse(200, { state: 'active' });
    if (action === 'leave') {
      await storeCall(trace, () => store.leave(queue, token.t, nowMs, basePolicy, config.leaveGraceSeconds * 1000, token.gen));
      return new Response(null, { status: 204, headers: { 'cache-control': 'no-store' } });
    }
    const start = sessionStart(token);
    const untilMs = config.sessionMaxSeconds > 0 ? (start + config.sessionMaxSeconds) * 1000 : Number.MAX_SAFE_INTEGER;
    const touched = await storeCall(trace, () => store.touch(queue, token.t, nowMs, basePolicy, untilMs, token.gen));
    if (!touched.ok) return jsonResponse(200, { state: 'active', refreshed: false });
    if (!touched.value) {
      return jsonResponse(200, { state: 'ended' }, { 'set-cookie': clearCookie() });
    }
    const now = Math.floor(nowMs / 1000);
    const cookie = await issue('a', token.t, nowMs, { j: token.j, s: start, r: now, gen: token.gen });
    return jsonResponse(200, { state: 'active', refreshed: true }, { 'set-cookie': cookie });
  }

  async function ownPath(request: Request, rest: string, trace: Trace): Promise<Response> {
    trace.decision = 'own';
    if (rest.startsWith('assets/')) {
      const name = rest.slice('assets/'.length);
      const asset = ASSETS.get(name);
      if (asset === undefined) return errorResponse(404, 'no such asset');
      const custom = name === 'style.css' ? await override('style.css', trace) : undefined;
      return new Response(custom ?? asset.body, {
        headers: {
          'content-type': asset.contentType,
          'cache-control': 'public, max-age=300',
          'x-content-type-options': 'nosniff',
          'x-compress-hint': 'on',
        },
      });
    }
    if (rest === 'status') {
      if (request.method !== 'GET' && request.method !== 'HEAD') return errorResponse(405, 'use GET', { allow: 'GET, HEAD' });
      return status(request, trace);
    }
    if (rest === 'heartbeat' || rest === 'leave') return session(request, rest, trace);
    if (rest === 'health') return jsonResponse(200, { ok: true });
    const admin = await handleAdminRoute(request, rest, { ...deps, address: trace.from, policy: policyNow(), trace, storeCall: (call) => storeCall(trace, call) });
    return admin ?? errorResponse(404, `no such path under ${config.pathPrefix}`);
  }

  /**
   * A VIP link: one use of the code is spent in the store (exactly as many visitors as it allows
   * get in, however many try at once), and the visitor goes to the same address without the code,
   * holding an access token. A code that does not work leaves the visitor to queue as usual.
   */
  async function useVip(request: Request, input: string, trace: Trace): Promise<Response | undefined> {
    const code = normalizeVipCode(input);
    if (code === undefined) {
      trace.reason = 'vip_malformed';
      return undefined;
    }
    const nowMs = clock.now();
    const hash = await hashVipCode(code);
    const used = await storeCall(trace, () => store.useVip(queue, hash, nowMs));
    if (!used.ok) return undefined;
    if (!used.value.ok) {
      trace.reason = `vip_${used.value.reason}`;
      return undefined;
    }
    trace.decision = 'vip';
    const target = new URL(request.url);
    // Rebuilt, not echoed: `/.//evil.example/` must not come back as the scheme-relative `//evil.example/`.
    const location = sameSiteLocation(target.pathname, withoutQueryParam(target.search, VIP_PARAM));
    const cookie = await issue('a', 0, nowMs, { j: Math.floor(nowMs / 1000) });
    return new Response(null, {
      status: 303,
      headers: { location, 'set-cookie': cookie, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' },
    });
  }

  /** The bypass cookie counts only when it holds a bypass pass signed by us and not expired. */
  async function hasBypassPass(request: Request): Promise<boolean> {
    const values = readCookieValues(request.headers.get('cookie'), config.bypassCookie).slice(0, MAX_COOKIES_CHECKED);
    for (const value of values) {
      const result = await verifyToken(secrets.keyRing, value, BYPASS_QUEUE, clock.now(), ['b']);
      if (result.ok && result.claims.k === 'b') return true;
    }
    return false;
  }

  /** A crawler is verified by its published address range; its user agent only says which it claims to be. */
  function isVerifiedCrawler(request: Request, client: ClientInfo): boolean {
    return CRAWLER_AGENT.test(request.headers.get('user-agent') ?? '') && isAddressInCidrs(client.address, config.crawlerIps);
  }

  async function route(request: Request, client: ClientInfo, trace: Trace): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (path.startsWith(config.pathPrefix)) return ownPath(request, path.slice(config.pathPrefix.length), trace);
    // Every way an origin might read the path (decoded, `;params` dropped, `\` as `/`, dots resolved).
    const readings = readPath(path);
    if (reservedPrefixMatch(path, config.pathPrefix, readings) === 'near') {
      // Another spelling of our prefix (`/__WR/`, `/%5F%5Fwr/`, `//__wr/`): the origin may read it as ours.
      trace.decision = 'reserved_spelling';
      return errorResponse(404, `no such path; the waiting room's own paths are spelt exactly ${config.pathPrefix}`);
    }
    if (bypassApplies(readings, config.bypassPaths)) {
      trace.decision = 'bypass_path';
      return pass(request, undefined, trace);
    }
    if (isAddressInCidrs(client.address, config.bypassIps)) {
      trace.decision = 'bypass_ip';
      return pass(request, undefined, trace);
    }
    if (config.bypassCookie !== '' && (await hasBypassPass(request))) {
      trace.decision = 'bypass_cookie';
      return pass(request, undefined, trace);
    }
    if (config.bypassCrawlers && isVerifiedCrawler(request, client)) {
      trace.decision = 'bypass_crawler';
      return pass(request, undefined, trace);
    }
    if (!queueApplies(readings, config.queuePaths)) {
      trace.decision = 'no_queue';
      return pass(request, undefined, trace);
    }
    const vip = new URL(request.url).searchParams.get(VIP_PARAM);
    if (vip !== null) {
      const used = await useVip(request, vip, trace);
      if (used !== undefined) return used;
    }
    const nowMs = clock.now();
    const locale = localeOf(request);
    const hold = (view: HoldView, cookie: string | undefined): Response | Promise<Response> =>
      wantsJson(request, path) ? holdingJson(view, cookie, locale) : holdingPage(view, cookie, locale, trace);
    if (eventPhase(config, nowMs) === 'over') {
      const over = await afterEnd(request, trace, nowMs);
      if (over === 'over') {
        trace.decision = 'event_over';
        return hold(overView(nowMs), undefined);
      }
      trace.decision = over === 'pass' ? 'event_over_pass' : 'access';
      return pass(request, over === 'pass' ? undefined : over, trace);
    }
    const v = await visit(request, trace, true);
    trace.decision = v.kind;
    switch (v.kind) {
      case 'access':
      case 'admitted':
        return pass(request, v, trace);
      case 'waiting':
      case 'prequeue':
        return hold(holdView(v, nowMs), v.cookie);
      case 'unavailable':
        if (config.storeFailure === 'pass') {
          trace.decision = 'unavailable_pass';
          return pass(request, undefined, trace);
        }
        return hold(holdView(v, nowMs), v.cookie);
      case 'none':
        // Unreachable: takeTicket is true here. Holding is the safe answer all the same.
        return hold(holdView(undefined, nowMs), undefined);
    }
  }

  return async (request, client) => {
    const trace: Trace = { decision: 'unknown', from: client.address };
    const response = await route(request, client, trace);
    logger.log({
      ts: new Date(clock.now()).toISOString(),
      method: request.method,
      path: new URL(request.url).pathname,
      status: response.status,
      decision: trace.decision,
      queue,
      ...(trace.reason !== undefined && { reason: trace.reason }),
      ...(trace.ticket !== undefined && { ticket: trace.ticket }),
      ...(trace.cursor !== undefined && { cursor: trace.cursor }),
      ...(trace.tail !== undefined && { tail: trace.tail }),
      ...(trace.storeMs !== undefined && { store_ms: trace.storeMs }),
      ...(trace.storeError !== undefined && { store_error: trace.storeError }),
      ...(trace.cache !== undefined && { cache: trace.cache }),
      ...(trace.client !== undefined && { client: trace.client }),
      ...(client.pop !== undefined && { pop: client.pop }),
    });
    return response;
  };
}
