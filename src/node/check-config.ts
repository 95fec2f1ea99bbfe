/**
 * `npm run check-config [-- FILE]`: checks settings without starting anything, and exits 1 naming
 * every problem.
 *
 * - Without FILE: devconfig.json and the WR_ environment variables, exactly as `npm start` reads them.
 * - With FILE: a Config Store's items, as `fastly config-store-entry list --store-id=ID --json`
 *   prints them (`[{ "item_key": …, "item_value": … }]`), or a flat JSON object of names and values.
 *   The running service cannot list its Config Store (Compute can only get an item by name), so a
 *   misspelt item there is caught here, before or after it is written: run this on the listing.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, parseSecrets, unknownSettingProblems, type ConfigProblem } from '../core/config';
import { parseQueues } from '../core/queues';
import { readLocalConfig } from '../platform/node';

/** The items of a Config Store listing (Fastly CLI JSON) or of a flat JSON object. */
export function readConfigStoreListing(text: string): Map<string, string> {
  const document: unknown = JSON.parse(text);
  const items = new Map<string, string>();
  if (Array.isArray(document)) {
    for (const entry of document as unknown[]) {
      const { item_key: key, item_value: value } = (entry ?? {}) as Record<string, unknown>;
      if (typeof key !== 'string' || typeof value !== 'string') throw new Error('a listing entry has no string item_key and item_value');
      items.set(key, value);
    }
  } else if (typeof document === 'object' && document !== null) {
    for (const [key, value] of Object.entries(document)) items.set(key, typeof value === 'string' ? value : JSON.stringify(value));
  } else {
    throw new Error('expected a JSON array of items or an object of names and values');
  }
  return items;
}

/** Every problem of a Config Store's items: names that are not settings, and bad values. */
export function checkConfigStoreItems(items: ReadonlyMap<string, string>): ConfigProblem[] {
  const problems = unknownSettingProblems(items.keys());
  try {
    parseQueues((key) => items.get(key));
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems.map((p) => ({ key: `Config Store item ${p.key}`, message: p.message })));
  }
  return problems;
}

/** Every problem of devconfig.json with `env` over it: unknown names, bad values, weak secrets. */
export function checkLocalConfig(path: string, env: NodeJS.ProcessEnv): ConfigProblem[] {
  const local = readLocalConfig(path, env);
  const problems = [...local.problems];
  for (const parse of [() => parseQueues(local.settings), () => parseSecrets(local.secrets)]) {
    try {
      parse();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(...error.problems.map((p) => ({ key: local.describe(p.key) ?? p.key, message: p.message })));
    }
  }
  return problems;
}

function main(): void {
  const file = process.argv[2];
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const problems = file === undefined ? checkLocalConfig(resolve(root, 'devconfig.json'), process.env) : checkConfigStoreItems(readConfigStoreListing(readFileSync(file, 'utf8')));
  const what = file === undefined ? 'devconfig.json and the WR_ environment variables' : file;
  if (problems.length === 0) {
    process.stdout.write(`${what}: no problems\n`);
    return;
  }
  process.stderr.write(`${what}: ${problems.length} problem(s)\n${problems.map((p) => `  - ${p.key}: ${p.message}`).join('\n')}\n`);
  process.exitCode = 1;
}

if (process.argv[1] !== undefined && /check-config\.(m?js|ts)$/.test(process.argv[1])) {
  try {
    main();
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}
