/**
 * src/core's modules import each other without a cycle, so that each can be read and tested from
 * the bottom up. Type-only imports count: a type shared by two modules that import each other is
 * the same tangle for a reader, and belongs in a module both can import (types.ts). Re-exports
 * (`export ... from`) count too, as they are imports.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const CORE = join(import.meta.dirname, '..', 'src', 'core');

/** `import … from './x'`, `import type … from './x'`, `export … from './x'`, `import './x'`. */
const IMPORT = /^\s*(?:import|export)\b[^;'"]*?(?:\bfrom\s*)?['"]\.\/([\w.-]+)['"]/gm;

/** Each module of a directory (flat, as src/core is) and the sibling modules it imports. */
function importGraph(dir: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of readdirSync(dir)) {
    if (!file.endsWith('.ts') || file.endsWith('.d.ts')) continue;
    const text = readFileSync(join(dir, file), 'utf8');
    const targets = [...text.matchAll(IMPORT)].map((m) => `${m[1]!.replace(/\.(?:ts|js)$/, '')}.ts`);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** One cycle of the graph as the path that closes it (`a.ts → b.ts → a.ts`), or undefined. */
function findCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  const walk = (node: string): string[] | undefined => {
    if (onPath.has(node)) return [...path.slice(path.indexOf(node)), node];
    if (done.has(node) || !graph.has(node)) return undefined;
    path.push(node);
    onPath.add(node);
    for (const next of graph.get(node)!) {
      const cycle = walk(next);
      if (cycle !== undefined) return cycle;
    }
    path.pop();
    onPath.delete(node);
    done.add(node);
    return undefined;
  };
  for (const node of [...graph.keys()].sort()) {
    const cycle = walk(node);
    if (cycle !== undefined) return cycle;
  }
  return undefined;
}

describe('the import graph of src/core', () => {
  it('reads every module and its imports, type-only ones included', () => {
    const graph = importGraph(CORE);
    // Guards the parser: if it read no edges, "no cycle" would prove nothing.
    expect(graph.get('handler.ts')).toEqual(expect.arrayContaining(['context.ts', 'visit.ts', 'respond.ts', 'rules.ts', 'own-paths.ts']));
    expect(graph.get('pages.ts')).toContain('types.ts'); // `import type { … } from './types'`
    expect(graph.get('holding.ts')).toContain('types.ts'); // and `export type { … } from './types'`
  });

  it('has no cycle', () => {
    const cycle = findCycle(importGraph(CORE));
    expect(cycle === undefined ? 'no cycle' : `import cycle: ${cycle.join(' → ')}`).toBe('no cycle');
  });

  it('the check finds a cycle when there is one, however long, and names it', () => {
    expect(findCycle(new Map([['a.ts', ['a.ts']]]))).toEqual(['a.ts', 'a.ts']);
    const graph = new Map([
      ['a.ts', ['b.ts', 'x.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['d.ts']],
      ['d.ts', ['b.ts']],
      ['x.ts', []],
    ]);
    expect(findCycle(graph)).toEqual(['b.ts', 'c.ts', 'd.ts', 'b.ts']);
    expect(findCycle(new Map([['a.ts', ['b.ts']], ['b.ts', ['c.ts']], ['c.ts', []]]))).toBeUndefined();
  });

  it('the parser reads each form of import', () => {
    const text = [
      "import { a } from './a';",
      "import type { B } from './b';",
      "import c, { type C } from './c.ts';",
      "export { d } from './d';",
      "export type { E } from './e';",
      "import './f';",
      "import {\n  g,\n  h,\n} from './g';",
      "import X from '../../templates/x.html';",
    ].join('\n');
    expect([...text.matchAll(IMPORT)].map((m) => m[1])).toEqual(['a', 'b', 'c.ts', 'd', 'e', 'f', 'g']);
  });
});
