/**
 * The one request path. In order: the waiting room's own paths, bypass rules, whether the queue
 * covers the request, the visitor's cookie, then ticket or poll, then pass or hold. The same
 * handler runs on Fastly and in the Node host; everything that differs is behind the ports.
 */
import { handleAdminRoute } from './admin';
import type { Config, Secrets } from './config';
import { readCookieValues, serializeCookie } from './cookies';
import { errorResponse, jsonResponse } from './http';
import { isAddressInCidrs } from './ip';
import { ASSETS, renderHoldingPage } from './pages';
import { matchesAnyPath } from './path-pattern';
import type { AutoAdmission, ClientInfo, Clock, Logger, Origin, QueueState, QueueStore, StateCache } from './ports';
import { callStore, type StoreOutcome } from './store-call';
import { signToken, verifyToken, type TokenClaims, type VerifyFailure } from './tokens';

export interface HandlerDeps {
  readonly config: Readonly<Config>;
  readonly secrets: Readonly<Secrets>;
  readonly store: QueueStore;
  readonly origin: Origin;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The per-POP cache of the queue's state (`state_cache_seconds`). */
  readonly cache: StateCache;
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
  /** A valid access token: no store call was made. */
  | { readonly kind: 'access'; readonly cookie: string | undefined }
  /** The cursor has reached the visitor's ticket: the cookie becomes an access token. */
  | { readonly kind: 'admitted'; readonly ticket: number; readonly cookie: string }
  /** In line: `ahead` visitors are before this one. */
  | { readonly kind: 'waiting'; readonly ticket: number; readonly ahead: number; readonly cookie: string }
  /** The store did not answer; `ticket` is known when the visitor already held one. */
  | { readonly kind: 'unavailable'; readonly ticket: number | undefined; readonly cookie: string | undefined }
  /** No valid token and none was to be taken (the status endpoint never takes a ticket). */
  | { readonly kind: 'none' };

/** The most tokens of ours one request may carry that we verify (duplicates are legal). */
const MAX_COOKIES_CHECKED = 4;

export function createHandler(deps: HandlerDeps): Handler {
  const { config, secrets, store, origin, logger, clock, cache } = deps;
  const cacheKey = `queue-state:${config.queueName}`;
  const auto: AutoAdmission = { count: config.admitPerPeriod, periodMs: config.admitPeriodSeconds * 1000 };
  const assetPrefix = `${config.pathPrefix}assets/`;
  // An access token is renewed on activity, but not on every request: that would add a
  // Set-Cookie to every response. Renewing once a minute keeps the session sliding.
  const renewAfterMs = Math.min(60, Math.floor(config.sessionSeconds / 4)) * 1000;

  function storeCall<T>(trace: Trace, call: () => Promise<T>): Promise<StoreOutcome<T>> {
    return callStore(call, config.storeTimeoutMs, clock).then((outcome) => {
      trace.storeMs = (trace.storeMs ?? 0) + outcome.ms;
      if (!outcome.ok) trace.storeError = `${outcome.reason}: ${outcome.message}`;
      return outcome;
    });
  }

  /**
   * A waiting visitor's poll: from the per-POP cache when it holds a fresh state, else one store
   * call (which also runs automatic admission) whose answer the cache keeps for its lifetime.
   */
  async function pollState(trace: Trace, nowMs: number): Promise<StoreOutcome<QueueState>> {
    const direct = () => storeCall(trace, () => store.poll(config.queueName, nowMs, auto));
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

  async function issue(kind: 'w' | 'a', ticket: number, nowMs: number): Promise<string> {
    const iat = Math.floor(nowMs / 1000);
    const lifetime = kind === 'a' ? config.sessionSeconds : config.queueTimeoutSeconds;
    const token = await signToken(secrets.keyRing, { q: config.queueName, k: kind, t: ticket, iat, exp: iat + lifetime });
    return serializeCookie(config.cookieName, token, { maxAge: lifetime });
  }

  /** The best valid token among the cookies sent: an access token first, else the earliest ticket. */
  async function readToken(request: Request, nowMs: number, trace: Trace): Promise<TokenClaims | undefined> {
    const values = readCookieValues(request.headers.get('cookie'), config.cookieName).slice(0, MAX_COOKIES_CHECKED);
    if (values.length === 0) return undefined;
    const results = await Promise.all(values.map((v) => verifyToken(secrets.keyRing, v, config.queueName, nowMs)));
    let best: TokenClaims | undefined;
    let failure: VerifyFailure | undefined;
    for (const result of results) {
      if (!result.ok) {
        failure ??= result.reason;
        continue;
      }
      const claims = result.claims;
      if (claims.k === 'c') continue;
      if (best === undefined || rank(claims) < rank(best)) best = claims;
    }
    if (best === undefined && failure !== undefined) trace.reason = `token_${failure}`;
    return best;
  }

  function rank(claims: TokenClaims): number {
    return claims.k === 'a' ? -1 : claims.t;
  }

  async function settle(state: QueueState, ticket: number, nowMs: number, trace: Trace): Promise<Visit> {
    trace.ticket = ticket;
    trace.cursor = state.cursor;
    trace.tail = state.tail;
    if (ticket <= state.cursor) return { kind: 'admitted', ticket, cookie: await issue('a', ticket, nowMs) };
    return { kind: 'waiting', ticket, ahead: ticket - state.cursor - 1, cookie: await issue('w', ticket, nowMs) };
  }

  /** Steps 4 and 5 of the request path: the cookie, then at most one store call. */
  async function visit(request: Request, trace: Trace, takeTicket: boolean): Promise<Visit> {
    const nowMs = clock.now();
    const token = await readToken(request, nowMs, trace);
    if (token?.k === 'a') {
      trace.ticket = token.t;
      const renew = nowMs - token.iat * 1000 >= renewAfterMs;
      return { kind: 'access', cookie: renew ? await issue('a', token.t, nowMs) : undefined };
    }
    if (token !== undefined) {
      const polled = await pollState(trace, nowMs);
      if (!polled.ok) {
        trace.ticket = token.t;
        // The outage is not the visitor's fault: keep the ticket alive while it lasts.
        return { kind: 'unavailable', ticket: token.t, cookie: await issue('w', token.t, nowMs) };
      }
      return settle(polled.value, token.t, nowMs, trace);
    }
    if (!takeTicket) return { kind: 'none' };
    const joined = await storeCall(trace, () => store.join(config.queueName, nowMs, auto));
    if (!joined.ok) return { kind: 'unavailable', ticket: undefined, cookie: undefined };
    return settle(joined.value, joined.value.ticket, nowMs, trace);
  }

  function holdingPage(ticket: number | undefined, ahead: number | undefined, cookie: string | undefined): Response {
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
      ahead,
      refreshSeconds: config.refreshSeconds,
      assetPrefix,
    });
    return new Response(html, { status: config.holdStatus, headers });
  }

  async function pass(request: Request, cookie: string | undefined, trace: Trace): Promise<Response> {
    let response: Response;
    try {
      response = await origin.forward(request);
    } catch (error) {
      trace.reason = `origin: ${error instanceof Error ? error.message : String(error)}`;
      return errorResponse(502, 'the site is not answering; please try again shortly');
    }
    if (cookie === undefined) return response;
    // Only Set-Cookie is added; status, headers and the streamed body are the origin's.
    const headers = new Headers(response.headers);
    headers.append('set-cookie', cookie);
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }

  async function status(request: Request, trace: Trace): Promise<Response> {
    const v = await visit(request, trace, false);
    trace.decision = `status_${v.kind}`;
    const headers: Record<string, string> = {};
    const body: Record<string, unknown> = { refresh_seconds: config.refreshSeconds };
    switch (v.kind) {
      case 'access':
      case 'admitted':
        Object.assign(body, { state: 'admitted' });
        break;
      case 'waiting':
        Object.assign(body, { state: 'waiting', ticket: v.ticket, ahead: v.ahead, position: v.ahead + 1 });
        break;
      case 'unavailable':
        Object.assign(body, { state: 'waiting', ticket: v.ticket ?? null, ahead: null, position: null });
        break;
      case 'none':
        Object.assign(body, { state: 'none' });
        break;
    }
    const response = jsonResponse(200, body, headers);
    if ('cookie' in v && v.cookie !== undefined) response.headers.append('set-cookie', v.cookie);
    return response;
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
    if (rest === 'health') return jsonResponse(200, { ok: true });
    const admin = await handleAdminRoute(request, rest, { ...deps, trace, storeCall: (call) => storeCall(trace, call) });
    return admin ?? errorResponse(404, `no such path under ${config.pathPrefix}`);
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
    if (!matchesAnyPath(path, config.queuePaths)) {
      trace.decision = 'no_queue';
      return pass(request, undefined, trace);
    }
    const v = await visit(request, trace, true);
    trace.decision = v.kind;
    switch (v.kind) {
      case 'access':
      case 'admitted':
        return pass(request, v.cookie, trace);
      case 'waiting':
        return holdingPage(v.ticket, v.ahead, v.cookie);
      case 'unavailable':
        if (config.storeFailure === 'pass') {
          trace.decision = 'unavailable_pass';
          return pass(request, v.cookie, trace);
        }
        return holdingPage(v.ticket, undefined, v.cookie);
      case 'none':
        // Unreachable: takeTicket is true here. Holding is the safe answer all the same.
        return holdingPage(undefined, undefined, undefined);
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
      queue: config.queueName,
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
