/**
 * `npm run simulate -- --adaptive-live`: adaptive admission against live origins over HTTP (issue 30,
 * item 2), the same scenarios as test/adaptive-settle.test.ts (test/support/adaptive-live.ts states
 * the origins and the visitors), each run with the controller and with fixed settings of the knob,
 * so that the controller's served visits can be set against the best fixed setting's, and its swing
 * after convergence read off.
 *
 * `--time-factor=N` runs the world N times faster than the wall (default 1: real time);
 * `--seconds=N` scenario seconds a run (default 300); `--settled-from=N` where "after convergence"
 * starts (default: 60 % of the run). One scenario's runs go at once; the scenarios one after another.
 */
import { table } from '../support/markdown-table';
import { capacityAt, runLive, summarize, type LiveScenario } from '../support/adaptive-live';

const TARGETS = { errorPercent: 5, slowPercent: 10 } as const;
const BOUNDS = { min: 2, max: 40 } as const;
const NEVER_SLOW_MS = 60_000;

interface Group {
  readonly scenario: LiveScenario;
  readonly fixed: readonly number[];
}

const GROUPS: readonly Group[] = [
  { scenario: { name: 'errors above C', mode: 'capacity', degrade: 'errors', capacity: 5, start: 16, adaptive: { ...BOUNDS, ...TARGETS }, slowMs: NEVER_SLOW_MS, requestsPerVisit: 4, visitors: 24, seed: 1 }, fixed: [4, 6, 8, 10, 12] },
  { scenario: { name: 'latency growing with load', mode: 'capacity', degrade: 'latency', capacity: 5, start: 8, adaptive: { ...BOUNDS, ...TARGETS }, slowMs: 8000, requestsPerVisit: 4, visitors: 24, seed: 2 }, fixed: [8, 12, 16, 20, 24] },
  { scenario: { name: 'capacity halves mid-run', mode: 'capacity', degrade: 'errors', capacity: 8, halvesAtS: 0, start: 8, adaptive: { ...BOUNDS, ...TARGETS }, slowMs: NEVER_SLOW_MS, requestsPerVisit: 4, visitors: 24, seed: 3 }, fixed: [3, 5, 7, 9, 12] },
];

function option(argv: readonly string[], name: string, fallback: number): number {
  const raw = argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const n = raw === undefined ? fallback : Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name}: a positive number (got "${raw}")`);
  return n;
}

const pct = (x: number): string => `${(100 * x).toFixed(1)} %`;

export async function mainAdaptiveLive(argv: readonly string[]): Promise<number> {
  const factor = option(argv, 'time-factor', 1);
  const seconds = option(argv, 'seconds', 300);
  const from = option(argv, 'settled-from', Math.round(seconds * 0.6));
  const rows: string[][] = [];
  for (const g of GROUPS) {
    // The halving scenario halves a third of the way in.
    const sc: LiveScenario = g.scenario.halvesAtS === undefined ? g.scenario : { ...g.scenario, halvesAtS: Math.round(seconds / 3) };
    const specs: LiveScenario[] = [sc, ...g.fixed.map((n) => ({ ...sc, name: `${sc.name}, fixed ${n}`, start: n, adaptive: undefined }))];
    const started = Date.now();
    const results = await Promise.all(specs.map((s) => runLive(s, seconds, factor)));
    console.error(`simulate --adaptive-live: ${sc.name}: ${((Date.now() - started) / 1000).toFixed(0)} s`);
    const summaries = results.map((r) => ({ r, s: summarize(r, from) }));
    const fixed = summaries.slice(1);
    const best = fixed.reduce((a, b) => (b.s.served > a.s.served ? b : a));
    const within = fixed.filter((f) => f.s.errorShare * 100 <= TARGETS.errorPercent && f.s.slowShare * 100 <= TARGETS.slowPercent);
    const bestWithin = within.length === 0 ? undefined : within.reduce((a, b) => (b.s.served > a.s.served ? b : a));
    for (const { r, s } of summaries) {
      const controller = r.scenario.adaptive !== undefined;
      const sent = r.requests.filter((q) => q.s >= from).length;
      rows.push([
        sc.name,
        controller ? `controller from ${sc.start}` : `fixed ${r.scenario.start}`,
        String(capacityAt(sc, seconds - 1)),
        (sent / (seconds - from)).toFixed(1),
        String(s.served),
        pct(s.served / best.s.served),
        bestWithin === undefined ? '-' : pct(s.served / bestWithin.s.served),
        pct(s.errorShare),
        pct(s.slowShare),
        controller ? `${s.least}-${s.most} (${(s.most / s.least).toFixed(2)}x)` : '',
      ]);
    }
  }
  console.log(`### Adaptive admission against live origins over HTTP (Node host, real store), ${seconds} s a run at ${factor}x real time\n`);
  console.log(`After convergence = from ${from} s; targets ${TARGETS.errorPercent} % errors, ${TARGETS.slowPercent} % slow; "within" = the fixed setting that served most within both targets.\n`);
  console.log(
    table(
      ['origin', 'run', 'C at the end (req/s)', 'load after convergence (req/s)', 'served visits', 'served / best fixed', 'served / best fixed within targets', 'errors', 'slow', 'learned after convergence'],
      ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      rows,
    ),
  );
  return 0;
}
