/**
 * A POP's memory of the operator's controls (src/core/remembered-controls.ts), on the in-memory
 * store: a store that forgets is one replaced by an empty one (a flush), the POP's cache lives on.
 * The same restore runs in the Lua scripts, against real Redis, in the store contract suite and in
 * the end-to-end switch scenario on both hosts (FLUSHALL).
 */
import { describe, expect, it } from 'vitest';
import type { AdmissionPolicy, QueueStore, StateCache } from '../src/core/ports';
import { rememberControls } from '../src/core/remembered-controls';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ManualClock } from './support/fixtures';

const RATE: AdmissionPolicy = { auto: { count: 5, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 };
const CAPACITY: AdmissionPolicy = { ...RATE, auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 2, maxNewPerMinute: 0 } };

/** A store whose state can be lost: `flush()` swaps in an empty one, as FLUSHALL leaves Redis. */
function forgetful(): { store: QueueStore; flush(): void } {
  let inner = new MemoryQueueStore();
  const store = new Proxy({} as QueueStore, {
    get: (_target, name) => {
      const value = (inner as unknown as Record<string | symbol, unknown>)[name];
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(inner) : value;
    },
  });
  return { store, flush: () => (inner = new MemoryQueueStore()) };
}

describe('the controls a POP remembers across a store that forgets', () => {
  it('restores hold, open and the operator’s pause in the first call after the loss, and an operator’s later change wins', async () => {
    const clock = new ManualClock();
    const lost = forgetful();
    const store = rememberControls(lost.store, new MemoryStateCache(clock), () => clock.now());
    await store.join('q', clock.now(), RATE);
    await store.control('q', { switch: 'hold' }, clock.now(), RATE);
    lost.flush();
    // Rate mode would let this join walk in; hold keeps it out, in the same call.
    expect(await store.join('q', clock.now(), RATE)).toMatchObject({ ticket: 1, claimed: false, switch: 'hold' });
    expect((await store.stats('q', clock.now(), RATE)).lostState).toEqual({ atMs: clock.now(), restored: ['hold'] });
    // The operator opens it; a second loss brings open back, not hold.
    await store.control('q', { switch: 'open' }, clock.now(), RATE);
    lost.flush();
    clock.advance(1_000);
    expect(await store.join('q', clock.now(), RATE)).toMatchObject({ ticket: 0, switch: 'open' });
    // Normal and paused, then lost: paused comes back, no switch.
    await store.control('q', { switch: 'normal' }, clock.now(), RATE);
    await store.control('q', { paused: true }, clock.now(), RATE);
    lost.flush();
    const after = await store.poll('q', clock.now(), RATE);
    expect(after).toMatchObject({ paused: true });
    expect(after).not.toHaveProperty('switch');
  });

  it('keeps the pause it knew under a switch (which hides it), and never takes a recovery window for a pause', async () => {
    const clock = new ManualClock();
    const lost = forgetful();
    const store = rememberControls(lost.store, new MemoryStateCache(clock), () => clock.now());
    await store.control('q', { paused: true }, clock.now(), CAPACITY);
    await store.control('q', { switch: 'hold' }, clock.now(), CAPACITY);
    lost.flush();
    expect((await store.stats('q', clock.now() + 1, CAPACITY))).toMatchObject({ generation: 0 });
    await store.poll('q', clock.now(), CAPACITY);
    expect((await store.stats('q', clock.now(), CAPACITY)).lostState?.restored).toEqual(['hold', 'paused']);

    // A queue that sees a recovery window (paused by it, not by the operator) and then loses its state again.
    const other = forgetful();
    const fresh = rememberControls(other.store, new MemoryStateCache(clock), () => clock.now());
    const held = await fresh.join('r', clock.now(), CAPACITY, { recoverMs: 10_000 });
    expect(held).toMatchObject({ paused: true, recovering: true });
    other.flush();
    const next = await fresh.join('r', clock.now() + 1, CAPACITY);
    expect(next).toMatchObject({ paused: false, claimed: true });
  });

  it('remembers nothing from a stats read of an absent state, and a cache that fails changes no answer', async () => {
    const clock = new ManualClock();
    const lost = forgetful();
    const cache = new MemoryStateCache(clock);
    const store = rememberControls(lost.store, cache, () => clock.now());
    await store.stats('q', clock.now(), RATE);
    expect(await cache.peek('wr-controls:q')).toBeUndefined();
    const broken: StateCache = {
      getOrLoad: () => Promise.reject(new Error('cache down')),
      peek: () => Promise.reject(new Error('cache down')),
      put: () => Promise.reject(new Error('cache down')),
    };
    const plain = rememberControls(new MemoryQueueStore(), broken, () => clock.now());
    expect(await plain.join('q', clock.now(), RATE)).toMatchObject({ ticket: 1, claimed: true });
    expect(await plain.control('q', { switch: 'hold' }, clock.now(), RATE)).toMatchObject({ switch: 'hold' });
  });
});
