/**
 * The rules that decide, before the queue, whether a request goes straight to the origin (bypass
 * paths, addresses, passes and verified crawlers) or is let in by a VIP code. Each is a plain
 * function of the request, the client and the queue's settings.
 */
import type { HandlerContext } from './context';
import { readCookieValues } from './cookies';
import { isAddressInCidrs } from './ip';
import { bypassApplies, sameSiteLocation, withoutQueryParam, type PathReadings } from './path-canon';
import { parsePathPatterns, type PathPattern } from './path-pattern';
import type { ClientInfo } from './ports';
import { limitedResponse } from './respond';
import { allowNewTicket } from './ticket-limit';
import { precheckToken, verifyToken } from './tokens';
import type { Trace } from './types';
import { MAX_COOKIES_CHECKED } from './visit';
import { hashVipCode, normalizeVipCode, VIP_PARAM } from './vip';

/** Bypass passes are not tied to a queue. */
export const BYPASS_QUEUE = '*';
/** User agents of the search engines' crawlers (a claim to be checked against their address ranges). */
const CRAWLER_AGENT = /\b(?:Googlebot|Google-InspectionTool|bingbot|Applebot|DuckDuckBot|YandexBot|Baiduspider)\b/i;

/** Why a request bypasses the queue, as its log line's decision. */
export type BypassDecision = 'bypass_path' | 'bypass_ip' | 'bypass_cookie' | 'bypass_crawler' | 'bypass_logo';

/** The holding page's own logo when it is a path on this site: it must reach the origin, not the queue. */
const logoPatterns = new WeakMap<object, readonly PathPattern[]>();
function logoPath(config: HandlerContext['config']): readonly PathPattern[] {
  let patterns = logoPatterns.get(config);
  if (patterns === undefined) {
    try {
      patterns = config.pageLogoUrl.startsWith('/') ? parsePathPatterns(config.pageLogoUrl.replace(/\*/g, '%2A')) : [];
    } catch {
      patterns = [];
    }
    logoPatterns.set(config, patterns);
  }
  return patterns;
}

/**
 * Whether a request bypasses the queue, and by which rule; checked in this order, the cheap ones
 * first (the pass is a signature check). `readings`: every way the origin might read the path.
 */
export async function bypassRule(ctx: HandlerContext, request: Request, client: ClientInfo, readings: PathReadings): Promise<BypassDecision | undefined> {
  const { config } = ctx;
  if (bypassApplies(readings, config.bypassPaths)) return 'bypass_path';
  // A logo served by the site itself (page_logo_url = /brand/logo.svg): a held visitor's page loads it.
  if (logoPath(config).length > 0 && bypassApplies(readings, logoPath(config))) return 'bypass_logo';
  if (isAddressInCidrs(client.address, config.bypassIps)) return 'bypass_ip';
  if (config.bypassCookie !== '' && (await hasBypassPass(ctx, request))) return 'bypass_cookie';
  if (config.bypassCrawlers && isVerifiedCrawler(ctx, request, client)) return 'bypass_crawler';
  return undefined;
}

/**
 * A VIP link: one use of the code is spent in the store (exactly as many visitors as it allows
 * get in, however many try at once), and the visitor goes to the same address without the code,
 * holding an access token. A code that does not work leaves the visitor to queue as usual.
 * Every well-formed code costs a store call, so each attempt counts for the client's ticket limit
 * first (see ticket-limit.ts): a client over it gets the ticket limit's answer (429) and no store call.
 */
export async function useVip(ctx: HandlerContext, request: Request, input: string, trace: Trace): Promise<Response | undefined> {
  const { store, clock, queue, storeCall, issue } = ctx;
  const code = normalizeVipCode(input);
  if (code === undefined) {
    trace.reason = 'vip_malformed';
    return undefined;
  }
  const allowance = await allowNewTicket(ctx.deps.ticketLimiter, ctx.config, trace.from, trace);
  if (!allowance.ok) {
    trace.decision = 'ticket_limited';
    const path = new URL(request.url).pathname;
    return limitedResponse(ctx, request, path, { kind: 'limited', retryAfterSeconds: allowance.retryAfterSeconds, why: 'ticket_limit' }, ctx.localeOf(request), trace);
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

/**
 * The bypass cookie counts only when it holds a bypass pass signed by us and not expired. As for
 * the queue's cookie (see readToken), values refused without crypto (junk, expired, another kind)
 * do not use up the MAX_COOKIES_CHECKED signature checks, so junk sent first cannot hide a pass.
 */
export async function hasBypassPass(ctx: HandlerContext, request: Request): Promise<boolean> {
  const { config, secrets, clock } = ctx;
  const nowMs = clock.now();
  let checked = 0;
  for (const value of new Set(readCookieValues(request.headers.get('cookie'), config.bypassCookie))) {
    if (precheckToken(secrets.keyRing, value, BYPASS_QUEUE, nowMs, ['b']) !== undefined) continue;
    if (checked === MAX_COOKIES_CHECKED) return false;
    checked += 1;
    const result = await verifyToken(secrets.keyRing, value, BYPASS_QUEUE, nowMs, ['b']);
    if (result.ok && result.claims.k === 'b') return true;
  }
  return false;
}

/** A crawler is verified by its published address range; its user agent only says which it claims to be. */
export function isVerifiedCrawler(ctx: HandlerContext, request: Request, client: ClientInfo): boolean {
  const { config } = ctx;
  return CRAWLER_AGENT.test(request.headers.get('user-agent') ?? '') && isAddressInCidrs(client.address, config.crawlerIps);
}
