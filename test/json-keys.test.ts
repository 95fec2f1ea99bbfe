import { describe, expect, it } from 'vitest';
import { repeatedTopLevelKey } from '../src/core/json-keys';

describe('repeatedTopLevelKey', () => {
  it.each<[string, string | undefined]>([
    ['{}', undefined],
    ['{"count": 1}', undefined],
    ['{"count": 1, "uses": 2}', undefined],
    ['{"count": 1, "count": 100000}', 'count'],
    ['{"count":1,"count":1}', 'count'],
    // The same name spelt with an escape is the same key to JSON.parse.
    ['{"count": 1, "co\\u0075nt": 2}', 'count'],
    ['{"a": 1, "b": 2, "a" : 3}', 'a'],
    ['{"a": 1,\n\t"a"\r\n:\n2}', 'a'],
    // Repeated below the top level, or as values: not keys of the object we read.
    ['{"a": {"x": 1, "x": 2}}', undefined],
    ['{"a": [{"count": 1}, {"count": 2}], "count": 3}', undefined],
    ['{"a": "count", "count": 1}', undefined],
    ['{"a": ["count", "count"], "b": "count"}', undefined],
    // Quotes, backslashes and brackets inside strings do not end them or change the depth.
    ['{"a\\"": 1, "a\\"": 2}', 'a"'],
    ['{"a\\\\": 1, "b": "\\\\", "a\\\\": 2}', 'a\\'],
    ['{"x": "{\\"count\\": 1, \\"count\\": 2}", "y": "}}]]"}', undefined],
    ['{"x": "}", "x": 1}', 'x'],
    ['{"": 1, "": 2}', ''],
    ['{"__proto__": 1, "__proto__": 2}', '__proto__'],
  ])('%s', (text, expected) => {
    expect(() => JSON.parse(text)).not.toThrow();
    expect(repeatedTopLevelKey(text)).toBe(expected);
  });

  it('finds, in generated objects, exactly the keys that are repeated at the top', () => {
    // Objects written key by key, with nested objects and arrays that repeat the names freely: the
    // truth is known from how each text was made, and JSON.parse must read every text.
    const names = ['count', 'co\\u0075nt', 'uses', 'a\\"b', 'a\\\\b', '{', '}', ':', ''];
    const decoded = (name: string): string => JSON.parse(`"${name}"`) as string;
    let seed = 11;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const value = (depth: number): string => {
      const kind = next(depth > 2 ? 3 : 5);
      if (kind === 0) return String(next(1000));
      if (kind === 1) return `"${names[next(names.length)]}"`;
      if (kind === 2) return next(2) === 0 ? 'true' : 'null';
      if (kind === 3) return `[${Array.from({ length: next(3) }, () => value(depth + 1)).join(', ')}]`;
      return `{${Array.from({ length: next(4) }, () => `"${names[next(names.length)]}": ${value(depth + 1)}`).join(', ')}}`;
    };
    let repeated = 0;
    for (let round = 0; round < 500; round++) {
      const keys = Array.from({ length: next(5) }, () => names[next(names.length)]!);
      const text = `{${keys.map((key) => `"${key}"${' '.repeat(next(2))}:${value(1)}`).join(',')}}`;
      expect(() => JSON.parse(text), text).not.toThrow();
      const seen = new Set<string>();
      const first = keys.map(decoded).find((key) => (seen.has(key) ? true : (seen.add(key), false)));
      expect(repeatedTopLevelKey(text), text).toBe(first);
      if (first !== undefined) repeated += 1;
    }
    // Both answers came up often enough to mean something.
    expect(repeated).toBeGreaterThan(100);
    expect(repeated).toBeLessThan(400);
  });
});
