/**
 * What this serving instance counted for the sale's record that happens without a store call: new
 * tickets refused (by reason) and store calls that failed. Kept in the instance's memory (the Node
 * process; on Fastly the instance, which lives across requests while its sandbox is reused) and
 * carried into the store by the instance's next join that takes a ticket (AdmissionPolicy.tally,
 * an argument of a write the join makes anyway), so the record costs no command.
 *
 * What can be lost: an instance that ends loses what it counted since its last join that took a
 * ticket (a tally taken by a join in flight comes back if the join fails or takes no ticket). On
 * Fastly without sandbox reuse each instance serves one request, and a request that is refused or
 * whose join fails makes no join afterwards: there the record holds no refusals and no store
 * errors (the per-POP "last minute" figures still count them).
 */
import { REFUSAL_REASONS, type EdgeTally, type RefusalReason } from './ports';

type Counts = { refused: Record<RefusalReason, number>; storeErrors: number };

/** Queues an instance keeps a tally for: a deployment's queues are few; a bound all the same. */
const MAX_QUEUES = 256;

const tallies = new Map<string, Counts>();

function countsOf(queue: string): Counts | undefined {
  let counts = tallies.get(queue);
  if (counts === undefined) {
    if (tallies.size >= MAX_QUEUES) return undefined;
    counts = { refused: Object.fromEntries(REFUSAL_REASONS.map((r) => [r, 0])) as Record<RefusalReason, number>, storeErrors: 0 };
    tallies.set(queue, counts);
  }
  return counts;
}

/** One new ticket refused for `reason`. */
export function tallyRefusal(queue: string, reason: RefusalReason): void {
  const counts = countsOf(queue);
  if (counts !== undefined) counts.refused[reason] += 1;
}

/** One store call that failed or timed out. */
export function tallyStoreError(queue: string): void {
  const counts = countsOf(queue);
  if (counts !== undefined) counts.storeErrors += 1;
}

/** Takes what the instance counted for `queue` (undefined: nothing), for a join to carry. */
export function takeTally(queue: string): EdgeTally | undefined {
  const counts = tallies.get(queue);
  if (counts === undefined) return undefined;
  tallies.delete(queue);
  const any = counts.storeErrors > 0 || REFUSAL_REASONS.some((r) => counts.refused[r] > 0);
  return any ? counts : undefined;
}

/** Gives back a tally a join took but did not carry into the store (it failed, or took no ticket). */
export function returnTally(queue: string, tally: EdgeTally | undefined): void {
  if (tally === undefined) return;
  const counts = countsOf(queue);
  if (counts === undefined) return;
  for (const r of REFUSAL_REASONS) counts.refused[r] += tally.refused[r];
  counts.storeErrors += tally.storeErrors;
}
