/**
 * The configuration reference cannot drift from the code: docs/configuration.md's tables are what
 * the schema generates, and the shapes the schema reports are the ones the parser enforces.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_KEYS, ConfigError, SECRET_KEYS, parseConfig, type ConfigProblem, type SettingShape } from '../src/core/config';
import { describeSettings, GENERATED_BEGIN, GENERATED_END, renderConfigurationReference, replaceGenerated } from '../src/core/config-reference';

const docs = readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8');

/** The problems `parseConfig` names for `key` when it is set to `value` and everything else is default. */
function problemsFor(key: string, value: string): ConfigProblem[] {
  try {
    parseConfig((k) => (k === key ? value : undefined));
    return [];
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.problems.filter((p) => p.key === key);
  }
}

describe('the configuration reference', () => {
  it('docs/configuration.md holds exactly what the schema generates (run npm run docs after changing a setting)', () => {
    expect(replaceGenerated(docs, renderConfigurationReference())).toBe(docs);
  });

  it('names every setting and every secret once, in the documented order', () => {
    const generated = docs.slice(docs.indexOf(GENERATED_BEGIN), docs.indexOf(GENERATED_END));
    const keys = [...generated.matchAll(/^\| `([a-z0-9_]+)` \|/gm)].map((m) => m[1]);
    expect(keys).toEqual([...CONFIG_KEYS, ...SECRET_KEYS]);
  });

  it('a changed default, bound or choice changes the generated table', () => {
    // The reference is built from what the parser reads: an observer that reports a different
    // bound must give a different table, or the table would not be following the schema.
    const shapes = describeSettings();
    const session = shapes.find((s) => s.key === 'session_seconds');
    expect(session).toEqual({ key: 'session_seconds', kind: 'integer', fallback: '300', min: 30, max: 7 * 86_400 });
    expect(renderConfigurationReference()).toContain('| `session_seconds` | ');
    expect(renderConfigurationReference()).toMatch(/\| `session_seconds` \| [^\n]* \| whole number, 30 – 604,800 \| `300` \|/);
  });

  it('documents ticket_block_ms with the bounds the order promise sets (100 – 900 ms, default 500)', () => {
    expect(describeSettings().find((s) => s.key === 'ticket_block_ms')).toEqual({ key: 'ticket_block_ms', kind: 'integer', fallback: '500', min: 100, max: 900 });
    expect(renderConfigurationReference()).toMatch(/\| `ticket_block_ms` \| with `ticket_blocks` on [^\n]* \| whole number, 100 – 900 \| `500` \|/);
    // Right after ticket_blocks, which it belongs to.
    expect(CONFIG_KEYS.indexOf('ticket_block_ms')).toBe(CONFIG_KEYS.indexOf('ticket_blocks') + 1);
  });

  it('refuses a file whose generated part has lost its markers', () => {
    expect(() => replaceGenerated('# Configuration\n', 'x')).toThrow(/lost the markers/);
  });

  describe.each(describeSettings().filter((s) => s.kind === 'integer') as Extract<SettingShape, { kind: 'integer' }>[])('$key', (shape) => {
    it('accepts its documented bounds and refuses one past each', () => {
      // Only the key's own bound is looked at: a bound may break a rule between keys (3 × refresh_seconds).
      const bound = (value: number) => problemsFor(shape.key, String(value)).filter((p) => /^must be (between|a whole number)/.test(p.message));
      expect(bound(shape.min)).toEqual([]);
      expect(bound(shape.max)).toEqual([]);
      expect(bound(shape.max + 1)).toEqual([expect.objectContaining({ message: expect.stringContaining(`between ${shape.min} and ${shape.max}`) })]);
      if (shape.min > 0) expect(bound(shape.min - 1)).toEqual([expect.objectContaining({ message: expect.stringContaining(`between ${shape.min} and ${shape.max}`) })]);
    });
  });

  describe.each(describeSettings().filter((s) => s.kind === 'choice') as Extract<SettingShape, { kind: 'choice' }>[])('$key', (shape) => {
    it('accepts each documented value and refuses any other', () => {
      for (const choice of shape.choices) expect(problemsFor(shape.key, choice).filter((p) => /must be one of/.test(p.message))).toEqual([]);
      expect(problemsFor(shape.key, 'not-a-choice')).toEqual([expect.objectContaining({ message: expect.stringContaining('must be one of') })]);
    });
  });

  it('documents defaults the parser really uses', () => {
    // An empty configuration parses, and each documented default read back gives the same result.
    const all = describeSettings().filter((s) => s.key !== 'queues');
    const defaults = parseConfig(() => undefined);
    const explicit = parseConfig((key) => all.find((s) => s.key === key)?.fallback);
    expect(explicit).toEqual(defaults);
  });
});
