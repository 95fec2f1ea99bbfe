/**
 * This serving instance's ticket blocks (`ticket_blocks`, issue 34): one TicketBlocks per queue,
 * kept in the instance's memory (the Node process; on Fastly the instance, which lives across
 * requests while its sandbox is reused), so the numbers one join took reach the arrivals that
 * follow at this instance. Kept by queue name rather than with the service, which a Fastly instance
 * builds again when its settings change (and on every request while it runs on the last valid
 * ones): the blocks and the rate estimate outlive that.
 *
 * Without reuse each Fastly instance serves one request: its allocator has seen one arrival, so
 * every join takes one number, as with blocks off (correct, and no cheaper).
 */
import type { Config } from './config';
import type { QueueState } from './ports';
import { blockSettings, TicketBlocks } from './ticket-blocks';

/** Queues an instance keeps blocks for: a deployment's queues are few (at most 50); a bound all the same. */
const MAX_QUEUES = 256;

interface Entry {
  /** The largest block and the block age it was made for: settings that change either start afresh. */
  readonly maxSize: number;
  readonly maxAgeMs: number;
  readonly blocks: TicketBlocks;
  /** The block join this instance has under way, which arrivals that find no number wait for. */
  joining?: BlockJoin;
}

/**
 * A block join under way at this instance (the Node host runs requests at once). Arrivals that
 * find no live block wait for its answer instead of joining too: one join, one block, no holes
 * from blocks that raced. On Fastly an instance runs one request at a time, so whoever registered
 * the join has settled it before the next request starts, and nothing waits there.
 */
export interface BlockJoin {
  /**
   * Resolves once the join's block, if any, is in the allocator: with the state the store answered
   * (wait over: try the blocks again), or undefined (the join failed, took one number, or never
   * ran: join yourself).
   */
  readonly answered: Promise<QueueState | undefined>;
  /** Settles the join for those waiting; the first call counts, later ones do nothing. */
  settle(answer: QueueState | undefined): void;
}

const entries = new Map<string, Entry>();

/** The queue's blocks at this instance; undefined with blocks off (or the random method, which the settings refuse). */
export function blocksOf(config: Pick<Config, 'queueName' | 'ticketBlocks' | 'ticketBlockMs' | 'queueMethod'>): TicketBlocks | undefined {
  if (config.ticketBlocks < 2 || config.queueMethod !== 'fifo') return undefined;
  const entry = entries.get(config.queueName);
  if (entry !== undefined && entry.maxSize === config.ticketBlocks && entry.maxAgeMs === config.ticketBlockMs) return entry.blocks;
  // A queue whose largest block or block age changed drops its live blocks: their numbers are never
  // handed out nor reported, and lapse as abandoned tickets do (a settings change in a sale is rare).
  if (entry === undefined && entries.size >= MAX_QUEUES) return undefined;
  const blocks = new TicketBlocks(blockSettings(config.ticketBlocks, config.ticketBlockMs));
  entries.set(config.queueName, { maxSize: config.ticketBlocks, maxAgeMs: config.ticketBlockMs, blocks });
  return blocks;
}

/**
 * A state the store has just answered (a poll's load, a join, a claim): one of another epoch or
 * generation voids the queue's live blocks here. Not a state read from the POP's cache, which may
 * be older than the blocks (another instance's answer, from before a reset).
 */
export function observeState(config: Pick<Config, 'queueName' | 'ticketBlocks' | 'queueMethod'>, state: Pick<QueueState, 'epoch' | 'generation'>): void {
  if (config.ticketBlocks < 2) return;
  entries.get(config.queueName)?.blocks.observe(state.epoch, state.generation);
}

/**
 * The block join under way for the queue at this instance, to wait for; undefined when there is
 * none (the caller joins, and leads the join with leadJoin()).
 */
export function joinUnderWay(config: Pick<Config, 'queueName'>): BlockJoin | undefined {
  return entries.get(config.queueName)?.joining;
}

/**
 * Registers the caller's coming join as the one under way for the queue, from the moment it found
 * no number (before any await, so arrivals right behind it wait). The caller must settle it in any
 * case (a finally): an unsettled join would hold its waiters until their request ends. Undefined
 * when another is already under way: the caller joins alongside it, as before coalescing.
 */
export function leadJoin(config: Pick<Config, 'queueName'>): BlockJoin | undefined {
  const entry = entries.get(config.queueName);
  if (entry === undefined || entry.joining !== undefined) return undefined;
  let resolve: (answer: QueueState | undefined) => void = () => undefined;
  const answered = new Promise<QueueState | undefined>((r) => (resolve = r));
  const join: BlockJoin = {
    answered,
    settle(answer) {
      if (entry.joining === join) entry.joining = undefined;
      resolve(answer);
    },
  };
  entry.joining = join;
  return join;
}

/** What this instance's blocks did for `queue` (numbers handed out here, holes reported, blocks taken); undefined: none kept. */
export function blockCounts(queue: string): { readonly handed: number; readonly holes: number; readonly blocks: number } | undefined {
  const entry = entries.get(queue);
  return entry === undefined ? undefined : { ...entry.blocks.counts };
}

/** Forgets every queue's blocks: for tests that run several stores in one process. */
export function forgetTicketBlocks(): void {
  entries.clear();
}
