/**
 * The responses of the request path: the holding page and the JSON answer for programs (both from
 * one `HoldView`, made from the visit), and the pass-through to the origin, which adds our cookie
 * and frees a capacity slot when the origin ends the session.
 */
import { admissionCookieName, admissionFor, type AdmissionVia } from './admission';
import { challengeSources } from './challenge';
import { withShard, type HandlerContext } from './context';
import { serializeCookie } from './cookies';
import { describeEstimate, estimateWait } from './estimate';
import { errorResponse, jsonResponse } from './http';
import { blankHoldView, holdingCsp, holdTexts } from './holding';
import { messages, type Locale, type Messages } from './i18n';
import { renderHoldingPage } from './pages';
import { matchesAnyPath } from './path-pattern';
import type { ChallengeHook, HoldView, PowChallenge, Trace, Visit } from './types';

/** How long a POP keeps a template override before asking the KV Store again, seconds. */
export const TEMPLATE_CACHE_SECONDS = 30;
/** The largest template override accepted, bytes of text. */
const MAX_TEMPLATE_CHARS = 64 * 1024;

/** Programs get JSON: a path configured for it, or a client that accepts JSON but not HTML. */
export function wantsJson(ctx: HandlerContext, request: Request, path: string): boolean {
  const { config } = ctx;
  if (config.jsonPaths.length > 0 && matchesAnyPath(path, config.jsonPaths)) return true;
  const accept = request.headers.get('accept') ?? '';
  return /application\/(?:[a-z.+-]*\+)?json/i.test(accept) && !/text\/html/i.test(accept);
}

/** What a held visitor is shown, from its visit: in line, in the draw, in the pre-queue, or unknown (store down). */
export function holdView(ctx: HandlerContext, v: Extract<Visit, { kind: 'waiting' | 'prequeue' | 'unavailable' }> | undefined, nowMs: number): HoldView {
  const { config, randomSeed, random } = ctx;
  // A ticket lives `queue_timeout_seconds` after its last update, and brings its place back within
  // it (see awaySeconds); in a draw, presence is polling, so leaving the page leaves the draw.
  const awaySeconds = config.queueMethod === 'fifo' ? config.queueTimeoutSeconds : undefined;
  const base = { ...blankHoldView('checking', nowMs, config.refreshSeconds), awaySeconds };
  if (v === undefined) return base;
  // A join the store did not answer has no ticket yet: a newcomer, who has no place to keep.
  if (v.kind === 'unavailable') return { ...base, ticket: v.ticket ?? null, newcomer: v.ticket === undefined };
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

/** What a visitor is shown after the event's end. */
export const overView = (ctx: HandlerContext, nowMs: number): HoldView => blankHoldView('over', nowMs, ctx.config.refreshSeconds);

/** The sentence that sums the view up, for programs and the page. */
export function holdMessage(view: HoldView): string {
  switch (view.state) {
    case 'checking':
      return 'We are checking your place in line.';
    case 'unreachable':
      return 'The site is not answering; please try again shortly.';
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
export function viewFields(ctx: HandlerContext, view: HoldView): Record<string, unknown> {
  const { config, queue } = ctx;
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
const holdStatusOf = (ctx: HandlerContext, view: HoldView): number => (view.state === 'over' ? 410 : ctx.config.holdStatus);

export function holdingJson(ctx: HandlerContext, view: HoldView, cookie: string | undefined, locale: Locale): Response {
  // An ended event is final: no retry, in the body as in the headers.
  const body = { status: view.state, ...viewFields(ctx, view), texts: holdTexts(view, locale, messages(locale, ctx.config.pageTexts)), retry_after_seconds: view.state === 'over' ? null : view.refreshSeconds };
  const headers: Record<string, string> = view.state === 'over' ? {} : { 'retry-after': String(view.refreshSeconds) };
  const response = jsonResponse(holdStatusOf(ctx, view), body, headers);
  if (cookie !== undefined) response.headers.append('set-cookie', cookie);
  return response;
}

/**
 * An override of a template from the operator's KV Store, cached in the POP for
 * TEMPLATE_CACHE_SECONDS; undefined when there is none, it is too large, or the store fails
 * (then the request's log line says why and the built-in template is used).
 */
export async function override(ctx: HandlerContext, key: string, trace: Trace): Promise<string | undefined> {
  const { deps, cache, queue } = ctx;
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

export async function holdingPage(
  ctx: HandlerContext,
  view: HoldView,
  cookie: string | undefined,
  locale: Locale,
  trace: Trace,
  check?: { readonly pow?: PowChallenge | undefined; readonly hook?: ChallengeHook | undefined },
): Promise<Response> {
  const { config, randomSeed, assetPrefix, branding, statusUrl } = ctx;
  const nonce = randomSeed().toString(36);
  const m = messages(locale, config.pageTexts);
  const headers = new Headers({
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'x-robots-tag': 'noindex',
    'content-language': m.htmlLang,
    vary: 'accept-language',
    // The widget of a challenge provider loads its script and frame from the provider.
    'content-security-policy': holdingCsp(nonce, branding.logoUrl, check?.hook === undefined ? [] : challengeSources(config)),
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    // Fastly compresses the body on the way out when the client accepts it; the Node host does the same.
    'x-compress-hint': 'on',
  });
  // A refused VIP link is not tried again at every reload: the page reloads its address without it.
  const again = view.vipRefused;
  if (view.state !== 'over') headers.set('refresh', again === undefined ? String(view.refreshSeconds) : `${view.refreshSeconds}; url=${again}`);
  if (config.holdStatus !== 200 && view.state !== 'over') headers.set('retry-after', String(view.refreshSeconds));
  if (cookie !== undefined) headers.append('set-cookie', cookie);
  const custom = siteTexts(ctx, m);
  const page = {
    view,
    texts: holdTexts(view, locale, m),
    locale: m,
    title: custom.title,
    // The default message is about letting people in: an ended event says nothing of the kind, nor
    // does the page of a site that failed someone already let in (or passed without a queue); before
    // the opening, nobody is let in yet.
    message:
      custom.message !== ''
        ? custom.message
        : view.state === 'over' || view.state === 'unreachable'
          ? ''
          : view.state === 'prequeue'
            ? m.prequeueMessage
            : m.defaultMessage,
    branding,
    assetPrefix,
    statusUrl,
    nonce,
    // Half the session, so an access token taken up late still has its other half (at most 5 minutes).
    turnWaitSeconds: Math.min(300, Math.floor(config.sessionSeconds / 2)),
    pow: check?.pow,
    hook: check?.hook,
  };
  const template = await override(ctx, 'holding.html', trace);
  let html: string | undefined;
  if (template !== undefined) {
    try {
      html = renderHoldingPage(page, template);
    } catch (error) {
      // A typo in an operator's template must never cost a visitor the page.
      trace.reason = `template_broken: holding.html: ${error instanceof Error ? error.message : String(error)}; the built-in one was served`;
    }
  }
  html ??= renderHoldingPage(page);
  return new Response(html, { status: holdStatusOf(ctx, view), headers });
}

/**
 * The request to the origin, with the signed admission (see admission.ts): `v` an admitted visitor,
 * else `via` says why the request passes without one (a bypass rule, a path the queue does not
 * hold, the store down under `store_failure = pass`, the event over under `event_after = pass`).
 */
export async function pass(
  ctx: HandlerContext,
  request: Request,
  v: Extract<Visit, { kind: 'access' | 'admitted' }> | undefined,
  trace: Trace,
  via: AdmissionVia = 'unqueued',
): Promise<Response> {
  const { config, origin, clock, clearCookie } = ctx;
  const admitted = await admissionFor(ctx, request, v?.grant ?? { via }, trace);
  let response: Response;
  // The origin's answer is counted for adaptive admission: its status and how long its first byte took.
  const sent = clock.now();
  try {
    response = await origin.forward(request, { drop: ctx.admissionHeaders, set: admitted.header });
  } catch (error) {
    ctx.meterOrigin(undefined, clock.now() - sent);
    trace.reason = `origin: ${error instanceof Error ? error.message : String(error)}`;
    return originDown(ctx, request, trace);
  }
  ctx.meterOrigin(response.status, clock.now() - sent);
  const endsSession = response.headers.has(config.endSessionHeader);
  const cookie = endsSession && v !== undefined ? clearCookie() : v?.cookie;
  if (endsSession && v?.slot) {
    const ticket = v.ticket;
    const generation = v.kind === 'access' ? v.generation : undefined;
    // A failed call is no loss: the slot then lapses with its session. In the visitor's database.
    const { store, queue, basePolicy, storeCall } = v.shard === undefined ? ctx : withShard(ctx, v.shard);
    await storeCall(trace, () => store.leave(queue, ticket, clock.now(), basePolicy, 0, generation));
  }
  if (endsSession) trace.reason = 'origin_ended_session';
  // The carried admission ends with the session.
  const carried = endsSession && v !== undefined ? serializeCookie(admissionCookieName(config), '', { maxAge: 0 }) : admitted.cookie;
  if (cookie === undefined && carried === undefined && !endsSession) return response;
  // Status, headers and the streamed body stay the origin's; we add Set-Cookie and remove only
  // the origin's end-session signal, which is meant for us.
  const headers = new Headers(response.headers);
  headers.delete(config.endSessionHeader);
  if (cookie !== undefined) headers.append('set-cookie', cookie);
  if (carried !== undefined) headers.append('set-cookie', carried);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

/** How soon the page of a site that did not answer tries again, seconds. */
const ORIGIN_RETRY_SECONDS = 10;

/**
 * The site did not answer (a 502): a program gets the JSON error, a browser a page in its language
 * that says so and tries again by itself; the visitor's cookie is untouched (its place or access
 * stands).
 */
async function originDown(ctx: HandlerContext, request: Request, trace: Trace): Promise<Response> {
  const path = new URL(request.url).pathname;
  const retry = { 'retry-after': String(ORIGIN_RETRY_SECONDS) };
  if (wantsJson(ctx, request, path)) return errorResponse(502, 'the site is not answering; please try again shortly', retry);
  const page = await holdingPage(ctx, blankHoldView('unreachable', ctx.clock.now(), ORIGIN_RETRY_SECONDS), undefined, ctx.localeOf(request), trace);
  const headers = new Headers(page.headers);
  headers.set('retry-after', String(ORIGIN_RETRY_SECONDS));
  return new Response(page.body, { status: 502, headers });
}

/**
 * A new ticket refused for now (see Visit `limited`), with `Retry-After`. Over `ticket_limit`: 429,
 * the penalty as an upper bound. The challenge provider down under `challenge_unavailable = hold`:
 * 503, a short retry. A program gets the reason as JSON; a browser gets the "checking your place"
 * page, which reloads when the wait is over and then takes its ticket: it tells a bot nothing, and
 * a person behind a busy shared address waits a minute rather than reading an error.
 */
export async function limitedResponse(ctx: HandlerContext, request: Request, path: string, v: Extract<Visit, { kind: 'limited' }>, locale: Locale, trace: Trace): Promise<Response> {
  const retryAfter = String(v.retryAfterSeconds);
  const status = v.why === 'ticket_limit' ? 429 : 503;
  if (wantsJson(ctx, request, path)) {
    const why =
      v.why === 'ticket_limit'
        ? `too many new visitors from your address: no new place in line for up to ${v.retryAfterSeconds} s`
        : `the visitor check is not answering: no new place in line yet; try again in ${v.retryAfterSeconds} s`;
    return errorResponse(status, why, { 'retry-after': retryAfter });
  }
  const page = await holdingPage(ctx, { ...blankHoldView('checking', ctx.clock.now(), v.retryAfterSeconds), newcomer: true }, undefined, locale, trace);
  const headers = new Headers(page.headers);
  headers.set('retry-after', retryAfter);
  return new Response(page.body, { status, headers });
}

/** How long the proof-of-work page waits before it reloads itself without JavaScript, seconds. */
const CHALLENGE_REFRESH_SECONDS = 120;

/**
 * A new visitor asked for a check first: a proof of work (see proof-of-work.ts) or a challenge
 * provider's widget (see challenge.ts). A browser gets the "checking your place" page, whose script
 * solves the challenge or shows the widget, sends the answer in its cookie and reloads (the page
 * without JavaScript says it needs it); a program gets the challenge as JSON with how to answer it.
 * No ticket yet, no store call.
 */
export async function challengeResponse(ctx: HandlerContext, request: Request, path: string, v: Extract<Visit, { kind: 'challenge' }>, locale: Locale, trace: Trace): Promise<Response> {
  const { pow, hook } = v;
  if (wantsJson(ctx, request, path)) {
    const body =
      pow !== undefined
        ? {
            status: 'challenge',
            challenge: pow.challenge,
            nonce: pow.nonce,
            difficulty: pow.difficulty,
            cookie: pow.cookie,
            how: `find a counter c (decimal) such that SHA-256("<nonce>:<c>") begins with ${pow.difficulty} zero bits; send it in the cookie ${pow.cookie}=<challenge>~<c>`,
          }
        : {
            status: 'challenge',
            provider: hook?.provider,
            site_key: hook?.siteKey,
            script: hook?.script,
            cookie: hook?.cookie,
            how: `pass the ${hook?.provider} check for this site key in a browser and send its token in the cookie ${hook?.cookie}=<token>`,
          };
    return jsonResponse(200, body, { 'cache-control': 'no-store' });
  }
  return holdingPage(ctx, { ...blankHoldView('checking', ctx.clock.now(), CHALLENGE_REFRESH_SECONDS), newcomer: true }, undefined, locale, trace, v);
}

/**
 * The response with Set-Cookie headers that remove the cookies a new ticket was taken with (a
 * proof-of-work solution, a provider's token; see Trace.spent): a stale one must not come back
 * with a later request for a ticket, where it would count as a replay.
 */
export function clearSpent(response: Response, names: readonly string[] | undefined): Response {
  if (names === undefined || names.length === 0) return response;
  const headers = new Headers(response.headers);
  for (const name of names) headers.append('set-cookie', serializeCookie(name, '', { maxAge: 0 }));
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

/** What the status endpoint says of a held visitor: the view's figures and texts in its language. */
export function statusBody(ctx: HandlerContext, view: HoldView, request: Request): Record<string, unknown> {
  const locale = ctx.localeOf(request);
  return { state: view.state, ...viewFields(ctx, view), texts: holdTexts(view, locale, messages(locale, ctx.config.pageTexts)), refresh_seconds: view.refreshSeconds };
}

/**
 * The site's name and message in the visitor's language: its own in `page_texts`, else
 * `page_title`/`page_message`, else those of `page_texts` for `page_language` (the settings are in
 * that language, so a language without its own shows the default language's).
 */
export function siteTexts(ctx: HandlerContext, m: Messages): { readonly title: string; readonly message: string } {
  const { config } = ctx;
  // Only an operator's table holds a site text: the default language's is looked at only when there is one.
  const own = config.pageTexts[config.pageLanguage];
  const text = (key: 'page_title' | 'page_message'): string => {
    const v = own?.[key];
    return typeof v === 'string' ? v : '';
  };
  return {
    title: m.pageTitle || config.pageTitle || text('page_title'),
    message: m.pageMessage || config.pageMessage || text('page_message'),
  };
}

