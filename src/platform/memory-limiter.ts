/**
 * FailureLimiter in process memory, for the Node host (one process is one POP): the semantics of
 * Fastly's Edge Rate Limiting as the core uses it (see `FailureLimiter` in ports.ts), with exact
 * counts over a sliding window of whole seconds, and holds that end on the injected clock.
 *
 * Memory is bounded whatever arrives: at most `maxClients` counters (a fixed 480-byte ring of the
 * last 60 seconds each), evicting the least recently counted client, and at most `maxHeld` holds,
 * evicting ended holds, then the oldest one. Every hold of a service has the same length (the
 * penalty is a service-wide setting), so the oldest is the one that ends soonest, which is what
 * Fastly's ERL evicts when its penalty box is full; each costs O(1). A flood of
 * distinct addresses therefore costs a fixed amount of memory; what it can do is push an earlier
 * guesser's count out (that guesser starts again from zero, as on Fastly).
 */
import type { Clock, FailureLimiter, FailureWindow } from '../core/ports';

/** Seconds a counter remembers: the longest window. */
const RING_SECONDS = 60;
const WINDOWS: readonly number[] = [10, 20, 30, 40, 50, 60];

export interface MemoryLimiterOptions {
  /** Most clients counted at once. @default 10000 */
  readonly maxClients?: number;
  /** Most clients held at once. @default 10000 */
  readonly maxHeld?: number;
}

export class MemoryFailureLimiter implements FailureLimiter {
  /** Per client, pairs of (second, failures in it) in slot `second % 60`. Map order: least recently counted first. */
  readonly #counters = new Map<string, Uint32Array>();
  /** Per held client, when its hold ends (ms). Map order: oldest hold first. */
  readonly #held = new Map<string, number>();
  readonly #maxClients: number;
  readonly #maxHeld: number;

  constructor(
    private readonly clock: Clock,
    options: MemoryLimiterOptions = {},
  ) {
    this.#maxClients = options.maxClients ?? 10_000;
    this.#maxHeld = options.maxHeld ?? 10_000;
  }

  /** Clients counted now (for tests of the bound). */
  get counted(): number {
    return this.#counters.size;
  }

  /** Holds kept now, ended ones included until they are looked at or pushed out. */
  get heldEntries(): number {
    return this.#held.size;
  }

  async isHeld(key: string): Promise<boolean> {
    const until = this.#held.get(key);
    if (until === undefined) return false;
    if (until > this.clock.now()) return true;
    this.#held.delete(key);
    return false;
  }

  async countFailure(key: string, windowSeconds: FailureWindow): Promise<number> {
    // The same refusal as Fastly's lookupCount, so a wrong window fails here too.
    if (!WINDOWS.includes(windowSeconds)) throw new TypeError(`window must be 10, 20, 30, 40, 50 or 60 seconds, got ${windowSeconds}`);
    const second = Math.floor(this.clock.now() / 1000);
    let ring = this.#counters.get(key);
    if (ring === undefined) {
      if (this.#counters.size >= this.#maxClients) this.#counters.delete(this.#counters.keys().next().value!);
      ring = new Uint32Array(RING_SECONDS * 2);
    } else {
      // Re-inserting moves the client to the back of the eviction order.
      this.#counters.delete(key);
    }
    this.#counters.set(key, ring);
    const slot = (second % RING_SECONDS) * 2;
    if (ring[slot] !== second) {
      ring[slot] = second;
      ring[slot + 1] = 0;
    }
    ring[slot + 1] = ring[slot + 1]! + 1;
    let failures = 0;
    for (let i = 0; i < ring.length; i += 2) {
      const age = second - ring[i]!;
      if (age >= 0 && age < windowSeconds) failures += ring[i + 1]!;
    }
    return failures;
  }

  async countOf(key: string, windowSeconds: FailureWindow): Promise<number> {
    if (!WINDOWS.includes(windowSeconds)) throw new TypeError(`window must be 10, 20, 30, 40, 50 or 60 seconds, got ${windowSeconds}`);
    const ring = this.#counters.get(key);
    if (ring === undefined) return 0;
    const second = Math.floor(this.clock.now() / 1000);
    let count = 0;
    for (let i = 0; i < ring.length; i += 2) {
      const age = second - ring[i]!;
      if (age >= 0 && age < windowSeconds) count += ring[i + 1]!;
    }
    return count;
  }

  async hold(key: string, minutes: number): Promise<void> {
    if (!Number.isInteger(minutes) || minutes < 1 || minutes > 60) throw new TypeError(`a hold lasts 1 to 60 whole minutes, got ${minutes}`);
    const now = this.clock.now();
    this.#held.delete(key);
    if (this.#held.size >= this.#maxHeld) this.#evictHold(now);
    this.#held.set(key, now + minutes * 60_000);
  }

  /** Drops the ended holds at the front; when none has ended, the oldest hold. */
  #evictHold(now: number): void {
    for (const [key, until] of this.#held) {
      if (until > now) break;
      this.#held.delete(key);
    }
    if (this.#held.size >= this.#maxHeld) this.#held.delete(this.#held.keys().next().value!);
  }
}
