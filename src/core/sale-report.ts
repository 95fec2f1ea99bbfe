/**
 * The sale's report: figures, a per-minute timeline, the operator's actions and a chart, built from
 * the store's record (per-minute points kept seven days, each with the running totals as they stood
 * then; see QueueStore.record) and the totals now (one stats call). Pure: numbers in, JSON, CSV and
 * SVG out, so a test can drive a scripted sale through a store and check every figure.
 *
 * Figures count from a baseline: the totals before the sale's first point (zero: the totals start
 * with the queue's state), or with `fromMs` the first point at or after it (what happened before
 * that point's minute is left out). The totals survive a reset (a reset is an action on the
 * timeline); a store that lost its state starts them again, and the report counts on from zero.
 */
import { REFUSAL_REASONS, WAIT_BOUNDS_MS, type RecordPoint, type RefusalReason, type SaleTotals } from './ports';

/** How much of the record one report reads: seven days, in one read (see QueueStore.record). */
export const REPORT_SPAN_MS = 7 * 24 * 3_600_000;
export const REPORT_READ_MINUTES = REPORT_SPAN_MS / 60_000;
const MINUTE_MS = 60_000;

/** One entry of the actions on the timeline. */
export interface ReportAction {
  readonly atMs: number;
  /** What was done, in words (`paused`, `switched to hold`, `reset`, ...). */
  readonly action: string;
  /** Who did it, when the audit trail says (the store's own record does not know). */
  readonly actor?: string;
  /** Where the entry comes from: `record` (a change seen between two minutes' points) or `audit`. */
  readonly source: 'record' | 'audit';
}

/** An audit trail's entry, as the report takes it (see addAuditActions). */
export interface AuditEntryForReport {
  readonly atMs: number;
  readonly action: string;
  readonly actor?: string;
}

/** One minute of the timeline. */
export interface ReportMinute {
  readonly atMs: number;
  /** Tickets handed out since the previous point. */
  readonly arrivals: number;
  readonly admitted: number;
  readonly lapsed: number;
  readonly refused: number;
  readonly storeErrors: number;
  /** The line then (FIFO: tickets not yet called; random: present in the draw). */
  readonly waiting: number;
  readonly active: number;
  readonly mode: string;
}

export interface SaleReport {
  readonly queue: string;
  readonly fromMs: number | null;
  readonly toMs: number;
  readonly arrivals: number;
  readonly admitted: number;
  readonly peakLine: { readonly waiting: number; readonly atMs: number | null };
  /**
   * Waits of the visitors let in: the longest and the mean (exact), and p50 (the median), p90, p99
   * as the histogram's bucket bound they fall within (seconds; null: above the last bound, 2 h).
   */
  readonly wait: {
    readonly count: number;
    readonly peakSeconds: number;
    readonly meanSeconds: number | null;
    readonly p50Seconds: number | null;
    readonly p90Seconds: number | null;
    readonly p99Seconds: number | null;
    /** The histogram: visitors let in per bucket, `le` in seconds ('+Inf' for the last). */
    readonly buckets: readonly { readonly le: number | '+Inf'; readonly count: number }[];
  };
  /** Calls that lapsed unclaimed (the holder never came back in time), and their share of the calls that ended. */
  readonly abandonment: { readonly lapsed: number; readonly rate: number | null };
  readonly refused: Readonly<Record<RefusalReason, number>>;
  readonly storeErrors: number;
  readonly switchChanges: number;
  readonly minutes: readonly ReportMinute[];
  readonly actions: readonly ReportAction[];
}

const MODES = ['normal', 'paused', 'hold', 'open', 'recovering'] as const;

const ZERO: SaleTotals = {
  admitted: 0,
  lapsed: 0,
  switchChanges: 0,
  waitSumMs: 0,
  waitMaxMs: 0,
  waitBuckets: new Array<number>(WAIT_BOUNDS_MS.length + 1).fill(0),
  refused: Object.fromEntries(REFUSAL_REASONS.map((r) => [r, 0])) as Record<RefusalReason, number>,
  storeErrors: 0,
};

/** Counts grew from `a` to `b`; a smaller `b` means the totals started again (a lost state): all of `b` is new. */
const grown = (a: number, b: number): number => (b >= a ? b - a : b);

/** `b - a` for every count of the totals (see grown). */
function totalsSince(a: SaleTotals, b: SaleTotals): SaleTotals {
  const restarted = b.admitted < a.admitted || b.waitSumMs < a.waitSumMs;
  const base = restarted ? ZERO : a;
  return {
    admitted: grown(base.admitted, b.admitted),
    lapsed: grown(base.lapsed, b.lapsed),
    switchChanges: grown(base.switchChanges, b.switchChanges),
    waitSumMs: grown(base.waitSumMs, b.waitSumMs),
    waitMaxMs: b.waitMaxMs,
    waitBuckets: b.waitBuckets.map((n, i) => grown(base.waitBuckets[i] ?? 0, n)),
    refused: Object.fromEntries(REFUSAL_REASONS.map((r) => [r, grown(base.refused[r], b.refused[r])])) as Record<RefusalReason, number>,
    storeErrors: grown(base.storeErrors, b.storeErrors),
  };
}

/** The bucket bound (seconds) that holds the q-th share of `buckets`; null above the last bound, or with none counted. */
export function waitQuantileSeconds(buckets: readonly number[], q: number): number | null {
  const count = buckets.reduce((a, b) => a + b, 0);
  if (count === 0) return null;
  const rank = Math.max(1, Math.ceil(q * count));
  let seen = 0;
  for (let i = 0; i < buckets.length; i += 1) {
    seen += buckets[i] ?? 0;
    if (seen >= rank) {
      const bound = WAIT_BOUNDS_MS[i];
      return bound === undefined ? null : bound / 1000;
    }
  }
  return null;
}

export interface ReportInput {
  readonly queue: string;
  readonly nowMs: number;
  /** The record's points, oldest first (QueueStore.record over the span). */
  readonly points: readonly RecordPoint[];
  /** The state and totals now (QueueStore.stats). */
  readonly now: { readonly tail: number; readonly waiting: number; readonly active: number; readonly totals: SaleTotals };
  /** Count from the first point at or after this (ms); undefined: the whole record, from zero. */
  readonly fromMs?: number | undefined;
}

export function buildSaleReport(input: ReportInput): SaleReport {
  const points = input.fromMs === undefined ? input.points : input.points.filter((p) => p.atMs >= (input.fromMs ?? 0));
  const first = points[0];
  // The baseline: zero for the whole record (its totals count from the state's start), else the
  // first point's own totals and tail.
  const base = input.fromMs === undefined || first === undefined ? { tail: 0, totals: ZERO } : { tail: first.tail, totals: first.totals };
  // The sale's totals: each point's growth over the one before (so a restart counts on), then now's.
  let sale = ZERO;
  const add = (d: SaleTotals): void => {
    sale = {
      admitted: sale.admitted + d.admitted,
      lapsed: sale.lapsed + d.lapsed,
      switchChanges: sale.switchChanges + d.switchChanges,
      waitSumMs: sale.waitSumMs + d.waitSumMs,
      waitMaxMs: Math.max(sale.waitMaxMs, d.waitMaxMs),
      waitBuckets: sale.waitBuckets.map((n, i) => n + (d.waitBuckets[i] ?? 0)),
      refused: Object.fromEntries(REFUSAL_REASONS.map((r) => [r, sale.refused[r] + d.refused[r]])) as Record<RefusalReason, number>,
      storeErrors: sale.storeErrors + d.storeErrors,
    };
  };
  let arrivals = 0;
  let lastTail = base.tail;
  let last = base.totals;
  const minutes: ReportMinute[] = [];
  const actions: ReportAction[] = [];
  let peak = { waiting: 0, atMs: null as number | null };
  let prev: RecordPoint | undefined;
  for (const p of points) {
    const d = totalsSince(last, p.totals);
    const came = grown(lastTail, p.tail);
    if (!(input.fromMs !== undefined && p === first)) add(d);
    if (!(input.fromMs !== undefined && p === first)) arrivals += came;
    minutes.push({
      atMs: p.atMs,
      arrivals: p === first && input.fromMs !== undefined ? 0 : came,
      admitted: p === first && input.fromMs !== undefined ? 0 : d.admitted,
      lapsed: p === first && input.fromMs !== undefined ? 0 : d.lapsed,
      refused: p === first && input.fromMs !== undefined ? 0 : REFUSAL_REASONS.reduce((n, r) => n + d.refused[r], 0),
      storeErrors: p === first && input.fromMs !== undefined ? 0 : d.storeErrors,
      waiting: p.waiting,
      active: p.active,
      mode: MODES[p.mode] ?? 'normal',
    });
    if (p.waiting > peak.waiting) peak = { waiting: p.waiting, atMs: p.atMs };
    if (prev !== undefined) {
      if (p.epoch !== prev.epoch) actions.push({ atMs: p.atMs, action: 'reset', source: 'record' });
      if (p.mode !== prev.mode) actions.push({ atMs: p.atMs, action: modeChange(prev.mode, p.mode), source: 'record' });
    }
    lastTail = p.tail;
    last = p.totals;
    prev = p;
  }
  arrivals += grown(lastTail, input.now.tail);
  add(totalsSince(last, input.now.totals));
  if (input.now.waiting > peak.waiting) peak = { waiting: input.now.waiting, atMs: input.nowMs };
  const count = sale.waitBuckets.reduce((a, b) => a + b, 0);
  const ended = sale.admitted + sale.lapsed;
  return {
    queue: input.queue,
    fromMs: first?.atMs ?? null,
    toMs: input.nowMs,
    arrivals,
    admitted: sale.admitted,
    peakLine: peak,
    wait: {
      count,
      peakSeconds: count === 0 ? 0 : sale.waitMaxMs / 1000,
      meanSeconds: count === 0 ? null : Math.round(sale.waitSumMs / count) / 1000,
      p50Seconds: waitQuantileSeconds(sale.waitBuckets, 0.5),
      p90Seconds: waitQuantileSeconds(sale.waitBuckets, 0.9),
      p99Seconds: waitQuantileSeconds(sale.waitBuckets, 0.99),
      buckets: sale.waitBuckets.map((n, i) => ({ le: WAIT_BOUNDS_MS[i] === undefined ? '+Inf' : (WAIT_BOUNDS_MS[i] ?? 0) / 1000, count: n })),
    },
    abandonment: { lapsed: sale.lapsed, rate: ended === 0 ? null : Math.round((sale.lapsed / ended) * 10_000) / 10_000 },
    refused: sale.refused,
    storeErrors: sale.storeErrors,
    switchChanges: sale.switchChanges,
    minutes,
    actions,
  };
}

function modeChange(from: number, to: number): string {
  const name = MODES[to] ?? 'normal';
  if (name === 'normal') return from === 1 ? 'resumed' : from === 4 ? 'recovery ended' : `switched back to normal (from ${MODES[from] ?? 'normal'})`;
  if (name === 'paused') return 'paused';
  if (name === 'recovering') return 'recovering after a lost state';
  return `switched to ${name}`;
}

/**
 * The hook for the audit trail: its entries (who did what, when) put on the report's timeline,
 * in time order with the changes the record saw (the console's and the API's report read them with
 * the audit trail's readAudit; see reportContext in admin.ts).
 */
export function addAuditActions(report: SaleReport, entries: readonly AuditEntryForReport[]): SaleReport {
  const audit: ReportAction[] = entries
    .filter((e) => e.atMs >= (report.fromMs ?? 0) && e.atMs <= report.toMs)
    .map((e) => ({ atMs: e.atMs, action: e.action, ...(e.actor !== undefined ? { actor: e.actor } : {}), source: 'audit' as const }));
  return { ...report, actions: [...report.actions, ...audit].sort((a, b) => a.atMs - b.atMs) };
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The report as JSON (snake_case keys, ISO times beside the ms), what `report.json` answers. */
export function saleReportJson(r: SaleReport): Record<string, unknown> {
  return {
    queue: r.queue,
    from: r.fromMs === null ? null : iso(r.fromMs),
    to: iso(r.toMs),
    arrivals: r.arrivals,
    admitted: r.admitted,
    peak_line: { waiting: r.peakLine.waiting, at: r.peakLine.atMs === null ? null : iso(r.peakLine.atMs) },
    wait_seconds: {
      let_in: r.wait.count,
      peak: r.wait.peakSeconds,
      mean: r.wait.meanSeconds,
      median: r.wait.p50Seconds,
      p50: r.wait.p50Seconds,
      p90: r.wait.p90Seconds,
      p99: r.wait.p99Seconds,
      buckets: r.wait.buckets,
    },
    abandonment: r.abandonment,
    refused: r.refused,
    store_errors: r.storeErrors,
    switch_changes: r.switchChanges,
    actions: r.actions.map((a) => ({ at: iso(a.atMs), action: a.action, ...(a.actor !== undefined ? { actor: a.actor } : {}), source: a.source })),
    minutes: r.minutes.map((m) => ({
      at: iso(m.atMs),
      arrivals: m.arrivals,
      admitted: m.admitted,
      lapsed: m.lapsed,
      refused: m.refused,
      store_errors: m.storeErrors,
      waiting: m.waiting,
      active: m.active,
      mode: m.mode,
    })),
  };
}

/** The timeline as CSV (RFC 4180; one row per recorded minute), what `report.csv` answers. */
export function saleReportCsv(r: SaleReport): string {
  const rows = [['minute', 'arrivals', 'admitted', 'lapsed', 'refused', 'store_errors', 'waiting', 'active', 'mode', 'actions']];
  for (const m of r.minutes) {
    const acts = r.actions.filter((a) => a.atMs >= m.atMs && a.atMs < m.atMs + MINUTE_MS).map((a) => a.action + (a.actor !== undefined ? ` (${a.actor})` : ''));
    rows.push([iso(m.atMs), String(m.arrivals), String(m.admitted), String(m.lapsed), String(m.refused), String(m.storeErrors), String(m.waiting), String(m.active), m.mode, acts.join('; ')]);
  }
  // A text cell a spreadsheet would read as a formula (an audit entry's actor, say) is quoted as text.
  const text = (v: string): string => (/^[=+\-@\t\r]/.test(v) ? `'${v}` : v);
  const cell = (v: string): string => {
    const t = /^-?\d+$/.test(v) ? v : text(v);
    return /[",\r\n]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
  };
  return rows.map((row) => row.map(cell).join(',')).join('\r\n') + '\r\n';
}

/** A round, readable top for an axis at least `max` (1, 2, 5 × 10^n). */
function niceTop(max: number): number {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

/**
 * The whole sale in two panels over one time axis, each with its own scale: the line (visitors
 * waiting) above, visitors let in per minute below. At most `columns` columns: each shows the
 * largest line and the most let in of its minutes, so a peak is never averaged away.
 */
export function renderSaleChart(r: SaleReport, columns = 480): string {
  const W = 760;
  const H = 300;
  const left = 56;
  const right = W - 12;
  const panels = [
    { title: 'Waiting', top: 24, bottom: 128, value: (m: ReportMinute) => m.waiting },
    { title: 'Let in per minute', top: 172, bottom: 276, value: (m: ReportMinute) => m.admitted },
  ];
  const ms = r.minutes;
  if (ms.length === 0) {
    return `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="No record yet" class="chart"><text x="${W / 2}" y="${H / 2}" text-anchor="middle" class="axis">No record yet: a point is recorded once a minute while the queue is used.</text></svg>`;
  }
  const t0 = ms[0]?.atMs ?? r.toMs;
  const t1 = Math.max(ms[ms.length - 1]?.atMs ?? t0, t0 + MINUTE_MS);
  const x = (t: number): number => left + ((t - t0) / (t1 - t0)) * (right - left);
  const bins = Math.min(columns, ms.length);
  const parts: string[] = [];
  for (const panel of panels) {
    const column: { t: number; v: number }[] = [];
    for (let b = 0; b < bins; b += 1) {
      const from = Math.floor((b * ms.length) / bins);
      const to = Math.floor(((b + 1) * ms.length) / bins);
      let v = 0;
      let t = ms[from]?.atMs ?? t0;
      for (let i = from; i < to; i += 1) {
        const m = ms[i];
        if (m !== undefined && panel.value(m) >= v) {
          v = panel.value(m);
          t = m.atMs;
        }
      }
      column.push({ t, v });
    }
    const top = niceTop(Math.max(...column.map((c) => c.v)));
    const y = (v: number): number => panel.bottom - (v / top) * (panel.bottom - panel.top);
    parts.push(`<text x="${left}" y="${panel.top - 8}" class="axis">${panel.title} (scale 0–${top})</text>`);
    for (const v of [0, top / 2, top]) {
      parts.push(`<line x1="${left}" x2="${right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" class="grid"/>`);
      parts.push(`<text x="${left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" class="axis">${Number.isInteger(v) ? v : v.toFixed(1)}</text>`);
    }
    const line = column.map((c) => `${x(c.t).toFixed(1)},${y(c.v).toFixed(1)}`).join(' ');
    parts.push(`<polyline points="${line}" fill="none" class="${panel.title === 'Waiting' ? 'waiting' : 'admitted'}"/>`);
  }
  for (const a of r.actions) {
    if (a.atMs < t0 || a.atMs > t1) continue;
    parts.push(`<line x1="${x(a.atMs).toFixed(1)}" x2="${x(a.atMs).toFixed(1)}" y1="24" y2="276" class="action"><title>${escapeXml(a.action)}</title></line>`);
  }
  const label = (t: number): string => iso(t).replace('T', ' ').slice(0, 16);
  parts.push(`<text x="${left}" y="${H - 4}" class="axis">${label(t0)} UTC</text>`);
  parts.push(`<text x="${right}" y="${H - 4}" text-anchor="end" class="axis">${label(t1)} UTC</text>`);
  return `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="The sale: visitors waiting, and let in per minute, from ${label(t0)} to ${label(t1)} UTC" class="chart">${parts.join('')}</svg>`;
}

function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
