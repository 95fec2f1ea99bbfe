/**
 * The operator's and the origin's controls: the Basic-Auth admin page with its let-N-in form, and
 * the bearer-token API the origin calls when it has room. Every change is one store call; bad
 * input gets a 4xx that says why and changes nothing.
 */
import type { Config, Secrets } from './config';
import { errorResponse, jsonResponse, readBasicAuth, readBearer, readSmallBody, timingSafeEqual } from './http';
import { formatCount, renderAdminPage } from './pages';
import type { AdmitResult, Clock, QueueState, QueueStore } from './ports';
import type { StoreOutcome } from './store-call';
import { signToken, verifyToken } from './tokens';

/** The most visitors one admit may let in: larger numbers are typos, not intentions. */
export const MAX_ADMIT_COUNT = 100_000;
const MAX_FORM_BYTES = 4096;
const CSRF_LIFETIME_SECONDS = 3600;

export interface AdminContext {
  readonly config: Readonly<Config>;
  readonly secrets: Readonly<Secrets>;
  readonly store: QueueStore;
  readonly clock: Clock;
  readonly trace: { decision: string; reason?: string; cursor?: number; tail?: number };
  readonly storeCall: <T>(call: () => Promise<T>) => Promise<StoreOutcome<T>>;
}

export type CountResult = { readonly ok: true; readonly count: number } | { readonly ok: false; readonly error: string };

/** Validates an admit count from a form, a query string or JSON. */
export function parseAdmitCount(value: unknown): CountResult {
  if (value === undefined || value === null || value === '') return { ok: false, error: 'count is missing' };
  let count: number;
  if (typeof value === 'number') {
    count = value;
  } else if (typeof value === 'string' && /^\s*-?[0-9]+\s*$/.test(value)) {
    count = Number(value.trim());
  } else {
    return { ok: false, error: `count must be a whole number, got ${JSON.stringify(value).slice(0, 40)}` };
  }
  if (!Number.isInteger(count)) return { ok: false, error: `count must be a whole number, got ${count}` };
  if (count <= 0) return { ok: false, error: `count must be at least 1, got ${count}` };
  if (count > MAX_ADMIT_COUNT) return { ok: false, error: `count must be at most ${MAX_ADMIT_COUNT}, got ${count}` };
  return { ok: true, count };
}

function describeState(state: QueueState, config: Readonly<Config>): Record<string, unknown> {
  return {
    queue: config.queueName,
    tail: state.tail,
    cursor: state.cursor,
    waiting: Math.max(0, state.tail - state.cursor),
    admit_per_period: config.admitPerPeriod,
    admit_period_seconds: config.admitPeriodSeconds,
    /** Changes reach every POP within this many seconds (the per-POP cache lifetime). */
    propagation_seconds: config.stateCacheSeconds,
  };
}

const ADMIN_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'content-security-policy':
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'referrer-policy': 'same-origin',
  'x-content-type-options': 'nosniff',
};

export async function handleAdminRoute(request: Request, rest: string, ctx: AdminContext): Promise<Response | undefined> {
  switch (rest) {
    case 'admin':
      return withBasicAuth(request, ctx, () => (request.method === 'GET' ? adminPage(request, ctx) : methodNotAllowed('GET')));
    case 'admin/state':
    case 'api/state':
      return (rest === 'api/state' ? withBearer : withBasicAuth)(request, ctx, () =>
        request.method === 'GET' ? stateJson(ctx) : methodNotAllowed('GET'),
      );
    case 'admin/admit':
      return withBasicAuth(request, ctx, () => (request.method === 'POST' ? formAdmit(request, ctx) : methodNotAllowed('POST')));
    case 'api/admit':
      return withBearer(request, ctx, () => (request.method === 'POST' ? apiAdmit(request, ctx) : methodNotAllowed('POST')));
    default:
      return undefined;
  }
}

function methodNotAllowed(allow: string): Response {
  return errorResponse(405, `use ${allow}`, { allow });
}

async function withBasicAuth(request: Request, ctx: AdminContext, next: () => Response | Promise<Response>): Promise<Response> {
  ctx.trace.decision = 'admin';
  const password = ctx.secrets.adminPassword;
  if (password === undefined) {
    return errorResponse(403, 'admin is disabled: set the admin_password secret to enable it');
  }
  const given = readBasicAuth(request.headers.get('authorization'));
  // Both comparisons always run, so the time taken does not tell which part was wrong.
  const userOk = timingSafeEqual(given?.user ?? '', ctx.config.adminUser);
  const passwordOk = timingSafeEqual(given?.password ?? '', password);
  if (given === undefined || !userOk || !passwordOk) {
    ctx.trace.reason = given === undefined ? 'admin_no_credentials' : 'admin_bad_credentials';
    return errorResponse(401, 'admin credentials required', {
      'www-authenticate': 'Basic realm="waiting room admin", charset="UTF-8"',
    });
  }
  return next();
}

async function withBearer(request: Request, ctx: AdminContext, next: () => Response | Promise<Response>): Promise<Response> {
  ctx.trace.decision = 'api';
  const expected = ctx.secrets.adminApiToken;
  if (expected === undefined) return errorResponse(403, 'the admit API is disabled: set the admin_api_token secret to enable it');
  const given = readBearer(request.headers.get('authorization'));
  if (given === undefined || !timingSafeEqual(given, expected)) {
    ctx.trace.reason = 'api_bad_token';
    return errorResponse(401, 'a valid bearer token is required', { 'www-authenticate': 'Bearer realm="waiting room"' });
  }
  return next();
}

async function stateJson(ctx: AdminContext): Promise<Response> {
  const outcome = await ctx.storeCall(() => ctx.store.peek(ctx.config.queueName));
  if (!outcome.ok) return errorResponse(503, `the queue store is unavailable (${outcome.reason}); nothing changed`);
  return jsonResponse(200, describeState(outcome.value, ctx.config));
}

async function adminPage(request: Request, ctx: AdminContext): Promise<Response> {
  const outcome = await ctx.storeCall(() => ctx.store.peek(ctx.config.queueName));
  if (!outcome.ok) return errorResponse(503, `the queue store is unavailable (${outcome.reason})`);
  const nowMs = ctx.clock.now();
  const iat = Math.floor(nowMs / 1000);
  const csrf = await signToken(ctx.secrets.keyRing, { q: ctx.config.queueName, k: 'c', t: 0, iat, exp: iat + CSRF_LIFETIME_SECONDS });
  const admitted = new URL(request.url).searchParams.get('admitted');
  const notice = admitted !== null && /^[0-9]{1,7}$/.test(admitted) ? `Let ${formatCount(Number(admitted))} ${admitted === '1' ? 'visitor' : 'visitors'} in.` : '';
  const { config } = ctx;
  const html = renderAdminPage({
    queue: config.queueName,
    tail: outcome.value.tail,
    cursor: outcome.value.cursor,
    autoText: config.admitPerPeriod > 0 ? `${config.admitPerPeriod} every ${config.admitPeriodSeconds} s` : 'off',
    csrf,
    admitAction: `${config.pathPrefix}admin/admit`,
    assetPrefix: `${config.pathPrefix}assets/`,
    maxAdmit: MAX_ADMIT_COUNT,
    notice,
    asOf: new Date(nowMs).toISOString().replace('T', ' ').slice(0, 19) + ' UTC',
    propagationSeconds: config.stateCacheSeconds,
  });
  return new Response(html, { headers: ADMIN_PAGE_HEADERS });
}

/**
 * A cross-site form post carries the browser's Basic-Auth credentials, so the form also needs a
 * token only our page can know, and the request must not come from another site.
 */
function isCrossSite(request: Request): boolean {
  // Browsers that send Fetch Metadata say exactly where a request comes from.
  const site = request.headers.get('sec-fetch-site');
  if (site !== null) return site !== 'same-origin' && site !== 'none';
  // Older browsers: compare Origin with our host. "null" is an opaque origin (a sandboxed frame,
  // a data: page), never our admin page. No Origin at all is a non-browser client, which still
  // needs the credentials and the form token.
  const origin = request.headers.get('origin');
  if (origin === null) return false;
  try {
    return new URL(origin).host !== new URL(request.url).host;
  } catch {
    return true;
  }
}

async function formAdmit(request: Request, ctx: AdminContext): Promise<Response> {
  if (isCrossSite(request)) {
    ctx.trace.reason = 'csrf_cross_site';
    return errorResponse(403, 'cross-site request refused; use the admin page');
  }
  const body = await readSmallBody(request, MAX_FORM_BYTES);
  if (!body.ok) return body.response;
  const form = new URLSearchParams(body.text);
  const csrf = form.get('csrf') ?? '';
  const check = await verifyToken(ctx.secrets.keyRing, csrf, ctx.config.queueName, ctx.clock.now());
  if (!check.ok || check.claims.k !== 'c') {
    ctx.trace.reason = 'csrf_token';
    return errorResponse(403, 'the form has expired or did not come from the admin page; reload the page and try again');
  }
  const counts = form.getAll('count');
  if (counts.length > 1) return errorResponse(400, 'count is given more than once');
  const parsed = parseAdmitCount(counts[0]);
  if (!parsed.ok) return errorResponse(400, parsed.error);
  const result = await admit(ctx, parsed.count);
  if (result instanceof Response) return result;
  if ((request.headers.get('accept') ?? '').includes('text/html')) {
    return new Response(null, {
      status: 303,
      headers: { location: `${ctx.config.pathPrefix}admin?admitted=${result.admitted}`, 'cache-control': 'no-store' },
    });
  }
  return jsonResponse(200, { admitted: result.admitted, ...describeState(result, ctx.config) });
}

async function apiAdmit(request: Request, ctx: AdminContext): Promise<Response> {
  const query = new URL(request.url).searchParams.getAll('count');
  if (query.length > 1) return errorResponse(400, 'count is given more than once');
  let value: unknown = query[0];
  const body = await readSmallBody(request, MAX_FORM_BYTES);
  if (!body.ok) return body.response;
  if (body.text.trim() !== '') {
    if (value !== undefined) return errorResponse(400, 'give count in the query or in the body, not both');
    let parsedBody: unknown;
    try {
      parsedBody = JSON.parse(body.text);
    } catch {
      return errorResponse(400, 'body must be JSON like {"count": 10}');
    }
    if (typeof parsedBody !== 'object' || parsedBody === null || Array.isArray(parsedBody)) {
      return errorResponse(400, 'body must be a JSON object like {"count": 10}');
    }
    value = (parsedBody as Record<string, unknown>)['count'];
  }
  const parsed = parseAdmitCount(value);
  if (!parsed.ok) return errorResponse(400, parsed.error);
  const result = await admit(ctx, parsed.count);
  if (result instanceof Response) return result;
  return jsonResponse(200, { admitted: result.admitted, ...describeState(result, ctx.config) });
}

async function admit(ctx: AdminContext, count: number): Promise<AdmitResult | Response> {
  const outcome = await ctx.storeCall(() => ctx.store.admit(ctx.config.queueName, count));
  if (!outcome.ok) return errorResponse(503, `the queue store did not confirm the admit (${outcome.reason}); check the state before retrying`);
  ctx.trace.cursor = outcome.value.cursor;
  ctx.trace.tail = outcome.value.tail;
  ctx.trace.reason = `admitted ${outcome.value.admitted}`;
  return outcome.value;
}
