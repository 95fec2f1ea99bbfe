/**
 * The record's points older than the last hour, kept where the console is served, for its chart of
 * the whole sale. Such a point never changes once its minute is over (the minute's first writing run
 * wrote it), so a console that polls every few seconds reads each minute of the record once: the
 * first poll of a sale reads what is there (one call), each later one at most the minutes that
 * passed the hour's edge since, and none at all within the same minute. Read every poll, seven days
 * of points were up to eight calls and some 1.7 MB from the store every two seconds per console.
 *
 * Kept as numbers in one Float64Array per queue (six a point): one object for the engine's garbage
 * collector however long the sale, which a reused Fastly sandbox's every request pays for by the
 * live object (docs/benchmarks.md). Bounded: seven days of minutes a queue, MAX_QUEUES queues a
 * store. Keyed by the store object, the queue, the reset epoch and the sale's start: a reset or a
 * new sale starts afresh.
 */
import type { HistoryPoint, QueueStore, RecordPoint } from './ports';
import { REPORT_READ_MINUTES, REPORT_SPAN_MS } from './sale-report';

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const FIELDS = 6;
const MAX_POINTS = REPORT_SPAN_MS / MINUTE_MS;
/** Queues kept per store; the console of a further one reads afresh (and takes the oldest's place). */
export const MAX_QUEUES = 8;

interface Kept {
  readonly key: string;
  readonly data: Float64Array;
  length: number;
  /** Every minute up to this one (its start, ms) has been read. */
  throughMs: number;
}

const kept = new WeakMap<object, Map<string, Kept>>();

/** One read of the record: `minutes` minutes from `fromMs`, or undefined when the store did not answer. */
export type RecordRead = (fromMs: number, minutes: number) => Promise<readonly RecordPoint[] | undefined>;

/**
 * The points of `queue`'s record from the sale's start up to an hour ago, of its current reset
 * `epoch`, within the last seven days, oldest first. A read that fails ends the reading (the chart
 * then shades what it lacks) and is tried again on the next poll.
 */
export async function olderPoints(store: QueueStore, queue: string, nowMs: number, saleStartMs: number, epoch: number, read: RecordRead): Promise<HistoryPoint[]> {
  const hourAgo = nowMs - HOUR_MS;
  if (saleStartMs <= 0 || saleStartMs >= hourAgo) return [];
  let queues = kept.get(store);
  if (queues === undefined) {
    queues = new Map();
    kept.set(store, queues);
  }
  const key = `${epoch}:${Math.floor(saleStartMs / MINUTE_MS)}`;
  let k = queues.get(queue);
  if (k === undefined || k.key !== key) {
    queues.delete(queue);
    while (queues.size >= MAX_QUEUES) queues.delete(queues.keys().next().value as string);
    k = { key, data: new Float64Array(MAX_POINTS * FIELDS), length: 0, throughMs: Math.floor(saleStartMs / MINUTE_MS) * MINUTE_MS - MINUTE_MS };
    queues.set(queue, k);
  }
  const oldest = (Math.floor((nowMs - REPORT_SPAN_MS) / MINUTE_MS) + 1) * MINUTE_MS;
  let from = Math.max(k.throughMs + MINUTE_MS, oldest);
  while (from <= hourAgo) {
    const minutes = Math.min(REPORT_READ_MINUTES, Math.floor((hourAgo - from) / MINUTE_MS) + 1);
    const points = await read(from, minutes);
    if (points === undefined) break;
    // Another poll of this console may have read the same minutes meanwhile: kept once.
    if (k.throughMs < from) {
      for (const p of points) if (p.atMs >= from && p.epoch === epoch) append(k, p);
      k.throughMs = from + (minutes - 1) * MINUTE_MS;
    }
    from += minutes * MINUTE_MS;
  }
  const out: HistoryPoint[] = [];
  for (let i = 0; i < k.length; i += 1) {
    const o = i * FIELDS;
    const atMs = k.data[o]!;
    if (atMs < oldest || atMs > hourAgo) continue;
    out.push({ atMs, tail: k.data[o + 1]!, cursor: k.data[o + 2]!, waiting: k.data[o + 3]!, active: k.data[o + 4]!, admittedLastMinute: k.data[o + 5]! });
  }
  return out;
}

/** Adds a point, in time order; a full array drops its oldest seventh first. */
function append(k: Kept, p: HistoryPoint): void {
  if (k.length > 0 && k.data[(k.length - 1) * FIELDS]! >= p.atMs) return;
  if (k.length === MAX_POINTS) {
    const drop = Math.ceil(MAX_POINTS / 7);
    k.data.copyWithin(0, drop * FIELDS, k.length * FIELDS);
    k.length -= drop;
  }
  k.data.set([p.atMs, p.tail, p.cursor, p.waiting, p.active, p.admittedLastMinute], k.length * FIELDS);
  k.length += 1;
}
