/**
 * The round-trip pass: store round trips per request class against the budgets of DESIGN.md, on
 * both arms, with the per-POP state cache off (MAIN_ROOM) so each class shows its full cost.
 *
 * Every class runs `COUNT_PER_CLASS` times between two snapshots; the first call of each script on
 * the fresh Redis (EVALSHA → NOSCRIPT → EVAL) is measured apart first, so the budgeted rows have a
 * warm script cache. The admitted visitors' cookies are left on the arm for the latency pass.
 */
import { table } from '../support/markdown-table';
import {
  ARM_CONCURRENCY,
  counted,
  MAIN_ROOM,
  visitorClasses,
  type Arm,
  type ArmName,
  type BilledRow,
  type Counts,
  type Pass,
  type Snapshot,
  type VisitorClasses,
} from './harness';
import { printTrouble } from './trouble';
import { describeSettings, log, runConcurrent } from './util';

/** Requests per class (fewer on the wasm: every request instantiates it). */
const COUNT_PER_CLASS: Readonly<Record<ArmName, number>> = { node: 200, wasm: 50 };

/**
 * Round trips allowed per request, and `billedBudget`, billed commands per request (what Upstash
 * bills: the script and every command inside it), on average over the class's requests: a join 3
 * (EVALSHA, HINCRBY of the tail, HMGET of ctl); a cache-miss poll 4 (3, and the minute's history
 * point, one HSET, once a minute); an admit 4 (3 + the ZADD of its reservations; the idempotency key rides on
 * ctl) and then its audit entry, a second call (the origin's admits of a minute are one entry: 5, the
 * sum kept beside it); a called visitor's poll and claim 4 + 4; an admitted visitor nothing.
 */
const CLASS_BUDGETS: readonly { label: string; budget: number; billedBudget?: number }[] = [
  { label: 'new visitor (no cookie)', budget: 1, billedBudget: 3 },
  { label: 'waiting visitor poll (holding cookie)', budget: 1, billedBudget: 4 },
  { label: 'admin / origin admit (POST api/admit): the admit 1 + its audit entry 1', budget: 2, billedBudget: 9 },
  { label: 'waiting visitor poll, called: poll 1 + claim 1 (the claim is the admission; 0 + 1 on a cache hit)', budget: 2, billedBudget: 8 },
  { label: 'admitted visitor (access cookie)', budget: 0, billedBudget: 0 },
];

interface ClassRow extends Counts {
  readonly label: string;
  readonly requests: number;
  readonly budget: number | undefined;
  readonly billedBudget?: number | undefined;
}

interface CountResult {
  /** First call of each script on a fresh Redis (info only). */
  readonly cold: ClassRow[];
  /** The budgeted classes, always in this order. */
  readonly rows: ClassRow[];
  /** Access cookies of the visitors admitted during the count. */
  readonly access: string[];
}

/** Runs every class `n` times against a waiting room with a fresh Redis, counting both ways. */
async function countRoundTrips(classes: VisitorClasses, n: number, concurrency: number, snapshot: Snapshot): Promise<CountResult> {
  const measure = async (label: string, budget: number | undefined, count: number, task: (i: number) => Promise<void>): Promise<ClassRow> => {
    const counts = await counted(snapshot, () => runConcurrent(count, concurrency, task));
    return { label, requests: count, ...counts, budget, billedBudget: CLASS_BUDGETS.find((c) => c.label === label)?.billedBudget };
  };
  const label = (i: number): string => CLASS_BUDGETS[i]?.label ?? '?';
  const budget = (i: number): number | undefined => CLASS_BUDGETS[i]?.budget;
  // Cold script cache: a fresh Redis knows no script, so the first call of each one is EVALSHA,
  // NOSCRIPT, then EVAL. Reported apart; it happens once per script after a flush.
  let firstCookie = '';
  const cold: ClassRow[] = [
    await measure('new visitor (join)', undefined, 1, async () => void (firstCookie = await classes.newVisitor())),
    await measure('waiting poll (poll)', undefined, 1, () => classes.waitingPoll(firstCookie)),
    await measure('admin admit (admit)', undefined, 1, () => classes.adminAdmit()),
    // The admit called ticket 1: its holder claims (poll + claim), which loads the claim script.
    await measure('called poll (poll + claim)', undefined, 1, async () => void (await classes.upgradePoll(firstCookie))),
  ];
  const waiting: string[] = new Array<string>(n).fill('');
  const access: string[] = new Array<string>(n).fill('');
  const rows: ClassRow[] = [];
  rows.push(await measure(label(0), budget(0), n, async (i) => void (waiting[i] = await classes.newVisitor())));
  rows.push(await measure(label(1), budget(1), n, (i) => classes.waitingPoll(waiting[i]!)));
  // Let exactly these n visitors in (the cold phase admitted ticket 1), one admit call each.
  rows.push(await measure(label(2), budget(2), n, () => classes.adminAdmit()));
  rows.push(await measure(label(3), budget(3), n, async (i) => void (access[i] = await classes.upgradePoll(waiting[i]!))));
  rows.push(await measure(label(4), budget(4), n, (i) => classes.admitted(access[i]!)));
  return { cold, rows, access };
}

function withinBudget(row: ClassRow): boolean {
  return row.budget === undefined || (row.http <= row.budget * row.requests && row.redis <= row.budget * row.requests);
}

export function roundTripsPass(): Pass {
  const counts: Partial<Record<ArmName, CountResult>> = {};
  return {
    name: 'round-trips',
    async prepare(arm: Arm) {
      await arm.host(MAIN_ROOM);
    },
    async run(arm: Arm) {
      const host = await arm.host(MAIN_ROOM);
      const n = COUNT_PER_CLASS[arm.name];
      log(`${arm.name}: counting store round trips per request class (${n} per class)`);
      try {
        const count = await countRoundTrips(visitorClasses(arm.name, host, arm.apiToken), n, ARM_CONCURRENCY[arm.name], arm.snapshot);
        counts[arm.name] = count;
        arm.admitted = count.access;
      } catch (error) {
        if (arm.name === 'node') await printTrouble('node round-trip count', arm.troubleSources(MAIN_ROOM));
        throw error;
      }
    },
    report(wasm) {
      const nodeCount = counts.node;
      if (nodeCount === undefined) throw new Error('round-trip pass: the node arm did not run');
      const wasmCount = counts.wasm;
      const perRequest = (row: ClassRow): string => `${(row.http / row.requests).toFixed(2)} · ${(row.redis / row.requests).toFixed(2)}`;
      let overBudget = false;
      const rows = nodeCount.rows.map((nodeRow, i) => {
        const wasmRow = wasmCount?.rows[i];
        const nodeOk = withinBudget(nodeRow);
        const wasmOk = wasm.kind === 'skipped' || (wasmRow !== undefined && withinBudget(wasmRow));
        overBudget ||= !nodeOk || (wasmRow !== undefined && !withinBudget(wasmRow));
        const wasmCell = wasmRow !== undefined ? perRequest(wasmRow) : wasm.kind === 'skipped' ? 'skipped' : 'error';
        const verdict = nodeOk && wasmOk ? (wasm.kind === 'skipped' ? 'PASS (node only)' : 'PASS') : 'FAIL';
        return [nodeRow.label, `≤ ${nodeRow.budget}`, perRequest(nodeRow), wasmCell, verdict];
      });
      const agreement = (host: string, count: CountResult): string => {
        const disagree = count.rows.filter((row) => row.http !== row.redis);
        return disagree.length === 0
          ? `${host}: the two counts agree on every row.`
          : `${host}: the counts DISAGREE on ${disagree.map((r) => `${r.label} (${r.http} HTTP vs ${r.redis} Redis)`).join('; ')}.`;
      };
      const coldLine = (host: string, count: CountResult): string =>
        `${host}: ${count.cold.map((row) => `${row.label} ${row.http} HTTP / ${row.redis} Redis`).join(', ')}.`;
      const wasmNote =
        wasm.kind === 'ran' && wasmCount !== undefined
          ? [
              `wasm: bin/main.wasm built from the same source, served by \`fastly compute serve --skip-build --viceroy-path ${wasm.hostPath}\` with the ` +
                'same settings (devconfig.json and the same overrides) and its own redis-server, bridge and demo origin. Its `upstash` backend ' +
                'is a counting HTTP proxy in front of that bridge (every request that reaches the bridge, retries included); Redis is that ' +
                `harness's own. ${agreement('node', nodeCount)} ${agreement('wasm', wasmCount)}`,
              `Cold script cache (first call of each script on a fresh Redis: EVALSHA → NOSCRIPT → EVAL, once per script): ` +
                `${coldLine('node', nodeCount)} ${coldLine('wasm', wasmCount)}`,
            ]
          : [
              wasm.kind === 'skipped'
                ? `wasm column SKIPPED: ${wasm.reason}. Only the Node budgets decide the result.`
                : `wasm column FAILED: ${wasm.kind === 'error' ? wasm.message : 'the pass did not run on it'}`,
              agreement('node', nodeCount),
              `Cold script cache (first call of each script on a fresh Redis: EVALSHA → NOSCRIPT → EVAL, once per script): ${coldLine('node', nodeCount)}`,
            ];
      const text = [
        `### Store round trips per request (node: ${COUNT_PER_CLASS.node} requests per class, concurrency ${ARM_CONCURRENCY.node}; ` +
          `wasm: ${COUNT_PER_CLASS.wasm} per class, concurrency ${ARM_CONCURRENCY.wasm}; warm script cache; ` +
          `settings over devconfig.json on both: ${describeSettings(MAIN_ROOM.overrides)})`,
        '',
        table(
          ['request class', 'budget', 'node round trips / request (HTTP · Redis)', 'wasm round trips / request (HTTP · Redis)', 'result'],
          ['l', 'r', 'r', 'r', 'l'],
          rows,
        ),
        '',
        'Each cell: HTTP requests that reached the Upstash bridge · script commands Redis executed (`INFO commandstats`, calls + ' +
          'rejected_calls of EVALSHA/EVAL), per request, counted independently. node: a counting wrapper around `fetch` in the host process.',
        ...wasmNote,
        '',
      ].join('\n');
      const billed = (['node', 'wasm'] as const).flatMap((arm): BilledRow[] => {
        const count = counts[arm];
        if (count === undefined) return [];
        return [
          ...count.cold.map((row) => ({ pass: 'round-trips' as const, arm, label: `cold script cache: ${row.label}`, requests: row.requests, counts: row })),
          ...count.rows.map((row) => ({ pass: 'round-trips' as const, arm, label: row.label, requests: row.requests, counts: row, billedBudget: row.billedBudget })),
        ];
      });
      return { text, failures: overBudget ? ['a store round-trip budget is exceeded'] : [], billed };
    },
  };
}
