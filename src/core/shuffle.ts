/**
 * The event lottery: a keyed permutation of the pre-queue's tickets 1..size onto places 1..size.
 *
 * The store freezes the pre-queue at the event's start (its size, and a seed drawn at that moment
 * by the edge that happened to start it), so every POP computes the same permutation from the
 * cached queue state without another store call, and the store only ever sees places. The seed
 * does not exist before the start, so nobody can learn their place by joining early; after the
 * start places are visible anyway.
 *
 * Construction: a balanced Feistel network of four rounds over [0, 4^half) with half = ceil(bits/2)
 * (four rounds make a Feistel network a strong pseudo-random permutation when its round function is
 * pseudo-random), and cycle-walking (apply it again until the value falls inside [0, size)), which
 * keeps it a bijection on [0, size). The domain is under 4 × size, so fewer than four steps are
 * needed on average. The round function is a 32-bit integer hash (murmur3's finaliser) keyed by
 * the seed: no `crypto.subtle`, so it is synchronous and costs microseconds, since secrecy after the
 * start is not what makes the lottery fair — the seed's absence before it is.
 */

/** The largest pre-queue the permutation handles: 2^40 tickets (halves of at most 20 bits). */
export const MAX_SHUFFLE_SIZE = 2 ** 40;

const ROUNDS = 4;

function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Round keys from a seed of up to 48 bits (two 24-bit halves, each hashed with the round number). */
function roundKeys(seed: number): number[] {
  const low = seed % 0x1000000;
  const high = Math.floor(seed / 0x1000000) % 0x1000000;
  const keys: number[] = [];
  for (let i = 0; i < ROUNDS; i++) keys.push(mix32(mix32(low ^ Math.imul(i + 1, 0x9e3779b9)) ^ high));
  return keys;
}

/** A permutation of 1..size keyed by `seed`: `place(ticket)` and its inverse `ticket(place)`. */
export interface Shuffle {
  readonly size: number;
  place(ticket: number): number;
  ticket(place: number): number;
}

export function createShuffle(size: number, seed: number): Shuffle {
  if (!Number.isSafeInteger(size) || size < 0 || size > MAX_SHUFFLE_SIZE) {
    throw new RangeError(`shuffle size must be an integer from 0 to 2^40, got ${size}`);
  }
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`shuffle seed must be a non-negative integer, got ${seed}`);
  let bits = 1;
  while (2 ** bits < size) bits++;
  const half = Math.ceil(bits / 2);
  const halfSize = 2 ** half;
  const mask = halfSize - 1;
  const keys = roundKeys(seed);

  // One pass of the network over [0, halfSize²): (L, R) → (R, L ⊕ F_i(R)) for each round, and back.
  const forward = (x: number): number => {
    let left = Math.floor(x / halfSize);
    let right = x % halfSize;
    for (const key of keys) {
      const next = (left ^ (mix32(right ^ key) & mask)) >>> 0;
      left = right;
      right = next;
    }
    return left * halfSize + right;
  };
  const backward = (x: number): number => {
    let left = Math.floor(x / halfSize);
    let right = x % halfSize;
    for (let i = keys.length - 1; i >= 0; i--) {
      const previous = (right ^ (mix32(left ^ keys[i]!) & mask)) >>> 0;
      right = left;
      left = previous;
    }
    return left * halfSize + right;
  };
  // Cycle-walking: the values below `size` form the permutation's restriction to [0, size).
  const walk = (step: (x: number) => number, x: number): number => {
    let y = step(x);
    while (y >= size) y = step(y);
    return y;
  };
  const check = (n: number, what: string): void => {
    if (!Number.isSafeInteger(n) || n < 1 || n > size) throw new RangeError(`${what} must be an integer from 1 to ${size}, got ${n}`);
  };
  return {
    size,
    place(ticket) {
      check(ticket, 'ticket');
      return size === 1 ? 1 : walk(forward, ticket - 1) + 1;
    },
    ticket(place) {
      check(place, 'place');
      return size === 1 ? 1 : walk(backward, place - 1) + 1;
    },
  };
}
