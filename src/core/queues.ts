/**
 * Several queues in one service. The optional `queues` setting is one JSON document listing the
 * queues in the order they are matched:
 *
 *   [{ "name": "sale", "hosts": ["shop.example"], "paths": ["/sale/*"], "countries": ["DE", "AT"],
 *      "settings": { "max_active": 500, "hold_status": 503 } },
 *    { "name": "default" }]
 *
 * Each queue has its own settings (the service's settings overridden by its `settings`), its own
 * counters in the store and its own cookie, so a visitor let into one is not let into another.
 * A request goes to the first queue whose hosts, paths and countries all match (an empty list
 * matches everything); paths are matched normalised, so `/SALE`, `//sale` and `/%73ale` cannot
 * slip past a rule for `/sale`, and a queue covers a path when any reading an origin might make of
 * it matches (`/sale;x`, `/%2Fsale`). The document is validated as a whole: every problem is named
 * with the queue's index and field.
 */
import { CONFIG_KEYS, ConfigError, parseConfig, QUEUE_NAME_PATTERN, unknownNameProblem, type Config, type ConfigProblem, type SettingSource } from './config';
import { queueApplies, readPath } from './path-canon';
import { parsePathPatterns, type PathPattern } from './path-pattern';

export interface QueueRule {
  readonly name: string;
  /** Lower-case host names without port; empty matches any host. */
  readonly hosts: readonly string[];
  readonly paths: readonly PathPattern[];
  /** ISO 3166-1 alpha-2 codes, upper case; empty matches any country (and an unknown one). */
  readonly countries: readonly string[];
}

export interface QueueSetup {
  readonly rule: QueueRule;
  readonly config: Readonly<Config>;
}

/** Settings that belong to the whole service, not to one queue. */
const SERVICE_KEYS = new Set([
  'queues',
  'path_prefix',
  'queue_paths',
  'queue_name',
  'bypass_paths',
  'bypass_ips',
  'bypass_cookie',
  'bypass_crawlers',
  'crawler_ips',
  'upstash_url',
  'store_shards',
  'upstash_shard_urls',
  'admin_user',
  'auth_failure_limit',
  'auth_failure_window_seconds',
  'auth_penalty_minutes',
  'store_timeout_ms',
  'store_retries',
  'state_cache_seconds',
  'webhooks',
]);
const MAX_QUEUES = 50;
const HOST_PATTERN = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const COUNTRY_PATTERN = /^[A-Z]{2}$/;
const QUEUE_FIELDS = new Set(['name', 'hosts', 'paths', 'countries', 'settings']);

/**
 * Parses the service's queues: the `queues` document when it is set, else one queue from the
 * plain settings. Throws `ConfigError` naming every problem (`queues[2].paths[0]`, …).
 */
export function parseQueues(source: SettingSource): QueueSetup[] {
  const text = source('queues');
  if (text === undefined || text.trim() === '') {
    const config = parseConfig(source);
    return [{ rule: { name: config.queueName, hosts: [], paths: config.queuePaths, countries: [] }, config }];
  }
  const problems: ConfigProblem[] = [];
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new ConfigError([{ key: 'queues', message: `must be JSON: ${error instanceof Error ? error.message : String(error)}` }]);
  }
  if (!Array.isArray(document) || document.length === 0 || document.length > MAX_QUEUES) {
    throw new ConfigError([{ key: 'queues', message: `must be a JSON array of 1 to ${MAX_QUEUES} queues` }]);
  }
  const names = new Set<string>();
  const setups: QueueSetup[] = [];
  document.forEach((entry: unknown, index) => {
    const at = `queues[${index}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      problems.push({ key: at, message: 'must be an object with a name' });
      return;
    }
    const fields = entry as Record<string, unknown>;
    for (const field of Object.keys(fields)) {
      if (!QUEUE_FIELDS.has(field)) problems.push({ key: `${at}.${field}`, message: 'is not a queue field (name, hosts, paths, countries, settings)' });
    }
    const name = fields['name'];
    if (typeof name !== 'string' || !QUEUE_NAME_PATTERN.test(name)) {
      problems.push({ key: `${at}.name`, message: 'must be 1-32 of a-z, 0-9, _ and -, starting with a letter or digit' });
      return;
    }
    if (names.has(name)) problems.push({ key: `${at}.name`, message: `${name} is used by an earlier queue` });
    names.add(name);
    const hosts = readList(fields['hosts'], `${at}.hosts`, problems, (host, key) => {
      const normal = host.toLowerCase().replace(/\.$/, '');
      if (!HOST_PATTERN.test(normal)) problems.push({ key, message: `${JSON.stringify(host)} is not a host name` });
      return normal;
    });
    const paths: PathPattern[] = [];
    readList(fields['paths'], `${at}.paths`, problems, (pattern, key) => {
      try {
        paths.push(...parsePathPatterns(pattern));
      } catch (error) {
        problems.push({ key, message: error instanceof Error ? error.message : String(error) });
      }
      return pattern;
    });
    const countries = readList(fields['countries'], `${at}.countries`, problems, (country, key) => {
      if (!COUNTRY_PATTERN.test(country)) problems.push({ key, message: `${JSON.stringify(country)} is not a two-letter upper-case country code` });
      return country;
    });
    const overrides = readSettings(fields['settings'], `${at}.settings`, problems);
    const queueSource: SettingSource = (key) => {
      if (key === 'queue_name') return name;
      // The router has matched the paths already.
      if (key === 'queue_paths') return '/*';
      if (key === 'cookie_name') return overrides.get(key) ?? `${source(key) ?? 'waiting_room'}_${name}`;
      return overrides.get(key) ?? source(key);
    };
    try {
      setups.push({
        rule: { name, hosts, paths: paths.length > 0 ? paths : parsePathPatterns('/*'), countries },
        config: parseConfig(queueSource),
      });
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      for (const problem of error.problems) {
        problems.push({ key: overrides.has(problem.key) ? `${at}.settings.${problem.key}` : `${problem.key} (in ${at})`, message: problem.message });
      }
    }
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return setups;
}

function readList(value: unknown, key: string, problems: ConfigProblem[], read: (item: string, key: string) => string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    problems.push({ key, message: 'must be a list of strings' });
    return [];
  }
  return value.flatMap((item: unknown, i) => {
    if (typeof item !== 'string') {
      problems.push({ key: `${key}[${i}]`, message: 'must be a string' });
      return [];
    }
    return [read(item, `${key}[${i}]`)];
  });
}

function readSettings(value: unknown, key: string, problems: ConfigProblem[]): Map<string, string> {
  const settings = new Map<string, string>();
  if (value === undefined) return settings;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    problems.push({ key, message: 'must be an object of settings' });
    return settings;
  }
  for (const [name, raw] of Object.entries(value as Record<string, unknown>)) {
    if (SERVICE_KEYS.has(name)) {
      problems.push({ key: `${key}.${name}`, message: 'is a setting of the whole service, not of one queue' });
    } else if (!(CONFIG_KEYS as readonly string[]).includes(name)) {
      problems.push(unknownNameProblem(`${key}.${name}`, name, CONFIG_KEYS));
    } else if (typeof raw === 'string' || typeof raw === 'number' || typeof raw === 'boolean') {
      settings.set(name, String(raw));
    } else {
      problems.push({ key: `${key}.${name}`, message: 'must be a string, number or boolean' });
    }
  }
  return settings;
}

export interface RequestFacts {
  readonly host: string;
  readonly path: string;
  readonly country: string | undefined;
}

/** The first queue whose rule covers the request, or undefined. */
export function selectQueue<T extends { readonly rule: QueueRule }>(queues: readonly T[], facts: RequestFacts): T | undefined {
  const host = facts.host.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
  const country = facts.country?.toUpperCase();
  const readings = readPath(facts.path);
  return queues.find(({ rule }) => {
    if (rule.hosts.length > 0 && !rule.hosts.includes(host)) return false;
    if (rule.countries.length > 0 && (country === undefined || !rule.countries.includes(country))) return false;
    // Any reading an origin might make of the path puts it in the queue (see path-canon.ts).
    return queueApplies(readings, rule.paths);
  });
}
