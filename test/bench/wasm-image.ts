/**
 * What a wasm's initial memory costs an instance: its data section, read from the module's bytes.
 *
 * js-compute-runtime keeps the memory its build-time run leaves as data segments. A host that
 * copies them into every fresh instance (the Compute host stand-in: V8's `new WebAssembly.Instance`)
 * pays for each 4-KiB page a segment writes to, whatever it holds; a host that maps the image
 * copy-on-write (Wasmtime at Fastly) pays for the pages a request touches. Both shrink with the
 * pages that hold a non-zero byte.
 */
import { readFileSync } from 'node:fs';

export interface WasmImage {
  /** Active data segments. */
  readonly segments: number;
  /** Their bytes, summed (zero runs inside a segment included). */
  readonly dataBytes: number;
  /** Bytes of the initial memory that are not zero. */
  readonly nonZeroBytes: number;
  /** 4-KiB pages of the initial memory holding at least one non-zero byte. */
  readonly pagesWithData: number;
  /** The memory's declared minimum, in bytes (64-KiB wasm pages). */
  readonly minimumMemoryBytes: number;
}

const SECTION_MEMORY = 5;
const SECTION_DATA = 11;
const HOST_PAGE = 4096;

class Reader {
  at: number;
  constructor(
    readonly bytes: Uint8Array,
    at: number,
  ) {
    this.at = at;
  }
  byte(): number {
    if (this.at >= this.bytes.length) throw new Error(`wasm: unexpected end at byte ${this.at}`);
    return this.bytes[this.at++]!;
  }
  /** An unsigned LEB128 of up to 32 bits. */
  u32(): number {
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const b = this.byte();
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
    }
    throw new Error(`wasm: LEB128 too long at byte ${this.at}`);
  }
  /** A constant offset expression: `i32.const N end` (the only form a js-compute build emits). */
  offset(): number {
    const op = this.byte();
    if (op !== 0x41) throw new Error(`wasm: data segment offset is not i32.const (opcode 0x${op.toString(16)})`);
    let result = 0;
    let shift = 0;
    let b: number;
    do {
      b = this.byte();
      result += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while ((b & 0x80) !== 0);
    // A signed LEB128: addresses of a js-compute build are positive and below 2^31.
    if (shift < 32 && (b & 0x40) !== 0) throw new Error('wasm: negative data segment offset');
    if (this.byte() !== 0x0b) throw new Error('wasm: data segment offset expression does not end');
    return result;
  }
}

export function readWasmImage(bytes: Uint8Array): WasmImage {
  if (bytes.length < 8 || bytes[0] !== 0x00 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) throw new Error('not a wasm module');
  const r = new Reader(bytes, 8);
  const segments: { offset: number; start: number; length: number }[] = [];
  let minimumMemoryBytes = 0;
  while (r.at < bytes.length) {
    const id = r.byte();
    const size = r.u32();
    const end = r.at + size;
    if (id === SECTION_MEMORY) {
      r.u32(); // count (one memory)
      const flags = r.u32();
      minimumMemoryBytes = r.u32() * 65_536;
      if ((flags & 1) !== 0) r.u32();
    } else if (id === SECTION_DATA) {
      const count = r.u32();
      for (let i = 0; i < count; i++) {
        const flags = r.u32();
        if (flags === 1) {
          // Passive: copied only when the code asks (memory.init), not part of the initial image.
          // (Read first: `r.at += r.u32()` would add to the position from before the length.)
          const length = r.u32();
          r.at += length;
          continue;
        }
        if (flags === 2) r.u32(); // memory index
        const offset = r.offset();
        const length = r.u32();
        segments.push({ offset, start: r.at, length });
        r.at += length;
      }
    }
    r.at = end;
  }
  let nonZeroBytes = 0;
  const pages = new Set<number>();
  for (const segment of segments) {
    for (let i = 0; i < segment.length; i++) {
      if (bytes[segment.start + i] === 0) continue;
      nonZeroBytes += 1;
      pages.add(Math.floor((segment.offset + i) / HOST_PAGE));
    }
  }
  return {
    segments: segments.length,
    dataBytes: segments.reduce((sum, s) => sum + s.length, 0),
    nonZeroBytes,
    pagesWithData: pages.size,
    minimumMemoryBytes,
  };
}

export function readWasmImageFile(path: string): WasmImage {
  return readWasmImage(readFileSync(path));
}
