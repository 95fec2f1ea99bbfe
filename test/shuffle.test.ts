import { describe, expect, it } from 'vitest';
import { createShuffle, MAX_SHUFFLE_SIZE } from '../src/core/shuffle';
import { seededRandom } from './support/seeded-random';

const seeds = (n: number, from = 1): number[] => {
  const random = seededRandom(from);
  return Array.from({ length: n }, () => Math.floor(random() * 2 ** 48));
};

/** Pearson's chi-square of observed counts against a uniform expectation. */
function chiSquare(counts: readonly number[]): number {
  const total = counts.reduce((a, b) => a + b, 0);
  const expected = total / counts.length;
  return counts.reduce((sum, c) => sum + (c - expected) ** 2 / expected, 0);
}

describe('the event shuffle', () => {
  it.each([1, 2, 3, 7, 8, 9, 100, 1000, 4097, 65_537])('is a bijection of 1..%i onto itself, both ways', (size) => {
    for (const seed of seeds(3, size)) {
      const shuffle = createShuffle(size, seed);
      const seen = new Uint8Array(size + 1);
      let outside = 0;
      let repeated = 0;
      let notInverse = 0;
      for (let t = 1; t <= size; t++) {
        const place = shuffle.place(t);
        if (!(place >= 1 && place <= size)) outside++;
        else if ((seen[place] = (seen[place] ?? 0) + 1) > 1) repeated++;
        if (shuffle.ticket(place) !== t) notInverse++;
      }
      expect({ outside, repeated, notInverse }).toEqual({ outside: 0, repeated: 0, notInverse: 0 });
    }
  });

  it('differs from arrival order and from one seed to the next', () => {
    const size = 1000;
    const [a, b] = seeds(2, 7).map((seed) => createShuffle(size, seed));
    let fixedA = 0;
    let same = 0;
    for (let t = 1; t <= size; t++) {
      if (a!.place(t) === t) fixedA++;
      if (a!.place(t) === b!.place(t)) same++;
    }
    // A random permutation has about one fixed point; two independent ones agree about once.
    expect(fixedA).toBeLessThan(8);
    expect(same).toBeLessThan(8);
  });

  it('gives the first arrival every place about equally often (chi-square, fixed seeds)', () => {
    const size = 20;
    const counts = new Array<number>(size).fill(0);
    for (const seed of seeds(20_000, 3)) counts[createShuffle(size, seed).place(1) - 1]!++;
    // 19 degrees of freedom: the 99.9th percentile is 43.8. A biased shuffle lands far above it.
    expect(chiSquare(counts)).toBeLessThan(43.8);
    // And arriving early is no advantage: the first arrival's mean place is the middle.
    const mean = counts.reduce((sum, c, i) => sum + c * (i + 1), 0) / 20_000;
    expect(Math.abs(mean - (size + 1) / 2)).toBeLessThan(0.2);
  });

  it('leaves neighbours in arrival uncorrelated in place (rank correlation near 0)', () => {
    const size = 5000;
    const shuffle = createShuffle(size, seeds(1, 11)[0]!);
    // Spearman's rho between arrival order and place; |rho| for a random permutation of 5000 is ~0.014.
    let sumD2 = 0;
    for (let t = 1; t <= size; t++) sumD2 += (shuffle.place(t) - t) ** 2;
    const rho = 1 - (6 * sumD2) / (size * (size * size - 1));
    expect(Math.abs(rho)).toBeLessThan(0.06);
  });

  it('stays a bijection at a large size on a sample, and quickly', () => {
    const size = 3_000_001;
    const shuffle = createShuffle(size, 123_456_789_012);
    const random = seededRandom(5);
    const places = new Set<number>();
    for (let i = 0; i < 20_000; i++) {
      const t = 1 + Math.floor(random() * size);
      const p = shuffle.place(t);
      expect(shuffle.ticket(p)).toBe(t);
      places.add(p);
    }
    expect(places.size).toBeGreaterThan(19_900);
  });

  it('refuses sizes, seeds and tickets outside its domain', () => {
    expect(() => createShuffle(-1, 1)).toThrow(RangeError);
    expect(() => createShuffle(MAX_SHUFFLE_SIZE + 1, 1)).toThrow(RangeError);
    expect(() => createShuffle(10, -1)).toThrow(RangeError);
    expect(() => createShuffle(10, 1.5)).toThrow(RangeError);
    const shuffle = createShuffle(10, 1);
    for (const bad of [0, 11, 1.5, Number.NaN]) expect(() => shuffle.place(bad)).toThrow(RangeError);
    expect(createShuffle(1, 99).place(1)).toBe(1);
  });
});
