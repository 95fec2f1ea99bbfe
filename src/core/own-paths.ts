/**
 * The waiting room's own paths, under `path_prefix`: the page's assets, the status endpoint its
 * script polls, the heartbeat script's session calls, health, and the admin console (admin.ts).
 */
import { describeError } from './auth-throttle';
import { handleAdminRoute } from './admin';
import { jwksDocument } from './admission-keys';
import { admissionKeys } from './admission';
import type { HandlerContext } from './context';
import { errorResponse, jsonResponse } from './http';
import { ASSETS } from './pages';
import { holdView, overView, override, statusBody } from './respond';
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

/** The heartbeat script's calls: keep a slot while the tab is open, give it up when it goes. */
export async function session(ctx: HandlerContext, request: Request, action: 'heartbeat' | 'leave', trace: Trace): Promise<Response> {
  const { config, store, clock, queue, basePolicy, storeCall, issue, clearCookie } = ctx;
  if (request.method !== 'POST') return errorResponse(405, 'use POST', { allow: 'POST' });
  const nowMs = clock.now();
  const token = await readToken(ctx, request, nowMs, trace);
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
