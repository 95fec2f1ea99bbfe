/**
 * The ticket-blocks pass (issue 34): what an arrival is billed when a reused sandbox takes its
 * numbers in blocks, next to today's join. Store-level: the arm's own bridge and Redis, the real
 * `UpstashQueueStore` and the real allocator (src/core/ticket-blocks.ts), arrivals fed to it at a
 * steady virtual rate as one instance would see them. The same store code serves both hosts, so it
 * runs on the Node arm only; the wasm column says so.
 *
 * Rows: today's join (size 1, one per arrival); the allocator at a few arrival rates with its
 * default settings (joins, numbers handed out locally, holes reported, billed per arrival); and one
 * block join of the largest size alone, with and without holes to report.
 */
import { Redis } from '@upstash/redis';
import { parseConfig } from '../../src/core/config';
import { admissionPolicy } from '../../src/core/context';
import type { AdmissionPolicy, JoinOptions, QueueStore } from '../../src/core/ports';
import { DEFAULT_BLOCK_SETTINGS, TicketBlocks } from '../../src/core/ticket-blocks';
import { createUpstashClientOptions, UpstashQueueStore } from '../../src/store/upstash-store';
import { source } from '../support/fixtures';
import { table } from '../support/markdown-table';
import { counted, type Arm, type BilledRow, type Counts, type Pass, type WasmStatus } from './harness';
import { log, messageOf } from './util';

const T0 = Date.UTC(2026, 10, 29, 12, 0, 0);
/** Arrivals per row. */
const ARRIVALS = 2_000;
/** One instance's arrival rates, per second (virtual: the clock is passed in). */
const RATES: readonly number[] = [10, 100, 1_000];

interface Row {
  readonly label: string;
  readonly arrivals: number;
  readonly joins: number;
  readonly handed: number;
  readonly holes: number;
  readonly counts: Counts;
}

type Outcome = { kind: 'ran'; rows: Row[] } | { kind: 'error'; message: string };

async function measure(arm: Arm): Promise<Row[]> {
  const store: QueueStore = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: arm.bridge.url, token: arm.bridge.token })), keyPrefix: 'bench-blocks' });
  // Automatic admission off: no period step in any call, so each row is the joins alone.
  const policy: AdmissionPolicy = admissionPolicy(parseConfig(source({ queue_name: 'bench-blocks', admit_per_period: '0' })));
  // Every script the rows use, loaded once (EVALSHA's NOSCRIPT fallback) on a queue of its own.
  await store.join('bench-blocks-warm', T0, policy, { block: { size: 2 } });
  const rows: Row[] = [];
  const todays = await counted(arm.snapshot, async () => {
    for (let i = 0; i < ARRIVALS; i++) await store.join('bench-blocks-1', T0 + i, policy);
  });
  rows.push({ label: "today's join (one per arrival)", arrivals: ARRIVALS, joins: ARRIVALS, handed: 0, holes: 0, counts: todays });
  for (const rate of RATES) {
    const queue = `bench-blocks-rate-${rate}`;
    const blocks = new TicketBlocks(DEFAULT_BLOCK_SETTINGS);
    let joins = 0;
    const counts = await counted(arm.snapshot, async () => {
      for (let i = 0; i < ARRIVALS; i++) {
        const now = T0 + (i * 1000) / rate;
        if (blocks.next(now) !== undefined) continue;
        const ask = blocks.joinOptions(now);
        const options: JoinOptions = ask.size > 1 || ask.holes !== undefined ? { block: { size: ask.size, holes: ask.holes } } : {};
        blocks.accept(await store.join(queue, Math.floor(now), policy, options), now);
        joins++;
      }
    });
    rows.push({ label: `blocks, one instance at ${rate.toLocaleString('en-US')} arrivals/s (default settings)`, arrivals: ARRIVALS, joins, handed: blocks.counts.handed, holes: blocks.counts.holes, counts });
  }
  // One largest block alone, then one that also reports holes (32 ranges, the most a join carries).
  const big = DEFAULT_BLOCK_SETTINGS.maxSize;
  const first = await store.join('bench-blocks-one', T0, policy, { block: { size: big } });
  const alone = await counted(arm.snapshot, () => store.join('bench-blocks-one', T0 + 1, policy, { block: { size: big } }));
  rows.push({ label: `one block join of ${big}, no holes`, arrivals: 1, joins: 1, handed: 0, holes: 0, counts: alone });
  const ranges = Array.from({ length: 32 }, (_, k) => ({ from: first.ticket + 1 + 3 * k, to: first.ticket + 2 + 3 * k }));
  const withHoles = await counted(arm.snapshot, () =>
    store.join('bench-blocks-one', T0 + 2, policy, { block: { size: big, holes: { epoch: first.epoch, generation: first.generation, ranges } } }),
  );
  rows.push({ label: `one block join of ${big}, reporting 32 hole ranges`, arrivals: 1, joins: 1, handed: 0, holes: 64, counts: withHoles });
  return rows;
}

export function blocksPass(): Pass {
  let node: Outcome | undefined;
  return {
    name: 'blocks',
    async run(arm) {
      if (arm.name !== 'node') return;
      try {
        node = { kind: 'ran', rows: await measure(arm) };
      } catch (error) {
        log(`blocks pass FAILED: ${messageOf(error)}`);
        node = { kind: 'error', message: messageOf(error) };
      }
    },
    report(_wasm: WasmStatus) {
      const lines = ['### A join in blocks (issue 34)', ''];
      if (node === undefined || node.kind === 'error') {
        lines.push(`FAILED: ${node?.kind === 'error' ? node.message : 'did not run'}`, '');
        return { text: lines.join('\n'), failures: ['the blocks pass failed'], billed: [] };
      }
      lines.push(
        table(
          ['what', 'arrivals', 'joins', 'handed out by the instance', 'holes reported', 'billed', 'billed per arrival', 'billed per join'],
          ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
          node.rows.map((r) => [r.label, String(r.arrivals), String(r.joins), String(r.handed), String(r.holes), String(r.counts.billed), (r.counts.billed / r.arrivals).toFixed(3), (r.counts.billed / r.joins).toFixed(2)]),
        ),
        '',
        `Store-level, on the Node arm's bridge and Redis: the real UpstashQueueStore and the real allocator (${JSON.stringify(DEFAULT_BLOCK_SETTINGS)}), ` +
          `arrivals fed to one instance at a steady virtual rate, automatic admission off. The same store code serves the Fastly build, so the wasm arm does not repeat it.`,
        '',
      );
      const failures: string[] = [];
      const today = node.rows[0]!;
      for (const r of node.rows.slice(1, 1 + RATES.length)) {
        if (r.counts.billed / r.arrivals > today.counts.billed / today.arrivals) failures.push(`blocks cost more per arrival than today's join (${r.label})`);
      }
      const billed: BilledRow[] = node.rows.map((r) => ({ pass: 'blocks', arm: 'node', label: r.label, requests: r.arrivals, counts: r.counts }));
      return { text: lines.join('\n'), failures, billed };
    },
  };
}
