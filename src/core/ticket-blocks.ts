/**
 * Ticket blocks (issue 34): one instance's supply of ticket numbers for one queue. When arrivals
 * come fast, one join takes a block of consecutive numbers (JoinOptions.block) and the instance
 * hands the rest to its next arrivals itself, so an arrival costs a fraction of a join. Pure: no
 * I/O, the time passed in, so the edge, the Node host and the simulator run the same code.
 *
 * Order: a block's numbers are handed out only while it is younger than `maxAgeMs`, counted from
 * when its join was sent. Blocks are numbered in the order the store ran their joins. A joiner's own
 * number is fixed when the store runs its join, up to a round trip after it arrived, and a block
 * the store ran just before can still be handed out for maxAgeMs after it was sent: so a visitor
 * who arrived more than maxAgeMs plus its join's round trip before another holds the lower number
 * (two visitors both handed from blocks: more than maxAgeMs). Within the instance the lowest
 * number left is handed first.
 *
 * Holes: the numbers of a block that aged out (or came back replayed) are nobody's. The next join
 * reports them (BlockHoles) and the store passes over them when it calls tickets. Holes that are
 * never reported (the instance ended) are called like abandoned tickets and lapse.
 */

import { MAX_BLOCK_HOLE_RANGES, MAX_TICKET_BLOCK, type BlockHoles, type JoinResult, type TicketRange } from './ports';

export interface BlockSettings {
  /** Largest block asked for, 1 .. MAX_TICKET_BLOCK; 1 turns blocks off (every arrival joins). @default 100 */
  readonly maxSize: number;
  /** A block's numbers are handed out only while it is younger than this, ms (1 .. 1000). @default 500 */
  readonly maxAgeMs: number;
  /** The size asked for fills in about this long at the recent arrival rate, ms (1 .. maxAgeMs). @default 250 */
  readonly fillTargetMs: number;
}

export const DEFAULT_BLOCK_SETTINGS: BlockSettings = { maxSize: 100, maxAgeMs: 500, fillTargetMs: 250 };

/** The longest a block may be handed from: the order bound issue 34 promises is one second. */
export const MAX_BLOCK_AGE_MS = 1_000;

/**
 * The settings of a queue's allocator from `ticket_blocks` (the largest block) and
 * `ticket_block_ms` (a block's age): the size asked for fills in half the age, as in the defaults,
 * so a block sized at the recent rate is used up well before it ages out.
 */
export function blockSettings(maxSize: number, maxAgeMs: number): BlockSettings {
  return { maxSize, maxAgeMs, fillTargetMs: Math.max(1, Math.floor(maxAgeMs / 2)) };
}

/**
 * The arrival rate is a count that decays by e every this many ms: about the last second's
 * arrivals, so a burst is seen within a few hundred ms and a lull forgets it as fast. A gap this
 * long between two arrivals starts the count afresh.
 */
const RATE_DECAY_MS = 1_000;

export interface HandedTicket {
  readonly ticket: number;
  readonly epoch: number;
  readonly generation: number;
}

export class BlockSettingsError extends Error {
  readonly code = 'ERR_BLOCK_SETTINGS';
}

interface Block {
  /** The next number to hand out, then up to `to`. */
  next: number;
  readonly to: number;
  readonly sentAtMs: number;
}

interface State {
  readonly epoch: number;
  readonly generation: number;
}

/** One queue's blocks in one instance (the caller keeps one per queue, e.g. in a bounded Map). */
export class TicketBlocks {
  readonly counts = { handed: 0, holes: 0, blocks: 0 };
  private readonly settings: BlockSettings;
  /** Live blocks, lowest numbers first. */
  private blocks: Block[] = [];
  /** The state the numbers belong to: the latest the caller saw. */
  private state: State | undefined;
  /** Holes of `state` not yet reported, ascending, disjoint, not adjacent. */
  private holes: TicketRange[] = [];
  private rateWeight = 0;
  private rateAtMs = 0;
  /** When the count started (the first arrival after a gap of RATE_DECAY_MS), or undefined before any. */
  private watchedSinceMs: number | undefined;
  private lastArrivalMs = 0;
  /** The last block taken: how many numbers and when its join was sent, for the ramp. */
  private last: { readonly size: number; readonly sentAtMs: number } | undefined;

  constructor(settings: BlockSettings = DEFAULT_BLOCK_SETTINGS) {
    checkSettings(settings);
    this.settings = settings;
  }

  /**
   * An arrival at nowMs: counted for the rate; the next number of the lowest live block, or
   * undefined (the caller joins with joinOptions()). `again`: the same arrival asking once more
   * (it waited for another's join), not counted twice.
   */
  next(nowMs: number, again = false): HandedTicket | undefined {
    if (!again) {
      if (this.watchedSinceMs === undefined || nowMs - this.lastArrivalMs >= RATE_DECAY_MS) {
        this.watchedSinceMs = nowMs;
        this.rateWeight = 0;
      }
      this.lastArrivalMs = nowMs;
    }
    this.decayTo(nowMs);
    if (!again) this.rateWeight += 1;
    this.expire(nowMs);
    const block = this.blocks[0];
    if (block === undefined || this.state === undefined) return undefined;
    const ticket = block.next;
    block.next += 1;
    if (block.next > block.to) this.blocks.shift();
    this.counts.handed += 1;
    return { ticket, epoch: this.state.epoch, generation: this.state.generation };
  }

  /**
   * What the caller's join asks for: the size (1 while arrivals are slow: an ordinary join) and the
   * holes to report, taken out here: give them back with failed() if the join fails.
   *
   * The size is what the arrival rate fills in fillTargetMs, and the rate is the decayed count over
   * the span it has actually watched: a sandbox that has seen 20 arrivals in its first 100 ms of a
   * sale is at 200 a second, not at the 20 a second a one-second count would say. The span is taken
   * as at least maxAgeMs, so a few close arrivals of a slow sandbox still ask for 1 (it takes about
   * four in half a second to ask for 2). And when the last block was used up in less than half of
   * fillTargetMs, the next asks for at least what the rate that used it up fills in fillTargetMs,
   * up to four times its size: so the ramp never asks past what was measured, and at a sale's
   * opening a sandbox of 1,000 arrivals a second asks for full blocks at its seventh join (1, 1, 1,
   * 2, 8, 32, then full), where the count alone took twenty-six.
   */
  joinOptions(nowMs: number): { size: number; holes?: BlockHoles } {
    this.decayTo(nowMs);
    this.expire(nowMs);
    const watchedMs = Math.max(this.settings.maxAgeMs, nowMs - (this.watchedSinceMs ?? nowMs));
    const perMs = this.rateWeight / (RATE_DECAY_MS * -Math.expm1(-watchedMs / RATE_DECAY_MS));
    let size = Math.floor(perMs * this.settings.fillTargetMs);
    const last = this.last;
    const usedInMs = last === undefined ? Infinity : nowMs - last.sentAtMs;
    if (last !== undefined && this.blocks.length === 0 && usedInMs < this.settings.fillTargetMs / 2) {
      size = Math.max(size, Math.floor(last.size * Math.min(4, this.settings.fillTargetMs / Math.max(usedInMs, 1))));
    }
    size = Math.max(1, Math.min(this.settings.maxSize, size));
    if (this.holes.length === 0 || this.state === undefined) return { size };
    const holes: BlockHoles = { epoch: this.state.epoch, generation: this.state.generation, ranges: this.holes };
    this.holes = [];
    this.counts.holes += countNumbers(holes.ranges);
    return { size, holes };
  }

  /**
   * The join's answer; sentAtMs = when the join was sent (the block's age counts from then). The
   * joiner holds result.ticket; the rest of result.block is handed out by next(). A replayed block
   * (a retry of a join whose answer was lost) may be as old as the key's memory: its rest are holes.
   */
  accept(result: JoinResult, sentAtMs: number): void {
    if (this.state !== undefined && !sameState(this.state, result)) {
      // An answer from before a reset the caller has already seen: its numbers are void.
      if (result.generation === this.state.generation && result.epoch < this.state.epoch) return;
    }
    this.observe(result.epoch, result.generation);
    const block = result.block;
    if (block === undefined) {
      this.last = undefined;
      return;
    }
    this.counts.blocks += 1;
    if (!result.replayed) this.last = { size: block.to - block.from + 1, sentAtMs };
    if (block.to <= result.ticket) return;
    const rest = { next: result.ticket + 1, to: block.to, sentAtMs };
    if (result.replayed) {
      this.addHole({ from: rest.next, to: rest.to });
      return;
    }
    let at = this.blocks.length;
    while (at > 0 && this.blocks[at - 1]!.next > rest.next) at -= 1;
    this.blocks.splice(at, 0, rest);
  }

  /** The join failed or got no answer: the holes it carried are carried by the next. */
  failed(holes: BlockHoles | undefined): void {
    if (holes === undefined || this.state === undefined || !sameState(this.state, holes)) return;
    this.counts.holes -= countNumbers(holes.ranges);
    for (const range of holes.ranges) this.addHole(range);
  }

  /**
   * The caller saw the queue's state in another epoch or generation: live blocks are void, not
   * holes (their numbers belong to a state that no longer exists), and so are unreported holes.
   */
  observe(epoch: number, generation: number): void {
    if (this.state !== undefined && sameState(this.state, { epoch, generation })) return;
    this.state = { epoch, generation };
    this.blocks = [];
    this.holes = [];
    this.last = undefined;
  }

  private decayTo(nowMs: number): void {
    const elapsed = nowMs - this.rateAtMs;
    if (elapsed > 0) {
      this.rateWeight *= Math.exp(-elapsed / RATE_DECAY_MS);
      this.rateAtMs = nowMs;
    }
  }

  /** Blocks that reached maxAgeMs leave; what they had left becomes holes. */
  private expire(nowMs: number): void {
    const live: Block[] = [];
    for (const block of this.blocks) {
      if (nowMs - block.sentAtMs < this.settings.maxAgeMs) live.push(block);
      else this.addHole({ from: block.next, to: block.to });
    }
    if (live.length !== this.blocks.length) this.blocks = live;
  }

  /**
   * Merges a range into the unreported holes. Past MAX_BLOCK_HOLE_RANGES the lowest go unreported:
   * they are the nearest to being called, and an unreported hole only costs its call's lapse.
   */
  private addHole(range: TicketRange): void {
    const merged: TicketRange[] = [];
    let from = range.from;
    let to = range.to;
    let placed = false;
    for (const r of this.holes) {
      if (r.to + 1 < from) merged.push(r);
      else if (to + 1 < r.from) {
        if (!placed) merged.push({ from, to });
        placed = true;
        merged.push(r);
      } else {
        from = Math.min(from, r.from);
        to = Math.max(to, r.to);
      }
    }
    if (!placed) merged.push({ from, to });
    this.holes = merged.length > MAX_BLOCK_HOLE_RANGES ? merged.slice(merged.length - MAX_BLOCK_HOLE_RANGES) : merged;
  }
}

function sameState(a: State, b: State): boolean {
  return a.epoch === b.epoch && a.generation === b.generation;
}

function countNumbers(ranges: readonly TicketRange[]): number {
  let n = 0;
  for (const r of ranges) n += r.to - r.from + 1;
  return n;
}

function checkSettings(s: BlockSettings): void {
  const bad: string[] = [];
  if (!Number.isSafeInteger(s.maxSize) || s.maxSize < 1 || s.maxSize > MAX_TICKET_BLOCK) bad.push(`maxSize must be an integer from 1 to ${MAX_TICKET_BLOCK}`);
  if (!Number.isSafeInteger(s.maxAgeMs) || s.maxAgeMs < 1 || s.maxAgeMs > MAX_BLOCK_AGE_MS) bad.push(`maxAgeMs must be an integer from 1 to ${MAX_BLOCK_AGE_MS}`);
  if (!Number.isSafeInteger(s.fillTargetMs) || s.fillTargetMs < 1 || s.fillTargetMs > s.maxAgeMs) bad.push('fillTargetMs must be an integer from 1 to maxAgeMs');
  if (bad.length > 0) throw new BlockSettingsError(bad.join('; '));
}
