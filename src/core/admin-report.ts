/**
 * The sale's report behind the console's sign-in (`<prefix>admin/report`, `.json`, `.csv`) and the
 * origin API's bearer token (`<prefix>api/report.json`, `.csv`): one stats call for the totals
 * now, then the record in one call (seven days at most; fewer with `from`), then the audit trail.
 * Nothing is written. `from` (ms since the epoch, or an ISO date-time) counts from the first point
 * at or after it; anything else is a 400 that names it.
 */
import { adminHead } from './admin-page';
import { errorResponse, jsonResponse } from './http';
import { escapeHtml, formatCount } from './pages';
import type { AdmissionPolicy, Clock, QueueStats, QueueStore, RecordPoint } from './ports';
import { addAuditActions, buildSaleReport, REPORT_READ_MINUTES, REPORT_SPAN_MS, renderSaleChart, saleReportCsv, saleReportJson, type AuditEntryForReport, type SaleReport } from './sale-report';
import type { StoreOutcome } from './store-call';
import { waitingOf } from './types';

/** What the report needs of the admin context (AdminContext has it all). */
export interface ReportContext {
  readonly config: { readonly queueName: string; readonly pathPrefix: string; readonly queueMethod: 'fifo' | 'random' };
  readonly store: QueueStore;
  readonly clock: Clock;
  readonly policy: AdmissionPolicy;
  readonly storeCall: <T>(call: () => Promise<T>) => Promise<StoreOutcome<T>>;
  /**
   * The audit trail's entries for the report's span (who did what, when), put on its timeline with
   * addAuditActions (admin.ts reads them from the audit trail); none: only what the record saw.
   */
  readonly auditEntries?: ((fromMs: number, toMs: number) => Promise<readonly AuditEntryForReport[]>) | undefined;
}

const MINUTE_MS = 60_000;

/** `from` as given: absent, ms since the epoch, or an ISO date-time; an error that names it otherwise. */
export function parseReportFrom(value: string | null): { ok: true; fromMs: number | undefined } | { ok: false; error: string } {
  if (value === null || value === '') return { ok: true, fromMs: undefined };
  if (/^[0-9]{1,16}$/.test(value)) return { ok: true, fromMs: Number(value) };
  if (/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?)?$/.test(value)) {
    const ms = Date.parse(value);
    if (Number.isFinite(ms) && ms >= 0) return { ok: true, fromMs: ms };
  }
  return { ok: false, error: `from must be ms since the epoch or an ISO date-time such as 2026-11-28T10:00Z, got ${JSON.stringify(value.slice(0, 40))}` };
}

/** The report now, or a Response saying why not (the store did not answer). */
export async function readSaleReport(ctx: ReportContext, fromMs: number | undefined): Promise<SaleReport | Response> {
  const nowMs = ctx.clock.now();
  const queue = ctx.config.queueName;
  const stats = await ctx.storeCall(() => ctx.store.stats(queue, nowMs, ctx.policy));
  if (!stats.ok) return errorResponse(503, `the queue store is unavailable (${stats.reason})`);
  const totals = stats.value.totals;
  if (totals === undefined) return errorResponse(501, 'this store keeps no record of the sale');
  const points: RecordPoint[] = [];
  const record = ctx.store.record?.bind(ctx.store);
  if (record !== undefined) {
    const current = Math.floor(nowMs / MINUTE_MS) * MINUTE_MS;
    const oldest = current - (REPORT_SPAN_MS / MINUTE_MS - 1) * MINUTE_MS;
    // A read of the day holding `from` and the ones after it.
    let start = fromMs === undefined ? oldest : Math.max(oldest, Math.floor(fromMs / MINUTE_MS) * MINUTE_MS);
    while (start <= current) {
      const minutes = Math.min(REPORT_READ_MINUTES, (current - start) / MINUTE_MS + 1);
      const from = start;
      const read = await ctx.storeCall(() => record(queue, nowMs, from, minutes));
      if (!read.ok) return errorResponse(503, `the queue store is unavailable (${read.reason})`);
      points.push(...read.value);
      start += minutes * MINUTE_MS;
    }
  }
  const s: QueueStats = stats.value;
  const waiting = waitingOf(s, ctx.config.queueMethod === 'random');
  const report = buildSaleReport({ queue, nowMs, points, now: { tail: s.tail, waiting, active: s.active, totals }, fromMs });
  const audit = ctx.auditEntries === undefined ? [] : await ctx.auditEntries(report.fromMs ?? nowMs - REPORT_SPAN_MS, nowMs);
  return audit.length === 0 ? report : addAuditActions(report, audit);
}

const REPORT_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };

/** `report.json` / `report.csv` (`format`), or the console's report page (`html`). */
export async function saleReportResponse(request: Request, ctx: ReportContext, format: 'json' | 'csv' | 'html', pageHeaders: Record<string, string>): Promise<Response> {
  const from = parseReportFrom(new URL(request.url).searchParams.get('from'));
  if (!from.ok) return errorResponse(400, from.error);
  const report = await readSaleReport(ctx, from.fromMs);
  if (report instanceof Response) return report;
  if (format === 'json') return jsonResponse(200, saleReportJson(report), REPORT_HEADERS);
  if (format === 'csv') {
    return new Response(saleReportCsv(report), {
      headers: { ...REPORT_HEADERS, 'content-type': 'text/csv; charset=utf-8; header=present', 'content-disposition': `attachment; filename="${ctx.config.queueName}-report.csv"` },
    });
  }
  return new Response(renderReportPage(report, ctx.config.pathPrefix, new URL(request.url).search), { headers: pageHeaders });
}

const seconds = (s: number | null, above = 'over 2 h'): string => (s === null ? above : s < 60 ? `${s} s` : s < 3600 ? `${Math.round((s / 60) * 10) / 10} min` : `${Math.round((s / 3600) * 10) / 10} h`);
const time = (ms: number | null): string => (ms === null ? '–' : new Date(ms).toISOString().replace('T', ' ').slice(0, 16) + ' UTC');

/** The console's report page: the figures, the chart of the whole sale, the actions, and the exports. */
export function renderReportPage(r: SaleReport, prefix: string, query: string): string {
  const e = escapeHtml;
  // A figure in the tiles' size; words (a time, a list) in the text size, as the console does.
  const tile = (label: string, value: string): string => `<div><dt>${e(label)}</dt><dd${/^[0-9,]+$/.test(value) ? '' : ' class="text"'}>${e(value)}</dd></div>`;
  const refused = Object.entries(r.refused)
    .filter(([, n]) => n > 0)
    .map(([reason, n]) => `${reason.replace(/_/g, ' ')} ${formatCount(n)}`)
    .join(', ');
  const actions =
    r.actions.length === 0
      ? '<p class="small">No change of the controls recorded.</p>'
      : `<ol class="actions">${r.actions.map((a) => `<li><time datetime="${new Date(a.atMs).toISOString()}">${e(time(a.atMs))}</time> ${e(a.action)}${a.actor !== undefined ? ` (${e(a.actor)})` : ''}</li>`).join('')}</ol>`;
  const q = e(query);
  return `${adminHead(prefix, `Sale report · ${r.queue}`)}
<body class="admin">
<main class="card console report" aria-labelledby="title">
  <header class="console-head">
    <h1 id="title">Sale report · <code>${e(r.queue)}</code></h1>
    <p class="small">From ${e(time(r.fromMs))} to ${e(time(r.toMs))}. <a href="${e(prefix)}admin">Back to the console</a> · <a href="${e(prefix)}admin/report.json${q}">JSON</a> · <a href="${e(prefix)}admin/report.csv${q}">CSV</a></p>
  </header>
  <section aria-labelledby="figures-heading">
    <h2 id="figures-heading">Figures</h2>
    <dl class="stats" id="report-figures">
      ${tile('Arrivals (tickets handed out)', formatCount(r.arrivals))}
      ${tile('Let in', formatCount(r.admitted))}
      ${tile('Peak line', `${formatCount(r.peakLine.waiting)} at ${time(r.peakLine.atMs)}`)}
      ${tile('Longest wait of those let in', r.wait.count === 0 ? '–' : seconds(r.wait.peakSeconds))}
      ${tile('Median wait (p50)', r.wait.count === 0 ? '–' : `up to ${seconds(r.wait.p50Seconds)}`)}
      ${tile('p90 / p99 wait', r.wait.count === 0 ? '–' : `up to ${seconds(r.wait.p90Seconds)} / up to ${seconds(r.wait.p99Seconds)}`)}
      ${tile('Abandoned (called, never came back)', `${formatCount(r.abandonment.lapsed)}${r.abandonment.rate === null ? '' : ` (${Math.round(r.abandonment.rate * 1000) / 10} % of calls)`}`)}
      ${tile('New tickets refused', refused === '' ? 'none' : refused)}
      ${tile('Store errors', formatCount(r.storeErrors))}
      ${tile('Switch changes', formatCount(r.switchChanges))}
    </dl>
  </section>
  <section aria-labelledby="chart-heading">
    <h2 id="chart-heading">The whole sale</h2>
    <div id="chart">${renderSaleChart(r)}</div>
    <p class="small">Each panel has its own scale. Percentiles are the bucket bounds of the wait histogram (5 s, 15 s, 30 s, 1, 2, 5, 10, 20, 30 min, 1 h, 2 h).</p>
  </section>
  <section aria-labelledby="actions-heading">
    <h2 id="actions-heading">Actions</h2>
    ${actions}
  </section>
</main>
</body>
</html>`;
}
