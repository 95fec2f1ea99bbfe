/**
 * Adaptive admission in the store: the controller that tunes the admission knob from what the edge
 * saw of the origin (docs/adaptive-admission.md). The Lua side is src/store/lua/lib/controller.lua;
 * this module holds its constants, the argument checks, the parsing of what the stats script
 * answers, and the same rules over a field map for the in-memory store. The two are bound by the
 * contract suite (test/store-contract.test.ts, "adaptive admission").
 *
 * Everything lives in fields of the queue's `ctl` hash, read by the HMGET every script already runs
 * and written by its one deferred HSET, so the controller costs no command of its own:
 *   ac_cfg   `<on 0|1>:<min>:<max>:<error %>:<slow %>`, the settings the last join or poll carried;
 *   ac_on    the console's switch, '1' or '0' (absent: the configuration decides);
 *   ac_val   the learned value (absent: the knob's own value, within the bounds);
 *   ac_pin   the operator's value, in effect until released;
 *   ac_at    when the last step looked at the reports; ac_move, when the value last moved;
 *   ac_sig   `<ms>:<requests>:<errors>:<slow>:<pops>`, what that step saw;
 *   ac_log   the last ADAPTIVE_LOG moves `<ms>:<from>:<to>:<e|s|h|p|u>`, joined by ';';
 *   ac_top   the boundary: the value last cut from ('' or absent: none found since the start or a pin);
 *   ac_ev    `<ms>:<requests>:<errors>:<slow>`, the answers of disjoint report windows since the last
 *            move (the window ending at ms the latest of them; '' or absent: none yet);
 *   ac_fail  the climbs and tries that failed (a cut right after them) since a try at or above the
 *            boundary last held (absent: none; see AC_TRY_BACKOFF);
 *   o<n>     a POP's report `<pop>:<ms>:<requests>:<errors>:<slow>`, slot n = reportSlot(pop).
 */
import type { AdaptiveMove, AdaptivePolicy, AdaptiveStatus } from '../core/ports';

/** A step looks at the reports at most this often, ms; a POP writes its report at most this often. */
export const AC_STEP_MS = 5_000;
/** A POP's report covers this span before it (what Fastly's rate counters count over at the least), ms. */
export const AC_WINDOW_MS = 10_000;
/** Fewer answers than this since the last move are no evidence for a move either way. */
export const AC_MIN_REQUESTS = 20;
/** Report slots in ctl: POPs beyond this share slots (the later report in a slot wins). */
export const AC_SLOTS = 32;
/** Moves kept for the console. */
export const ADAPTIVE_LOG = 12;
/**
 * A healthy step adds (max - min) / AC_STEPS, at least 1: floor to ceiling in AC_STEPS steps. 20, not
 * 40: in rate mode the load answers a change of the count only as sessions turn over (minutes), and
 * the flash-sale simulation (test/sim/adaptive.ts) found smaller steps no steadier, only slower to
 * take back capacity the origin regained (docs/adaptive-admission.md, "The simulation").
 */
export const AC_STEPS = 20;
/**
 * A cut is as deep as the signal is over its target (DCTCP's rule, cutting in proportion to how much
 * was marked): with r = the worse of errors and slow answers over their target share, the value
 * keeps 1 - (r - 1) / AC_CUT_SPAN of itself, at most AC_CUT_KEEP_MAX and at least
 * AC_CUT_KEEP_MIN: a share just over its target takes 5 % off, twice the target a quarter, three
 * times or more a half (an origin that lost capacity). In the flash-sale simulation, with the
 * double step up (adaptiveValue), it raised the mean share of the best fixed count's served over
 * seven crowds from 82.5 % to 84.8 % (cautious targets) and 91.4 % to 95.5 % (throughput-first)
 * against a cut to 3/4 (1/2 at three times the error target), the overload still stopped within
 * 19-43 s of the halving (docs/adaptive-admission.md, "The simulation").
 */
export const AC_CUT_SPAN = 4;
/**
 * Once a boundary is known (ac_top), a cut keeps at least this much: near the boundary a small cut
 * finds it again, and a deep one would make the value swing (issue 30: 1-9 and 4-25 against real
 * origins); a site that lost more capacity is followed by the next cuts, a window apart.
 */
export const AC_GENTLE_KEEP = 0.7;
/**
 * Once a boundary is known, the value holds this long without a move before each climb (half the
 * way back to just under the boundary, then probes to it and 1, 3, 7 … above it, a step at most at
 * a time): a move judged before the load has followed it (sessions take their time to fill the
 * room) passes when it should not. Against live origins, climbs back under the boundary a window
 * apart took the origin over its error target (8 % against 5 % in a run of
 * test/adaptive-settle.test.ts) before the first of them showed.
 */
export const AC_PLATEAU_MS = 20_000;
/**
 * Once a boundary is known the controller climbs only while the answers since its last move used at
 * most 1 / AC_PROBE_HEADROOM of each target (errors and slow answers): between that and the target
 * it holds, and a try at or above the boundary is undone by one at once. It settles with headroom
 * under its targets rather than on them, so the origin's share measured over a run stays within
 * the target, not around it, and it stops paying for tries at a value the site only just takes
 * (issue 30: 5.8 % errors measured against a 5 % target in real time, with the headroom asked of
 * the probes alone).
 */
export const AC_PROBE_HEADROOM = 2;
/**
 * A try of the boundary itself (from just under it to it) after climbs and tries failed n times
 * (ac_fail: a cut from the boundary or above, or right after a climb; a try at or above the boundary
 * that held starts the count over) waits AC_PLATEAU_MS times 2^(n - 1), at most 2^AC_TRY_BACKOFF:
 * 20, 20, 40, then 80 s; only where one more is over a tenth of the value (the try then adds that
 * much load at once). Against the live origin that sheds load in bursts (test/support/adaptive-live.ts's
 * refuses everything while its last 10 s hold C x 10 requests) a window between two bursts looks like
 * headroom, and a try of the value that had just failed, every 40-60 s, each costing a burst of
 * errors, took its error share over the target (issue 30: 5.9 % against 5 % in real time). Not from
 * the first failure, and not where a step is small: in the flash-sale simulation (values of 20-200)
 * a longer hold before every retry cost the throughput-first controller its bar (89.2 % of the best
 * fixed count's served, under 90 %) and the cautious one its recovery (125-280 s, over 120;
 * docs/adaptive-admission.md, "A margin under the target").
 */
export const AC_TRY_BACKOFF = 2;
export const AC_CUT_KEEP_MAX = 0.95;
export const AC_CUT_KEEP_MIN = 0.5;
/** The longest POP name kept. */
export const POP_PATTERN = /^[A-Za-z0-9_.-]{1,32}$/;

export class AdaptiveArgumentError extends RangeError {
  constructor(message: string) {
    super(message);
    this.name = 'AdaptiveArgumentError';
  }
}

const isCount = (v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max;

/** The settings and report as the join and poll scripts take them ('' = none). Throws on nonsense. */
export function adaptiveArg(a: AdaptivePolicy | undefined): string {
  if (a === undefined) return '';
  if (typeof a !== 'object' || a === null) throw new AdaptiveArgumentError('invalid adaptive: expected an object');
  if (typeof a.enabled !== 'boolean') throw new AdaptiveArgumentError(`invalid adaptive.enabled ${String(a.enabled)}: expected true or false`);
  if (!isCount(a.min, 1) || !isCount(a.max, a.min)) throw new AdaptiveArgumentError(`invalid adaptive bounds ${String(a.min)}..${String(a.max)}: expected integers 1 <= min <= max`);
  for (const [name, v] of [['errorPercent', a.errorPercent], ['slowPercent', a.slowPercent]] as const) {
    if (!isCount(v, 0, 100)) throw new AdaptiveArgumentError(`invalid adaptive.${name} ${String(v)}: expected an integer 0-100`);
  }
  const cfg = `${a.enabled ? 1 : 0}:${a.min}:${a.max}:${a.errorPercent}:${a.slowPercent}`;
  const r = a.report;
  if (r === undefined) return cfg;
  if (typeof r.pop !== 'string' || !POP_PATTERN.test(r.pop)) throw new AdaptiveArgumentError(`invalid adaptive.report.pop ${JSON.stringify(r.pop)}: expected 1-32 of A-Z a-z 0-9 _ . -`);
  for (const [name, v] of [['requests', r.requests], ['errors', r.errors], ['slow', r.slow]] as const) {
    if (!isCount(v, 0)) throw new AdaptiveArgumentError(`invalid adaptive.report.${name} ${String(v)}: expected an integer >= 0`);
  }
  return `${cfg}|${r.pop}:${r.requests}:${r.errors}:${r.slow}`;
}

/** ARGV 16, 17 of the control script: '' keep; 'on', 'off', 'config'; a pin, 'del' to release it. */
export function adaptiveControlArgv(adaptive: 'on' | 'off' | null | undefined, pin: number | null | undefined): string[] {
  return [adaptive === undefined ? '' : adaptive === null ? 'config' : adaptive, pin === undefined ? '' : pin === null ? 'del' : String(pin)];
}

/** The report slot of a POP: djb2 over its bytes, mod AC_SLOTS (the Lua's ac_slot does the same). */
export function reportSlot(pop: string): number {
  let h = 5381;
  for (let i = 0; i < pop.length; i++) h = (h * 33 + pop.charCodeAt(i)) % 4_294_967_296;
  return h % AC_SLOTS;
}

interface Settings {
  readonly on: boolean;
  readonly min: number;
  readonly max: number;
  readonly err: number;
  readonly slow: number;
}

/** On: switched on from the console ('1'), or on in the settings and not switched off ('0'). */
function isEnabled(switched: string | undefined, s: Settings): boolean {
  return switched === '1' || (switched !== '0' && s.on);
}

function settingsOf(cfg: string | undefined): Settings | undefined {
  const m = /^([01]):(\d+):(\d+):(\d+):(\d+)$/.exec(cfg ?? '');
  if (m === null) return undefined;
  return { on: m[1] === '1', min: Number(m[2]), max: Number(m[3]), err: Number(m[4]), slow: Number(m[5]) };
}

const REASONS: Readonly<Record<string, AdaptiveMove['reason']>> = { e: 'errors', s: 'slow', h: 'healthy', p: 'pinned', u: 'released' };

/**
 * What the stats script answers about the controller: `<knob>|<value>|ac_cfg|ac_on|ac_pin|ac_sig|ac_log`
 * (knob r, a, n, or '' when there is nothing to tune; value '' when the controller is off).
 * Undefined when the store has no settings.
 */
export function parseAdaptiveStatus(raw: string): AdaptiveStatus | undefined {
  const [knob = '', value = '', cfg = '', on = '', pin = '', sig = '', log = ''] = raw.split('|');
  const s = settingsOf(cfg);
  if (s === undefined) return undefined;
  const sigMatch = /^(\d+):(\d+):(\d+):(\d+):(\d+)$/.exec(sig);
  const moves: AdaptiveMove[] = [];
  for (const entry of log.split(';')) {
    const m = /^(\d+):(\d+):(\d+):([eshpu])$/.exec(entry);
    if (m !== null) moves.push({ atMs: Number(m[1]), from: Number(m[2]), to: Number(m[3]), reason: REASONS[m[4]!]! });
  }
  const enabled = isEnabled(on, s);
  return {
    enabled: enabled && knob !== '',
    source: on === '' ? 'config' : 'console',
    knob: knob === 'a' ? 'max_active' : knob === 'n' ? 'max_new_per_minute' : 'admit_per_period',
    value: value === '' ? 0 : Number(value),
    pinned: enabled && pin !== '',
    min: s.min,
    max: s.max,
    errorPercent: s.err,
    slowPercent: s.slow,
    signals: sigMatch === null ? null : { atMs: Number(sigMatch[1]), requests: Number(sigMatch[2]), errors: Number(sigMatch[3]), slow: Number(sigMatch[4]), pops: Number(sigMatch[5]) },
    moves,
  };
}

// ---------------------------------------------------------------------------------------------
// The rules over a field map: the in-memory store's twin of controller.lua, line for line.

/** The controller's fields of one queue (ctl's ac_* and o<n>), as strings, as Redis keeps them. */
export type AdaptiveFields = Map<string, string>;

/** join/poll: keep the settings carried; stage this POP's report (written when due). */
export function takeAdaptive(f: AdaptiveFields, arg: string, nowMs: number): void {
  if (arg === '') return;
  const bar = arg.indexOf('|');
  const cfg = bar < 0 ? arg : arg.slice(0, bar);
  if (f.get('ac_cfg') !== cfg) f.set('ac_cfg', cfg);
  if (bar < 0) return;
  const [pop = '', requests, errors, slow] = arg.slice(bar + 1).split(':');
  const field = `o${reportSlot(pop)}`;
  const at = /^[^:]+:(\d+):/.exec(f.get(field) ?? '');
  const other = !(f.get(field) ?? '').startsWith(`${pop}:`);
  if (at === null || other || Number(at[1]) <= nowMs - AC_STEP_MS) f.set(field, `${pop}:${nowMs}:${requests}:${errors}:${slow}`);
}

function logMove(f: AdaptiveFields, nowMs: number, from: number, to: number, reason: string): void {
  const kept = (f.get('ac_log') ?? '').split(';').filter((e) => e !== '');
  const out = kept.slice(Math.max(0, kept.length - ADAPTIVE_LOG + 1));
  out.push(`${nowMs}:${from}:${to}:${reason}`);
  f.set('ac_val', String(to));
  f.set('ac_move', String(nowMs));
  f.set('ac_log', out.join(';'));
  f.set('ac_ev', '');
}

/** How much of the value a cut keeps (see AC_CUT_SPAN): the same double arithmetic as `ac_keep` in the Lua. */
export function cutKeep(requests: number, errors: number, slow: number, s: { readonly err: number; readonly slow: number }): number {
  const over = (n: number, target: number): number => (n === 0 ? 0 : target === 0 ? Number.POSITIVE_INFINITY : (n * 100) / (target * requests));
  const r = Math.max(over(errors, s.err), over(slow, s.slow));
  return Math.max(AC_CUT_KEEP_MIN, Math.min(AC_CUT_KEEP_MAX, 1 - (r - 1) / AC_CUT_SPAN));
}

export interface StepInput {
  readonly nowMs: number;
  /** The knob's own value (configured or overridden). */
  readonly base: number;
  /** No step: paused, switched, before the event's start, or a read-only run. */
  readonly frozen: boolean;
  /** Tickets wait (tail > cursor). */
  readonly waiting: boolean;
}

/** The value in effect, stepping when due; undefined when the controller is off (the knob's own value stands). */
export function adaptiveValue(f: AdaptiveFields, input: StepInput): number | undefined {
  const s = settingsOf(f.get('ac_cfg'));
  if (s === undefined) return undefined;
  if (!isEnabled(f.get('ac_on'), s)) return undefined;
  const pin = f.get('ac_pin');
  if (pin !== undefined) return Number(pin);
  const { nowMs } = input;
  const learned = f.get('ac_val');
  const value = Math.min(s.max, Math.max(s.min, learned === undefined ? input.base : Number(learned)));
  if (input.frozen || nowMs - Number(f.get('ac_at') ?? 0) < AC_STEP_MS) return value;
  const moved = Number(f.get('ac_move') ?? 0);
  const since = moved + AC_WINDOW_MS;
  let requests = 0;
  let errors = 0;
  let slow = 0;
  let pops = 0;
  for (let i = 0; i < AC_SLOTS; i++) {
    const m = /^[^:]+:(\d+):(\d+):(\d+):(\d+)$/.exec(f.get(`o${i}`) ?? '');
    if (m === null) continue;
    const at = Number(m[1]);
    if (at >= since && at > nowMs - AC_WINDOW_MS) {
      requests += Number(m[2]);
      errors += Number(m[3]);
      slow += Number(m[4]);
      pops += 1;
    }
  }
  if (pops === 0) return value;
  // The answers since the last move: this window's, added to those of earlier windows it does not
  // overlap (a report counts the window before it; an overlapping one would count answers twice),
  // until they are enough to decide on.
  const held = /^(\d+):(\d+):(\d+):(\d+)$/.exec(f.get('ac_ev') ?? '');
  let ev = { at: nowMs, requests, errors, slow };
  if (held !== null) {
    const kept = { at: Number(held[1]), requests: Number(held[2]), errors: Number(held[3]), slow: Number(held[4]) };
    // Gathered until there are enough to decide on; once there were, the count starts over.
    if (kept.requests < AC_MIN_REQUESTS) ev = kept.at <= nowMs - AC_WINDOW_MS ? { at: nowMs, requests: kept.requests + requests, errors: kept.errors + errors, slow: kept.slow + slow } : kept;
  }
  // The load against the last step's: while it still moves by more than a tenth, wait for it to
  // settle before raising into a rise or cutting into a fall (rate mode: a count reaches the load
  // only as sessions turn over).
  const prev = /^\d+:(\d+):/.exec(f.get('ac_sig') ?? '');
  const before = prev === null ? undefined : Number(prev[1]);
  // A change counts when it is over a tenth and over what chance moves a count by (twice its
  // square root): small counts jump by more than a tenth from one window to the next on their own.
  const moves = (d: number): boolean => before !== undefined && d * 10 > before && d * d > 4 * before;
  const rising = before !== undefined && moves(requests - before);
  const falling = before !== undefined && moves(before - requests);
  f.set('ac_at', String(nowMs));
  f.set('ac_sig', `${nowMs}:${requests}:${errors}:${slow}:${pops}`);
  f.set('ac_ev', `${ev.at}:${ev.requests}:${ev.errors}:${ev.slow}`);
  let to = value;
  let reason: string | undefined;
  const overErrors = errors * 100 > s.err * requests;
  const overSlow = slow * 100 > s.slow * requests;
  const evErrors = ev.errors * 100 > s.err * ev.requests;
  const evSlow = ev.slow * 100 > s.slow * ev.requests;
  // Headroom: the answers since the last move use at most 1 / AC_PROBE_HEADROOM of each target.
  const roomyErrors = ev.errors * 100 * AC_PROBE_HEADROOM <= s.err * ev.requests;
  const roomy = roomyErrors && ev.slow * 100 * AC_PROBE_HEADROOM <= s.slow * ev.requests;
  const topField = f.get('ac_top');
  const top = topField === undefined || topField === '' ? undefined : Number(topField);
  const failField = f.get('ac_fail');
  const fails = failField === undefined || failField === '' ? 0 : Number(failField);
  const step = Math.max(1, Math.ceil((s.max - s.min) / AC_STEPS));
  const windowOver = requests >= AC_MIN_REQUESTS && (overErrors || overSlow);
  const hard = windowOver || (ev.requests >= AC_MIN_REQUESTS && (evErrors || evSlow));
  // At or above the boundary (a try): without headroom it steps back at once, within target as it
  // may be, rather than wait for the try's load to take the origin over its target.
  const soft = top !== undefined && value >= top && ev.requests >= AC_MIN_REQUESTS && !roomy;
  if (falling && (overErrors || overSlow || soft)) {
    // Over target (or a try without headroom), but the load is already coming down: let it.
  } else if (hard || soft) {
    let keep = windowOver ? cutKeep(requests, errors, slow, s) : cutKeep(ev.requests, ev.errors, ev.slow, s);
    // Near a boundary found before, a small cut finds it again; a site that lost more capacity
    // than that is followed by the next cuts, a window apart (0.7, 0.49, 0.34 of the value).
    if (top !== undefined) keep = Math.max(keep, AC_GENTLE_KEEP);
    // A try without headroom but within target is undone by one, the least step back.
    to = hard ? Math.max(s.min, Math.min(value - 1, Math.floor(value * keep + 0.5))) : Math.max(s.min, value - 1);
    reason = overErrors || evErrors || (!hard && !roomyErrors) ? 'e' : 's';
    // A try (at or above the boundary) or a climb that failed: counted, for the next try's hold.
    const tried = top !== undefined && (value >= top || (f.get('ac_log') ?? '').endsWith('h'));
    if (to !== value) {
      f.set('ac_top', String(value));
      f.set('ac_fail', String(tried ? fails + 1 : fails));
    }
  } else if (input.waiting && !rising && ev.requests >= AC_MIN_REQUESTS && !overErrors && !overSlow && !evErrors && !evSlow) {
    if (top === undefined) {
      // No boundary yet: a step, two when nothing failed and nothing was slow (no sign of a limit).
      to = value + (ev.errors === 0 && ev.slow === 0 ? 2 : 1) * step;
    } else if (!roomy || nowMs - moved < AC_PLATEAU_MS) {
      // Near a boundary found before, it climbs only once its last move has been held long enough
      // for the load to show it, and only with headroom: within target but using more than
      // 1 / AC_PROBE_HEADROOM of it, a site this near its limit would go over with more.
    } else if (value < top - 1) {
      // Half the way to just under the boundary: the moves shrink as it comes near.
      to = Math.min(top - 1, value + Math.min(step, Math.max(1, Math.floor((top - value) / 2))));
    } else {
      // At the boundary (just under it, or above it while the site stays healthy: it has grown):
      // on, twice as far above it at each try. Trying again the boundary itself after tries there
      // failed twice or more in a row, when one more is over a tenth of the value, waits 2, then 4
      // holds (see AC_TRY_BACKOFF).
      const up = Math.min(step, Math.max(1, value - top + 1));
      if (value >= top || up * 10 <= value || fails < 2 || nowMs - moved >= AC_PLATEAU_MS * 2 ** Math.min(fails - 1, AC_TRY_BACKOFF)) to = value + up;
    }
    to = Math.min(s.max, to);
    reason = 'h';
  }
  if (reason !== undefined && to !== value) {
    // A try that held: the site takes the boundary, the tries start over at one hold.
    if (reason === 'h' && top !== undefined && value >= top && fails > 0) f.set('ac_fail', '0');
    logMove(f, nowMs, value, to, reason);
  }
  return to;
}

/**
 * The control script's ARGV 16, 17 over the fields (see control.lua). `hand`: the change of the
 * knob's threshold by hand (capacity mode: max active, or max new per minute when it is the knob),
 * after the other changes; while the controller is on it pins that value, and `null` (back to the
 * configured value) releases the pin.
 */
export function controlAdaptive(f: AdaptiveFields, nowMs: number, adaptive: 'on' | 'off' | null | undefined, pin: number | null | undefined, hand?: number | null): void {
  if (adaptive === 'on') f.set('ac_on', '1');
  else if (adaptive === 'off') f.set('ac_on', '0');
  else if (adaptive === null) f.delete('ac_on');
  if (pin === undefined) {
    const s = settingsOf(f.get('ac_cfg'));
    if (s === undefined || !isEnabled(f.get('ac_on'), s)) return;
    if (hand === null) pin = null;
    else if (hand !== undefined && hand > 0) pin = hand;
    else return;
  }
  const held = f.get('ac_pin');
  if (pin === null) {
    if (held === undefined) return;
    logMove(f, nowMs, Number(held), Number(held), 'u');
    f.delete('ac_pin');
    return;
  }
  logMove(f, nowMs, Number(held ?? f.get('ac_val') ?? 0), pin, 'p');
  // The operator's value: the boundary learned before it no longer says where the site's is.
  f.set('ac_pin', String(pin));
  f.set('ac_top', '');
  f.set('ac_fail', '');
}

/** The stats script's controller answer (see parseAdaptiveStatus). */
export function adaptiveStatusRaw(f: AdaptiveFields, knob: string, value: number | undefined): string {
  return [knob, value === undefined ? '' : String(value), f.get('ac_cfg') ?? '', f.get('ac_on') ?? '', f.get('ac_pin') ?? '', f.get('ac_sig') ?? '', f.get('ac_log') ?? ''].join('|');
}
