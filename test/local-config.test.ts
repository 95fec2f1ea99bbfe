/**
 * Names that are not ours are refused, never silently ignored: a misspelt `WR_` environment
 * variable, an unknown key of devconfig.json, an unknown Config Store item, and a host option with
 * a value it does not take. Each problem says where the name came from and, when one is close,
 * the spelling that was probably meant.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, nearestName, unknownSettingProblems } from '../src/core/config';
import { buildWithLastValid, type SettingsMemory } from '../src/core/last-valid';
import { checkConfigFile, checkConfigStoreItems, checkLocalConfig, readConfigStoreListing } from '../src/node/check-config';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { readLocalConfig } from '../src/platform/node';
import { MemoryQueueStore } from '../src/store/memory-store';
import { BASE_SECRETS, BASE_SETTINGS, ManualClock, MemoryLogger, RecordingOrigin, source } from './support/fixtures';

const dir = mkdtempSync(join(tmpdir(), 'wr-local-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** A devconfig.json of the given sections, written to a fresh file. */
function devconfig(document: unknown): string {
  const path = join(dir, `devconfig-${++files}.json`);
  writeFileSync(path, typeof document === 'string' ? document : JSON.stringify(document));
  return path;
}

const GOOD = { '//': 'a comment', config: BASE_SETTINGS, dev_secrets: BASE_SECRETS };

describe('readLocalConfig', () => {
  it('finds nothing wrong in the shipped devconfig.json', () => {
    const local = readLocalConfig(fileURLToPath(new URL('../devconfig.json', import.meta.url)), {});
    expect(local.problems).toEqual([]);
    expect(local.host).toEqual({ store: 'memory', templatesDir: undefined, bind: '127.0.0.1', trustedProxies: [], deployment: false, redisShards: [] });
  });

  it('takes a deployment (another store, or HOST off loopback) for one: secrets from the environment alone, the published development values refused by name', () => {
    const shipped = fileURLToPath(new URL('../devconfig.json', import.meta.url));
    const dev = (JSON.parse(readFileSync(shipped, 'utf8')) as { dev_secrets: Record<string, string> }).dev_secrets;
    const redisEnv = { WR_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:6390' };
    const deployed = readLocalConfig(shipped, redisEnv);
    expect(deployed.host).toMatchObject({ deployment: true, bind: '127.0.0.1' });
    // devconfig.json's development values are not read at all: a missing key ring is named by its variable.
    expect(deployed.secrets('signing_keys')).toBeUndefined();
    expect(deployed.secrets('admin_password')).toBeUndefined();
    expect(deployed.describe('signing_keys')).toBe('environment variable WR_SIGNING_KEYS, not set');
    // ...nor taken through the environment: by equality, or by the marker every published one carries.
    const refused = readLocalConfig(shipped, { ...redisEnv, WR_SIGNING_KEYS: dev['signing_keys']!, WR_ADMIN_PASSWORD: dev['admin_password']!, WR_ADMIN_API_TOKEN: 'an-old-dev-only-origin-token-5150' });
    expect(refused.problems.map((p) => p.key)).toEqual(['environment variable WR_SIGNING_KEYS', 'environment variable WR_ADMIN_PASSWORD', 'environment variable WR_ADMIN_API_TOKEN']);
    for (const problem of refused.problems) {
      expect(problem.message).toMatch(/development value published in devconfig.json/);
      for (const value of Object.values(dev)) expect(problem.message).not.toContain(value);
    }
    // Values of one's own pass; the demo still runs on the development values.
    expect(readLocalConfig(shipped, { ...redisEnv, WR_SIGNING_KEYS: `k1:${'7Hq2'.repeat(10)}x` }).problems).toEqual([]);
    expect(readLocalConfig(shipped, {}).secrets('admin_password')).toBe(dev['admin_password']);
    // HOST: off loopback is a deployment even with the memory store; loopback is not; a name is refused.
    expect(readLocalConfig(shipped, { HOST: '0.0.0.0' }).host).toMatchObject({ bind: '0.0.0.0', deployment: true });
    expect(readLocalConfig(shipped, { HOST: '::1' }).host).toMatchObject({ bind: '::1', deployment: false });
    expect(readLocalConfig(shipped, { HOST: 'my-laptop' }).problems).toEqual([
      { key: 'environment variable HOST', message: 'must be the IP address to listen on (127.0.0.1, 0.0.0.0 or :: for every interface, or one of this machine\'s), got "my-laptop"' },
    ]);
  });

  it('refuses, in a deployment, a Redis without a password on another machine unless the operator vouches for the network', () => {
    const shipped = fileURLToPath(new URL('../devconfig.json', import.meta.url));
    const secrets = { WR_SIGNING_KEYS: `k1:${'7Hq2'.repeat(10)}x` };
    const open = readLocalConfig(shipped, { ...secrets, WR_STORE: 'redis', REDIS_URL: 'redis://10.0.4.7:6379' });
    expect(open.problems).toEqual([
      {
        key: 'environment variable REDIS_URL',
        message: 'names 10.0.4.7:6379 without a password: give it one (redis://:PASSWORD@host:port, or rediss:// for TLS) or, on a private network you trust, set WR_REDIS_ALLOW_NO_AUTH=true',
      },
    ]);
    expect(readLocalConfig(shipped, { ...secrets, WR_STORE: 'redis', REDIS_URL: 'redis://10.0.4.7:6379', WR_REDIS_ALLOW_NO_AUTH: 'true' }).problems).toEqual([]);
    expect(readLocalConfig(shipped, { ...secrets, WR_STORE: 'redis', REDIS_URL: 'rediss://default:s3cret-Value@db.example.net:6380' }).problems).toEqual([]);
    expect(readLocalConfig(shipped, { ...secrets, WR_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:6379' }).problems).toEqual([]);
  });

  it('refuses a misspelt WR_ variable, naming it and the setting it was meant to be', () => {
    const local = readLocalConfig(devconfig(GOOD), { WR_MAX_ACTIV: '20', WR_MAX_ACTIVE: '5', PATH: '/usr/bin', ORIGIN_URL: 'http://x', HOME: '/root' });
    expect(local.problems).toEqual([{ key: 'environment variable WR_MAX_ACTIV', message: 'is not a setting of the waiting room; did you mean WR_MAX_ACTIVE?' }]);
    // The correctly spelt one is read; variables without the WR_ prefix are not ours to judge.
    expect(local.settings('max_active')).toBe('5');
    expect(local.describe('max_active')).toBe('environment variable WR_MAX_ACTIVE');
  });

  it('refuses a lower-case wr_ variable, which is never read, naming the upper-case one it was meant to be', () => {
    const local = readLocalConfig(devconfig(GOOD), { wr_admit_per_period: '5', Wr_Store: 'redis', wr_max_activ: '3' });
    expect(local.problems).toEqual([
      { key: 'environment variable Wr_Store', message: "is not read: the waiting room's variables are upper case; did you mean WR_STORE?" },
      { key: 'environment variable wr_admit_per_period', message: "is not read: the waiting room's variables are upper case; did you mean WR_ADMIT_PER_PERIOD?" },
      { key: 'environment variable wr_max_activ', message: "is not read: the waiting room's variables are upper case (is not a setting of the waiting room; did you mean WR_MAX_ACTIVE?)" },
    ]);
    // Nothing of them was taken.
    expect(local.describe('admit_per_period')).not.toBe('environment variable wr_admit_per_period');
    expect(local.host.store).toBe('memory');
  });

  it('refuses WR_STORE with a value it does not take, naming the allowed ones, and a misspelt WR_STORE', () => {
    expect(readLocalConfig(devconfig(GOOD), { WR_STORE: 'upstsh' }).problems).toEqual([
      { key: 'environment variable WR_STORE', message: 'must be one of memory, upstash, redis, got "upstsh"' },
    ]);
    expect(readLocalConfig(devconfig(GOOD), { WR_STROE: 'upstash' }).problems).toEqual([
      { key: 'environment variable WR_STROE', message: 'is not a setting of the waiting room; did you mean WR_STORE?' },
    ]);
    expect(readLocalConfig(devconfig(GOOD), { WR_STORE: 'upstash' })).toMatchObject({ problems: [], host: { store: 'upstash' } });
    expect(readLocalConfig(devconfig(GOOD), { WR_STORE: 'memory' })).toMatchObject({ problems: [], host: { store: 'memory' } });
  });

  it('takes WR_STORE=redis only with a valid REDIS_URL: one server, or a cluster (several nodes, or WR_REDIS_CLUSTER=true)', () => {
    // A private network's Redis without a password: allowed here, refused by default (see the deployment test).
    const problemsOf = (env: Record<string, string>) => readLocalConfig(devconfig(GOOD), { WR_STORE: 'redis', WR_REDIS_ALLOW_NO_AUTH: 'true', ...env }).problems;
    expect(problemsOf({})).toEqual([{ key: 'environment variable REDIS_URL', message: 'is required with WR_STORE=redis (e.g. redis://127.0.0.1:6379)' }]);
    expect(problemsOf({ REDIS_URL: 'localhost:6379' })).toEqual([
      { key: 'environment variable REDIS_URL', message: expect.stringMatching(/^is not a URL: "localhost:6379"|^must use redis:\/\/ or rediss:\/\//) },
    ]);
    expect(problemsOf({ REDIS_URL: 'https://example.com' })).toEqual([
      { key: 'environment variable REDIS_URL', message: 'must use redis:// or rediss://, got "https://example.com"' },
    ]);
    expect(problemsOf({ REDIS_URL: 'redis://r:6379', WR_REDIS_CLUSTER: 'yes' })).toEqual([
      { key: 'environment variable WR_REDIS_CLUSTER', message: 'must be one of true, false, got "yes"' },
    ]);
    const host = (env: Record<string, string>) => readLocalConfig(devconfig(GOOD), { WR_STORE: 'redis', WR_REDIS_ALLOW_NO_AUTH: 'true', ...env });
    expect(host({ REDIS_URL: 'redis://r:6379' })).toMatchObject({ problems: [], host: { store: 'redis', redis: { urls: ['redis://r:6379'], cluster: false } } });
    expect(host({ REDIS_URL: 'redis://r:6379', WR_REDIS_CLUSTER: 'true' }).host.redis).toEqual({ urls: ['redis://r:6379'], cluster: true });
    expect(host({ REDIS_URL: 'redis://a:7000,redis://b:7001' }).host.redis).toEqual({ urls: ['redis://a:7000', 'redis://b:7001'], cluster: true });
    // REDIS_URL is not read unless the store is Redis: it may be set for something else.
    expect(readLocalConfig(devconfig(GOOD), { REDIS_URL: 'nonsense' })).toMatchObject({ problems: [], host: { store: 'memory', redis: undefined } });
  });

  it('refuses a WR_TEMPLATES_DIR that is not a directory', () => {
    expect(readLocalConfig(devconfig(GOOD), { WR_TEMPLATES_DIR: join(dir, 'missing') }).problems).toEqual([
      { key: 'environment variable WR_TEMPLATES_DIR', message: `is not a directory: ${join(dir, 'missing')}` },
    ]);
    expect(readLocalConfig(devconfig(GOOD), { WR_TEMPLATES_DIR: dir })).toMatchObject({ problems: [], host: { templatesDir: dir } });
  });

  it('refuses unknown keys of devconfig.json in every section, with a suggestion only when one is close', () => {
    const path = devconfig({
      ...GOOD,
      confg: {},
      config: { ...BASE_SETTINGS, max_activ: '20', colour: 'red', admin_password: 'in-the-wrong-place' },
      dev_secrets: { ...BASE_SECRETS, signing_key: 'k1:x', hold_status: '503' },
    });
    const problems = readLocalConfig(path, {}).problems;
    const file = basename(path);
    expect(problems).toEqual([
      { key: `${file} key confg`, message: 'is not a section (config, dev_secrets); did you mean config?' },
      { key: `${file} key config.max_activ`, message: 'is not a setting of the waiting room; did you mean max_active?' },
      { key: `${file} key config.colour`, message: 'is not a setting of the waiting room' },
      { key: `${file} key config.admin_password`, message: 'is a secret: put it under dev_secrets (on Fastly: the Secret Store)' },
      { key: `${file} key dev_secrets.signing_key`, message: 'is not a secret of the waiting room; did you mean signing_keys?' },
      { key: `${file} key dev_secrets.hold_status`, message: 'is a setting, not a secret: put it under config' },
    ]);
    // A secret's value never appears in a message.
    expect(JSON.stringify(problems)).not.toContain('in-the-wrong-place');
  });

  it('reports a file that is not JSON as a problem of the file', () => {
    const path = devconfig('{ "config": { "max_active": "20", } }');
    const [problem] = readLocalConfig(path, {}).problems;
    expect(problem?.key).toBe(basename(path));
    expect(problem?.message).toMatch(/^is not JSON: /);
  });
});

describe('buildWaitingRoom with the problems of its sources', () => {
  it('refuses to start, naming the unknown names and the bad values all at once', () => {
    const path = devconfig({ ...GOOD, config: { ...BASE_SETTINGS, max_activ: '20' } });
    const local = readLocalConfig(path, { WR_HOLD_STATUS: '302', WR_QUEUE_METHD: 'random' });
    let error: unknown;
    try {
      buildWaitingRoom({ ...local, originUrl: 'http://127.0.0.1:9', store: new MemoryQueueStore(), logger: new MemoryLogger() });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const keys = (error as ConfigError).problems.map((p) => p.key);
    expect(keys).toEqual([`${basename(path)} key config.max_activ`, 'environment variable WR_QUEUE_METHD', 'hold_status']);
    expect((error as ConfigError).message).toContain('did you mean WR_QUEUE_METHOD?');
    expect(local.describe('hold_status')).toBe('environment variable WR_HOLD_STATUS');
  });

  it('refuses to start on an unknown name alone, when every value is fine', () => {
    const local = readLocalConfig(devconfig(GOOD), { WR_SESION_SECONDS: '900' });
    expect(() => buildWaitingRoom({ ...local, originUrl: 'http://127.0.0.1:9', store: new MemoryQueueStore(), logger: new MemoryLogger() })).toThrow(
      /environment variable WR_SESION_SECONDS: is not a setting of the waiting room; did you mean WR_SESSION_SECONDS\?/,
    );
    const fine = readLocalConfig(devconfig(GOOD), { WR_SESSION_SECONDS: '900' });
    expect(buildWaitingRoom({ ...fine, originUrl: 'http://127.0.0.1:9', store: new MemoryQueueStore(), logger: new MemoryLogger() }).config.sessionSeconds).toBe(900);
  });
});

describe('Config Store items', () => {
  it('names every item that is not a setting, with the nearest spelling, and a secret put there', () => {
    expect(unknownSettingProblems(['queue_name', 'max_activ', 'upstash_token', 'totally_else'])).toEqual([
      { key: 'Config Store item max_activ', message: 'is not a setting of the waiting room; did you mean max_active?' },
      { key: 'Config Store item upstash_token', message: 'is a secret: it belongs in the Secret Store (wr_secrets), never with the settings' },
      { key: 'Config Store item totally_else', message: 'is not a setting of the waiting room' },
    ]);
  });

  it('suggests only within an edit distance of 2', () => {
    expect(nearestName('max_activ', ['max_active', 'queue_name'])).toBe('max_active');
    expect(nearestName('MAX_ACTIVE_', ['max_active'])).toBe('max_active');
    expect(nearestName('mx_acti', ['max_active'])).toBeUndefined();
    expect(nearestName('refresh_secs', ['refresh_seconds'])).toBeUndefined();
  });
});

describe('npm run check-config', () => {
  it('reads a Fastly CLI listing of the Config Store and names every unknown item and bad value', () => {
    const listing = JSON.stringify([
      { item_key: 'queue_name', item_value: 'default', store_id: 'abc' },
      { item_key: 'max_activ', item_value: '20', store_id: 'abc' },
      { item_key: 'hold_status', item_value: '302', store_id: 'abc' },
    ]);
    const items = readConfigStoreListing(listing);
    expect([...items.keys()]).toEqual(['queue_name', 'max_activ', 'hold_status']);
    expect(checkConfigStoreItems(items)).toEqual([
      { key: 'Config Store item max_activ', message: 'is not a setting of the waiting room; did you mean max_active?' },
      { key: 'Config Store item hold_status', message: 'must be one of 200, 429, 503, got "302"' },
    ]);
    expect(checkConfigStoreItems(readConfigStoreListing(JSON.stringify(BASE_SETTINGS)))).toEqual([]);
    expect(() => readConfigStoreListing('[{"key": "x"}]')).toThrow(/item_key/);
  });

  it('checks the settings item: a settings file before it is published, a listing that holds it, the local store', () => {
    const settings = JSON.stringify({ ...BASE_SETTINGS, max_activ: '20', hold_status: '302' });
    const expected = [
      { key: 'Config Store item settings key max_activ', message: 'is not a setting of the waiting room; did you mean max_active?' },
      { key: 'Config Store item settings key hold_status', message: 'must be one of 200, 429, 503, got "302"' },
    ];
    expect(checkConfigFile(settings)).toEqual(expected);
    expect(checkConfigFile(JSON.stringify({ settings }))).toEqual(expected);
    const listing = JSON.stringify([
      { item_key: 'settings', item_value: JSON.stringify(BASE_SETTINGS) },
      { item_key: 'max_active', item_value: '20' },
    ]);
    // A per-setting item left over from the earlier layout is named: it is no longer read.
    expect(checkConfigFile(listing)).toEqual([{ key: 'Config Store item max_active', message: expect.stringMatching(/is not read while the settings item holds the settings/) }]);
    expect(checkConfigFile(JSON.stringify(BASE_SETTINGS))).toEqual([]);
    expect(checkConfigFile('{"settings": "{broken"}')[0]!.key).toBe('Config Store item settings');
  });

  it('checks devconfig.json with the environment as npm start reads them, weak secrets included', () => {
    const path = devconfig({ ...GOOD, dev_secrets: { ...BASE_SECRETS, signing_keys: `k1:${'a'.repeat(32)}` } });
    expect(checkLocalConfig(path, { WR_MAX_ACTIV: '3', WR_QUEUE_METHOD: 'fifa' })).toEqual([
      { key: 'environment variable WR_MAX_ACTIV', message: 'is not a setting of the waiting room; did you mean WR_MAX_ACTIVE?' },
      { key: 'environment variable WR_QUEUE_METHOD', message: 'must be one of fifo, random, got "fifa"' },
      { key: `${basename(path)} key dev_secrets.signing_keys`, message: expect.stringMatching(/only 1 different characters/) },
    ]);
    expect(checkLocalConfig(fileURLToPath(new URL('../devconfig.json', import.meta.url)), {})).toEqual([]);
  });

  it('checks webhooks for the host that sends them: a backend on Fastly, a URL and the secret on the Node host', () => {
    const webhooks = JSON.stringify([{ name: 'fastly-only', backend: 'hooks', path: '/x', events: ['*'] }, { name: 'node-only', url: 'https://hooks.example/x', events: ['*'] }]);
    expect(checkConfigFile(JSON.stringify({ ...BASE_SETTINGS, webhooks }))).toEqual([
      { key: 'Config Store item settings key webhooks[1]', message: expect.stringMatching(/node-only has no "backend": on Fastly/) },
    ]);
    const path = devconfig({ ...GOOD, config: { ...GOOD.config, webhooks } });
    expect(checkLocalConfig(path, {})).toEqual([
      { key: 'webhooks[0]', message: 'fastly-only has no "url": the Node host sends to a plain URL' },
      { key: 'environment variable WR_WEBHOOK_SECRET, not set', message: 'is required with webhooks: nothing is sent unsigned' },
    ]);
  });
});

describe('a misspelt key in the queues document on a running service', () => {
  it('is refused with its nearest spelling, and the service keeps its last valid settings', async () => {
    let snapshot: string | undefined;
    const memory: SettingsMemory = { recall: async () => snapshot, remember: async (s) => void (snapshot = s) };
    const clock = new ManualClock();
    const deps = { store: new MemoryQueueStore(), origin: new RecordingOrigin(), logger: new MemoryLogger(), clock, cache: new MemoryStateCache(clock), authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock) };
    await buildWithLastValid(source({ ...BASE_SETTINGS, page_title: 'Last good' }), source(BASE_SECRETS), deps, memory);
    const misspelt = source({ ...BASE_SETTINGS, queues: JSON.stringify([{ name: 'sale', settings: { max_activ: 20 } }]) });
    const built = await buildWithLastValid(misspelt, source(BASE_SECRETS), deps, memory);
    expect(built.refused?.problems).toEqual([{ key: 'queues[0].settings.max_activ', message: 'is not a setting of the waiting room; did you mean max_active?' }]);
    expect(await (await built.service.handler(new Request('https://shop.example/'), { address: '192.0.2.1', pop: 'TST' })).text()).toContain('Last good');
  });
});
