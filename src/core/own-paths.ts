/**
 * The waiting room's own paths, under `path_prefix`: the page's assets, the status endpoint its
 * script polls, the heartbeat script's session calls, health, and the admin console (admin.ts).
 */
import { describeError } from './auth-throttle';
import { handleAdminRoute } from './admin';
import { jwksDocument } from './admission-keys';
import { admissionKeys } from './admission';
import { withShard, type HandlerContext } from './context';
import { errorResponse, jsonResponse } from './http';
import { ASSETS } from './pages';
import { holdView, overView, override, statusBody } from './respond';
import { allowSessionCall } from './ticket-limit';
import { eventPhase, type Trace } from './types';
import { afterEnd, holdsSlot, readToken, sessionStart, visit } from './visit';

/** The status endpoint the holding page's script polls: the visitor's view as JSON; never takes a ticket. */
export async function status(ctx: HandlerContext, request: Request, trace: Trace): Promise<Response> {
  const { config, clock } = ctx;
  const nowMs = clock.now();
  if (eventPhase(config, nowMs) === 'over') {
    const over = await afterEnd(ctx, request, trace, nowMs);
    if (over !== 'over') return jsonResponse(200, { state: 'admitted', refresh_seconds: config.refreshSeconds });
    return jsonResponse(200, statusBody(ctx, overView(ctx, nowMs), request));
  }
  const v = await visit(ctx, request, trace, false);
  trace.decision = `status_${v.kind}`;
  let body: Record<string, unknown>;
  switch (v.kind) {
    case 'access':
    case 'admitted':
    case 'open':
      // Switched open: the page's script goes to the site, which now lets everyone through.
      body = { state: 'admitted', refresh_seconds: config.refreshSeconds };
      break;
    case 'none':
      body = { state: 'none', refresh_seconds: config.refreshSeconds };
      break;
    case 'limited':
    case 'challenge':
      // Unreachable: the status endpoint takes no ticket, so it is never refused one or challenged.
      body = { state: 'none', refresh_seconds: config.refreshSeconds };
      break;
    default:
      body = statusBody(ctx, holdView(ctx, v, nowMs), request);
  }
  const response = jsonResponse(200, body);
  if ('cookie' in v && v.cookie !== undefined) response.headers.append('set-cookie', v.cookie);
  return response;
}

/** How long a POP remembers a leave (see session), beyond the slot's grace: seconds. */
const LEFT_MARK_SLACK_SECONDS = 5;

/**
 * The heartbeat script's calls: keep a slot while the tab is open, give it up when it goes.
 *
 * A heartbeat refreshes the slot in the store only when it is due, as a page view does: the access
 * token's last refresh (`r`) is `activity_refresh_seconds` old, or this POP saw the visitor's
 * `leave` since then (a page it navigated away from: the next page's first heartbeat keeps the
 * place). Otherwise it answers `refreshed: false` with no store call. Both calls that do reach the
 * store count for the client's allowance (allowSessionCall); past it they are answered without the
 * store: the slot then lapses on its own, `session_seconds` after its last refresh.
 */
export async function session(queueCtx: HandlerContext, request: Request, action: 'heartbeat' | 'leave', trace: Trace): Promise<Response> {
  if (request.method !== 'POST') return errorResponse(405, 'use POST', { allow: 'POST' });
  const nowMs = queueCtx.clock.now();
  const token = await readToken(queueCtx, request, nowMs, trace);
  // The token's database (several databases, store_shards): its slot is there.
  const ctx = token === undefined ? queueCtx : withShard(queueCtx, token.sh ?? 0);
  const { config, store, queue, basePolicy, storeCall, issue, clearCookie, cache, cacheKey, refreshAfterMs } = ctx;
  trace.decision = action;
  if (token?.k !== 'a') return jsonResponse(200, { state: 'none' });
  trace.ticket = token.t;
  if (!holdsSlot(token)) return jsonResponse(200, { state: 'active' });
  const leftKey = `${cacheKey}:left:${token.gen ?? 0}:${token.t}`;
  const notRefreshed = () => jsonResponse(200, { state: 'active', refreshed: false });
  const start = sessionStart(token);
  if (action === 'heartbeat') {
    const lastRefreshMs = (token.r ?? start) * 1000;
    let due = nowMs - lastRefreshMs >= refreshAfterMs;
    if (!due) {
      const left = await cache.peek<number>(leftKey).catch(() => undefined);
      due = left !== undefined && left >= lastRefreshMs;
    }
    if (!due) {
      trace.reason = 'refresh_not_due';
      return notRefreshed();
    }
  }
  if (!(await allowSessionCall(ctx.deps.ticketLimiter, config, trace.from, trace))) {
    return action === 'leave' ? new Response(null, { status: 204, headers: { 'cache-control': 'no-store' } }) : notRefreshed();
  }
  if (action === 'leave') {
    const left = await storeCall(trace, () => store.leave(queue, token.t, nowMs, basePolicy, config.leaveGraceSeconds * 1000, token.gen));
    // Remembered at this POP for the grace, so the next page's heartbeat refreshes the slot again.
    if (left.ok) await cache.getOrLoad(leftKey, config.leaveGraceSeconds + LEFT_MARK_SLACK_SECONDS, async () => nowMs).catch(() => undefined);
    return new Response(null, { status: 204, headers: { 'cache-control': 'no-store' } });
  }
  const untilMs = config.sessionMaxSeconds > 0 ? (start + config.sessionMaxSeconds) * 1000 : Number.MAX_SAFE_INTEGER;
  const touched = await storeCall(trace, () => store.touch(queue, token.t, nowMs, basePolicy, untilMs, token.gen));
  if (!touched.ok) return notRefreshed();
  if (!touched.value) {
    return jsonResponse(200, { state: 'ended' }, { 'set-cookie': clearCookie() });
  }
  const now = Math.floor(nowMs / 1000);
  const cookie = await issue('a', token.t, nowMs, { j: token.j, s: start, r: now, gen: token.gen, v: token.v === 1 ? 1 : undefined });
  return jsonResponse(200, { state: 'active', refreshed: true }, { 'set-cookie': cookie });
}

/**
 * The public keys of the signed admission (see admission.ts), for the origin's JWT library: every
 * key `admission_keys` lists, cacheable for five minutes (a rotation lists the new key before it
 * signs: add it second, wait, then move it first).
 */
async function jwks(ctx: HandlerContext, trace: Trace): Promise<Response> {
  trace.decision = 'jwks';
  try {
    const keys = await admissionKeys(ctx.secrets);
    return jsonResponse(200, jwksDocument(keys), { 'cache-control': 'public, max-age=300', 'access-control-allow-origin': '*' });
  } catch (error) {
    trace.reason = `admission keys: ${describeError(error)}`;
    return errorResponse(503, `no admission keys to publish: ${describeError(error)}`);
  }
}

/** A request for one of our own paths; `rest` is its path after `path_prefix`. */
export async function ownPath(ctx: HandlerContext, request: Request, rest: string, trace: Trace): Promise<Response> {
  const { config, policyNow, storeCall } = ctx;
  trace.decision = 'own';
  if (rest.startsWith('assets/')) {
    const name = rest.slice('assets/'.length);
    const asset = ASSETS.get(name);
    if (asset === undefined) return errorResponse(404, 'no such asset');
    const custom = name === 'style.css' ? await override(ctx, 'style.css', trace) : undefined;
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
    return status(ctx, request, trace);
  }
  if (rest === 'heartbeat' || rest === 'leave') return session(ctx, request, rest, trace);
  if (rest === 'health') return jsonResponse(200, { ok: true });
  if (rest === '.well-known/jwks.json') return jwks(ctx, trace);
  const admin = await handleAdminRoute(request, rest, { ...ctx.deps, address: trace.from, policy: policyNow(), trace, storeCall: (call) => storeCall(trace, call) });
  return admin ?? errorResponse(404, `no such path under ${config.pathPrefix}`);
}
