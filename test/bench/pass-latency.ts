/**
 * The latency pass: the latency the waiting room adds over a bare pass-through proxy to the same
 * origin, in one bounded run per setting, arms interleaved round by round (keep-alive, the load
 * generator in its own thread, the origin and bridge in another).
 *
 * Node arm: the origin direct, the bare proxy (startHost + forward), an admitted visitor (token
 * check, no store call) and a waiting poll (one store round trip), at two concurrencies. Wasm arm:
 * the bare proxy wasm, admitted and waiting on the stand-in, whose numbers are its own, not Fastly's.
 * The admitted visitors are the round-trip pass's; run alone, the pass lets some in itself.
 */
import { table } from '../support/markdown-table';
import { ARM_CONCURRENCY, countsBetween, MAIN_ROOM, visitorClasses, type Arm, type Pass, type VisitorClasses } from './harness';
import { log, mean, median, ms, PATH, percentile, signedMs } from './util';
import { runLoadPlan, type ArmSample, type ArmSpec } from './workers';

/** Node: warm-up per arm, then rounds × per-round requests per arm, arms interleaved. */
const LATENCY_RUNS: readonly { concurrency: number; warmup: number; rounds: number; perRound: number }[] = [
  { concurrency: ARM_CONCURRENCY.node, warmup: 300, rounds: 10, perRound: 200 },
  { concurrency: 1, warmup: 100, rounds: 5, perRound: 100 },
];
/** Budget of one latency run; requests past it are not sent and the run is reported truncated. */
const LATENCY_RUN_BUDGET_MS = 35_000;
/** Wasm, the stand-in's numbers only: concurrency 1, warm-up per arm, rounds × per-round per arm. */
const WASM_LATENCY_RUN = { concurrency: 1, warmup: 10, rounds: 5, perRound: 20 } as const;
const WASM_LATENCY_BUDGET_MS = 20_000;

/**
 * `n` admitted visitors' access cookies: the round-trip pass's, or (the pass run alone) `n` fresh
 * visitors joined, let in one admit call each, and upgraded. Before any waiting visitor of this
 * pass joins, so that those stay behind the cursor.
 */
async function admittedVisitors(arm: Arm, classes: VisitorClasses, n: number): Promise<string[]> {
  if (arm.admitted !== undefined && arm.admitted.length >= n) return arm.admitted.slice(0, n);
  const waiting: string[] = [];
  for (let i = 0; i < n; i++) waiting.push(await classes.newVisitor());
  for (let i = 0; i < n; i++) await classes.adminAdmit();
  const access: string[] = [];
  for (const cookie of waiting) access.push(await classes.upgradePoll(cookie));
  return access;
}

function latencyReport(
  run: { concurrency: number; warmup: number; rounds: number; perRound: number },
  arms: readonly ArmSample[],
  truncated: boolean,
  storeHttp: number,
  storeRedis: number,
): { text: string; failed: boolean } {
  const stats = arms.map((arm) => {
    const sorted = [...arm.latencies].sort((a, b) => a - b);
    return {
      arm,
      p50: percentile(sorted, 50),
      p95: percentile(sorted, 95),
      p99: percentile(sorted, 99),
      mean: mean(sorted),
      rps: arm.wallMs > 0 ? (arm.latencies.length / arm.wallMs) * 1000 : NaN,
    };
  });
  const base = stats[1]; // the bare proxy
  const rows = stats.map((s, i) => {
    const isBase = i === 1;
    const vsProxy = base === undefined || isBase;
    // Paired per round: this arm's round mean minus the proxy's mean of the same round.
    const perRound = base === undefined ? [] : s.arm.roundMeans.map((m, r) => m - (base.arm.roundMeans[r] ?? NaN));
    return [
      s.arm.name,
      String(s.arm.latencies.length),
      ms(s.p50),
      ms(s.p95),
      ms(s.p99),
      ms(s.mean),
      Number.isFinite(s.rps) ? s.rps.toFixed(0) : 'n/a',
      vsProxy ? '—' : signedMs(s.p50 - base.p50),
      vsProxy ? '—' : signedMs(s.mean - base.mean),
      vsProxy ? '—' : `${signedMs(median(perRound))} [${signedMs(Math.min(...perRound))}, ${signedMs(Math.max(...perRound))}]`,
      vsProxy ? '—' : `${(s.mean / base.mean).toFixed(2)}×`,
      vsProxy ? '—' : `${(s.p50 / base.p50).toFixed(2)}×`,
    ];
  });
  const errors = arms.filter((a) => a.errors > 0);
  const pollArm = arms[3];
  const expectedStore = pollArm?.sent ?? 0;
  const text = [
    `### Added latency, concurrency ${run.concurrency} (GET ${PATH}, keep-alive; ${run.warmup} warm-up then ${run.rounds} interleaved rounds × ${run.perRound} per arm)`,
    '',
    table(
      ['arm', 'requests', 'p50 ms', 'p95 ms', 'p99 ms', 'mean ms', 'req/s', 'added p50', 'added mean', 'added mean per round: median [min, max]', 'mean vs proxy', 'p50 vs proxy'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      rows,
    ),
    '',
    '"added" = this arm minus the bare proxy (same host code, same origin, no waiting-room logic); the per-round column pairs ' +
      'each round\'s mean with the proxy\'s mean of the same round. Load generator in its own thread; origin and bridge in another.',
    `Store requests during this run: ${storeHttp} HTTP / ${storeRedis} Redis, for ${expectedStore} waiting polls sent ` +
      `(admitted and proxy arms: 0 expected)${storeHttp === expectedStore && storeRedis === expectedStore ? ' — as expected.' : ' — MISMATCH.'}` +
      (errors.length > 0 ? ` Errors: ${errors.map((a) => `${a.name} ${a.errors} (${a.firstError ?? ''})`).join('; ')}.` : '') +
      (truncated ? ` Cut short by the ${LATENCY_RUN_BUDGET_MS / 1000} s budget of a run.` : ''),
    '',
  ].join('\n');
  return { text, failed: truncated || errors.length > 0 || storeHttp !== expectedStore || storeRedis !== expectedStore };
}

function wasmLatencyReport(
  arms: readonly ArmSample[],
  truncated: boolean,
  storeHttp: number,
  storeRedis: number,
  hostStats: { tInst: number; ms: number }[] | undefined,
): { text: string; failed: boolean } {
  const stats = arms.map((arm) => ({ arm, p50: percentile([...arm.latencies].sort((a, b) => a - b), 50), mean: mean(arm.latencies) }));
  const base = stats[0];
  const rows = stats.map((s, i) => [
    s.arm.name,
    String(s.arm.latencies.length),
    ms(s.p50),
    ms(s.mean),
    i === 0 || base === undefined ? '—' : signedMs(s.p50 - base.p50),
    i === 0 || base === undefined ? '—' : signedMs(s.mean - base.mean),
  ]);
  const errors = arms.filter((a) => a.errors > 0);
  const expectedStore = arms[2]?.sent ?? 0;
  const storeOk = storeHttp === expectedStore && storeRedis === expectedStore;
  const run = WASM_LATENCY_RUN;
  const instantiate =
    hostStats !== undefined && hostStats.length > 0
      ? ` The host's own timings of this run's ${hostStats.length} waiting-room requests (GET /__host/stats): median ${ms(median(hostStats.map((s) => s.ms)))} ms, of which ${ms(median(hostStats.map((s) => s.tInst)))} ms instantiating the wasm.`
      : '';
  const text = [
    `### Wasm latency on the Compute host: the stand-in's numbers, NOT Fastly's (concurrency ${run.concurrency}; ${run.warmup} warm-up then ${run.rounds} interleaved rounds × ${run.perRound} per arm)`,
    '',
    table(['arm', 'requests', 'p50 ms', 'mean ms', 'added p50', 'added mean'], ['l', 'r', 'r', 'r', 'r', 'r'], rows),
    '',
    `The host instantiates a fresh wasm for every request, so absolute numbers say nothing about Fastly; "added" is this arm minus the bare proxy wasm on the same host.${instantiate}` +
      ` Store requests during this run: ${storeHttp} HTTP / ${storeRedis} Redis, for ${expectedStore} waiting polls sent${storeOk ? ' — as expected.' : ' — MISMATCH.'}` +
      (errors.length > 0 ? ` Errors: ${errors.map((a) => `${a.name} ${a.errors} (${a.firstError ?? ''})`).join('; ')}.` : '') +
      (truncated ? ` Cut short by the ${WASM_LATENCY_BUDGET_MS / 1000} s budget of the run.` : ''),
    '',
  ].join('\n');
  return { text, failed: truncated || errors.length > 0 || !storeOk };
}

/** The Node arm: both concurrencies, four arms each. */
async function runNodeLatency(arm: Arm): Promise<{ text: string; failed: boolean }[]> {
  const host = await arm.host(MAIN_ROOM);
  const bare = await arm.bare();
  const classes = visitorClasses('node', host, arm.apiToken);
  const concurrency = ARM_CONCURRENCY.node;
  const accessCookies = await admittedVisitors(arm, classes, concurrency);
  // Fresh waiting visitors, behind the cursor, for the poll arm.
  const latencyWaiting: string[] = [];
  for (let i = 0; i < concurrency; i++) latencyWaiting.push(await classes.newVisitor());
  const arms: ArmSpec[] = [
    // The same Cookie header on every pass-through arm, so the requests are byte for byte alike.
    { name: 'origin, direct (no proxy)', url: `${arm.originUrl}${PATH}`, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
    { name: 'bare proxy (startHost + forward)', url: `${bare}${PATH}`, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
    { name: 'waiting room: admitted (token check)', url: classes.page, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
    { name: 'waiting room: waiting poll (1 store trip)', url: classes.page, cookies: latencyWaiting, expectStatus: host.config.holdStatus, expectOrigin: false },
  ];
  const reports: { text: string; failed: boolean }[] = [];
  for (const run of LATENCY_RUNS) {
    log(`node: latency, concurrency ${run.concurrency}, ${run.warmup} warm-up + ${run.rounds} × ${run.perRound} per arm`);
    const before = await arm.snapshot();
    const result = await runLoadPlan(arm.load, { arms, ...run, budgetMs: LATENCY_RUN_BUDGET_MS }, LATENCY_RUN_BUDGET_MS + 20_000);
    const store = countsBetween(before, await arm.snapshot());
    reports.push(latencyReport(run, result.arms, result.truncated, store.http, store.redis));
  }
  return reports;
}

/** The wasm arm: concurrency 1, three arms, with the stand-in's own timings. */
async function runWasmLatency(arm: Arm): Promise<{ text: string; failed: boolean }> {
  const host = await arm.host(MAIN_ROOM);
  const bare = await arm.bare();
  const classes = visitorClasses('wasm', host, arm.apiToken);
  const accessCookies = await admittedVisitors(arm, classes, 2);
  const waitingCookies: string[] = [];
  for (let i = 0; i < 2; i++) waitingCookies.push(await classes.newVisitor());
  const arms: ArmSpec[] = [
    { name: 'bare proxy wasm (one fetch to origin)', url: `${bare}${PATH}`, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
    { name: 'waiting room wasm: admitted (token check)', url: classes.page, cookies: accessCookies, expectStatus: 200, expectOrigin: true },
    { name: 'waiting room wasm: waiting poll (1 store trip)', url: classes.page, cookies: waitingCookies, expectStatus: host.config.holdStatus, expectOrigin: false },
  ];
  const run = WASM_LATENCY_RUN;
  log(`wasm: latency, concurrency ${run.concurrency}, ${run.warmup} warm-up + ${run.rounds} × ${run.perRound} per arm`);
  const before = await arm.snapshot();
  const result = await runLoadPlan(arm.load, { arms, ...run, budgetMs: WASM_LATENCY_BUDGET_MS }, WASM_LATENCY_BUDGET_MS + 20_000);
  const store = countsBetween(before, await arm.snapshot());
  // The host's timings of this run's waiting-room requests: the last ones it served (concurrency 1).
  const appRequests = (result.arms[1]?.sent ?? 0) + (result.arms[2]?.sent ?? 0);
  const hostStats = (await host.stats())?.slice(-appRequests);
  return wasmLatencyReport(result.arms, result.truncated, store.http, store.redis, hostStats);
}

export function latencyPass(): Pass {
  let node: { text: string; failed: boolean }[] | undefined;
  let wasmReport: { text: string; failed: boolean } | undefined;
  return {
    name: 'latency',
    async prepare(arm: Arm) {
      await arm.host(MAIN_ROOM);
      await arm.bare();
    },
    async run(arm: Arm) {
      if (arm.name === 'node') node = await runNodeLatency(arm);
      else wasmReport = await runWasmLatency(arm);
    },
    report(wasm) {
      const failures: string[] = [];
      if (node?.some((r) => r.failed) ?? true) failures.push('the latency run had errors or was cut short');
      if (wasm.kind === 'ran' && (wasmReport?.failed ?? true)) failures.push('the wasm latency run had errors, was cut short or made unexpected store requests');
      const texts = [...(node ?? []).map((r) => r.text), ...(wasm.kind === 'ran' && wasmReport !== undefined ? [wasmReport.text] : [])];
      return { text: texts.join('\n'), failures, billed: [] };
    },
  };
}
