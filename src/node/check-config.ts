/**
 * `npm run check-config [-- FILE]`: checks settings without starting anything, and exits 1 naming
 * every problem.
 *
 * - Without FILE: devconfig.json and the WR_ environment variables, exactly as `npm start` reads them.
 * - With FILE: the settings as the `settings` item holds them (a JSON object of names and values,
 *   checked before it is published), or a Config Store's items, as
 *   `fastly config-store-entry list --store-id=ID --json` prints them
 *   (`[{ "item_key": …, "item_value": … }]`) or as bin/local-config.json holds them
 *   (`{ "settings": "<the JSON text>" }`). A store without a `settings` item is checked item by
 *   item, the layout before it; Compute cannot list a store, so there a misspelt item is caught
 *   only here.
 * - With `--accounts FILE`: the `admin_accounts` secret's text (a JSON object of account name →
 *   `{"role", "hash"}`), checked before it is put in the Secret Store; each problem names the
 *   account. The other secrets are checked in devconfig.json and the environment (no FILE).
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, parseSecrets, parseSettingsDocument, SETTINGS_ITEM, unknownSettingProblems, type ConfigProblem, type SettingSource } from '../core/config';
import { webhookHostProblems } from '../core/webhook-targets';
import { parseQueues } from '../core/queues';
import { parseAccounts } from '../core/accounts';
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

/** Every problem of a Config Store's items: the `settings` item when there is one, else each item. */
export function checkConfigStoreItems(items: ReadonlyMap<string, string>): ConfigProblem[] {
  const document = items.get(SETTINGS_ITEM);
  if (document !== undefined) {
    const problems = checkSettingsDocument(document);
    for (const name of items.keys()) {
      if (name !== SETTINGS_ITEM) problems.push({ key: `Config Store item ${name}`, message: `is not read while the ${SETTINGS_ITEM} item holds the settings: delete it` });
    }
    return problems;
  }
  return [...unknownSettingProblems(items.keys()), ...queueProblems((key) => items.get(key), (key) => `Config Store item ${key}`)];
}

/** Every problem of the `settings` item's text: broken JSON, unknown names, bad values. */
export function checkSettingsDocument(text: string): ConfigProblem[] {
  const document = parseSettingsDocument(text);
  return [...document.problems, ...queueProblems(document.source, (key) => `Config Store item ${SETTINGS_ITEM} key ${key}`)];
}

function queueProblems(source: SettingSource, where: (key: string) => string): ConfigProblem[] {
  try {
    // A Config Store's settings are Fastly's: its webhooks must name backends.
    return webhookHostProblems(parseQueues(source)[0]!.config.webhooks, 'fastly').map((p) => ({ key: where(p.key), message: p.message }));
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.problems.map((p) => ({ key: where(p.key), message: p.message }));
  }
}

/**
 * What FILE holds: a listing or a `{ "settings": "<text>" }` store is checked as items; any other
 * JSON object is the settings document itself.
 */
export function checkConfigFile(text: string): ConfigProblem[] {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    // Not JSON at all: said as a problem of the settings item, which is what such a file is meant to be.
    return checkSettingsDocument(text);
  }
  const isStore = Array.isArray(document) || (typeof document === 'object' && document !== null && typeof (document as Record<string, unknown>)[SETTINGS_ITEM] === 'string');
  if (!isStore) return checkSettingsDocument(text);
  let items: Map<string, string>;
  try {
    items = readConfigStoreListing(text);
  } catch (error) {
    return [{ key: 'Config Store listing', message: error instanceof Error ? error.message : String(error) }];
  }
  return checkConfigStoreItems(items);
}

/** Every problem of devconfig.json with `env` over it: unknown names, bad values, weak secrets. */
export function checkLocalConfig(path: string, env: NodeJS.ProcessEnv): ConfigProblem[] {
  const local = readLocalConfig(path, env);
  const problems = [...local.problems];
  const checks = [
    () => {
      const webhooks = parseQueues(local.settings)[0]!.config.webhooks;
      // The Node host sends to URLs, signed with webhook_secret.
      const more = webhookHostProblems(webhooks, 'node');
      if (webhooks.length > 0 && local.secrets('webhook_secret') === undefined) more.push({ key: 'webhook_secret', message: 'is required with webhooks: nothing is sent unsigned' });
      if (more.length > 0) throw new ConfigError(more);
    },
    () => parseSecrets(local.secrets),
  ];
  for (const parse of checks) {
    try {
      parse();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(...error.problems.map((p) => ({ key: local.describe(p.key) ?? p.key, message: p.message })));
    }
  }
  return problems;
}

/** The problems of an `admin_accounts` secret's text (see accounts.ts), under the key `admin_accounts`. */
export function checkAccountsText(text: string): ConfigProblem[] {
  try {
    parseAccounts(text.trim());
    return [];
  } catch (error) {
    return [{ key: 'admin_accounts', message: error instanceof Error ? error.message : String(error) }];
  }
}

/** What `npm run check-config [-- FILE | --accounts FILE]` prints and its exit status: every problem on stderr, each with its key. */
export function runCheckConfig(file: string | undefined, root: string, env: NodeJS.ProcessEnv, accountsFile?: string): { readonly stdout: string; readonly stderr: string; readonly status: number } {
  const what = accountsFile !== undefined ? accountsFile : file === undefined ? 'devconfig.json and the WR_ environment variables' : file;
  let problems: ConfigProblem[];
  try {
    problems =
      accountsFile !== undefined
        ? checkAccountsText(readFileSync(accountsFile, 'utf8'))
        : file === undefined
          ? checkLocalConfig(resolve(root, 'devconfig.json'), env)
          : checkConfigFile(readFileSync(file, 'utf8'));
  } catch (error) {
    // What is left (a file that cannot be read) still says which file.
    return { stdout: '', stderr: `${what}: ${error instanceof Error ? error.message : String(error)}\n`, status: 1 };
  }
  if (problems.length === 0) return { stdout: `${what}: no problems\n`, stderr: '', status: 0 };
  return { stdout: '', stderr: `${what}: ${problems.length} problem(s)\n${problems.map((p) => `  - ${p.key}: ${p.message}`).join('\n')}\n`, status: 1 };
}

if (process.argv[1] !== undefined && /check-config\.(m?js|ts)$/.test(process.argv[1])) {
  const accounts = process.argv[2] === '--accounts';
  if (accounts && process.argv[3] === undefined) {
    process.stderr.write('--accounts needs the file that holds the admin_accounts secret\n');
    process.exit(2);
  }
  const result = runCheckConfig(accounts ? undefined : process.argv[2], resolve(dirname(fileURLToPath(import.meta.url)), '..'), process.env, accounts ? process.argv[3] : undefined);
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  process.exitCode = result.status;
}
