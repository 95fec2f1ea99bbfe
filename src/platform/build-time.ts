/**
 * What runs once, inside the engine, while js-compute-runtime builds the wasm: the engine's crypto
 * set up, one admitted visitor run through the core, then the freed memory those left behind
 * zeroed. Every instance starts from the memory this leaves. Imported for its effect by the Fastly
 * entry (src/index.ts) and the bench's floor (test/engine/floor.ts), so both start from the same.
 */
import { engineWarmUp } from './engine-warm-up';
import { scrubFreedMemory, type ScrubReport } from './memory-scrub';
import { requestWarmUp, type WarmUpReport } from './request-warm-up';

export interface BuildTimeReport {
  readonly warmUp: WarmUpReport;
  readonly scrub: ScrubReport;
}

/** Settles after every step; the scrub last, when nothing else will free memory. */
export const buildTime: Promise<BuildTimeReport> = Promise.all([engineWarmUp, requestWarmUp]).then(([, warmUp]) => ({
  warmUp,
  scrub: scrubFreedMemory(),
}));
