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
import { MemoryQueueStore } from '../../src/store/memory-store';
import { table } from '../support/markdown-table';
import { errorRate, FULL_SCENARIO, judge, LIVE_VISIT, runAll, swingOf, type AdaptiveScenario } from './adaptive';
import { boundaryAt, capacityAt, RATE_SCENARIO, runLive, summarize, type LiveScenario } from '../support/adaptive-live';

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
  { scenario: { name: 'capacity halves mid-run', mode: 'capacity', degrade: 'errors', capacity: 10, halvesAtS: 0, start: 10, adaptive: { ...BOUNDS, ...TARGETS }, slowMs: NEVER_SLOW_MS, requestsPerVisit: 4, visitors: 24, seed: 3 }, fixed: [3, 5, 7, 9, 12] },
  // Rate mode: admit_per_period every 4 s, each visitor let in making 4 requests, so the knob's
  // boundary is C (5 requests a second) x 4 s / 4 = 5 a period.
  { scenario: RATE_SCENARIO, fixed: [3, 4, 5, 7, 10] },
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
  const only = argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);
  const rows: string[][] = [];
  for (const g of GROUPS.filter((x) => only === undefined || x.scenario.name.includes(only))) {
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
        `${r.scenario.mode === 'rate' ? 'admit_per_period' : 'max_active'} ${+boundaryAt(sc, seconds - 1).toFixed(1)}`,
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
  // The simulation beside it: the flash-sale model (test/sim/adaptive.ts) with each origin model,
  // on the in-memory store (seconds), judged the same way: served against the fixed count that
  // served most, and the learned value's swing once converged.
  const side: string[][] = [];
  for (const row of rows.filter((r) => r[1]!.startsWith('controller'))) side.push([`live, ${factor}x real time`, row[0]!, row[1]!, row[6]!, row[8]!, row[10]!]);
  const models: readonly [string, AdaptiveScenario][] = [
    ['2-min sessions, load per second (issue 17)', FULL_SCENARIO],
    ['2-min sessions, load over 10 s', { ...FULL_SCENARIO, origin: 'window' }],
    ['visits as the live runs\', load over 10 s', { ...FULL_SCENARIO, origin: 'window', visit: LIVE_VISIT }],
  ];
  for (const [model, s] of models) {
    const results = await runAll(s, () => new MemoryQueueStore());
    for (const c of results.filter((r) => r.spec.adaptive !== undefined)) {
      const v = judge(results, c.spec.name);
      const w = swingOf(s, c)!;
      side.push(['simulation, 30 min', `flash sale: ${model}`, c.spec.name, pct(v.servedRatio), pct(errorRate(c)), `${w.least}-${w.most} (${(w.most / w.least).toFixed(2)}x)`]);
    }
  }
  console.log(`### Adaptive admission against live origins over HTTP (Node host, real store), ${seconds} s a run at ${factor}x real time\n`);
  console.log(`After convergence = from ${from} s; targets ${TARGETS.errorPercent} % errors, ${TARGETS.slowPercent} % slow; "within" = the fixed setting that served most within both targets.\n`);
  console.log(
    table(
      ['origin', 'run', 'C at the end (req/s)', 'knob at C', 'load after convergence (req/s)', 'served visits', 'served / best fixed', 'served / best fixed within targets', 'errors', 'slow', 'learned after convergence'],
      ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      rows,
    ),
  );
  console.log('\n### Served against the best fixed setting, and the swing after convergence: live runs and the simulation side by side\n');
  console.log(table(['source', 'origin', 'controller', 'served / best fixed', 'errors', 'learned after convergence'], ['l', 'l', 'l', 'r', 'r', 'r'], side));
  return 0;
}
