/**
 * The operator's and the origin's controls: the Basic-Auth admin page with its let-N-in form, and
 * the bearer-token API the origin calls when it has room. Every change is one store call; bad
 * input gets a 4xx that says why and changes nothing.
 */
import { noticeQuery, readNotice } from './admin-notice';
import { guardSignIn, type SignInGuard } from './auth-throttle';
import type { Config, Secrets } from './config';
import { errorResponse, jsonResponse, NOSNIFF, readBasicAuth, readBearer, readSmallBody, timingSafeEqual } from './http';
import { adminPanel, saleStartOf, type AdminFigures } from './admin-view';
import { metricsText } from './metrics';
import { blockCounts } from './edge-blocks';
import { saleReportResponse, type ReportContext } from './admin-report';
import { olderPoints as keptOlderPoints } from './older-points';
import { adaptiveInForce, adminHead, consoleMode, pausedByOperator, renderAuditList, renderConsolePage } from './admin-page';
import { escapeHtml, formatCount, pauseControl, renderQueueList } from './pages';
import { repeatedTopLevelKey } from './json-keys';
import { IDEMPOTENCY_KEY_PATTERN, type AdaptiveStatus, type AdmissionPolicy, type AdmitResult, type Clock, type CurrentQueue, type EmergencySwitch, type FailureLimiter, type HistoryPoint, type QueueOverview, type QueueState, type QueueStats, type QueueStore, type RuntimeControl } from './ports';
import type { StoreOutcome } from './store-call';
import { refusedTicketsLastMinute, type RefusalReason } from './ticket-limit';
import { STORE_DOWN_RETRY_SECONDS, storeDownAlert, storeDownText } from './store-down-text';
import { signToken, verifyToken } from './tokens';
import { createVipCode, hashVipCode, VIP_PARAM } from './vip';
import { allows, checkPassword, DEFAULT_ITERATIONS, findAccount, roleFor, verifyPassword, type Account, type Right, type Role } from './accounts';
import { auditJson, encodeAuditEntry, readAudit, recentAudit, type AuditAction, type AuditEntry, type AuditValue } from './audit';
import { clientKey } from './auth-throttle';
import { AUDIT_KEEP_MS, AUDIT_MAX_ENTRIES, type AuditMerge } from './ports';
import { waitingOf } from './types';

/** Bypass passes are not tied to a queue (the same value as rules.ts checks). */
const BYPASS_QUEUE = '*';

/** The most visitors one admit may let in: larger numbers are typos, not intentions. */
export const MAX_ADMIT_COUNT = 100_000;
const MAX_FORM_BYTES = 4096;
/**
 * How long a form token is good for. The page carries one, and each live poll of its script brings
 * a fresh one (see liveJson): a console left open keeps working, one whose script stopped does not.
 */
const CSRF_LIFETIME_SECONDS = 3600;

/** A form token for the console's forms, good for CSRF_LIFETIME_SECONDS from `nowMs`. */
async function formToken(ctx: AdminContext, nowMs: number): Promise<string> {
  const iat = Math.floor(nowMs / 1000);
  return signToken(ctx.secrets.keyRing, { q: ctx.config.queueName, k: 'c', t: 0, iat, exp: iat + CSRF_LIFETIME_SECONDS });
}

export interface AdminContext {
  readonly config: Readonly<Config>;
  readonly secrets: Readonly<Secrets>;
  readonly store: QueueStore;
  readonly clock: Clock;
  readonly policy: AdmissionPolicy;
  /** With several queues: every queue's figures, for the list on the admin page. */
  readonly overview?: ((nowMs: number, current: CurrentQueue) => Promise<readonly QueueOverview[]>) | undefined;
  /** Counts failed sign-ins per client and holds guessers (see auth-throttle.ts); none: nobody is held. */
  readonly authLimiter?: FailureLimiter | undefined;
  /** Counts new tickets per client (see ticket-limit.ts): the console shows this POP's refusals. */
  readonly ticketLimiter?: FailureLimiter | undefined;
  /** The client's address, which failed sign-ins are counted against. */
  readonly address: string | undefined;
  /** The request's log fields; `actor` is the signed-in account's name (or `api`), `role` its role. */
  readonly trace: { decision: string; reason?: string; cursor?: number; tail?: number; client?: string; actor?: string; role?: Role | 'api' };
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

/** The queue's figures as the admin API answers them (the stats fields the issue names). */
function describeState(state: QueueState & Partial<Pick<QueueStats, 'reserved' | 'avgWaitSeconds' | 'adaptive' | 'lostState' | 'databases'>>, config: Readonly<Config>): Record<string, unknown> {
  const admitPerPeriod = state.admitPerPeriod ?? config.admitPerPeriod;
  const mode = modeOf({ ...state, admitPerPeriod });
  return {
    queue: config.queueName,
    /** capacity, rate, or manual (by hand: admits only). */
    mode,
    paused: state.paused,
    /** The emergency switch: normal, open (the room steps aside) or hold (nobody new gets in). */
    switch: state.switch ?? 'normal',
    tail: state.tail,
    cursor: state.cursor,
    queue_length: Math.max(0, state.tail - state.cursor),
    waiting: waitingOf(state, config.queueMethod === 'random'),
    active_sessions: state.active,
    max_sessions: state.maxActive,
    max_new_per_minute: state.maxNewPerMinute,
    admitted_last_minute: state.admittedLastMinute,
    admitted_last_5_minutes: state.admittedLast5Minutes,
    /** A reset names the epoch it expects (`epoch` in its body), so that a retried reset applies once. */
    epoch: state.epoch,
    ...(state.reserved !== undefined && { reserved: state.reserved }),
    ...(state.avgWaitSeconds !== undefined && { avg_wait_seconds: state.avgWaitSeconds }),
    admit_per_period: admitPerPeriod,
    admit_period_seconds: config.admitPeriodSeconds,
    ...(state.adaptive !== undefined && { adaptive: describeAdaptive(state.adaptive) }),
    /**
     * The store lost this queue's state (a flush, a restart without persistence) and a POP that knew
     * it restored the controls it remembered: when, and which (open, hold, paused; none when it
     * remembered them normal). Absent when the state was never lost.
     */
    ...(state.lostState !== undefined && { state_lost: { at: new Date(state.lostState.atMs).toISOString(), restored: state.lostState.restored } }),
    /** Changes reach every POP within this many seconds (the per-POP cache lifetime). */
    propagation_seconds: config.stateCacheSeconds,
    /** Several databases (store_shards): each one's tail and cursor, in order; tail and cursor above are their sums. */
    ...(state.databases !== undefined && { databases: state.databases }),
  };
}

/** Adaptive admission as the API answers it: what it moves, the value, its bounds, what it saw, its moves. */
function describeAdaptive(a: AdaptiveStatus): Record<string, unknown> {
  return {
    enabled: a.enabled,
    source: a.source,
    knob: a.knob,
    value: a.value,
    pinned: a.pinned,
    min: a.min,
    max: a.max,
    error_percent: a.errorPercent,
    slow_percent: a.slowPercent,
    signals: a.signals === null ? null : { at: new Date(a.signals.atMs).toISOString(), requests: a.signals.requests, errors: a.signals.errors, slow: a.signals.slow, pops: a.signals.pops },
    moves: a.moves.map((m) => ({ at: new Date(m.atMs).toISOString(), from: m.from, to: m.to, reason: m.reason })),
  };
}

/** The most a threshold may be set to at runtime: larger numbers are typos, not intentions. */
export const MAX_THRESHOLD = 10_000_000;

/** The most visitors a period may be set to at runtime: the bound `admit_per_period` has in the configuration. */
export const MAX_PERIOD_QUOTA = 1_000_000;

/**
 * How the queue lets people in, from the thresholds in effect: capacity (`max_active` or
 * `max_new_per_minute` above 0), rate (`admit_per_period` above 0 each period) or by hand (admits
 * from here and the origin only).
 */
export type QueueMode = 'capacity' | 'rate' | 'manual';

export type ControlResult =
  | { readonly ok: true; readonly change: RuntimeControl; readonly mode?: QueueMode | undefined }
  | { readonly ok: false; readonly error: string };

/** A whole number from JSON (an integer) or a form (digits, spaces around them allowed); undefined otherwise. */
function wholeNumber(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isInteger(value) ? value : undefined;
  return typeof value === 'string' && /^\s*[0-9]+\s*$/.test(value) ? Number(value.trim()) : undefined;
}

/** Where controls come from: the API's JSON, which has types, or the console's form, which has only strings. */
export type ControlSource = 'json' | 'form';

/**
 * Validates runtime controls from JSON (`{"paused": true, "max_active": 500}`) or a form
 * (`paused=true`, `max_active=500`, `max_active=default`). `null`/`default` returns a threshold to
 * its configured value. Any bad field refuses the whole change.
 *
 * JSON takes typed values only: `"true"` where a boolean is meant, or `"5"` where a number is, is
 * refused, not read as what it might mean. A client that quotes its values built the body wrong
 * (a template filled in as text), and reading `"false"` as false would only hide the day it sends
 * `"False"` or `"0"` and something else is applied. The form's strings are read as before.
 */
export function parseControl(input: Readonly<Record<string, unknown>>, source: ControlSource): ControlResult {
  // A string in JSON where a boolean or a number is meant (the keywords the API documents aside).
  const untyped = (key: string, type: string, value: unknown): ControlResult | undefined =>
    source === 'json' && typeof value === 'string'
      ? { ok: false, error: `${key} must be a JSON ${type}, not the string ${JSON.stringify(value).slice(0, 40)}; nothing changed` }
      : undefined;
  const keys = Object.keys(input);
  if (keys.length === 0) return { ok: false, error: 'give at least one of paused, max_active, max_new_per_minute, admit_per_period, mode, switch, adaptive, adaptive_pin' };
  const change: {
    paused?: boolean;
    maxActive?: number | null;
    maxNewPerMinute?: number | null;
    admitPerPeriod?: number | null;
    switch?: EmergencySwitch;
    adaptive?: 'on' | 'off' | null;
    adaptivePin?: number | null;
  } = {};
  let mode: QueueMode | undefined;
  for (const key of keys) {
    const value = input[key];
    if (key === 'mode') {
      if (value === 'capacity' || value === 'rate' || value === 'manual') mode = value;
      else return { ok: false, error: `mode must be capacity, rate or manual (the mode the change leaves the queue in), got ${JSON.stringify(value)?.slice(0, 40)}; nothing changed` };
      continue;
    }
    if (key === 'admit_per_period') {
      const refused = untyped(key, 'number (a whole number), or null for the configured value', value);
      if (refused !== undefined) return refused;
      const quota = value === null || value === 'default' ? null : wholeNumber(value);
      if (quota === undefined) return { ok: false, error: `admit_per_period must be a whole number, or null for the configured value; got ${JSON.stringify(value)?.slice(0, 40)}` };
      if (quota !== null && (quota < 0 || quota > MAX_PERIOD_QUOTA)) return { ok: false, error: `admit_per_period must be between 0 and ${formatCount(MAX_PERIOD_QUOTA)}, got ${quota}` };
      change.admitPerPeriod = quota;
      continue;
    }
    if (key === 'adaptive') {
      if (value === 'on' || value === 'off') change.adaptive = value;
      else if (value === null || value === 'config') change.adaptive = null;
      else return { ok: false, error: `adaptive must be on, off or config (back to the configuration), got ${JSON.stringify(value)?.slice(0, 40)}` };
      continue;
    }
    if (key === 'adaptive_pin') {
      const refused = value === 'release' ? undefined : untyped(key, 'number (a whole number), or "release"', value);
      if (refused !== undefined) return refused;
      const pin = value === null || value === 'release' ? null : wholeNumber(value);
      if (pin === undefined) return { ok: false, error: `adaptive_pin must be a whole number, or release; got ${JSON.stringify(value)?.slice(0, 40)}` };
      if (pin !== null && (pin < 1 || pin > MAX_THRESHOLD)) return { ok: false, error: `adaptive_pin must be between 1 and ${MAX_THRESHOLD}, got ${pin}` };
      change.adaptivePin = pin;
      continue;
    }
    if (key === 'switch') {
      if (value === 'normal' || value === 'open' || value === 'hold') change.switch = value;
      else return { ok: false, error: `switch must be normal, open (everyone passes, nobody is queued) or hold (nobody new gets in), got ${JSON.stringify(value)?.slice(0, 40)}` };
      continue;
    }
    if (key === 'paused') {
      const refused = untyped(key, 'boolean, true or false', value);
      if (refused !== undefined) return refused;
      if (value === true || value === 'true') change.paused = true;
      else if (value === false || value === 'false') change.paused = false;
      else return { ok: false, error: `paused must be true or false, got ${JSON.stringify(value)?.slice(0, 40)}` };
      continue;
    }
    if (key !== 'max_active' && key !== 'max_new_per_minute') {
      return { ok: false, error: `unknown control ${JSON.stringify(key).slice(0, 60)}: use paused, max_active, max_new_per_minute, admit_per_period, mode, switch, adaptive or adaptive_pin` };
    }
    const refused = untyped(key, 'number (a whole number), or null for the configured value', value);
    if (refused !== undefined) return refused;
    const parsed = value === null || value === 'default' ? null : wholeNumber(value);
    if (parsed === undefined) return { ok: false, error: `${key} must be a whole number, or null for the configured value; got ${JSON.stringify(value)?.slice(0, 40)}` };
    if (parsed !== null && (parsed < 0 || parsed > MAX_THRESHOLD)) {
      return { ok: false, error: `${key} must be between 0 (no limit) and ${MAX_THRESHOLD}, got ${parsed}` };
    }
    if (key === 'max_active') change.maxActive = parsed;
    else change.maxNewPerMinute = parsed;
  }
  return { ok: true, change, mode };
}

/** The mode thresholds make: see QueueMode. */
export function modeOf(t: { readonly maxActive: number; readonly maxNewPerMinute: number; readonly admitPerPeriod: number }): QueueMode {
  return t.maxActive > 0 || t.maxNewPerMinute > 0 ? 'capacity' : t.admitPerPeriod > 0 ? 'rate' : 'manual';
}

/** A mode in words, with the thresholds that make it. */
function modeText(mode: QueueMode, t: { readonly maxActive: number; readonly maxNewPerMinute: number; readonly admitPerPeriod: number }, config: Readonly<Config>): string {
  if (mode === 'rate') return `rate mode (${formatCount(t.admitPerPeriod)} visitors every ${config.admitPeriodSeconds} s)`;
  if (mode === 'manual') return 'by hand (nobody is let in but by an admit)';
  const parts = [t.maxActive > 0 ? `${formatCount(t.maxActive)} at once` : 'no limit at once', t.maxNewPerMinute > 0 ? `${formatCount(t.maxNewPerMinute)} new a minute` : 'no limit a minute'];
  return `capacity mode (${parts.join(', ')})`;
}

/**
 * A change of thresholds never changes the mode unless it says so (`mode`): in rate mode, a
 * capacity threshold set alone would quietly stop the period quota; in capacity mode, both limits
 * at 0 would quietly stop capacity. From admission by hand, a limit starts automatic admission
 * (nothing in force stops) and the answer says the mode changed. Given the thresholds in effect
 * (`now`), returns the change to apply (a change to rate or by hand sets the thresholds the other
 * modes use to 0), or why it is refused; nothing is applied either way.
 */
export function guardMode(
  change: RuntimeControl,
  mode: QueueMode | undefined,
  now: { readonly maxActive: number; readonly maxNewPerMinute: number; readonly admitPerPeriod: number },
  config: Readonly<Config>,
): { ok: true; change: RuntimeControl; from: QueueMode; to: QueueMode } | { ok: false; status: 400 | 409; error: string } {
  let applied: RuntimeControl = change;
  if (mode === 'rate' || mode === 'manual') {
    for (const [key, name] of [['maxActive', 'max_active'], ['maxNewPerMinute', 'max_new_per_minute']] as const) {
      const given = change[key];
      if (given !== undefined && given !== 0) return { ok: false, status: 400, error: `${mode === 'rate' ? 'rate mode' : 'admission by hand'} has ${name} at 0, got ${given === null ? 'default' : given}; nothing changed` };
    }
    applied = { ...applied, maxActive: 0, maxNewPerMinute: 0 };
    if (mode === 'manual') {
      if (change.admitPerPeriod !== undefined && change.admitPerPeriod !== 0) return { ok: false, status: 400, error: 'admission by hand has admit_per_period at 0; nothing changed' };
      applied = { ...applied, admitPerPeriod: 0 };
    }
  }
  const value = (given: number | null | undefined, current: number, configured: number): number => (given === undefined ? current : given === null ? configured : given);
  const after = {
    maxActive: value(applied.maxActive, now.maxActive, config.maxActive),
    maxNewPerMinute: value(applied.maxNewPerMinute, now.maxNewPerMinute, config.maxNewPerMinute),
    admitPerPeriod: value(applied.admitPerPeriod, now.admitPerPeriod, config.admitPerPeriod),
  };
  const from = modeOf(now);
  const to = modeOf(after);
  if (mode !== undefined && to !== mode) {
    const needs = mode === 'rate' ? 'admit_per_period above 0' : 'max_active or max_new_per_minute above 0';
    return { ok: false, status: 400, error: `this change leaves the queue in ${modeText(to, after, config)}, not ${mode} mode: give ${needs}; nothing changed` };
  }
  // From admission by hand a limit starts automatic admission, and nothing in force stops: allowed,
  // and the answer says that the mode changed. Away from rate or capacity it must be chosen.
  if (mode === undefined && to !== from && from !== 'manual') {
    return {
      ok: false,
      status: 409,
      error: `this change would switch the queue from ${modeText(from, now, config)} to ${modeText(to, after, config)}; nothing changed. To mean it, send mode=${to} with it.`,
    };
  }
  return { ok: true, change: applied, from, to };
}

const ADMIN_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'content-security-policy':
    "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'referrer-policy': 'same-origin',
  'x-content-type-options': 'nosniff',
};

/**
 * The report's context: the admin context, with the audit trail's entries (who did what) for its
 * timeline, read in one more call; a trail that cannot be read leaves the report with what the
 * record saw (its actions then name no one).
 */
function reportContext(ctx: AdminContext): ReportContext {
  return {
    ...ctx,
    auditEntries: async (fromMs, toMs) => {
      const read = await ctx.storeCall(() => readAudit(ctx.store, ctx.config.queueName, fromMs, toMs + 1));
      return read.ok ? read.value.map((e) => ({ atMs: e.atMs, action: e.change, actor: e.actor })) : [];
    },
  };
}

export async function handleAdminRoute(request: Request, rest: string, ctx: AdminContext): Promise<Response | undefined> {
  switch (rest) {
    case 'admin':
      return withBasicAuth(request, ctx, 'read', () => (request.method === 'GET' ? adminPage(request, ctx) : methodNotAllowed('GET')));
    case 'admin/state':
    case 'admin/stats':
      return withBasicAuth(request, ctx, 'read', () => (request.method === 'GET' ? stateJson(ctx) : methodNotAllowed('GET')));
    case 'api/state':
    case 'api/stats':
      return withBearer(request, ctx, () => (request.method === 'GET' ? stateJson(ctx) : methodNotAllowed('GET')));
    case 'admin/live':
      return withBasicAuth(request, ctx, 'read', () => (request.method === 'GET' ? liveJson(ctx) : methodNotAllowed('GET')));
    case 'api/metrics':
      return withBearer(request, ctx, () => (request.method === 'GET' ? metrics(ctx) : methodNotAllowed('GET')));
    case 'admin/metrics':
      return withBasicAuth(request, ctx, 'read', () => (request.method === 'GET' ? metrics(ctx) : methodNotAllowed('GET')));
    case 'admin/audit':
      return withBasicAuth(request, ctx, 'read', () => (request.method === 'GET' ? auditRoute(request, ctx) : methodNotAllowed('GET')));
    case 'api/audit':
      return withBearer(request, ctx, () => (request.method === 'GET' ? auditRoute(request, ctx) : methodNotAllowed('GET')));
    case 'admin/sign-out':
      return request.method === 'GET' ? signOut(request, ctx) : methodNotAllowed('GET');
    case 'admin/report':
      return withBasicAuth(request, ctx, 'read', () => (request.method === 'GET' ? saleReportResponse(request, reportContext(ctx), 'html', ADMIN_PAGE_HEADERS) : methodNotAllowed('GET')));
    case 'admin/report.json':
    case 'admin/report.csv':
      return withBasicAuth(request, ctx, 'read', () =>
        request.method === 'GET' ? saleReportResponse(request, reportContext(ctx), rest.endsWith('.csv') ? 'csv' : 'json', ADMIN_PAGE_HEADERS) : methodNotAllowed('GET'),
      );
    case 'api/report.json':
    case 'api/report.csv':
      return withBearer(request, ctx, () =>
        request.method === 'GET' ? saleReportResponse(request, reportContext(ctx), rest.endsWith('.csv') ? 'csv' : 'json', ADMIN_PAGE_HEADERS) : methodNotAllowed('GET'),
      );
    case 'admin/reset':
      return withBasicAuth(request, ctx, 'reset', () => (request.method === 'POST' ? formReset(request, ctx) : methodNotAllowed('POST')));
    case 'api/reset':
      return withBearer(request, ctx, () => (request.method === 'POST' ? apiReset(request, ctx) : methodNotAllowed('POST')));
    case 'admin/control':
      return withBasicAuth(request, ctx, 'change', () => (request.method === 'POST' ? formControl(request, ctx) : methodNotAllowed('POST')));
    case 'api/vip':
      return withBearer(request, ctx, () => (request.method === 'POST' ? apiCreateVip(request, ctx) : methodNotAllowed('POST')));
    case 'admin/vip':
      return withBasicAuth(request, ctx, 'change', () => (request.method === 'POST' ? formCreateVip(request, ctx) : methodNotAllowed('POST')));
    case 'api/bypass-pass':
      return withBearer(request, ctx, () => (request.method === 'POST' ? mintBypassPass(request, ctx) : methodNotAllowed('POST')));
    case 'api/control':
      return withBearer(request, ctx, () => (request.method === 'POST' ? apiControl(request, ctx) : methodNotAllowed('POST')));
    case 'admin/admit':
      return withBasicAuth(request, ctx, 'change', () => (request.method === 'POST' ? formAdmit(request, ctx) : methodNotAllowed('POST')));
    case 'api/admit':
      return withBearer(request, ctx, () => (request.method === 'POST' ? apiAdmit(request, ctx) : methodNotAllowed('POST')));
    default:
      return undefined;
  }
}

function methodNotAllowed(allow: string): Response {
  return errorResponse(405, `use ${allow}`, { allow });
}

function signInGuard(ctx: AdminContext, account?: string): SignInGuard {
  return { limiter: ctx.authLimiter, settings: ctx.config, address: ctx.address, trace: ctx.trace, account };
}

/** The realm the console's Basic Auth asks for (the sign-out answers it too, see signOut). */
const ADMIN_REALM = 'Basic realm="waiting room admin", charset="UTF-8"';

/**
 * The console's accounts: those of `admin_accounts`, and `admin_password` as an admin named
 * `admin_user` (as before accounts existed) unless a named account takes that name.
 */
export function consoleAccounts(secrets: Pick<Secrets, 'adminPassword' | 'adminAccounts'>, adminUser: string): readonly Account[] {
  const named = secrets.adminAccounts;
  const password = secrets.adminPassword;
  if (password === undefined || findAccount(named, adminUser) !== undefined) return named;
  return [...named, { name: adminUser, role: 'admin', password }];
}

/**
 * A hash no password matches, checked for a name no account has, at the iterations of the named
 * accounts' first hash: an unknown name costs what a known one does, so the time taken does not tell
 * which names exist. Without named accounts (only `admin_password`) there is no hash to hide, and
 * nothing is computed.
 */
const NO_ACCOUNT = { iterations: DEFAULT_ITERATIONS, salt: new Uint8Array(16), hash: new Uint8Array(32), text: '' };

/**
 * Basic Auth for the console: the account named by the user name, its password checked (see
 * accounts.ts), the sign-in throttled per client and per account, then the account's role must
 * hold `right`: a viewer's change, or an operator's reset, is a 403 that says so.
 */
async function withBasicAuth(request: Request, ctx: AdminContext, right: Right, next: () => Response | Promise<Response>): Promise<Response> {
  ctx.trace.decision = 'admin';
  const accounts = consoleAccounts(ctx.secrets, ctx.config.adminUser);
  if (accounts.length === 0) {
    return errorResponse(403, 'admin is disabled: set the admin_accounts or the admin_password secret to enable it');
  }
  const given = readBasicAuth(request.headers.get('authorization'));
  const account = given === undefined ? undefined : findAccount(accounts, given.user);
  const signIn = await guardSignIn(signInGuard(ctx, given?.user), 'admin', async () => {
    if (given === undefined) return 'missing';
    if (account === undefined) {
      const like = accounts.find((a) => a.hash !== undefined)?.hash;
      if (like !== undefined) await verifyPassword(given.password, { ...NO_ACCOUNT, iterations: like.iterations });
      return 'wrong';
    }
    return (await checkPassword(account, given.password, ctx.clock.now(), timingSafeEqual)) ? 'ok' : 'wrong';
  });
  if (signIn.kind === 'held') return signIn.response;
  if (signIn.kind !== 'ok' || account === undefined) {
    return errorResponse(401, 'admin credentials required', { 'www-authenticate': ADMIN_REALM });
  }
  ctx.trace.actor = account.name;
  ctx.trace.role = account.role;
  if (!allows(account.role, right)) {
    ctx.trace.reason = `role_refused: ${account.role} ${account.name} may not ${right}`;
    const what = right === 'reset' ? 'reset the queue' : 'change anything';
    return errorResponse(403, `the account ${JSON.stringify(account.name)} is ${account.role === 'viewer' ? 'a' : 'an'} ${account.role}: it may not ${what} (that needs ${roleFor(right) === 'admin' ? 'an admin' : 'an operator or an admin'}); nothing changed`);
  }
  return next();
}

/**
 * Signing out of Basic Auth, which has no sign-out of its own: browsers keep the credentials and
 * send them until a request with them is answered 401. So this route answers 401 with the
 * console's realm: the browser (Chromium, Firefox, Safari) drops the credentials it holds for the
 * console and asks again; dismissing the prompt leaves a page that says it signed out and links
 * back. The answer also sets a short-lived marker cookie (for this path only): if the person signs
 * in again at that prompt, the request comes back here with the marker and valid credentials, and
 * is sent on to the console instead of being signed out again (which would loop). The marker
 * grants nothing: the credentials are still checked as on any console request.
 */
async function signOut(request: Request, ctx: AdminContext): Promise<Response> {
  ctx.trace.decision = 'admin';
  const marker = SIGNED_OUT_COOKIE;
  const cookiePath = `${ctx.config.pathPrefix}admin/sign-out`;
  const hasMarker = (request.headers.get('cookie') ?? '').split(';').some((c) => c.trim() === `${marker}=1`);
  const given = readBasicAuth(request.headers.get('authorization'));
  if (hasMarker && given !== undefined) {
    // Signing in again at the prompt: the console checks the credentials (and throttles) as always.
    ctx.trace.reason = 'signed_in_again';
    return new Response(null, {
      status: 303,
      headers: { location: `${ctx.config.pathPrefix}admin`, 'set-cookie': clearSignedOut(ctx.config.pathPrefix), 'cache-control': 'no-store', ...NOSNIFF },
    });
  }
  ctx.trace.reason = 'signed_out';
  const admin = escapeHtml(`${ctx.config.pathPrefix}admin`);
  const html = `${adminHead(ctx.config.pathPrefix, 'Signed out · waiting room admin')}
<body class="admin">
<main class="card" aria-labelledby="title">
  <h1 id="title">Signed out</h1>
  <p>You are signed out of the waiting room console in this browser. Close the window if others use this computer.</p>
  <p><a href="${admin}">Sign in again</a></p>
</main>
</body>
</html>`;
  return new Response(html, {
    status: 401,
    headers: {
      ...ADMIN_PAGE_HEADERS,
      'www-authenticate': ADMIN_REALM,
      'set-cookie': `${marker}=1; Max-Age=600; Path=${cookiePath}; HttpOnly; Secure; SameSite=Strict`,
    },
  });
}

/** The sign-out route's marker (see signOut). */
const SIGNED_OUT_COOKIE = 'wr_signed_out';

/** Clears the sign-out's marker: when the person is back in the console, the next sign-out must sign out. */
const clearSignedOut = (prefix: string): string => `${SIGNED_OUT_COOKIE}=; Max-Age=0; Path=${prefix}admin/sign-out; HttpOnly; Secure; SameSite=Strict`;

/**
 * Records a change in the audit trail (one store call, after the change) and returns a warning
 * when the store did not take it. The change itself stands either way, and the request's log line
 * carries the actor and the change (`actor`, `reason`), so a lost entry is never silent: the answer
 * says so, and the log line says `audit not stored`.
 */
async function recordAudit(
  ctx: AdminContext,
  action: AuditAction,
  change: string,
  values?: { before?: Record<string, AuditValue> | undefined; after?: Record<string, AuditValue> | undefined },
  merge?: AuditMerge,
): Promise<string | undefined> {
  const nowMs = ctx.clock.now();
  const entry: AuditEntry = {
    atMs: nowMs,
    actor: ctx.trace.actor ?? 'unknown',
    role: ctx.trace.role ?? 'api',
    client: clientKey(ctx.address),
    action,
    change,
    ...(values?.before !== undefined && { before: values.before }),
    ...(values?.after !== undefined && { after: values.after }),
  };
  const outcome = await ctx.storeCall(() => ctx.store.appendAudit(ctx.config.queueName, encodeAuditEntry(entry), nowMs, merge));
  if (outcome.ok) return undefined;
  ctx.trace.reason = `${ctx.trace.reason ?? action}; audit not stored (${outcome.reason})`;
  return `The change was applied, but the audit trail did not record it (the store: ${outcome.reason}); the request log has it.`;
}

/** The fields of the state a control touches, for the audit trail's before and after. */
function controlFields(state: Partial<QueueStats>, config: Readonly<Config>): Record<string, AuditValue> {
  return {
    paused: state.paused ?? null,
    switch: state.switch ?? 'normal',
    max_active: state.maxActive ?? null,
    max_new_per_minute: state.maxNewPerMinute ?? null,
    admit_per_period: state.admitPerPeriod ?? config.admitPerPeriod,
    ...(state.adaptive !== undefined && { adaptive: state.adaptive.enabled, adaptive_pinned: state.adaptive.pinned }),
  };
}

/** `GET admin/audit` (and `api/audit`): the trail as JSON, newest first; `limit`, `from`, `to` narrow it. */
async function auditRoute(request: Request, ctx: AdminContext): Promise<Response> {
  const params = new URL(request.url).searchParams;
  for (const key of params.keys()) {
    if (!['limit', 'from', 'to', 'queue'].includes(key)) return errorResponse(400, `unknown parameter ${JSON.stringify(key).slice(0, 40)}: use limit, from, to`);
  }
  const limitText = params.get('limit') ?? '100';
  if (!/^[0-9]{1,5}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > AUDIT_MAX_ENTRIES) {
    return errorResponse(400, `limit must be a whole number from 1 to ${AUDIT_MAX_ENTRIES}`);
  }
  const time = (name: string): number | undefined | Response => {
    const text = params.get(name);
    if (text === null) return undefined;
    const ms = Date.parse(text);
    return Number.isFinite(ms) && /^\d{4}-\d{2}-\d{2}T/.test(text) ? ms : errorResponse(400, `${name} must be an ISO 8601 time like 2026-11-28T10:00:00Z`);
  };
  const from = time('from');
  const to = time('to');
  if (from instanceof Response) return from;
  if (to instanceof Response) return to;
  const nowMs = ctx.clock.now();
  // A window reads the whole kept trail; without one, the newest `limit`.
  const window = from !== undefined || to !== undefined;
  const outcome = await ctx.storeCall(() => recentAudit(ctx.store, ctx.config.queueName, window ? AUDIT_MAX_ENTRIES : Number(limitText), nowMs));
  if (!outcome.ok) return errorResponse(503, `the queue store is unavailable (${outcome.reason})`);
  const entries = outcome.value.filter((e) => (from === undefined || e.atMs >= from) && (to === undefined || e.atMs < to)).slice(0, Number(limitText));
  return jsonResponse(200, {
    queue: ctx.config.queueName,
    kept: { max_entries: AUDIT_MAX_ENTRIES, days_after_last_change: AUDIT_KEEP_MS / 86_400_000 },
    entries: entries.map(auditJson),
  });
}

async function withBearer(request: Request, ctx: AdminContext, next: () => Response | Promise<Response>): Promise<Response> {
  ctx.trace.decision = 'api';
  const expected = ctx.secrets.adminApiToken;
  if (expected === undefined) return errorResponse(403, 'the admit API is disabled: set the admin_api_token secret to enable it');
  const given = readBearer(request.headers.get('authorization'));
  const signIn = await guardSignIn(signInGuard(ctx), 'api', () =>
    given === undefined ? 'missing' : timingSafeEqual(given, expected) ? 'ok' : 'wrong',
  );
  if (signIn.kind === 'held') return signIn.response;
  if (signIn.kind !== 'ok') {
    return errorResponse(401, 'a valid bearer token is required', { 'www-authenticate': 'Bearer realm="waiting room"' });
  }
  ctx.trace.actor = 'api';
  ctx.trace.role = 'api';
  return next();
}

async function stateJson(ctx: AdminContext): Promise<Response> {
  const outcome = await ctx.storeCall(() => ctx.store.stats(ctx.config.queueName, ctx.clock.now(), ctx.policy));
  if (!outcome.ok) return errorResponse(503, `the queue store is unavailable (${outcome.reason}); nothing changed`);
  return jsonResponse(200, { ...describeState(outcome.value, ctx.config), ...(await refusedHere(ctx)) });
}

/**
 * New tickets refused to clients over `ticket_limit` in the last minute, as counted where this
 * request is served (Edge Rate Limiting is per POP; the Node host is one POP); null when the limiter
 * cannot say. No store call.
 */
async function refusedHere(ctx: AdminContext): Promise<{ tickets_refused_last_minute_here: Record<RefusalReason, number | null> }> {
  return { tickets_refused_last_minute_here: await refusedTicketsLastMinute(ctx.ticketLimiter, ctx.config.queueName) };
}

/** The on-call figures in the OpenMetrics text format (see metrics.ts): one stats call, no history. */
async function metrics(ctx: AdminContext): Promise<Response> {
  const stats = await ctx.storeCall(() => ctx.store.stats(ctx.config.queueName, ctx.clock.now(), ctx.policy));
  const text = await metricsText({
    queue: ctx.config.queueName,
    method: ctx.config.queueMethod,
    stats: stats.ok ? { ok: true, value: stats.value, ms: stats.ms } : { ok: false },
    limiter: ctx.ticketLimiter,
    blocks: blockCounts(ctx.config.queueName),
  });
  return new Response(text, { headers: { 'content-type': 'application/openmetrics-text; version=1.0.0; charset=utf-8', 'cache-control': 'no-store' } });
}

/** How many of the newest changes the console lists. */
const CONSOLE_AUDIT_ENTRIES = 20;

interface Panel {
  readonly stats: QueueStats;
  /** The newest changes; undefined when the store did not answer them (the figures still show). */
  readonly audit: readonly AuditEntry[] | undefined;
  readonly refused: { tickets_refused_last_minute_here: Record<RefusalReason, number | null> };
  readonly figures: AdminFigures;
  readonly chart: string;
}

/**
 * The figures and the last hour's chart, read by one stats call (one script run, billed once): the
 * tiles and the chart's latest point are the same answer (see adminPanel).
 */
async function readPanel(ctx: AdminContext, nowMs: number): Promise<Panel | Response> {
  // The recent changes in a second call beside the figures (the console's, never a visitor's).
  const [stats, audit] = await Promise.all([
    ctx.storeCall(() => ctx.store.stats(ctx.config.queueName, nowMs, ctx.policy, { history: true })),
    ctx.storeCall(() => recentAudit(ctx.store, ctx.config.queueName, CONSOLE_AUDIT_ENTRIES, nowMs)),
  ]);
  if (!stats.ok) return errorResponse(503, `the queue store is unavailable (${stats.reason})`);
  const refused = await refusedHere(ctx);
  // A sale that began over an hour ago (its reset, or the event's start): the chart covers it from
  // the sale's record (see olderPoints). One with neither began, as far as the chart can tell, at the
  // oldest point the record keeps (seven days at most): read from the record's start.
  const known = saleStartOf(stats.value, ctx.config, nowMs);
  const older = await olderPoints(ctx, nowMs, known > 0 ? known : SINCE_THE_RECORD_BEGAN, stats.value.epoch);
  const withOlder = older.length === 0 ? stats.value : { ...stats.value, history: [...older, ...(stats.value.history ?? [])] };
  const saleStart = known > 0 ? known : (older[0]?.atMs ?? 0);
  // A store that answers no history still gives the figures: the chart then shows only now.
  return { stats: stats.value, audit: audit.ok ? audit.value : undefined, refused, ...adminPanel(withOlder, ctx.config, nowMs, refused.tickets_refused_last_minute_here, saleStart) };
}

/** A sale start before any record (ms): olderPoints then reads all the record keeps. */
const SINCE_THE_RECORD_BEGAN = 1;

/**
 * The record's points from the sale's start up to the last hour (which the stats call read); none
 * when the sale is younger. Kept where the console is served (older-points.ts): a poll reads only
 * the minutes that passed the hour's edge since the last.
 */
async function olderPoints(ctx: AdminContext, nowMs: number, saleStartMs: number, epoch: number): Promise<HistoryPoint[]> {
  const record = ctx.store.record?.bind(ctx.store);
  if (record === undefined) return [];
  return keptOlderPoints(ctx.store, ctx.config.queueName, nowMs, saleStartMs, epoch, async (from, minutes) => {
    const read = await ctx.storeCall(() => record(ctx.config.queueName, nowMs, from, minutes));
    // The older part is a bonus: without it the chart shades what it could not read.
    return read.ok ? read.value : undefined;
  });
}

const asOf = (nowMs: number): string => new Date(nowMs).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';

/**
 * What the console's script polls: the same figures as the page, as text, the chart, and a fresh
 * form token for the page's forms. The token is safe here: this is a GET behind Basic Auth whose
 * JSON another site's page cannot read (no CORS), and a form still needs same-origin Fetch Metadata.
 */
async function liveJson(ctx: AdminContext): Promise<Response> {
  const nowMs = ctx.clock.now();
  const panel = await readPanel(ctx, nowMs);
  if (panel instanceof Response) return panel;
  const { stats, refused } = panel;
  return jsonResponse(200, {
    figures: { ...panel.figures, as_of: asOf(nowMs), mode_name: { capacity: 'capacity', rate: 'rate', manual: 'by hand' }[consoleMode({ ...stats, admitPerPeriod: stats.admitPerPeriod ?? ctx.config.admitPerPeriod })] },
    chart: panel.chart,
    paused: stats.paused,
    ...pauseControl(pausedByOperator(stats)),
    state: { ...describeState(stats, ctx.config), ...refused },
    // What each select of the page shows: the state in force.
    in_force: { switch: stats.switch ?? 'normal', mode: consoleMode({ ...stats, admitPerPeriod: stats.admitPerPeriod ?? ctx.config.admitPerPeriod }), adaptive: adaptiveInForce(stats) },
    csrf: await formToken(ctx, nowMs),
    audit: renderAuditList(panel.audit),
    ...(ctx.overview !== undefined && { queues: renderQueueList(await ctx.overview(nowMs, { name: ctx.config.queueName, stats }), ctx.config.queueName, `${ctx.config.pathPrefix}admin`) }),
  });
}

/**
 * The console while the store does not answer: a page, not bare JSON, that says so, what still
 * works without the store and what does not, and comes back by itself. Its script asks the live
 * figures every 10 s in the background and reloads only once the store answers: a page that
 * reloaded itself every 10 s would pull the text from under whoever reads it (WCAG 2.2.1, the
 * failure F41). Without JavaScript the page still reloads every 10 s (a refresh in `<noscript>`).
 */

/** What the console's script polls for live figures (with several queues, this queue's). */
const liveUrl = (ctx: AdminContext): string => `${ctx.config.pathPrefix}admin/live${ctx.overview === undefined ? '' : `?${queueQuery(ctx, '')}`}`;

async function storeDownPage(ctx: AdminContext, problem: Response): Promise<Response> {
  const { config } = ctx;
  let reason = 'no answer';
  try {
    reason = String(((await problem.json()) as { error?: unknown }).error ?? reason);
  } catch {
    // The JSON error is ours; if it is not there, the generic reason stands.
  }
  const text = storeDownText(config);
  const html = `${adminHead(
    config.pathPrefix,
    `Waiting room admin · ${config.queueName} · store not answering`,
    `<noscript><meta http-equiv="refresh" content="${STORE_DOWN_RETRY_SECONDS}"></noscript>\n<script src="${escapeHtml(config.pathPrefix)}assets/admin.js" defer></script>\n`,
  )}
<body class="admin" data-store-down data-live="${escapeHtml(liveUrl(ctx))}" data-every="${STORE_DOWN_RETRY_SECONDS}">
<main class="card wide" aria-labelledby="title">
  <h1 id="title">${escapeHtml(text.title)}</h1>
  <p class="notice error" role="alert">${escapeHtml(storeDownAlert(config.queueName, reason, STORE_DOWN_RETRY_SECONDS, 'shows the console'))}</p>
  <h2>What still works</h2>
  <ul>
    <li>${escapeHtml(text.kept)}</li>
    <li>${escapeHtml(text.visitors)}</li>
    <li>Bypass rules and the health endpoint.</li>
  </ul>
  <h2>What waits for the store</h2>
  <ul>
    <li>${escapeHtml(text.waits)}</li>
    <li>The log's <code>store_error</code> field on each request says what the store answered, or that it did not in time.</li>
  </ul>
</main>
</body>
</html>`;
  return new Response(html, { status: 503, headers: { ...ADMIN_PAGE_HEADERS, 'retry-after': String(STORE_DOWN_RETRY_SECONDS) } });
}

async function adminPage(request: Request, ctx: AdminContext): Promise<Response> {
  const nowMs = ctx.clock.now();
  const panel = await readPanel(ctx, nowMs);
  if (panel instanceof Response) return storeDownPage(ctx, panel);
  const csrf = await formToken(ctx, nowMs);
  const { config } = ctx;
  const notice = await readNotice(ctx.secrets.keyRing, config.queueName, new URL(request.url).searchParams, nowMs);
  const html = renderConsolePage({
    queue: config.queueName,
    stats: panel.stats,
    figures: panel.figures,
    chart: panel.chart,
    csrf,
    admitKey: crypto.randomUUID(),
    actionPrefix: `${config.pathPrefix}admin/`,
    actionQuery: ctx.overview === undefined ? '' : `?${queueQuery(ctx, '')}`,
    liveUrl: liveUrl(ctx),
    liveSeconds: Math.max(2, config.stateCacheSeconds),
    queues: ctx.overview === undefined ? undefined : await ctx.overview(nowMs, { name: ctx.config.queueName, stats: panel.stats }),
    assetPrefix: `${config.pathPrefix}assets/`,
    maxAdmit: MAX_ADMIT_COUNT,
    // Only a notice this service wrote and tagged shows (see admin-notice.ts); anything else is not shown.
    notice,
    asOf: asOf(nowMs),
    propagationSeconds: config.stateCacheSeconds,
    noticeIsWarning: notice.startsWith('Nobody was let in'),
    periodSeconds: config.admitPeriodSeconds,
    adaptiveConfigured: config.adaptiveAdmission,
    storeDown: storeDownText(config),
    ...(ctx.trace.actor !== undefined && ctx.trace.role !== undefined && ctx.trace.role !== 'api' && { account: { name: ctx.trace.actor, role: ctx.trace.role } }),
    signOutUrl: `${config.pathPrefix}admin/sign-out`,
    audit: panel.audit,
  });
  // Back in the console: a sign-out's marker is spent (see signOut), so the next sign-out signs out.
  return new Response(html, { headers: { ...ADMIN_PAGE_HEADERS, 'set-cookie': clearSignedOut(config.pathPrefix) } });
}

/** Reads the epoch a reset expects: absent (any), or the whole number the state reported. */
function parseExpectedEpoch(value: unknown): { ok: true; epoch: number | undefined } | { ok: false; error: string } {
  if (value === undefined || value === '') return { ok: true, epoch: undefined };
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,16}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 0) return { ok: false, error: 'epoch must be the whole number the state reports (its `epoch`)' };
  return { ok: true, epoch: n };
}

/**
 * Resetting needs the queue's name typed in: a slip of the mouse must not empty a line. With the
 * epoch it expects (the console sends the one it showed), a reset applies once: a store that did
 * not answer in time is asked once more, and a reset that finds the epoch moved on changes nothing
 * and says so. Without one, a timed-out reset is not retried (it might empty the line twice).
 */
async function reset(ctx: AdminContext, confirm: unknown, expected: unknown): Promise<Response> {
  if (confirm !== ctx.config.queueName) {
    return errorResponse(400, `to reset, confirm with the queue's name (${JSON.stringify(ctx.config.queueName)}); nothing changed`);
  }
  const parsed = parseExpectedEpoch(expected);
  if (!parsed.ok) return errorResponse(400, `${parsed.error}; nothing changed`);
  const epoch = parsed.epoch;
  const call = () => ctx.store.reset(ctx.config.queueName, ctx.clock.now(), ctx.policy, epoch);
  let outcome = await ctx.storeCall(call);
  let retried = false;
  if (!outcome.ok && epoch !== undefined) {
    retried = true;
    outcome = await ctx.storeCall(call);
  }
  if (!outcome.ok) {
    return jsonResponse(503, {
      error: `the queue store did not answer (${outcome.reason}): it is unknown whether the reset was applied. ${
        epoch === undefined ? 'Check the state before retrying.' : 'Retrying with the same epoch is safe: it resets at most once.'
      }`,
      applied: 'unknown',
    });
  }
  const result = outcome.value;
  ctx.trace.reason = result.applied ? 'reset' : 'reset_not_applied';
  if (!result.applied) {
    // Our own first attempt may have been applied after all, if this answer is a retry's.
    if (retried) {
      return jsonResponse(200, {
        notice: `Queue ${ctx.config.queueName} has been reset (the epoch is no longer ${epoch}): by this request, or by another since.`,
        reset: true,
        applied: 'earlier',
        ...describeState(result, ctx.config),
      });
    }
    return jsonResponse(409, {
      error: `queue ${ctx.config.queueName} was reset by someone else since epoch ${epoch}; nothing changed. Reload the state and reset again if you still mean it.`,
      reset: false,
      applied: false,
      ...describeState(result, ctx.config),
    });
  }
  const notice = `Reset queue ${ctx.config.queueName}: the line is empty and tickets taken before are void.`;
  const auditWarning = await recordAudit(ctx, 'reset', `Reset queue ${ctx.config.queueName}.`, {
    ...(epoch !== undefined && { before: { epoch } }),
    after: { epoch: result.epoch, tail: result.tail, cursor: result.cursor },
  });
  return jsonResponse(200, { notice, reset: true, applied: true, ...(auditWarning !== undefined && { audit_warning: auditWarning }), ...describeState(result, ctx.config) });
}

async function formReset(request: Request, ctx: AdminContext): Promise<Response> {
  const form = await readAdminForm(request, ctx);
  if (form instanceof Response) return form;
  const confirms = form.getAll('confirm');
  if (confirms.length !== 1) return errorResponse(400, 'confirm must be given once');
  const epochs = form.getAll('epoch');
  if (epochs.length > 1) return errorResponse(400, 'epoch is given more than once');
  const response = await reset(ctx, confirms[0]!.trim(), epochs[0]);
  if (!response.ok || !(request.headers.get('accept') ?? '').includes('text/html')) return response;
  // The browser's notice says what the JSON says: that the trail missed it, when it did.
  const { audit_warning: warning } = (await response.json()) as { audit_warning?: string };
  return answerForm(request, ctx, warning === undefined ? `Reset queue ${ctx.config.queueName}.` : `Reset queue ${ctx.config.queueName}. ${warning}`, {});
}

/**
 * An API call's JSON object body, read within MAX_FORM_BYTES: `undefined` when there is no body, a
 * 400 naming `example` when it is not a JSON object, and a 400 naming the key when one is given
 * twice (JSON.parse would keep the last; see json-keys.ts), as a form field given twice is.
 */
async function readJsonObject(request: Request, example: string): Promise<Record<string, unknown> | undefined | Response> {
  const body = await readSmallBody(request, MAX_FORM_BYTES);
  if (!body.ok) return body.response;
  if (body.text.trim() === '') return undefined;
  let input: unknown;
  try {
    input = JSON.parse(body.text);
  } catch {
    return errorResponse(400, `body must be JSON like ${example}`);
  }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return errorResponse(400, `body must be a JSON object like ${example}`);
  const twice = repeatedTopLevelKey(body.text);
  if (twice !== undefined) return errorResponse(400, `${JSON.stringify(twice).slice(0, 80)} is given more than once in the body; nothing changed`);
  return input as Record<string, unknown>;
}

async function apiReset(request: Request, ctx: AdminContext): Promise<Response> {
  const input = await readJsonObject(request, '{"confirm": "<queue name>"}');
  if (input instanceof Response) return input;
  return reset(ctx, input?.['confirm'], input?.['epoch']);
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
    const from = new URL(origin);
    // Our host is the one the browser sent in Host, never one read from the request target: a
    // form on another site can post to `https://us//evil.example/…`, a target that a careless
    // parser reads as the host evil.example, the very host in that form's Origin.
    const host = request.headers.get('host');
    const ours = host === null ? new URL(request.url).host : new URL(`${from.protocol}//${host}`).host;
    return from.host !== ours;
  } catch {
    return true;
  }
}

/** Checks an admin form post (same site, small, carrying our anti-forgery token) and reads it. */
async function readAdminForm(request: Request, ctx: AdminContext): Promise<URLSearchParams | Response> {
  if (isCrossSite(request)) {
    ctx.trace.reason = 'csrf_cross_site';
    return errorResponse(403, 'cross-site request refused; use the admin page');
  }
  const body = await readSmallBody(request, MAX_FORM_BYTES);
  if (!body.ok) return body.response;
  const form = new URLSearchParams(body.text);
  const csrf = form.get('csrf') ?? '';
  const check = await verifyToken(ctx.secrets.keyRing, csrf, ctx.config.queueName, ctx.clock.now(), ['c']);
  if (!check.ok || check.claims.k !== 'c') {
    ctx.trace.reason = 'csrf_token';
    return errorResponse(403, 'the form has expired or did not come from the admin page; reload the page and try again');
  }
  form.delete('csrf');
  return form;
}

/** With several queues, the admin's links and forms name the queue they act on. */
function queueQuery(ctx: AdminContext, separator: string): string {
  return ctx.overview === undefined ? '' : `queue=${encodeURIComponent(ctx.config.queueName)}${separator}`;
}

/** A browser gets the page back with a notice (tagged, see admin-notice.ts); a program gets JSON. */
async function answerForm(request: Request, ctx: AdminContext, notice: string, json: Record<string, unknown>): Promise<Response> {
  if ((request.headers.get('accept') ?? '').includes('text/html')) {
    const done = await noticeQuery(ctx.secrets.keyRing, ctx.config.queueName, notice, ctx.clock.now());
    return new Response(null, {
      status: 303,
      headers: {
        location: `${ctx.config.pathPrefix}admin?${queueQuery(ctx, '&')}${done}`,
        'cache-control': 'no-store',
        ...NOSNIFF,
      },
    });
  }
  return jsonResponse(200, json);
}

async function formAdmit(request: Request, ctx: AdminContext): Promise<Response> {
  const form = await readAdminForm(request, ctx);
  if (form instanceof Response) return form;
  const counts = form.getAll('count');
  if (counts.length > 1) return errorResponse(400, 'count is given more than once');
  const parsed = parseAdmitCount(counts[0]);
  if (!parsed.ok) return errorResponse(400, parsed.error);
  const keys = form.getAll('idempotency_key');
  if (keys.length > 1) return errorResponse(400, 'idempotency_key is given more than once');
  const key = parseIdempotencyKey(keys[0], 'idempotency_key');
  if (!key.ok) return errorResponse(400, key.error);
  const result = await admit(ctx, parsed.count, key.key);
  if (result instanceof Response) return result;
  const notice = admitWarning(result) ?? (result.replayed
    ? `Already done: this request let ${formatCount(result.admitted)} ${result.admitted === 1 ? 'visitor' : 'visitors'} in.`
    : `Let ${formatCount(result.admitted)} ${result.admitted === 1 ? 'visitor' : 'visitors'} in.`);
  return answerForm(request, ctx, result.auditWarning === undefined ? notice : `${notice} ${result.auditWarning}`, admitJson(result, ctx.config));
}

async function formControl(request: Request, ctx: AdminContext): Promise<Response> {
  const form = await readAdminForm(request, ctx);
  if (form instanceof Response) return form;
  const fields: Record<string, string> = {};
  for (const [key, value] of form) {
    if (key in fields) return errorResponse(400, `${key} is given more than once`);
    // An empty capacity field in the form means "leave it as it is".
    if (value.trim() !== '') fields[key] = value;
  }
  const parsed = parseControl(fields, 'form');
  if (!parsed.ok) return errorResponse(400, parsed.error);
  const result = await control(ctx, parsed.change, parsed.mode);
  if (result instanceof Response) return result;
  const warning = result.auditWarning;
  return answerForm(request, ctx, warning === undefined ? result.changed : `${result.changed} ${warning}`, { changed: result.changed, ...(warning !== undefined && { audit_warning: warning }), ...describeState(result.state, ctx.config) });
}

async function apiControl(request: Request, ctx: AdminContext): Promise<Response> {
  const input = await readJsonObject(request, '{"paused": true} or {"max_active": 500}');
  if (input instanceof Response) return input;
  if (input === undefined) return errorResponse(400, 'body must be JSON like {"paused": true} or {"max_active": 500}');
  const parsed = parseControl(input, 'json');
  if (!parsed.ok) return errorResponse(400, parsed.error);
  const result = await control(ctx, parsed.change, parsed.mode);
  if (result instanceof Response) return result;
  return jsonResponse(200, { changed: result.changed, ...(result.auditWarning !== undefined && { audit_warning: result.auditWarning }), ...describeState(result.state, ctx.config) });
}

export const MAX_VIP_CODES = 100;
export const MAX_VIP_USES = 1_000_000;
const MAX_VIP_SECONDS = 90 * 86_400;

export interface VipRequest {
  readonly count: number;
  readonly uses: number;
  readonly expiresInSeconds: number | null;
}

/** Validates `{"count": 5, "uses": 1, "expires_in_seconds": 86400}` (form values as strings). */
export function parseVipRequest(input: Readonly<Record<string, unknown>>): { ok: true; request: VipRequest } | { ok: false; error: string } {
  for (const key of Object.keys(input)) {
    if (!['count', 'uses', 'expires_in_seconds'].includes(key)) return { ok: false, error: `unknown field ${JSON.stringify(key).slice(0, 60)}: use count, uses, expires_in_seconds` };
  }
  const whole = (name: string, value: unknown, fallback: number | null, min: number, max: number): number | null | string => {
    if (value === undefined || value === '') return fallback;
    const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*[0-9]+\s*$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isInteger(n) || n < min || n > max) return `${name} must be a whole number from ${min} to ${max}`;
    return n;
  };
  const count = whole('count', input['count'], 1, 1, MAX_VIP_CODES);
  if (typeof count === 'string') return { ok: false, error: count };
  const uses = whole('uses', input['uses'], 1, 1, MAX_VIP_USES);
  if (typeof uses === 'string') return { ok: false, error: uses };
  const expires = whole('expires_in_seconds', input['expires_in_seconds'], null, 60, MAX_VIP_SECONDS);
  if (typeof expires === 'string') return { ok: false, error: expires };
  return { ok: true, request: { count: count ?? 1, uses: uses ?? 1, expiresInSeconds: expires } };
}

/** Makes the codes; each is shown once, here, and stored only as a hash. */
async function createVips(request: Request, ctx: AdminContext, vip: VipRequest): Promise<Response> {
  const nowMs = ctx.clock.now();
  const expiresAtMs = vip.expiresInSeconds === null ? null : nowMs + vip.expiresInSeconds * 1000;
  const codes: { code: string; link: string }[] = [];
  const origin = new URL(request.url).origin;
  // All of them in one store call (Fastly allows a request 32 backend requests; 100 codes made one
  // by one would fail past them). Drawn again only for a collision with an existing code (about
  // 2^-79 each), which makes another call.
  while (codes.length < vip.count) {
    const drawn = Array.from({ length: vip.count - codes.length }, () => createVipCode());
    const hashes = await Promise.all(drawn.map((code) => hashVipCode(code)));
    const outcome = await ctx.storeCall(() => ctx.store.createVips(ctx.config.queueName, hashes, { uses: vip.uses, expiresAtMs }, nowMs));
    if (!outcome.ok) {
      // Unknown whether this batch was stored: its codes are never shown, so none of them can be used.
      const made = codes.length === 0 ? 'no code was made' : `the ${codes.length} listed here work`;
      return jsonResponse(503, {
        error: `the queue store did not confirm the codes (${outcome.reason}); ${made}. Ask again for the ones you need.`,
        codes,
      });
    }
    outcome.value.forEach((created, i) => {
      if (created) codes.push({ code: drawn[i]!, link: `${origin}/?${VIP_PARAM}=${drawn[i]!}` });
    });
  }
  ctx.trace.reason = `created ${codes.length} VIP codes`;
  const expiry = expiresAtMs === null ? 'no expiry' : `expiring ${new Date(expiresAtMs).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  const made = `Created ${codes.length} VIP ${codes.length === 1 ? 'code' : 'codes'}, ${vip.uses} ${vip.uses === 1 ? 'use' : 'uses'} each, ${expiry}.`;
  // The codes themselves never go in the trail: it is readable by viewers.
  const auditWarning = await recordAudit(ctx, 'vip_codes', made, { after: { codes: codes.length, uses_each: vip.uses, expires_at: expiresAtMs === null ? null : new Date(expiresAtMs).toISOString() } });
  return jsonResponse(200, {
    notice: `${made} They are shown only now.${auditWarning === undefined ? '' : ` ${auditWarning}`}`,
    queue: ctx.config.queueName,
    uses_each: vip.uses,
    expires_at: expiresAtMs === null ? null : new Date(expiresAtMs).toISOString(),
    codes,
  });
}

async function apiCreateVip(request: Request, ctx: AdminContext): Promise<Response> {
  const input = await readJsonObject(request, '{"count": 5, "uses": 1, "expires_in_seconds": 86400}');
  if (input instanceof Response) return input;
  const parsed = parseVipRequest(input ?? {});
  if (!parsed.ok) return errorResponse(400, parsed.error);
  return createVips(request, ctx, parsed.request);
}

async function formCreateVip(request: Request, ctx: AdminContext): Promise<Response> {
  const form = await readAdminForm(request, ctx);
  if (form instanceof Response) return form;
  const fields: Record<string, string> = {};
  for (const [key, value] of form) {
    if (key in fields) return errorResponse(400, `${key} is given more than once`);
    fields[key] = value;
  }
  const parsed = parseVipRequest(fields);
  if (!parsed.ok) return errorResponse(400, parsed.error);
  return createVips(request, ctx, parsed.request);
}

/** The longest a bypass pass may live. */
const MAX_BYPASS_SECONDS = 30 * 86_400;

/** Mints a bypass pass for the `bypass_cookie` (for staff, monitoring, partners). */
async function mintBypassPass(request: Request, ctx: AdminContext): Promise<Response> {
  if (ctx.config.bypassCookie === '') return errorResponse(409, 'bypass passes are off: set the bypass_cookie setting first');
  const input = await readJsonObject(request, '{"ttl_seconds": 86400}');
  if (input instanceof Response) return input;
  let ttl: unknown = 86_400;
  if (input !== undefined) {
    const { ttl_seconds: given, ...rest } = input;
    if (Object.keys(rest).length > 0) return errorResponse(400, `unknown field ${JSON.stringify(Object.keys(rest)[0])}: only ttl_seconds`);
    if (given !== undefined) ttl = given;
  }
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 60 || ttl > MAX_BYPASS_SECONDS) {
    return errorResponse(400, `ttl_seconds must be a whole number from 60 to ${MAX_BYPASS_SECONDS}`);
  }
  const iat = Math.floor(ctx.clock.now() / 1000);
  const token = await signToken(ctx.secrets.keyRing, { q: BYPASS_QUEUE, k: 'b', t: 0, iat, exp: iat + ttl });
  ctx.trace.reason = `bypass pass for ${ttl} s`;
  const auditWarning = await recordAudit(ctx, 'bypass_pass', `Made a bypass pass for ${ttl} s.`, { after: { expires_at: new Date((iat + ttl) * 1000).toISOString() } });
  return jsonResponse(200, {
    ...(auditWarning !== undefined && { audit_warning: auditWarning }),
    cookie_name: ctx.config.bypassCookie,
    token,
    expires_at: new Date((iat + ttl) * 1000).toISOString(),
    set_cookie: `${ctx.config.bypassCookie}=${token}; Max-Age=${ttl}; Path=/; HttpOnly; Secure; SameSite=Lax`,
  });
}

function describeChange(change: RuntimeControl, modes?: { readonly from: QueueMode; readonly to: QueueMode }): string {
  const parts: string[] = [];
  if (modes !== undefined && modes.from !== modes.to) {
    parts.push(
      modes.to === 'capacity'
        ? 'Switched to capacity mode: visitors are let in while there is room (at once, new a minute); the period quota no longer applies.'
        : modes.to === 'rate'
          ? 'Switched to rate mode: visitors are let in a number each period; capacity at once and new a minute are off (0).'
          : 'Switched to admission by hand: nobody is let in but by an admit from here or the origin.',
    );
  }
  if (change.switch === 'open') parts.push('Switched open: everyone passes, nobody is queued.');
  if (change.switch === 'hold') parts.push('Switched to hold: nobody new gets in, not even by an admit.');
  if (change.switch === 'normal') parts.push('Switched back to normal.');
  if (change.paused !== undefined) parts.push(change.paused ? 'Admission paused.' : 'Admission resumed.');
  const limit = (name: string, value: number | null | undefined) => {
    if (value === undefined) return;
    parts.push(value === null ? `${name} back to the configured value.` : `${name} set to ${value === 0 ? 'no limit' : formatCount(value)}.`);
  };
  limit('Capacity (active visitors)', change.maxActive);
  limit('New visitors per minute', change.maxNewPerMinute);
  if (change.admitPerPeriod !== undefined) {
    parts.push(change.admitPerPeriod === null ? 'Visitors per period back to the configured value.' : `Visitors per period set to ${formatCount(change.admitPerPeriod)}.`);
  }
  if (change.adaptive === 'on') parts.push('Adaptive admission switched on.');
  if (change.adaptive === 'off') parts.push('Adaptive admission switched off.');
  if (change.adaptive === null) parts.push('Adaptive admission back to the configuration.');
  if (change.adaptivePin === null) parts.push('Adaptive admission released: it learns again.');
  if (typeof change.adaptivePin === 'number') parts.push(`Adaptive admission pinned at ${formatCount(change.adaptivePin)}.`);
  return parts.join(' ');
}

/**
 * Applies a runtime change. One that touches a threshold or names a mode first reads the thresholds
 * in effect (a second store call, for the console and the API only) so that it can refuse a quiet
 * change of mode (see guardMode); the others are one call.
 */
async function control(ctx: AdminContext, change: RuntimeControl, mode?: QueueMode): Promise<{ state: QueueState; changed: string; auditWarning: string | undefined } | Response> {
  let applied = change;
  let modes: { from: QueueMode; to: QueueMode } | undefined;
  let before: Record<string, AuditValue> | undefined;
  if (mode !== undefined || change.maxActive !== undefined || change.maxNewPerMinute !== undefined || change.admitPerPeriod !== undefined) {
    const now = await ctx.storeCall(() => ctx.store.stats(ctx.config.queueName, ctx.clock.now(), ctx.policy));
    if (!now.ok) return errorResponse(503, `the queue store is unavailable (${now.reason}); nothing changed`);
    before = controlFields(now.value, ctx.config);
    const guarded = guardMode(change, mode, { ...now.value, admitPerPeriod: now.value.admitPerPeriod ?? ctx.config.admitPerPeriod }, ctx.config);
    if (!guarded.ok) return errorResponse(guarded.status, guarded.error);
    applied = guarded.change;
    modes = guarded;
  }
  const outcome = await ctx.storeCall(() => ctx.store.control(ctx.config.queueName, applied, ctx.clock.now(), ctx.policy));
  if (!outcome.ok) return errorResponse(503, `the queue store did not confirm the change (${outcome.reason}); check the state before retrying`);
  const changed = describeChange(mode === undefined ? applied : change, modes);
  ctx.trace.reason = `control ${changed}`;
  const auditWarning = await recordAudit(ctx, 'control', changed, { before, after: controlFields(outcome.value, ctx.config) });
  return { state: outcome.value, changed, auditWarning };
}

async function apiAdmit(request: Request, ctx: AdminContext): Promise<Response> {
  const query = new URL(request.url).searchParams.getAll('count');
  if (query.length > 1) return errorResponse(400, 'count is given more than once');
  let value: unknown = query[0];
  const input = await readJsonObject(request, '{"count": 10}');
  if (input instanceof Response) return input;
  if (input !== undefined) {
    if (value !== undefined) return errorResponse(400, 'give count in the query or in the body, not both');
    // A field we do not read must not pass unnoticed: `idempotency_key` in the body (it goes in the
    // Idempotency-Key header) or a misspelt count would otherwise be a 200 that did something else.
    const unknown = Object.keys(input).find((key) => key !== 'count');
    if (unknown !== undefined) {
      const hint = unknown.toLowerCase().replace(/[-_]/g, '') === 'idempotencykey' ? ': send the key in the Idempotency-Key header' : ': only count';
      return errorResponse(400, `unknown field ${JSON.stringify(unknown).slice(0, 60)}${hint}; nothing changed`);
    }
    value = input['count'];
  }
  const parsed = parseAdmitCount(value);
  if (!parsed.ok) return errorResponse(400, parsed.error);
  const key = parseIdempotencyKey(request.headers.get('idempotency-key') ?? undefined, 'Idempotency-Key');
  if (!key.ok) return errorResponse(400, key.error);
  const result = await admit(ctx, parsed.count, key.key);
  if (result instanceof Response) return result;
  return jsonResponse(200, admitJson(result, ctx.config));
}

/**
 * Reads an `Idempotency-Key` (header or form field, `name`): absent, or IDEMPOTENCY_KEY_PATTERN.
 * Given but empty or blank is refused, not read as absent: the caller meant a key (a template or
 * variable that came out empty), and without one each retry of a lost answer would admit again.
 */
function parseIdempotencyKey(value: string | undefined, name: string): { ok: true; key: string | undefined } | { ok: false; error: string } {
  if (value === undefined) return { ok: true, key: undefined };
  if (value.trim() === '') {
    return { ok: false, error: `${name} is empty: send a key (1-64 of A-Z, a-z, 0-9, ".", "_", ":", "-"; a UUID will do) or leave it out; nothing changed` };
  }
  if (!IDEMPOTENCY_KEY_PATTERN.test(value)) {
    return { ok: false, error: 'Idempotency-Key must be 1-64 of A-Z, a-z, 0-9, ".", "_", ":", "-" (a UUID will do); nothing changed' };
  }
  return { ok: true, key: value };
}

/** An admit's answer: applied (now, or by an earlier request with the same key: `replayed`), and the state. */
function admitJson(result: AdmitResult & { readonly idempotencyKey: string; readonly auditWarning?: string | undefined }, config: Readonly<Config>): Record<string, unknown> {
  const warning = admitWarning(result);
  return {
    admitted: result.admitted,
    applied: true,
    replayed: result.replayed,
    idempotency_key: result.idempotencyKey,
    ...(warning !== undefined && { warning }),
    ...(result.auditWarning !== undefined && { audit_warning: result.auditWarning }),
    ...describeState(result, config),
  };
}

/**
 * Why an admit under hold let nobody in: a refusal must not read like a success (a green "Let 0
 * visitors in."). Undefined for any other answer.
 */
export function admitWarning(result: Pick<AdmitResult, 'admitted' | 'replayed' | 'switch'>): string | undefined {
  if (result.replayed || result.admitted > 0 || result.switch !== 'hold') return undefined;
  return 'Nobody was let in: the emergency switch is on hold, which refuses every admit (from here and from the origin). Switch back to normal to let people in.';
}

/**
 * An explicit admit, exactly once. Every admit carries an idempotency key (the caller's, else one
 * made here), which the store records with its result for 10 minutes. When the store does not
 * answer in time, the call may still have been applied (or be applied later: the Fastly engine
 * cannot cancel it), so it is asked once more with the same key: the answer then is the recorded
 * result if the first got through (`replayed`), or the admit applied now, and a late first attempt
 * finds the key recorded and admits nobody. If the store still does not answer, the 503 says that
 * it is unknown, and that a retry with the same key is safe.
 */
async function admit(ctx: AdminContext, count: number, given: string | undefined): Promise<(AdmitResult & { readonly idempotencyKey: string; readonly auditWarning?: string | undefined }) | Response> {
  const key = given ?? crypto.randomUUID();
  const call = () => ctx.store.admit(ctx.config.queueName, count, ctx.clock.now(), ctx.policy, key);
  let outcome = await ctx.storeCall(call);
  if (!outcome.ok) outcome = await ctx.storeCall(call);
  if (!outcome.ok) {
    return jsonResponse(503, {
      error: `the queue store did not answer (${outcome.reason}): it is unknown whether the admit was applied. Retrying with the same Idempotency-Key (${key}) is safe: it admits at most once.`,
      applied: 'unknown',
      idempotency_key: key,
    });
  }
  ctx.trace.cursor = outcome.value.cursor;
  ctx.trace.tail = outcome.value.tail;
  const { replayed, asked, admitted } = outcome.value;
  if (replayed && asked !== 0 && asked !== count) {
    // The key stands for another request: a retry must repeat it, and a new request needs a new key.
    // Answered as a conflict so that a caller reading only `admitted` cannot take it for this one.
    ctx.trace.reason = `admit key reused (asked ${asked}, now ${count})`;
    return jsonResponse(422, {
      error: `the Idempotency-Key ${key} was used for an admit of ${asked} (it let ${admitted} in) and cannot stand for an admit of ${count}; nothing changed. Use a new key for a new request.`,
      applied: false,
      idempotency_key: key,
      first_count: asked,
    });
  }
  ctx.trace.reason = replayed ? `admit replayed (${admitted})` : `admitted ${admitted}`;
  // A replay was recorded by the request that applied it.
  const auditWarning = replayed ? undefined : await auditAdmit(ctx, count, outcome.value);
  return { ...outcome.value, idempotencyKey: key, auditWarning };
}

/**
 * An admit's audit entry. A person's admit is an entry of its own; the origin's admits (it may
 * admit every second) are one entry a minute, "Origin admits in the minute from 10:02 UTC: let in
 * 40, calls 60.", the store adding up the run (see QueueStore.appendAudit), so that
 * they do not push the operators' actions out of the trail's AUDIT_MAX_ENTRIES.
 */
async function auditAdmit(ctx: AdminContext, count: number, result: AdmitResult): Promise<string | undefined> {
  const { admitted } = result;
  const after = { cursor: result.cursor, tail: result.tail, switch: result.switch ?? 'normal' };
  if (ctx.trace.role !== 'api') {
    return recordAudit(ctx, 'admit', `Let ${formatCount(admitted)} ${admitted === 1 ? 'visitor' : 'visitors'} in (asked ${formatCount(count)}).`, { after: { admitted, ...after } });
  }
  const minute = Math.floor(ctx.clock.now() / 60_000);
  const from = new Date(minute * 60_000).toISOString().slice(11, 16);
  return recordAudit(ctx, 'admit', `Origin admits in the minute from ${from} UTC: let in #SUM#, calls #CALLS#.`, { after }, { tag: `api-admit:${minute}`, add: admitted });
}
