/**
 * The one request path. In order: the waiting room's own paths, bypass rules, whether the queue
 * covers the request, the visitor's cookie, then ticket, poll or claim, then pass or hold. The
 * same handler runs on Fastly and in the Node host; everything that differs is behind the ports.
 *
 * Two admission modes, decided by the thresholds in effect (configured or set at runtime):
 * - rate mode: a called ticket (`ticket <= cursor`) simply becomes an access token;
 * - capacity mode (`max_active` / `max_new_per_minute`): a called ticket claims a slot in the store
 *   (one call), the access token then carries the slot, refreshed at most once per
 *   `activity_refresh_seconds`, and the slot is freed when the visitor leaves or the origin says so.
 */
import { handleAdminRoute } from './admin';
import type { Config, Secrets } from './config';
import { readCookieValues, serializeCookie } from './cookies';
import { describeEstimate, estimateWait } from './estimate';
import { errorResponse, jsonResponse } from './http';
import { isAddressInCidrs } from './ip';
import { ASSETS, renderHoldingPage } from './pages';
import { matchesAnyPath } from './path-pattern';
import type { AdmissionPolicy, ClientInfo, Clock, Logger, Origin, QueueState, QueueStats, QueueStore, StateCache } from './ports';
import { callStore, type StoreOutcome } from './store-call';
import { signToken, verifyToken, type TokenClaims, type VerifyFailure } from './tokens';
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
  /** With several queues: every queue's figures, for the admin page's list. */
  readonly overview?: (nowMs: number) => Promise<readonly { readonly name: string; readonly stats: QueueStats | undefined }[]>;
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
  | { readonly kind: 'access'; readonly ticket: number; readonly slot: boolean; readonly cookie: string | undefined }
  /** The visitor's ticket was called (and in capacity mode its slot claimed): the cookie becomes an access token. */
  | { readonly kind: 'admitted'; readonly ticket: number; readonly slot: boolean; readonly cookie: string }
  /** In line: `ahead` visitors are before this one. `front`: called, waiting for a slot to free. */
  | {
      readonly kind: 'waiting';
      readonly ticket: number;
      readonly ahead: number;
      readonly front: boolean;
      readonly state: QueueState;
      readonly cookie: string;
    }
  /** The store did not answer; `ticket` is known when the visitor already held one. */
  | { readonly kind: 'unavailable'; readonly ticket: number | undefined; readonly cookie: string | undefined }
  /** No valid token and none was to be taken (the status endpoint never takes a ticket). */
  | { readonly kind: 'none' };

/** The most tokens of ours one request may carry that we verify (duplicates are legal). */
const MAX_COOKIES_CHECKED = 4;
/** Bypass passes are not tied to a queue. */
export const BYPASS_QUEUE = '*';
/** User agents of the search engines' crawlers (a claim to be checked against their address ranges). */
const CRAWLER_AGENT = /\b(?:Googlebot|Google-InspectionTool|bingbot|Applebot|DuckDuckBot|YandexBot|Baiduspider)\b/i;
/** A called ticket's reservation outlives the holder's next poll by this much. */
const RESERVATION_SLACK_MS = 5000;

export function isCapacityMode(state: Pick<QueueState, 'maxActive' | 'maxNewPerMinute'>): boolean {
  return state.maxActive > 0 || state.maxNewPerMinute > 0;
}

export function admissionPolicy(config: Readonly<Config>): AdmissionPolicy {
  return {
    auto: { count: config.admitPerPeriod, periodMs: config.admitPeriodSeconds * 1000 },
    thresholds: { maxActive: config.maxActive, maxNewPerMinute: config.maxNewPerMinute },
    sessionMs: config.sessionSeconds * 1000,
    // The holder notices the call on a poll (every refresh_seconds) once its POP's cache expires.
    reservationMs: (config.refreshSeconds + config.stateCacheSeconds) * 1000 + RESERVATION_SLACK_MS,
  };
}

export function createHandler(deps: HandlerDeps): Handler {
  const { config, secrets, store, origin, logger, clock, cache } = deps;
  const queue = config.queueName;
  const policy = admissionPolicy(config);
  const cacheKey = `queue-state:${queue}`;
  const assetPrefix = `${config.pathPrefix}assets/`;
  // Rate mode: an access token is renewed on activity, but not on every request (that would add
  // a Set-Cookie to every response). Once a minute keeps the session sliding.
  const renewAfterMs = Math.min(60, Math.floor(config.sessionSeconds / 4)) * 1000;
  const refreshAfterMs = config.activityRefreshSeconds * 1000;

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
    const direct = () => storeCall(trace, () => store.poll(queue, nowMs, policy));
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
    };
    return serializeCookie(config.cookieName, await signToken(secrets.keyRing, claims), { maxAge: lifetime });
  }

  const clearCookie = () => serializeCookie(config.cookieName, '', { maxAge: 0 });

  /** The best valid token among the cookies sent: an access token first, else the earliest ticket. */
  async function readToken(request: Request, nowMs: number, trace: Trace): Promise<TokenClaims | undefined> {
    const values = readCookieValues(request.headers.get('cookie'), config.cookieName).slice(0, MAX_COOKIES_CHECKED);
    if (values.length === 0) return undefined;
    const results = await Promise.all(values.map((v) => verifyToken(secrets.keyRing, v, queue, nowMs)));
    let best: TokenClaims | undefined;
    let failure: VerifyFailure | undefined;
    for (const result of results) {
      if (!result.ok) {
        failure ??= result.reason;
        continue;
      }
      const claims = result.claims;
      if (claims.k === 'c' || claims.k === 'b') continue;
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

  /** A called ticket in capacity mode claims its slot (one call, never cached). */
  async function claimSlot(trace: Trace, ticket: number, joined: number, nowMs: number, state: QueueState): Promise<Visit> {
    const claimed = await storeCall(trace, () => store.claim(queue, ticket, nowMs, policy, Math.max(0, nowMs - joined * 1000)));
    if (!claimed.ok) return { kind: 'unavailable', ticket, cookie: await issue('w', ticket, nowMs, { j: joined }) };
    record(trace, claimed.value, ticket);
    const now = Math.floor(nowMs / 1000);
    if (claimed.value.claimed) {
      return { kind: 'admitted', ticket, slot: true, cookie: await issue('a', ticket, nowMs, { j: joined, s: now, r: now }) };
    }
    trace.reason = 'called_no_room';
    return { kind: 'waiting', ticket, ahead: 0, front: true, state, cookie: await issue('w', ticket, nowMs, { j: joined }) };
  }

  /** Where a ticket stands against a state: called (rate or capacity mode) or still waiting. */
  async function settle(trace: Trace, state: QueueState, ticket: number, joined: number, nowMs: number): Promise<Visit> {
    record(trace, state, ticket);
    if (ticket > state.cursor) {
      return {
        kind: 'waiting',
        ticket,
        ahead: ticket - state.cursor - 1,
        front: false,
        state,
        cookie: await issue('w', ticket, nowMs, { j: joined }),
      };
    }
    if (isCapacityMode(state)) return claimSlot(trace, ticket, joined, nowMs, state);
    return { kind: 'admitted', ticket, slot: false, cookie: await issue('a', ticket, nowMs, { j: joined }) };
  }

  async function newVisit(trace: Trace, nowMs: number): Promise<Visit> {
    const joined = await storeCall(trace, () => store.join(queue, nowMs, policy));
    if (!joined.ok) return { kind: 'unavailable', ticket: undefined, cookie: undefined };
    const result = joined.value;
    const now = Math.floor(nowMs / 1000);
    if (result.claimed) {
      record(trace, result, result.ticket);
      trace.reason = 'walk_in';
      return { kind: 'admitted', ticket: result.ticket, slot: true, cookie: await issue('a', result.ticket, nowMs, { j: now, s: now, r: now }) };
    }
    if (isCapacityMode(result) && result.ticket <= result.cursor) {
      // Called by the same step but not claimed (paused meanwhile): it claims on the next poll.
      record(trace, result, result.ticket);
      return { kind: 'waiting', ticket: result.ticket, ahead: 0, front: true, state: result, cookie: await issue('w', result.ticket, nowMs, { j: now }) };
    }
    return settle(trace, result, result.ticket, now, nowMs);
  }

  async function accessVisit(trace: Trace, token: TokenClaims, nowMs: number, takeTicket: boolean): Promise<Visit> {
    trace.ticket = token.t;
    if (token.s === undefined) {
      const renew = nowMs - token.iat * 1000 >= renewAfterMs;
      return { kind: 'access', ticket: token.t, slot: false, cookie: renew ? await issue('a', token.t, nowMs, { j: token.j }) : undefined };
    }
    // Capacity mode: the slot is refreshed in the store at most once per activity_refresh_seconds.
    const untilMs = config.sessionMaxSeconds > 0 ? (token.s + config.sessionMaxSeconds) * 1000 : Number.MAX_SAFE_INTEGER;
    const lastRefreshMs = (token.r ?? token.s) * 1000;
    if (nowMs - lastRefreshMs < refreshAfterMs) return { kind: 'access', ticket: token.t, slot: true, cookie: undefined };
    const touched = await storeCall(trace, () => store.touch(queue, token.t, nowMs, policy, untilMs));
    // The token is self-contained: a store that does not answer does not end the session.
    if (!touched.ok) return { kind: 'access', ticket: token.t, slot: true, cookie: undefined };
    if (!touched.value) {
      trace.reason = 'slot_ended';
      return takeTicket ? newVisit(trace, nowMs) : { kind: 'none' };
    }
    const now = Math.floor(nowMs / 1000);
    return { kind: 'access', ticket: token.t, slot: true, cookie: await issue('a', token.t, nowMs, { j: token.j, s: token.s, r: now }) };
  }

  /** Steps 4 and 5 of the request path: the cookie, then what the store must say. */
  async function visit(request: Request, trace: Trace, takeTicket: boolean): Promise<Visit> {
    const nowMs = clock.now();
    const token = await readToken(request, nowMs, trace);
    if (token?.k === 'a') return accessVisit(trace, token, nowMs, takeTicket);
    if (token !== undefined) {
      const joined = token.j ?? token.iat;
      const polled = await pollState(trace, nowMs);
      if (!polled.ok) {
        trace.ticket = token.t;
        // The outage is not the visitor's fault: keep the ticket alive while it lasts.
        return { kind: 'unavailable', ticket: token.t, cookie: await issue('w', token.t, nowMs, { j: joined }) };
      }
      return settle(trace, polled.value, token.t, joined, nowMs);
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

  function holdingJson(v: Extract<Visit, { kind: 'waiting' }> | undefined, ticket: number | undefined, cookie: string | undefined): Response {
    const estimate = v === undefined ? undefined : estimateWait(v.ahead, v.state, config);
    const body = {
      status: 'waiting',
      queue,
      ticket: ticket ?? null,
      place: v === undefined ? null : v.ahead + 1,
      ahead: v?.ahead ?? null,
      paused: v?.state.paused ?? null,
      estimated_wait_seconds: v === undefined || v.front || v.state.paused ? null : (estimate?.seconds ?? null),
      estimate_basis: estimate?.basis ?? 'none',
      message: v === undefined ? 'We are checking your place in line.' : waitText(v),
      retry_after_seconds: config.refreshSeconds,
    };
    const headers: Record<string, string> = { 'retry-after': String(config.refreshSeconds) };
    const response = jsonResponse(config.holdStatus, body, headers);
    if (cookie !== undefined) response.headers.append('set-cookie', cookie);
    return response;
  }

  function holdingPage(v: Extract<Visit, { kind: 'waiting' }> | undefined, ticket: number | undefined, cookie: string | undefined): Response {
    const headers = new Headers({
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      refresh: String(config.refreshSeconds),
      'x-robots-tag': 'noindex',
    });
    if (config.holdStatus !== 200) headers.set('retry-after', String(config.refreshSeconds));
    if (cookie !== undefined) headers.append('set-cookie', cookie);
    const html = renderHoldingPage({
      title: config.pageTitle,
      message: config.pageMessage,
      ticket,
      ahead: v?.ahead,
      estimate: v === undefined ? '' : waitText(v),
      refreshSeconds: config.refreshSeconds,
      assetPrefix,
    });
    return new Response(html, { status: config.holdStatus, headers });
  }

  function waitText(v: Extract<Visit, { kind: 'waiting' }>): string {
    if (v.state.paused) return 'Admission is paused for a moment; you keep your place.';
    if (v.front) return 'You are at the front: you go in as soon as someone leaves.';
    return describeEstimate(estimateWait(v.ahead, v.state, config));
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
      // A failed call is no loss: the slot then lapses with its session.
      await storeCall(trace, () => store.leave(queue, ticket, clock.now(), policy, 0));
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

  async function status(request: Request, trace: Trace): Promise<Response> {
    const v = await visit(request, trace, false);
    trace.decision = `status_${v.kind}`;
    const body: Record<string, unknown> = { refresh_seconds: config.refreshSeconds };
    switch (v.kind) {
      case 'access':
      case 'admitted':
        Object.assign(body, { state: 'admitted' });
        break;
      case 'waiting': {
        const estimate = estimateWait(v.ahead, v.state, config);
        Object.assign(body, {
          state: 'waiting',
          ticket: v.ticket,
          ahead: v.ahead,
          position: v.ahead + 1,
          paused: v.state.paused,
          estimated_wait_seconds: v.front || v.state.paused ? null : estimate.seconds,
          estimate_basis: estimate.basis,
          message: waitText(v),
        });
        break;
      }
      case 'unavailable':
        Object.assign(body, { state: 'waiting', ticket: v.ticket ?? null, ahead: null, position: null });
        break;
      case 'none':
        Object.assign(body, { state: 'none' });
        break;
    }
    const response = jsonResponse(200, body);
    if ('cookie' in v && v.cookie !== undefined) response.headers.append('set-cookie', v.cookie);
    return response;
  }

  /** The heartbeat script's calls: keep a slot while the tab is open, give it up when it goes. */
  async function session(request: Request, action: 'heartbeat' | 'leave', trace: Trace): Promise<Response> {
    if (request.method !== 'POST') return errorResponse(405, 'use POST', { allow: 'POST' });
    const nowMs = clock.now();
    const token = await readToken(request, nowMs, trace);
    trace.decision = action;
    if (token?.k !== 'a') return jsonResponse(200, { state: 'none' });
    trace.ticket = token.t;
    if (token.s === undefined) return jsonResponse(200, { state: 'active' });
    if (action === 'leave') {
      await storeCall(trace, () => store.leave(queue, token.t, nowMs, policy, config.leaveGraceSeconds * 1000));
      return new Response(null, { status: 204, headers: { 'cache-control': 'no-store' } });
    }
    const untilMs = config.sessionMaxSeconds > 0 ? (token.s + config.sessionMaxSeconds) * 1000 : Number.MAX_SAFE_INTEGER;
    const touched = await storeCall(trace, () => store.touch(queue, token.t, nowMs, policy, untilMs));
    if (!touched.ok) return jsonResponse(200, { state: 'active', refreshed: false });
    if (!touched.value) {
      return jsonResponse(200, { state: 'ended' }, { 'set-cookie': clearCookie() });
    }
    const now = Math.floor(nowMs / 1000);
    const cookie = await issue('a', token.t, nowMs, { j: token.j, s: token.s, r: now });
    return jsonResponse(200, { state: 'active', refreshed: true }, { 'set-cookie': cookie });
  }

  async function ownPath(request: Request, rest: string, trace: Trace): Promise<Response> {
    trace.decision = 'own';
    if (rest.startsWith('assets/')) {
      const asset = ASSETS.get(rest.slice('assets/'.length));
      if (asset === undefined) return errorResponse(404, 'no such asset');
      return new Response(asset.body, {
        headers: { 'content-type': asset.contentType, 'cache-control': 'public, max-age=300', 'x-content-type-options': 'nosniff' },
      });
    }
    if (rest === 'status') {
      if (request.method !== 'GET' && request.method !== 'HEAD') return errorResponse(405, 'use GET', { allow: 'GET, HEAD' });
      return status(request, trace);
    }
    if (rest === 'heartbeat' || rest === 'leave') return session(request, rest, trace);
    if (rest === 'health') return jsonResponse(200, { ok: true });
    const admin = await handleAdminRoute(request, rest, { ...deps, policy, trace, storeCall: (call) => storeCall(trace, call) });
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
    target.searchParams.delete(VIP_PARAM);
    const cookie = await issue('a', 0, nowMs, { j: Math.floor(nowMs / 1000) });
    return new Response(null, {
      status: 303,
      headers: { location: `${target.pathname}${target.search}`, 'set-cookie': cookie, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' },
    });
  }

  /** The bypass cookie counts only when it holds a bypass pass signed by us and not expired. */
  async function hasBypassPass(request: Request): Promise<boolean> {
    const values = readCookieValues(request.headers.get('cookie'), config.bypassCookie).slice(0, MAX_COOKIES_CHECKED);
    for (const value of values) {
      const result = await verifyToken(secrets.keyRing, value, BYPASS_QUEUE, clock.now());
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
    if (matchesAnyPath(path, config.bypassPaths)) {
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
    if (!matchesAnyPath(path, config.queuePaths)) {
      trace.decision = 'no_queue';
      return pass(request, undefined, trace);
    }
    const vip = new URL(request.url).searchParams.get(VIP_PARAM);
    if (vip !== null) {
      const used = await useVip(request, vip, trace);
      if (used !== undefined) return used;
    }
    const v = await visit(request, trace, true);
    trace.decision = v.kind;
    const hold = wantsJson(request, path) ? holdingJson : holdingPage;
    switch (v.kind) {
      case 'access':
      case 'admitted':
        return pass(request, v, trace);
      case 'waiting':
        return hold(v, v.ticket, v.cookie);
      case 'unavailable':
        if (config.storeFailure === 'pass') {
          trace.decision = 'unavailable_pass';
          return pass(request, undefined, trace);
        }
        return hold(undefined, v.ticket, v.cookie);
      case 'none':
        // Unreachable: takeTicket is true here. Holding is the safe answer all the same.
        return hold(undefined, undefined, undefined);
    }
  }

  return async (request, client) => {
    const trace: Trace = { decision: 'unknown' };
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
      ...(client.pop !== undefined && { pop: client.pop }),
    });
    return response;
  };
}
