import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, parseSecrets, placeholderProblem, TICKET_BLOCKS_AUTO } from '../src/core/config';
import { MAX_TICKET_BLOCK } from '../src/core/ports';
import { blockSettings, DEFAULT_BLOCK_SETTINGS } from '../src/core/ticket-blocks';
import { ADMIN_PASSWORD, BASE_SECRETS, KEY_1, KEY_2, source } from './support/fixtures';

function problemsOf(run: () => unknown): { key: string; message: string }[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('parseConfig', () => {
  it("refuses fastly.toml's placeholder Upstash URL, saying where the real one is", () => {
    const problems = problemsOf(() => parseConfig(source({ upstash_url: 'https://YOUR-DB.upstash.io/' })));
    expect(problems).toEqual([{ key: 'upstash_url', message: expect.stringMatching(/^is still the placeholder your-db\.upstash\.io from fastly\.toml: set it to .*UPSTASH_REDIS_REST_URL/) }]);
    expect(parseConfig(source({ upstash_url: 'https://eu1-real-12345.upstash.io' })).upstashUrl).toBe('https://eu1-real-12345.upstash.io');
  });

  it('knows a placeholder backend host by name, whatever its case, and nothing else', () => {
    expect(placeholderProblem('backend origin', 'Origin.Example.com')?.message).toMatch(/^is still the placeholder Origin\.Example\.com from fastly\.toml: set it to the host name of your site/);
    expect(placeholderProblem('backend origin', 'shop.example.com')).toBeUndefined();
    expect(placeholderProblem('backend origin', '127.0.0.1')).toBeUndefined();
  });

  it('takes every default when it is given explicitly (a default is never checked when it stands in for a missing key)', () => {
    const defaults: Record<string, string> = {};
    parseConfig(() => undefined, (shape) => {
      if (shape.fallback !== '') defaults[shape.key] = shape.fallback;
    });
    expect(Object.keys(defaults).length).toBeGreaterThan(30);
    expect(parseConfig(source(defaults))).toEqual(parseConfig(() => undefined));
  });

  it('has a documented default for every key', () => {
    const config = parseConfig(() => undefined);
    expect(config).toMatchObject({
      queueName: 'default',
      pathPrefix: '/__wr/',
      cookieName: 'waiting_room',
      sessionSeconds: 300,
      sessionMaxSeconds: 0,
      activityRefreshSeconds: 30,
      leaveGraceSeconds: 10,
      maxActive: 0,
      maxNewPerMinute: 0,
      endSessionHeader: 'x-waiting-room-end-session',
      queueTimeoutSeconds: 600,
      refreshSeconds: 20,
      admitPerPeriod: 0,
      admitPeriodSeconds: 60,
      holdStatus: 200,
      storeFailure: 'hold',
      storeTimeoutMs: 1000,
      storeRetries: 1,
      upstashUrl: undefined,
      adminUser: 'admin',
    });
    expect(config.queuePaths).toHaveLength(1);
    expect(config.bypassPaths).toHaveLength(2);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reads every value it is given', () => {
    const config = parseConfig(
      source({
        queue_name: 'sale-2026',
        path_prefix: '/_queue/',
        queue_paths: '/shop/*, /checkout',
        bypass_paths: '/health',
        bypass_ips: '10.0.0.0/8, 2001:db8::/32',
        cookie_name: 'q',
        session_seconds: '900',
        queue_timeout_seconds: '120',
        refresh_seconds: '10',
        admit_per_period: '50',
        admit_period_seconds: '30',
        hold_status: '503',
        store_failure: 'pass',
        store_timeout_ms: '250',
        store_retries: '0',
        upstash_url: 'https://eu1-x.upstash.io/',
        admin_user: 'ops',
        page_title: 'Sale',
        page_message: 'Hold on',
      }),
    );
    expect(config).toMatchObject({
      queueName: 'sale-2026',
      pathPrefix: '/_queue/',
      cookieName: 'q',
      sessionSeconds: 900,
      queueTimeoutSeconds: 120,
      refreshSeconds: 10,
      admitPerPeriod: 50,
      admitPeriodSeconds: 30,
      holdStatus: 503,
      storeFailure: 'pass',
      storeTimeoutMs: 250,
      storeRetries: 0,
      upstashUrl: 'https://eu1-x.upstash.io',
      adminUser: 'ops',
      pageTitle: 'Sale',
      pageMessage: 'Hold on',
    });
    expect(config.queuePaths).toHaveLength(2);
    expect(config.bypassIps).toHaveLength(2);
  });

  it('names every bad key in one error', () => {
    const problems = problemsOf(() =>
      parseConfig(
        source({
          queue_name: 'Bad Name',
          path_prefix: 'no-slash',
          queue_paths: 'shop',
          bypass_ips: '10.0.0.0/33',
          session_seconds: '-5',
          refresh_seconds: '1e3',
          admit_per_period: '99999999',
          hold_status: '302',
          store_failure: 'open',
          upstash_url: 'ftp://x',
          cookie_name: 'a b',
        }),
      ),
    );
    expect(problems.map((p) => p.key).sort()).toEqual(
      [
        'admit_per_period',
        'bypass_ips',
        'cookie_name',
        'hold_status',
        'path_prefix',
        'queue_name',
        'queue_paths',
        'refresh_seconds',
        'session_seconds',
        'store_failure',
        'upstash_url',
      ].sort(),
    );
    for (const problem of problems) expect(problem.message.length).toBeGreaterThan(5);
  });

  it('reads page_texts: a language of the operator’s may be page_language; every mistake is named by its place', () => {
    const config = parseConfig(source({ page_texts: JSON.stringify({ sv: { in_line: 'Du står i kö' }, de: { page_message: 'Heute ab 9 Uhr.' } }), page_language: 'sv' }));
    expect(config.pageLanguage).toBe('sv');
    expect(config.pageTexts['de']).toEqual({ page_message: 'Heute ab 9 Uhr.' });
    expect(parseConfig(() => undefined).pageTexts).toEqual({});
    expect(problemsOf(() => parseConfig(source({ page_texts: '{"de": {"in_lin": "x", "ahead": {"one": "{n}"}}}', page_language: 'sv' })))).toEqual([
      { key: 'page_texts.de.in_lin', message: 'unknown text; did you mean in_line?' },
      { key: 'page_texts.de.ahead', message: 'needs an "other" form' },
      { key: 'page_language', message: 'must be one of en, de, fr, es, it, pt, nl, tr, ja, zh, ko, ar, got "sv"' },
    ]);
    expect(problemsOf(() => parseConfig(source({ page_texts: '{"de": ' })))).toEqual([{ key: 'page_texts', message: expect.stringMatching(/^is not valid JSON/) }]);
  });

  it('refuses a queue timeout shorter than three refreshes', () => {
    const problems = problemsOf(() => parseConfig(source({ refresh_seconds: '30', queue_timeout_seconds: '60' })));
    expect(problems).toEqual([{ key: 'queue_timeout_seconds', message: expect.stringContaining('90') }]);
  });

  it('reads an event schedule with a zone, and refuses impossible or zone-less times and an end before the start', () => {
    const config = parseConfig(source({ event_start: '2026-12-01T10:00:00+01:00', event_end: '2026-12-01T12:30:00Z', event_order: 'arrival', event_after: 'pass', queue_method: 'random' }));
    expect(config).toMatchObject({ eventStartMs: Date.UTC(2026, 11, 1, 9), eventEndMs: Date.UTC(2026, 11, 1, 12, 30), eventOrder: 'arrival', eventAfter: 'pass', queueMethod: 'random' });
    expect(parseConfig(source({})).eventStartMs).toBe(0);
    for (const bad of ['2026-02-30T09:00:00Z', '2026-12-01T09:00:00', '2026-12-01 09:00Z', 'tomorrow', '2026-13-01T09:00:00Z', '2026-12-01T24:00:00Z']) {
      expect(() => parseConfig(source({ event_start: bad })), bad).toThrow(/event_start: must be a date and time with a zone/);
    }
    expect(() => parseConfig(source({ event_start: '2026-12-01T09:00:00Z', event_end: '2026-12-01T09:00:00Z' }))).toThrow(/event_end: must be later than event_start/);
    const error = (() => {
      try {
        parseConfig(source({ event_order: 'random', event_after: 'open', queue_method: 'lottery' }));
      } catch (e) {
        return e as ConfigError;
      }
      return undefined;
    })();
    expect(error?.problems.map((p) => p.key).sort()).toEqual(['event_after', 'event_order', 'queue_method']);
  });

  it('reads ticket_blocks as off, auto or the largest block, and refuses anything else naming the key', () => {
    expect(parseConfig(source({})).ticketBlocks).toBe(0);
    expect(parseConfig(source({ ticket_blocks: 'off' })).ticketBlocks).toBe(0);
    expect(parseConfig(source({ ticket_blocks: 'auto' })).ticketBlocks).toBe(TICKET_BLOCKS_AUTO);
    expect(TICKET_BLOCKS_AUTO).toBe(DEFAULT_BLOCK_SETTINGS.maxSize);
    expect(parseConfig(source({ ticket_blocks: ' 40 ' })).ticketBlocks).toBe(40);
    expect(parseConfig(source({ ticket_blocks: String(MAX_TICKET_BLOCK) })).ticketBlocks).toBe(MAX_TICKET_BLOCK);
    // One number a join is an ordinary join: the same as off.
    expect(parseConfig(source({ ticket_blocks: '1' })).ticketBlocks).toBe(0);
    for (const bad of ['0', '1001', 'on', '-5', '2.5', 'AUTO', '1e2']) {
      expect(problemsOf(() => parseConfig(source({ ticket_blocks: bad }))), bad).toEqual([
        { key: 'ticket_blocks', message: `must be off, auto or the largest block, a whole number from 1 to ${MAX_TICKET_BLOCK}, got ${JSON.stringify(bad)}` },
      ]);
    }
    // The random method keeps every ticket in its draw; a number handed out is answered from the POP's cache.
    expect(problemsOf(() => parseConfig(source({ ticket_blocks: 'auto', queue_method: 'random' })))).toEqual([{ key: 'ticket_blocks', message: expect.stringContaining('queue_method = random') }]);
    expect(problemsOf(() => parseConfig(source({ ticket_blocks: '50', state_cache_seconds: '0' })))).toEqual([{ key: 'ticket_blocks', message: expect.stringContaining('state_cache_seconds above 0') }]);
    expect(parseConfig(source({ ticket_blocks: 'off', queue_method: 'random', state_cache_seconds: '0' })).ticketBlocks).toBe(0);
  });

  it('reads ticket_block_ms as the block age, 100 to 900 ms, and refuses one that would change nothing with blocks off', () => {
    expect(parseConfig(source({})).ticketBlockMs).toBe(DEFAULT_BLOCK_SETTINGS.maxAgeMs);
    expect(parseConfig(source({ ticket_blocks: 'auto', ticket_block_ms: '900' })).ticketBlockMs).toBe(900);
    expect(parseConfig(source({ ticket_blocks: '40', ticket_block_ms: ' 100 ' })).ticketBlockMs).toBe(100);
    // 900 is the ceiling: the order bound is the block's age plus a join's round trip, and the promise is one second.
    for (const bad of ['99', '901', '1000', '0']) {
      expect(problemsOf(() => parseConfig(source({ ticket_blocks: 'auto', ticket_block_ms: bad }))), bad).toEqual([{ key: 'ticket_block_ms', message: `must be between 100 and 900, got ${bad}` }]);
    }
    for (const bad of ['half', '500ms', '2.5']) {
      expect(problemsOf(() => parseConfig(source({ ticket_blocks: 'auto', ticket_block_ms: bad }))), bad).toEqual([{ key: 'ticket_block_ms', message: `must be a whole number, got ${JSON.stringify(bad)}` }]);
    }
    // With blocks off an age would do nothing: refused, naming what to do; the default given explicitly stands for a missing key.
    for (const off of [{}, { ticket_blocks: 'off' }, { ticket_blocks: '1' }] as Record<string, string>[]) {
      expect(problemsOf(() => parseConfig(source({ ...off, ticket_block_ms: '700' })))).toEqual([{ key: 'ticket_block_ms', message: expect.stringMatching(/changes nothing while ticket_blocks is off: set ticket_blocks .* or remove it \(got 700\)/) }]);
    }
    expect(parseConfig(source({ ticket_blocks: 'off', ticket_block_ms: '500' })).ticketBlockMs).toBe(500);
    // The allocator an instance builds: the age as given, sized to fill in half of it (the defaults' proportion).
    expect(blockSettings(TICKET_BLOCKS_AUTO, 500)).toEqual(DEFAULT_BLOCK_SETTINGS);
    expect(blockSettings(1000, 900)).toEqual({ maxSize: 1000, maxAgeMs: 900, fillTargetMs: 450 });
  });

});

describe('parseSecrets', () => {
  it('reads the secret store entries', () => {
    const secrets = parseSecrets(source(BASE_SECRETS));
    expect(secrets.keyRing.current.kid).toBe('k1');
    expect(secrets.adminPassword).toBe(BASE_SECRETS['admin_password']);
  });

  it('requires signing keys, and leaves admin off when no password is set', () => {
    expect(problemsOf(() => parseSecrets(() => undefined)).map((p) => p.key)).toEqual(['signing_keys']);
    const secrets = parseSecrets(source({ signing_keys: `k1:${KEY_1}` }));
    expect(secrets.adminPassword).toBeUndefined();
    expect(secrets.adminApiToken).toBeUndefined();
  });

  it('refuses weak credentials, naming the keys but never the values', () => {
    const problems = problemsOf(() =>
      parseSecrets(source({ signing_keys: 'k1:weak-secret', admin_password: 'hunter2', admin_api_token: 'short-token' })),
    );
    expect(problems.map((p) => p.key)).toEqual(['signing_keys', 'admin_password', 'admin_api_token']);
    const text = JSON.stringify(problems);
    for (const secret of ['weak-secret', 'hunter2', 'short-token']) expect(text).not.toContain(secret);
  });

  it('refuses a signing key of 32 repeated letters, or of a short pattern repeated, and says what a key needs', () => {
    for (const weak of ['a'.repeat(32), 'Ab1-'.repeat(10), '0123456789abcdef'.repeat(2), `${KEY_1.slice(0, 20)}zzzzzzzzzzzz`]) {
      const problems = problemsOf(() => parseSecrets(source({ ...BASE_SECRETS, signing_keys: `k1:${KEY_1},k2:${weak}` })));
      expect(problems, weak).toHaveLength(1);
      expect(problems[0]!.key).toBe('signing_keys');
      expect(problems[0]!.message).toMatch(/entry 2 \(k2\)/);
      expect(problems[0]!.message).toContain('openssl rand -base64 32');
      expect(JSON.stringify(problems)).not.toContain(weak);
    }
  });

  it('refuses placeholders, passphrases where a key is expected, and an admin password anyone would try first, naming the secret and never the value', () => {
    const cases: [string, Record<string, string>, string, RegExp][] = [
      ['an admin password of a common word and digits', { admin_password: 'password1234' }, 'admin_password', /first passwords anyone tries/],
      ['an admin password of a common word and symbols', { admin_password: 'Admin!2024#@' }, 'admin_password', /first passwords anyone tries/],
      ['an admin password of one character', { admin_password: 'aaaaaaaaaaaa' }, 'admin_password', /different characters/],
      ['an admin password left as the template says', { admin_password: '<your admin password>' }, 'admin_password', /placeholder/],
      ['an admin password to change', { admin_password: 'Changeme-2026!' }, 'admin_password', /placeholder/],
      ['an API token to replace', { admin_api_token: 'REPLACE-with-a-random-token-0123' }, 'admin_api_token', /placeholder/],
      ['an API token of words', { admin_api_token: 'correct horse battery staple origin' }, 'admin_api_token', /made of words/],
      ['a signing key of words', { signing_keys: 'k1:correct-horse-battery-staple-signing-key' }, 'signing_keys', /made of words/],
      ['a signing key placeholder', { signing_keys: 'k1:<at least 32 random characters go here>' }, 'signing_keys', /placeholder/],
      ['an Upstash token placeholder', { upstash_token: '<UPSTASH_REDIS_REST_TOKEN>' }, 'upstash_token', /placeholder/],
    ];
    for (const [name, secrets, key, message] of cases) {
      const problems = problemsOf(() => parseSecrets(source({ ...BASE_SECRETS, ...secrets })));
      expect(problems.map((p) => p.key), name).toEqual([key]);
      expect(problems[0]!.message, name).toMatch(message);
      for (const value of Object.values(secrets)) expect(JSON.stringify(problems), name).not.toContain(value.split(':').pop()!);
    }
    // Long random values pass, and so does a strong password made of words with digits and symbols.
    expect(() => parseSecrets(source({ ...BASE_SECRETS, admin_password: 'Tulip-47-Orbit-Vane!' }))).not.toThrow();
  });

  it('refuses an admin_api_token that is or contains the admin password, or is a signing key', () => {
    const cases: [string, Record<string, string>, RegExp][] = [
      ['equal to the password', { admin_password: 'correct-horse-battery-staple-1987', admin_api_token: 'correct-horse-battery-staple-1987' }, /admin password/],
      ['containing the password', { admin_password: ADMIN_PASSWORD, admin_api_token: `${ADMIN_PASSWORD}-for-the-origin-0427` }, /admin password/],
      ['the password in other case', { admin_password: ADMIN_PASSWORD, admin_api_token: `X9${ADMIN_PASSWORD.toUpperCase()}-origin-api` }, /admin password/],
      ['equal to a signing key', { admin_api_token: KEY_1 }, /signing key/],
      ['equal to an older signing key', { signing_keys: `k2:${KEY_2},k1:${KEY_1}`, admin_api_token: KEY_1 }, /signing key/],
      ['weak', { admin_api_token: '0'.repeat(30) }, /different characters/],
    ];
    for (const [name, secrets, message] of cases) {
      const problems = problemsOf(() => parseSecrets(source({ ...BASE_SECRETS, ...secrets })));
      expect(problems.map((p) => p.key), name).toEqual(['admin_api_token']);
      expect(problems[0]!.message, name).toMatch(message);
      expect(JSON.stringify(problems), name).not.toContain(secrets['admin_api_token']!);
    }
    // The same values apart are accepted.
    expect(() => parseSecrets(source(BASE_SECRETS))).not.toThrow();
  });

  it('refuses an admin password that is part of a signing key', () => {
    const problems = problemsOf(() => parseSecrets(source({ ...BASE_SECRETS, admin_password: KEY_1.slice(0, 16) })));
    expect(problems.map((p) => p.key)).toEqual(['admin_password']);
  });

  it("accepts devconfig.json's dev secrets", () => {
    const dev = (JSON.parse(readFileSync(new URL('../devconfig.json', import.meta.url), 'utf8')) as { dev_secrets: Record<string, string> }).dev_secrets;
    expect(() => parseSecrets(source(dev))).not.toThrow();
  });
});
