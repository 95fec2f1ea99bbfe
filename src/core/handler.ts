/**
 * The one request path, top-down: the waiting room's own paths, a misspelt prefix, the bypass
 * rules, whether the queue covers the request, a VIP code, the event's end, then the visit (the
 * visitor's cookie and what the store says) and the response: pass or hold. Each step lives in a
 * module of its own (own-paths.ts, rules.ts, visit.ts, respond.ts), a plain function of the
 * handler's context (context.ts). The same handler runs on Fastly and in the Node host; everything
 * that differs is behind the ports.
 */
import { createContext, type HandlerContext, type HandlerDeps } from './context';
import { errorResponse } from './http';
import { ownPath } from './own-paths';
import { queueApplies, readPath, reservedPrefixMatch, sameSiteLocation, withoutQueryParam } from './path-canon';
import type { ClientInfo } from './ports';
import { challengeResponse, clearSpent, holdingJson, holdingPage, holdView, limitedResponse, overView, pass, wantsJson } from './respond';
import { bypassRule, useVip } from './rules';
import type { Locale } from './i18n';
import { eventPhase, type HoldView, type Trace, type Visit } from './types';
import { afterEnd, visit } from './visit';
import { VIP_PARAM } from './vip';

export { admissionPolicy, type HandlerDeps } from './context';
export { TEMPLATE_CACHE_SECONDS } from './respond';
export { BYPASS_QUEUE } from './rules';

export type Handler = (request: Request, client: ClientInfo) => Promise<Response>;

async function route(ctx: HandlerContext, request: Request, client: ClientInfo, trace: Trace): Promise<Response> {
  const { config, clock, localeOf } = ctx;
  const path = new URL(request.url).pathname;
  if (path.startsWith(config.pathPrefix)) return ownPath(ctx, request, path.slice(config.pathPrefix.length), trace);
  // Every way an origin might read the path (decoded, `;params` dropped, `\` as `/`, dots resolved).
  const readings = readPath(path);
  if (reservedPrefixMatch(path, config.pathPrefix, readings) === 'near') {
    // Another spelling of our prefix (`/__WR/`, `/%5F%5Fwr/`, `//__wr/`): the origin may read it as ours.
    trace.decision = 'reserved_spelling';
    return errorResponse(404, `no such path; the waiting room's own paths are spelt exactly ${config.pathPrefix}`);
  }
  const bypass = await bypassRule(ctx, request, client, readings);
  if (bypass !== undefined) {
    trace.decision = bypass;
    return pass(ctx, request, undefined, trace, 'bypass');
  }
  if (!queueApplies(readings, config.queuePaths)) {
    trace.decision = 'no_queue';
    return pass(ctx, request, undefined, trace);
  }
  const url = new URL(request.url);
  const vip = url.searchParams.get(VIP_PARAM);
  let vipRefused: string | undefined;
  if (vip !== null) {
    const used = await useVip(ctx, request, vip, trace);
    if (used !== undefined) return used;
    // Refused (not the store failing): the visitor queues as anyone does, and the page says why,
    // then reloads its address without the code (rebuilt, never echoed, as the VIP redirect is).
    if (trace.reason?.startsWith('vip_') === true) vipRefused = sameSiteLocation(url.pathname, withoutQueryParam(url.search, VIP_PARAM));
  }
  const nowMs = clock.now();
  const locale = localeOf(request);
  const hold = (view: HoldView, cookie: string | undefined): Response | Promise<Response> =>
    wantsJson(ctx, request, path) ? holdingJson(ctx, view, cookie, locale) : holdingPage(ctx, vipRefused === undefined ? view : { ...view, vipRefused }, cookie, locale, trace);
  if (eventPhase(config, nowMs) === 'over') {
    const over = await afterEnd(ctx, request, trace, nowMs);
    if (over === 'over') {
      trace.decision = 'event_over';
      return hold(overView(ctx, nowMs), undefined);
    }
    trace.decision = over === 'pass' ? 'event_over_pass' : 'access';
    return pass(ctx, request, over === 'pass' ? undefined : over, trace, 'event-over');
  }
  const v = await visit(ctx, request, trace, true);
  trace.decision = v.kind;
  // A new ticket clears the cookies it was taken with (a solution, a provider's token).
  return clearSpent(await answer(ctx, request, path, v, locale, hold, trace), trace.spent);
}

/** Step 6: what the visit comes to, passed to the origin or held. */
function answer(
  ctx: HandlerContext,
  request: Request,
  path: string,
  v: Visit,
  locale: Locale,
  hold: (view: HoldView, cookie: string | undefined) => Response | Promise<Response>,
  trace: Trace,
): Response | Promise<Response> {
  const { config } = ctx;
  const nowMs = ctx.clock.now();
  switch (v.kind) {
    case 'access':
    case 'admitted':
      return pass(ctx, request, v, trace);
    case 'waiting':
    case 'prequeue':
      return hold(holdView(ctx, v, nowMs), v.cookie);
    case 'unavailable':
      if (config.storeFailure === 'pass') {
        trace.decision = 'unavailable_pass';
        return pass(ctx, request, undefined, trace, 'store-down');
      }
      return hold(holdView(ctx, v, nowMs), v.cookie);
    case 'challenge':
      trace.decision = v.pow !== undefined ? 'pow_challenge' : 'challenge';
      return challengeResponse(ctx, request, path, v, locale, trace);
    case 'limited':
      trace.decision = v.why === 'ticket_limit' ? 'ticket_limited' : 'challenge_unavailable';
      return limitedResponse(ctx, request, path, v, locale, trace);
    case 'open':
      // Switched open: the waiting room steps aside.
      trace.decision = 'switch_open';
      return pass(ctx, request, undefined, trace, 'open');
    case 'none':
      // Unreachable: takeTicket is true here. Holding is the safe answer all the same.
      return hold(holdView(ctx, undefined, nowMs), undefined);
  }
}

export function createHandler(deps: HandlerDeps): Handler {
  const ctx = createContext(deps);
  const { logger, clock, queue } = ctx;
  return async (request, client) => {
    const trace: Trace = { decision: 'unknown', from: client.address };
    const response = await route(ctx, request, client, trace);
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
      ...(trace.block !== undefined && { block: trace.block }),
      ...(trace.client !== undefined && { client: trace.client }),
      ...(trace.actor !== undefined && { actor: trace.actor }),
      ...(client.pop !== undefined && { pop: client.pop }),
    });
    return response;
  };
}
