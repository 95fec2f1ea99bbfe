/**
 * StateCache in process memory, for the Node host (one process is one "POP") and for simulations
 * that give every simulated POP its own instance. Concurrent misses share one load, as Fastly's
 * SimpleCache.getOrSet collapses them within a POP. Time comes from the injected clock.
 */
import type { Clock, StateCache } from '../core/ports';

interface Entry {
  readonly value: unknown;
  readonly expiresAt: number;
}

export class MemoryStateCache implements StateCache {
  readonly #entries = new Map<string, Entry>();
  readonly #loading = new Map<string, Promise<unknown>>();
  /** Number of loads run (misses that reached `load`), for tests and simulations. */
  loads = 0;

  constructor(private readonly clock: Clock) {}

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
        this.#entries.set(key, { value, expiresAt: this.clock.now() + ttlSeconds * 1000 });
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
