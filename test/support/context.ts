/**
 * A handler context (src/core/context.ts) on the in-memory store and a manual clock, for the unit
 * tests of the request path's steps: each step is called alone, without building a handler.
 */
import { parseConfig, parseSecrets, type Config } from '../../src/core/config';
import { createContext, type HandlerContext } from '../../src/core/context';
import type { Trace } from '../../src/core/types';
import { MemoryStateCache } from '../../src/platform/memory-cache';
import { MemoryQueueStore } from '../../src/store/memory-store';
import { BASE_SECRETS, BASE_SETTINGS, FaultyStore, ManualClock, MemoryLogger, RecordingOrigin, source } from './fixtures';

export interface ContextRig {
  readonly ctx: HandlerContext;
  readonly config: Config;
  /** The store the context calls: counts calls, and can be made to fail. */
  readonly store: FaultyStore;
  /** The store behind it, for setting up a state without counting. */
  readonly inner: MemoryQueueStore;
  readonly origin: RecordingOrigin;
  readonly clock: ManualClock;
}

export function contextRig(settings: Record<string, string> = {}): ContextRig {
  const inner = new MemoryQueueStore();
  const store = new FaultyStore(inner);
  const origin = new RecordingOrigin();
  const clock = new ManualClock();
  const config = parseConfig(source({ ...BASE_SETTINGS, store_timeout_ms: '100', ...settings }));
  const ctx = createContext({
    config,
    secrets: parseSecrets(source(BASE_SECRETS)),
    store,
    origin,
    logger: new MemoryLogger(),
    clock,
    cache: new MemoryStateCache(clock),
    randomSeed: () => 12345,
  });
  return { ctx, config, store, inner, origin, clock };
}

export function newTrace(): Trace {
  return { decision: 'unknown' };
}

/** A GET of the site, with our cookie holding `values` (several: as many cookies of that name). */
export function siteRequest(path = '/', values: readonly string[] = [], headers: Record<string, string> = {}): Request {
  const cookie = values.map((v) => `waiting_room=${v}`).join('; ');
  return new Request(`https://shop.example${path}`, { headers: { ...(cookie !== '' && { cookie }), ...headers } });
}

/** The value of a Set-Cookie string `name=value; …`. */
export function cookieValue(setCookie: string): string {
  return setCookie.slice(setCookie.indexOf('=') + 1).split(';')[0]!;
}
