/**
 * The settings as one Config Store item (a JSON object) and the secrets read as a request needs
 * them: what the Fastly adapter does in one lookup instead of one per setting.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, parseSecretsOnDemand, parseSettingsDocument } from '../src/core/config';
import { buildWithLastValid, type SettingsMemory } from '../src/core/last-valid';
import { signToken, verifyToken } from '../src/core/tokens';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { BASE_SECRETS, BASE_SETTINGS, ManualClock, MemoryLogger, RecordingOrigin, source } from './support/fixtures';

class Memory implements SettingsMemory {
  snapshot: string | undefined;
  async recall() {
    return this.snapshot;
  }
  async remember(snapshot: string) {
    this.snapshot = snapshot;
  }
}

const clock = new ManualClock();
const deps = { store: new MemoryQueueStore(), origin: new RecordingOrigin(), logger: new MemoryLogger(), clock, cache: new MemoryStateCache(clock), authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock) };

describe('the settings item', () => {
  it('is parsed and validated like the separate items', () => {
    const document = parseSettingsDocument(JSON.stringify({ ...BASE_SETTINGS, max_active: 500, page_title: 'Sale' }));
    expect(document.problems).toEqual([]);
    const config = parseConfig(document.source);
    expect(config.maxActive).toBe(500);
    expect(config.pageTitle).toBe('Sale');
    expect(() => parseConfig(parseSettingsDocument(JSON.stringify({ ...BASE_SETTINGS, refresh_seconds: 'soon' })).source)).toThrow(/refresh_seconds/);
  });

  it('takes queues as the JSON array itself', () => {
    const queues = [{ name: 'sale', paths: ['/sale/*'] }, { name: 'default' }];
    const document = parseSettingsDocument(JSON.stringify({ ...BASE_SETTINGS, queues }));
    expect(JSON.parse(document.source('queues')!)).toEqual(queues);
  });

  it('names broken JSON and a document that is not an object', () => {
    const broken = parseSettingsDocument('{"max_active": 5,');
    expect(broken.problems).toHaveLength(1);
    expect(broken.problems[0]!.key).toBe('Config Store item settings');
    expect(broken.problems[0]!.message).toMatch(/must be a JSON object of settings: /);
    expect(parseSettingsDocument('["max_active"]').problems[0]!.message).toMatch(/must be a JSON object/);
    expect(parseSettingsDocument('{"max_active": null}').problems).toEqual([{ key: 'max_active', message: expect.stringMatching(/got null/) }]);
  });

  it('names every unknown key, with the nearest spelling, and a secret put among the settings', () => {
    const document = parseSettingsDocument(JSON.stringify({ ...BASE_SETTINGS, max_activ: '5', admin_password: 'x' }));
    expect(document.problems).toEqual([
      { key: 'Config Store item settings key max_activ', message: expect.stringMatching(/did you mean max_active\?/) },
      { key: 'Config Store item settings key admin_password', message: expect.stringMatching(/is a secret/) },
    ]);
  });

  it('with an unknown key is refused and the last valid settings are kept', async () => {
    const memory = new Memory();
    const good = parseSettingsDocument(JSON.stringify({ ...BASE_SETTINGS, page_title: 'Last good' }));
    await buildWithLastValid(good.source, source(BASE_SECRETS), deps, memory, good.problems);
    const bad = parseSettingsDocument(JSON.stringify({ ...BASE_SETTINGS, page_title: 'New', max_activ: '5', refresh_seconds: 'soon' }));
    const built = await buildWithLastValid(bad.source, source(BASE_SECRETS), deps, memory, bad.problems);
    expect(built.refused).toBeInstanceOf(ConfigError);
    // Both kinds of problem named at once: the unknown name and the bad value.
    expect(built.refused!.problems.map((p) => p.key)).toEqual(['Config Store item settings key max_activ', 'refresh_seconds']);
    expect(built.service.config.pageTitle).toBe('Last good');
    expect(JSON.parse(memory.snapshot!)).toMatchObject({ page_title: 'Last good' });
  });

  it('with broken JSON and nothing to fall back on is a ConfigError naming the item', async () => {
    const bad = parseSettingsDocument('{not json');
    await expect(buildWithLastValid(bad.source, source(BASE_SECRETS), deps, new Memory(), bad.problems)).rejects.toThrow(/Config Store item settings: must be a JSON object/);
  });
});

describe('secrets on demand', () => {
  function counting(values: Record<string, string>) {
    const asked: string[] = [];
    return { asked, source: (key: string) => (asked.push(key), values[key]) };
  }

  it('reads only the signing keys for a token check', async () => {
    const { asked, source: secrets } = counting(BASE_SECRETS);
    const parsed = parseSecretsOnDemand(secrets);
    const token = await signToken(parsed.keyRing, { q: 'default', k: 'a', t: 1, iat: 1000, exp: 2000 });
    expect((await verifyToken(parsed.keyRing, token, 'default', 1_500_000, ['a'])).ok).toBe(true);
    expect(new Set(asked)).toEqual(new Set(['signing_keys']));
    expect(parsed.adminPassword).toBe(BASE_SECRETS['admin_password']);
    expect(asked).toContain('admin_password');
    expect(asked).toContain('admin_api_token');
  });

  it('refuses a broken key ring at once, and a weak admin password when it is first asked for', () => {
    expect(() => parseSecretsOnDemand(counting({ signing_keys: 'k1:short' }).source)).toThrow(ConfigError);
    const parsed = parseSecretsOnDemand(counting({ ...BASE_SECRETS, admin_password: 'short' }).source);
    expect(() => parsed.adminPassword).toThrow(/admin_password: must be at least 12 characters/);
    expect(() => parsed.adminApiToken).toThrow(ConfigError);
  });

  it('reads the admin password again on each ask, so a service kept across requests sees a changed one', () => {
    const values: Record<string, string> = { ...BASE_SECRETS };
    const parsed = parseSecretsOnDemand((key) => values[key]);
    expect(parsed.adminPassword).toBe(BASE_SECRETS['admin_password']);
    values['admin_password'] = 'a-new-admin-password';
    expect(parsed.adminPassword).toBe('a-new-admin-password');
  });
});

describe('the last valid settings, checked cheaply', () => {
  it('asks holds() and neither recalls nor rewrites while the settings are unchanged', async () => {
    let recalls = 0;
    let writes = 0;
    let kept: string | undefined;
    const memory: SettingsMemory = {
      async recall() {
        recalls++;
        return kept;
      },
      async remember(snapshot) {
        writes++;
        kept = snapshot;
      },
      async holds(snapshot) {
        return kept === snapshot;
      },
    };
    const settings = source({ ...BASE_SETTINGS, page_title: 'One' });
    for (let i = 0; i < 3; i++) await buildWithLastValid(settings, source(BASE_SECRETS), deps, memory);
    expect({ recalls, writes }).toEqual({ recalls: 0, writes: 1 });
    await buildWithLastValid(source({ ...BASE_SETTINGS, page_title: 'Two' }), source(BASE_SECRETS), deps, memory);
    expect(writes).toBe(2);
    expect(JSON.parse(kept!)).toMatchObject({ page_title: 'Two' });
  });
});
