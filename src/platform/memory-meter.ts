/**
 * OriginMeter in process memory, for the Node host (one process is one POP): the origin's answers
 * per queue over a sliding window of the last 10 whole seconds, as Fastly's rate counter counts
 * them (`lookupCount(entry, 10)`), on the injected clock. Memory is bounded: a fixed ring per queue,
 * and queues are the configured ones.
 */
import type { Clock, OriginMeter, OriginOutcome } from '../core/ports';

/** Seconds counted: the shortest span Fastly's rate counters look back over. */
export const METER_SECONDS = 10;

export class MemoryOriginMeter implements OriginMeter {
  /** Per queue, per slot `second % METER_SECONDS`: the second it holds, then its requests, errors and slow answers. */
  readonly #rings = new Map<string, Float64Array>();

  constructor(private readonly clock: Clock) {}

  count(queue: string, outcome: OriginOutcome): void {
    const second = Math.floor(this.clock.now() / 1000);
    let s = this.#rings.get(queue);
    if (s === undefined) {
      s = new Float64Array(METER_SECONDS * 4).fill(-1);
      this.#rings.set(queue, s);
    }
    const at = (second % METER_SECONDS) * 4;
    if (s[at] !== second) {
      s[at] = second;
      s[at + 1] = s[at + 2] = s[at + 3] = 0;
    }
    s[at + 1]! += 1;
    if (outcome === 'error') s[at + 2]! += 1;
    if (outcome === 'slow') s[at + 3]! += 1;
  }

  recent(queue: string): { requests: number; errors: number; slow: number } {
    const second = Math.floor(this.clock.now() / 1000);
    const s = this.#rings.get(queue);
    let requests = 0;
    let errors = 0;
    let slow = 0;
    if (s === undefined) return { requests, errors, slow };
    for (let at = 0; at < s.length; at += 4) {
      if (s[at]! > second - METER_SECONDS && s[at]! <= second) {
        requests += s[at + 1]!;
        errors += s[at + 2]!;
        slow += s[at + 3]!;
      }
    }
    return { requests, errors, slow };
  }
}
