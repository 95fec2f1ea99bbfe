/**
 * `npm run check-config` names the setting of every problem, whatever the value: no input makes it
 * print a bare error ("Invalid URL") instead of the key. And the settings the docs tell an operator
 * to start from pass it once their `<placeholders>` are filled in, while the placeholders left in
 * are refused by name.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { CONFIG_KEYS } from '../src/core/config';
import { checkConfigFile, checkSettingsDocument, runCheckConfig } from '../src/node/check-config';
import { PROJECT_ROOT } from './support/compute-host';
import { ACCOUNTS_SECRET } from './support/fixtures';

const DOCS = ['README.md', ...readdirSync(join(PROJECT_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** A problem names the setting when its key is a setting or a queue's field, as the settings item holds it. */
function namesASetting(key: string): boolean {
  const name = key.replace(/^Config Store item settings key /, '');
  return (CONFIG_KEYS as readonly string[]).includes(name) || /^(queues|webhooks)(\[\d+\])?(\.|\[|$)/.test(name);
}

/** The JSON code blocks of a Markdown page whose object keys are all settings: the settings examples. */
function settingsExamples(page: string): string[] {
  const text = readFileSync(join(PROJECT_ROOT, page), 'utf8');
  return [...text.matchAll(/^```json\n([\s\S]*?)^```/gm)]
    .map((m) => m[1]!)
    .filter((block) => {
      const keys = [...block.matchAll(/^\s*"([a-z_]+)":/gm)].map((k) => k[1]!);
      return keys.length > 0 && block.trimStart().startsWith('{') && keys.every((k) => (CONFIG_KEYS as readonly string[]).includes(k));
    });
}

/** What an operator would type for each `<placeholder>`: a host name where one stands in a host. */
const filledIn = (block: string): string => block.replace(/<[^<>\n]+>/g, 'example1');

describe('check-config names the setting of every problem', () => {
  it('an upstash_url whose host is no host name (the guide\'s own example) is a problem of upstash_url', () => {
    const problems = checkSettingsDocument(JSON.stringify({ upstash_url: 'https://<name>-<id>.upstash.io' }));
    expect(problems).toEqual([{ key: 'Config Store item settings key upstash_url', message: expect.stringContaining('https://<name>-<id>.upstash.io') }]);
  });

  /** Values that have broken parsers before: URLs the pattern lets through and URL parsing refuses, numbers JSON and Number read differently. */
  const HOSTILE = ['https://', 'https://<name>-<id>.upstash.io', 'https://[::1', 'https://a:b:c', 'https://%zz', 'https://a b', '-1', '1e309', 'NaN', '0x10', '[]', '{}', '{"a":', '[{"name": "q", "settings": {"upstash_url": "https://<x>"}}]', '2026-13-01T00:00:00Z', '\u0000', '\ud800'];
  const unnamed = (key: string, value: string): string[] =>
    checkSettingsDocument(JSON.stringify({ [key]: value }))
      .filter((p) => !namesASetting(p.key) || p.message === '')
      .map((p) => `${key}=${JSON.stringify(value)}: ${p.key}: ${p.message}`);

  it('for every setting and every value that has broken a parser: problems, each naming a setting', () => {
    expect(CONFIG_KEYS.flatMap((key) => HOSTILE.flatMap((value) => unnamed(key, value)))).toEqual([]);
  });

  it('for any value of any setting: problems, each naming a setting, and never an error of its own', () => {
    // Any code point, lone surrogates included (fast-check's own 'binary' unit builds its table for seconds).
    const text = fc.array(fc.integer({ min: 0, max: 0x10ffff }).map((c) => String.fromCodePoint(c)), { maxLength: 40 }).map((a) => a.join(''));
    const url = text.map((s) => `https://${s}`);
    // Any setting with any text, the URL settings with URL-like text, and a queue's own settings.
    const pairs = fc.oneof(
      fc.tuple(fc.constantFrom(...CONFIG_KEYS), fc.oneof(fc.string({ maxLength: 40 }), text, url)),
      fc.tuple(fc.constantFrom('upstash_url', 'challenge_verify_url', 'challenge_script_url', 'page_logo_url'), url),
      fc.tuple(fc.constant('queues'), url.map((u) => `[{"name": "q", "settings": {"upstash_url": ${JSON.stringify(u)}}}]`)),
    );
    fc.assert(
      fc.property(pairs, ([key, value]) => {
        const found = unnamed(key, value);
        if (found.length > 0) throw new Error(found.join('; '));
      }),
      { numRuns: 300 },
    );
  });

  it('a file that is not JSON, or a listing with a broken entry, is a problem of the settings item or the listing', () => {
    expect(checkConfigFile('{"queue_name": "default",')).toEqual([{ key: 'Config Store item settings', message: expect.stringMatching(/^must be a JSON object of settings/) }]);
    expect(checkConfigFile('[{"item_key": "settings"}]')).toEqual([{ key: 'Config Store listing', message: expect.stringMatching(/item_key and item_value/) }]);
  });
});

describe('the settings examples of the docs', () => {
  const examples = DOCS.flatMap((page) => settingsExamples(page).map((block, i) => ({ name: `${page} #${i + 1}`, block })));
  const dir = mkdtempSync(join(tmpdir(), 'wr-check-config-'));
  let files = 0;
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('there are some: the deploy guide\'s and the configuration reference\'s', () => {
    expect(examples.map((e) => e.name)).toEqual(expect.arrayContaining([expect.stringMatching(/^docs\/deploying\.md/), expect.stringMatching(/^docs\/configuration\.md/)]));
  });

  it.each(examples)('$name passes check-config once its placeholders are filled in', ({ block }) => {
    expect(checkConfigFile(filledIn(block))).toEqual([]);
  });

  it('npm run check-config on the deploy guide\'s example as written names upstash_url, and passes it filled in', () => {
    const guide = examples.find((e) => e.name.startsWith('docs/deploying.md'))!;
    const run = (text: string) => {
      const file = join(dir, `settings-${++files}.json`);
      writeFileSync(file, text);
      return runCheckConfig(file, PROJECT_ROOT, {});
    };
    const raw = run(guide.block);
    expect(raw.status).toBe(1);
    expect(raw.stderr).toMatch(/^ {2}- Config Store item settings key upstash_url: must be an http\(s\) URL with a valid host name/m);
    expect(raw.stderr).not.toMatch(/Invalid URL/);
    expect(run(filledIn(guide.block))).toEqual({ stdout: expect.stringMatching(/: no problems\n$/), stderr: '', status: 0 });
  });
});

describe('check-config and the admin_accounts secret', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-accounts-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, text: string): string => {
    const file = join(dir, name);
    writeFileSync(file, text);
    return file;
  };

  it('--accounts FILE names admin_accounts and the account for every mistake, and passes a good file', () => {
    const bad = runCheckConfig(undefined, PROJECT_ROOT, {}, write('bad.json', JSON.stringify({ otto: { role: 'root', hash: 'x' } })));
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/^ {2}- admin_accounts: account "otto": role must be viewer, operator or admin$/m);
    expect(runCheckConfig(undefined, PROJECT_ROOT, {}, write('good.json', `${ACCOUNTS_SECRET}\n`))).toEqual({ stdout: expect.stringMatching(/good\.json: no problems\n$/), stderr: '', status: 0 });
  });

  it('without FILE, checks WR_ADMIN_ACCOUNTS with the other secrets, naming it', () => {
    const run = runCheckConfig(undefined, PROJECT_ROOT, { WR_ADMIN_ACCOUNTS: '{"otto": {"role": "operator", "hash": "pbkdf2-sha256$5$AAAA$BBBB"}}' });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/^ {2}- environment variable WR_ADMIN_ACCOUNTS: account "otto": hash iterations must be from 1000 to 100000, got 5$/m);
  });
});
