/**
 * The last build-time step: zeroes memory the build left freed but dirty, so that every instance
 * starts from a smaller image.
 *
 * js-compute-runtime keeps the memory the build-time run leaves (bin/main.wasm's data section) as
 * every instance's initial state, and keeps every non-zero byte of it, live or not. Parsing the
 * bundle and the warm-ups free a few megabytes of the engine's scratch memory (parser, bytecode
 * emitter, the warm-up's own garbage) without clearing it. A zero-filled `ArrayBuffer` is
 * allocated with `calloc`, which clears a recycled block before handing it out: a run of them of
 * one large size lands in those freed blocks first and overwrites their leftovers with zeros. The
 * buffers are dropped at the end; what remains of them is zeros, which are not in the image.
 *
 * Measured on the room's wasm (docs/benchmarks.md): pages holding any byte 1,605 → ~1,200, data
 * section 5.95 → ~4.2 MB. On the Compute host stand-in, which copies the data section into every
 * fresh instance, that is ~1 ms of each request's instantiation. On Fastly, which maps the image
 * copy-on-write, it is a smaller image and nothing more. 64 blocks of 64 KiB measured best: fewer
 * left freed blocks dirty; more, or smaller sizes, put a block header on each fresh page they reach.
 */
const SCRUB_BLOCK_BYTES = 64 * 1024;
const SCRUB_BLOCKS = 64;

export interface ScrubReport {
  /** Bytes of zero-filled blocks allocated and dropped. */
  readonly bytes: number;
}

/** All the blocks are held until it returns, so each one takes a block of its own. */
export function scrubFreedMemory(): ScrubReport {
  const blocks: ArrayBuffer[] = [];
  for (let i = 0; i < SCRUB_BLOCKS; i++) blocks.push(new ArrayBuffer(SCRUB_BLOCK_BYTES));
  return { bytes: blocks.length * SCRUB_BLOCK_BYTES };
}
