/**
 * `npm run bench`: store round trips per request class against the budgets of DESIGN.md, and the
 * latency the waiting room adds over a bare pass-through proxy, in one bounded run; then the
 * per-POP cache, the two queueing methods and capacity mode, each on hosts of its own.
 *
 * Every pass runs on the Node host and then on bin/main.wasm on a Compute host, each over a
 * harness of its own started here (harness.ts: redis-server, the Upstash bridge, the demo origin,
 * and for the wasm a counting proxy and `fastly compute serve`). When no Compute host is found,
 * the wasm column is skipped (with the reason) and only the Node results decide the exit code.
 *
 * The passes, in the order they run (one file each):
 *   - pass-round-trips.ts  store round trips per request class, state cache off, against budgets
 *   - pass-latency.ts      added latency over a bare proxy, arms interleaved
 *   - pass-cache.ts        store commands per poll with the per-POP cache at its default
 *   - pass-capacity.ts     capacity mode: every request class of a slot's life
 *   - pass-methods.ts      store commands per waiting poll, FIFO with the cache vs random
 *   - pass-gates.ts        the bot defences: a proof of work asked and verified, a ticket refused
 *   - pass-admission.ts    the signed admission: an admitted request with it off, carried, signed
 *   - pass-blocks.ts       a join's billed cost per arrival in ticket blocks, next to today's (store-level)
 * `npm run bench -- --adaptive-live` runs instead the adaptive controller's real-time soak against live
 * origins (test/sim/adaptive-live.ts; 5 minutes a scenario, its report beside the simulation's).
 * `npm run bench -- --pass cache` (repeatable, or a comma list) runs only the passes named, on the
 * same harness; a pass that builds on another (latency on the round-trip pass's admitted visitors,
 * methods on the cache pass's host) then makes what it needs itself.
 *
 * Every host's request log is kept, and so is the counting proxy's: when a pass fails, the
 * `store_error` and `reason` of the requests that met a store error are printed with it, and the
 * report ends with every host's count of them (trouble.ts).
 *
 * The bundle (bin/bench.mjs) is also the workers' entry: `workerData.role` picks the part to run
 * (workers.ts).
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { isMainThread, workerData } from 'node:worker_threads';
import { billedReport, loadStoreScripts, startNodeArm, startWasmArm, type Arm, type Pass, type PassName, type Run, type WasmStatus } from './harness';
import { cachePass } from './pass-cache';
import { admissionPass } from './pass-admission';
import { blocksPass } from './pass-blocks';
import { capacityPass } from './pass-capacity';
import { gatesPass } from './pass-gates';
import { latencyPass } from './pass-latency';
import { methodsPass } from './pass-methods';
import { roundTripsPass } from './pass-round-trips';
import { printTrouble, troubleReport, type TroubleSource } from './trouble';
import { mainAdaptiveLive } from '../sim/adaptive-live';
import { Cleanups, log, messageOf, sleep } from './util';
import { runWorker, type WorkerInput } from './workers';

/** The whole run is abandoned (and everything stopped) past this. */
const WATCHDOG_MS = 420_000;

/** Every pass, in the order they run on each arm. */
const PASSES: readonly (() => Pass)[] = [roundTripsPass, latencyPass, cachePass, capacityPass, methodsPass, gatesPass, admissionPass, blocksPass];
/** The order of their sections in the report. */
const REPORT_ORDER: readonly PassName[] = ['round-trips', 'blocks', 'cache', 'methods', 'capacity', 'gates', 'admission', 'latency'];
const PASS_NAMES: readonly PassName[] = ['round-trips', 'latency', 'cache', 'capacity', 'methods', 'gates', 'admission', 'blocks'];

/** The passes `--pass NAME` (repeatable, or NAME,NAME) selects; all of them without it. */
function selectedPasses(argv: readonly string[]): Set<PassName> {
  const named: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--pass') named.push(...(argv[++i] ?? '').split(','));
    else if (arg.startsWith('--pass=')) named.push(...arg.slice('--pass='.length).split(','));
    else throw new Error(`unknown argument ${JSON.stringify(arg)}; usage: npm run bench [-- --pass ${PASS_NAMES.join('|')} …]`);
  }
  const unknown = named.filter((name) => !(PASS_NAMES as readonly string[]).includes(name));
  if (unknown.length > 0) throw new Error(`unknown pass ${unknown.map((n) => JSON.stringify(n)).join(', ')}; the passes: ${PASS_NAMES.join(', ')}`);
  return new Set((named.length === 0 ? PASS_NAMES : named) as PassName[]);
}

/** Runs the passes on one arm: each one's hosts first, then each pass, in order. A throw ends the arm. */
async function runArm(arm: Arm, passes: readonly Pass[], warmScripts: boolean): Promise<void> {
  // Run without the round-trip pass, the store's scripts are loaded first, as that pass leaves them.
  if (warmScripts) await loadStoreScripts(arm.bridge, `${arm.name} arm`);
  for (const pass of passes) await pass.prepare?.(arm);
  for (const pass of passes) await pass.run(arm);
}

async function main(): Promise<number> {
  // The adaptive controller's soak against live origins, in real time by default (minutes a run,
  // so not a pass of the bounded run below): `npm run bench -- --adaptive-live`, the options of
  // `npm run simulate -- --adaptive-live` (test/sim/adaptive-live.ts).
  if (process.argv.includes('--adaptive-live')) return mainAdaptiveLive(process.argv.slice(2));
  const startedAt = performance.now();
  const selected = selectedPasses(process.argv.slice(2));
  const passes = PASSES.map((make) => make()).filter((pass) => selected.has(pass.name));
  const warmScripts = !selected.has('round-trips');
  const run: Run = { bundle: fileURLToPath(import.meta.url), cleanups: new Cleanups(), trouble: [] };
  const watchdog = setTimeout(() => {
    log(`gave up after ${WATCHDOG_MS / 1000} s; stopping everything`);
    for (const line of run.trouble.flatMap((source) => source.report())) log(line);
    void run.cleanups.runAll().finally(() => process.exit(3));
  }, WATCHDOG_MS);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void run.cleanups.runAll().finally(() => process.exit(130)));
  }

  try {
    // --- The Node arm: a failure here ends the run.
    const node = await startNodeArm(run);
    await runArm(node.arm, passes, warmScripts);

    // --- The same passes through bin/main.wasm on a Compute host.
    const sources: TroubleSource[] = [];
    let wasm: WasmStatus;
    try {
      // The blocks pass is store-level and runs on the Node arm alone: by itself it needs no wasm.
      const started = passes.every((pass) => pass.name === 'blocks') ? ({ kind: 'skipped', reason: 'only store-level passes were asked for' } as const) : await startWasmArm(run, node.root, node.arm, sources);
      if (started.kind === 'skipped') {
        wasm = started;
        log(`wasm column skipped: ${started.reason}`);
      } else {
        await runArm(started.arm, passes, warmScripts);
        wasm = { kind: 'ran', hostPath: started.hostPath };
      }
    } catch (error) {
      log(`wasm arm FAILED: ${messageOf(error)}`);
      const lines = await printTrouble('wasm arm', sources);
      wasm = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
    }

    // --- Report.
    const passReports = REPORT_ORDER.flatMap((name) => passes.filter((pass) => pass.name === name)).map((pass) => pass.report(wasm));
    const reports = [...passReports, billedReport(passReports.flatMap((report) => report.billed))];
    const trouble = troubleReport(run.trouble);
    const cpus = os.cpus();
    const out: string[] = [
      `## Benchmark (\`npm run bench\`)${selected.size < PASS_NAMES.length ? `: only ${[...selected].join(', ')}` : ''}`,
      '',
      `Machine: ${cpus.length} CPUs (${cpus[0]?.model.trim() ?? 'unknown model'}), ${os.platform()} ${os.arch()}, Node ${process.version}, ` +
        `redis-server ${node.redisVersion}, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the end. ` +
        'Everything on 127.0.0.1: redis-server, the Upstash REST bridge over it, the demo origin, the Node host with the real ' +
        '`UpstashQueueStore` (`@upstash/redis` client, `createUpstashClientOptions`), a bare pass-through proxy' +
        (wasm.kind === 'ran' ? ', and bin/main.wasm on a Compute host with its own redis-server, bridge and origin.' : '.'),
      '',
      ...reports.map((report) => report.text),
      trouble.text,
      `Total run time ${((performance.now() - startedAt) / 1000).toFixed(1)} s.`,
    ];
    process.stdout.write(`${out.join('\n')}\n`);
    const failures = reports.flatMap((report) => report.failures);
    for (const failure of failures) log(`FAIL: ${failure}`);
    if (wasm.kind === 'error') log('FAIL: the wasm arm could not run to the end (see above)');
    // With store_failure=hold a request that met a store failure can still look right from outside
    // (a holding page and a renewed waiting cookie): any the hosts logged fails the run.
    if (trouble.details.length > 0) {
      log('FAIL: requests met store failures, or a host or the counting proxy reported errors:');
      for (const line of trouble.details) log(line);
    }
    return failures.length > 0 || wasm.kind === 'error' || trouble.details.length > 0 ? 1 : 0;
  } finally {
    clearTimeout(watchdog);
    await run.cleanups.runAll();
  }
}

if (isMainThread) {
  main().then(
    (code) => process.exit(code),
    async (error: unknown) => {
      process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      await sleep(10);
      process.exit(2);
    },
  );
} else {
  runWorker(workerData as WorkerInput);
}
