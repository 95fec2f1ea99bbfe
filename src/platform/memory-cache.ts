/**
 * StateCache in process memory, for the Node host (one process is one "POP") and for simulations
 * that give every simulated POP its own instance. Concurrent misses share one load, as Fastly's
 * SimpleCache.getOrSet collapses them within a POP. Time comes from the injected clock.
 *
 * Bounded: past `maxEntries` the expired entries are dropped, then, if it is still too full, the
 * least recently stored, down to nine tenths of the bound (each key set is a short-lived mark, such
 * as a spent proof of work's nonce, so a flood of them must not grow the process without end).
 */
import type { Clock, StateCache } from '../core/ports';

interface Entry {
  readonly value: unknown;
  readonly expiresAt: number;
}

/** Entries a MemoryStateCache holds at most by default: ~100 bytes each. */
export const DEFAULT_STATE_CACHE_ENTRIES = 100_000;

export class MemoryStateCache implements StateCache {
  readonly #entries = new Map<string, Entry>();
  readonly #loading = new Map<string, Promise<unknown>>();
  /** Number of loads run (misses that reached `load`), for tests and simulations. */
  loads = 0;

  constructor(
    private readonly clock: Clock,
    private readonly maxEntries: number = DEFAULT_STATE_CACHE_ENTRIES,
  ) {}

  /** How many entries are held, expired ones included (for tests). */
  get size(): number {
    return this.#entries.size;
  }

  #store(key: string, value: unknown, ttlSeconds: number): void {
    // Deleted first, so the Map's order is the order entries were last stored.
    this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAt: this.clock.now() + ttlSeconds * 1000 });
    if (this.#entries.size <= this.maxEntries) return;
    const now = this.clock.now();
    for (const [k, entry] of this.#entries) if (entry.expiresAt <= now) this.#entries.delete(k);
    const keep = Math.floor(this.maxEntries * 0.9);
    for (const k of this.#entries.keys()) {
      if (this.#entries.size <= keep) break;
      this.#entries.delete(k);
    }
  }

  async put<T>(key: string, value: T, ttlSeconds: number): Promise<void> {
    this.#store(key, value, ttlSeconds);
  }

  async peek<T>(key: string): Promise<T | undefined> {
    const entry = this.#entries.get(key);
    return entry !== undefined && entry.expiresAt > this.clock.now() ? (entry.value as T) : undefined;
  }

  async getOrLoad<T>(key: string, ttlSeconds: number, load: () => Promise<T>): Promise<{ value: T; hit: boolean }> {
    const entry = this.#entries.get(key);
    if (entry !== undefined && entry.expiresAt > this.clock.now()) return { value: entry.value as T, hit: true };
    const pending = this.#loading.get(key);
    if (pending !== undefined) return { value: (await pending) as T, hit: true };
    this.loads++;
    const loading = load().then(
      (value) => {
        this.#store(key, value, ttlSeconds);
        return value;
      },
    );
    this.#loading.set(key, loading);
    try {
      return { value: await loading, hit: false };
    } finally {
      this.#loading.delete(key);
    }
  }
}
