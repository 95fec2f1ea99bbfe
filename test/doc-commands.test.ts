/**
 * Every command the docs give is one the pinned tools take. The Fastly CLI commands of the README,
 * docs/*.md, fastly.toml's comments and the code's messages and comments are run against the
 * pinned CLI itself (the binary node_modules/.bin/fastly runs), offline and harmless: a fresh home
 * with no stored token, no token in the environment, every Fastly endpoint and proxy pointed at a
 * closed port, an empty working folder. The CLI parses the whole command line first (command, flag
 * names, required flags, flag values of a fixed set or a number) and only then needs a token or the
 * network, so a command that gets past parsing is one the CLI takes; "error parsing arguments" is a
 * wrong command. A command elided with `…` is checked with `--help` (its command and flag names).
 * `npm run` commands must name a script of package.json. A doc edit with a wrong flag fails here.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLACEHOLDER_HOSTS } from '../src/core/config';
import { PROJECT_ROOT } from './support/compute-host';
import { commandsOfMarkdown, commandsOfMessage, commandsOfTomlComments, type DocCommand } from './support/doc-commands';

/** The pinned CLI's own binary (what node_modules/.bin/fastly runs), without a Node process in front of each run. */
const FASTLY = (await import('@fastly/cli')).default;
const PAGES = ['README.md', ...readdirSync(join(PROJECT_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const read = (file: string): string => readFileSync(join(PROJECT_ROOT, file), 'utf8');

const COMMANDS: DocCommand[] = [
  ...PAGES.flatMap((page) => commandsOfMarkdown(read(page), page)),
  ...commandsOfTomlComments(read('fastly.toml'), 'fastly.toml'),
  ...Object.entries(PLACEHOLDER_HOSTS).flatMap(([host, message]) => commandsOfMessage(message, `src/core/config.ts PLACEHOLDER_HOSTS[${host}]`)),
  // What the code's own comments and messages tell an operator to type.
  ...(readdirSync(join(PROJECT_ROOT, 'src'), { recursive: true }) as string[])
    .filter((f) => /\.(ts|mjs)$/.test(f))
    .flatMap((f) => commandsOfMessage(read(`src/${f}`), `src/${f}`)),
];
const FASTLY_COMMANDS = COMMANDS.filter((c) => c.program === 'fastly' && c.args.length > 0);

interface Run {
  readonly code: number | null;
  readonly output: string;
}

let home: string;
let work: string;
/** A closed port: every request the CLI makes is refused at once, with or without a network. */
const NOWHERE = 'http://127.0.0.1:9';

function runFastly(args: readonly string[]): Promise<Run> {
  const env = {
    PATH: process.env['PATH'] ?? '',
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    FASTLY_API_ENDPOINT: NOWHERE,
    FASTLY_ACCOUNT_ENDPOINT: NOWHERE,
    HTTP_PROXY: NOWHERE,
    HTTPS_PROXY: NOWHERE,
    NO_PROXY: '',
  };
  return new Promise((done, fail) => {
    const child = spawn(FASTLY, args, { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    // Parsing is immediate; this only ends a run that hangs for a reason of its own.
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, output });
    });
  });
}

/** Runs each distinct command line once, a few at a time. */
async function runAll(lines: readonly (readonly string[])[]): Promise<Map<string, Run>> {
  const results = new Map<string, Run>();
  const queue = [...new Set(lines.map((l) => JSON.stringify(l)))];
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) results.set(next, await runFastly(JSON.parse(next) as string[]));
    }),
  );
  return results;
}

/** The CLI's line for a command it refused, or undefined when it got past parsing. */
function refusal(run: Run | undefined): string | undefined {
  if (run === undefined) return 'not run';
  if (run.code === null) return 'did not finish';
  return /^ERROR: error parsing arguments: .*$/m.exec(run.output)?.[0];
}

/** How a command is checked: as written, or with `--help` when it is elided. */
const lineOf = (command: DocCommand): string[] => (command.partial ? [...command.args, '--help'] : [...command.args]);

/** Command lines that must be refused, so that a pass above means something. */
const WRONG = {
  flag: ['service', 'backend', 'update', '--version', 'latest', '--autoclone', '--name', 'origin', '--adress', 'origin.example'],
  value: ['service', 'backend', 'update', '--version', 'latest', '--name', 'upstash', '--connect-timeout', 'soon'],
  choice: ['products', '--enable', 'edge_rate_limiting'],
  required: ['secret-store-entry', 'create', '--name', 'signing_keys', '--stdin'],
  command: ['service', 'backends', 'list', '--version', 'latest'],
  elided: ['secret-store-entry', 'create', '--recreate-alow', '--help'],
};

let runs: Map<string, Run>;
let topHelp: string;
let secretHelp: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'wr-doc-commands-home-'));
  work = mkdtempSync(join(tmpdir(), 'wr-doc-commands-'));
  // The CLI pauses a few seconds the first time it shows its data-collection notice: say it was shown.
  await runFastly(['version']);
  const config = join(home, '.config', 'fastly', 'config.toml');
  mkdirSync(join(home, '.config', 'fastly'), { recursive: true });
  try {
    writeFileSync(config, readFileSync(config, 'utf8').replace('metadata_notice_displayed = false', 'metadata_notice_displayed = true'));
  } catch {
    // No config written: the first compute command only takes longer.
  }
  runs = await runAll([...FASTLY_COMMANDS.map(lineOf), ...Object.values(WRONG), ['--help'], ['secret-store-entry', 'create', '--help']]);
  topHelp = runs.get(JSON.stringify(['--help']))!.output;
  secretHelp = runs.get(JSON.stringify(['secret-store-entry', 'create', '--help']))!.output;
});

afterAll(() => {
  rmSync(home, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

describe('the commands the docs give', () => {
  it('are found: the deploy guide\'s, the runbook\'s, fastly.toml\'s and the configuration\'s own', () => {
    const where = new Set(FASTLY_COMMANDS.map((c) => c.where.split(/[: ]/)[0]));
    expect([...where]).toEqual(expect.arrayContaining(['docs/deploying.md', 'docs/operating.md', 'fastly.toml', 'src/core/config.ts', 'src/node/keys.ts']));
    expect(FASTLY_COMMANDS.length).toBeGreaterThan(20);
  });

  it('the checker refuses a wrong flag, value, choice, missing flag and command, as the CLI does', () => {
    for (const [what, line] of Object.entries(WRONG)) expect(refusal(runs.get(JSON.stringify(line))), what).toMatch(/error parsing arguments/);
    expect(refusal(runs.get(JSON.stringify(FASTLY_COMMANDS.find((c) => !c.partial)!.args)))).toBeUndefined();
  });

  it('every Fastly CLI command is one the pinned CLI takes', () => {
    const refused = FASTLY_COMMANDS.flatMap((c) => {
      const why = refusal(runs.get(JSON.stringify(lineOf(c))));
      return why === undefined ? [] : [`${c.where}: fastly ${c.args.join(' ')}${c.partial ? ' (elided, checked with --help)' : ''}\n    ${why}`];
    });
    expect(refused.join('\n')).toBe('');
  });

  it('every Fastly CLI command is spelt as the CLI lists it (no hidden alias such as `fastly backend`)', () => {
    const listed = new Set([...topHelp.slice(topHelp.indexOf('COMMANDS')).matchAll(/^ {2}([a-z][a-z-]*) /gm)].map((m) => m[1]!));
    expect(listed.has('service')).toBe(true);
    const unlisted = FASTLY_COMMANDS.filter((c) => !listed.has(c.args[0]!)).map((c) => `${c.where}: fastly ${c.args.join(' ')}`);
    expect(unlisted).toEqual([]);
  });

  it('a secret is written with --recreate-allow, which creates it or replaces it (--recreate fails for a new one, neither for an existing one)', () => {
    expect(secretHelp).toMatch(/--recreate-allow\s+Create or recreate/);
    expect(secretHelp).toMatch(/--recreate\s+Recreate secret by name \(errors if secret doesn't\s+already exist\)/);
    const writes = FASTLY_COMMANDS.filter((c) => c.args[0] === 'secret-store-entry' && c.args[1] === 'create');
    expect(writes.length).toBeGreaterThan(0);
    expect(writes.filter((c) => !c.args.includes('--recreate-allow')).map((c) => c.where)).toEqual([]);
  });

  it('the pinned CLI cannot enable Edge Rate Limiting, as the deploy guide says', () => {
    const choices = /enum value must be one of ([a-z_,]+)/.exec(runs.get(JSON.stringify(WRONG.choice))!.output)?.[1]?.split(',') ?? [];
    expect(choices).toContain('websockets');
    expect(choices.filter((c) => /rate|erl/.test(c))).toEqual([]);
    expect(read('docs/deploying.md')).toMatch(/`npx fastly products --enable …` does not take it/);
  });

  it('every `npm run` names a script of package.json', () => {
    const scripts = Object.keys((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts);
    // `npm run` alone is a mention of npm, not a command.
    const runs_ = COMMANDS.filter((c) => c.program === 'npm' && c.args[0] === 'run' && c.args.length > 1);
    expect(runs_.length).toBeGreaterThan(10);
    expect(runs_.filter((c) => !scripts.includes(c.args[1] ?? '')).map((c) => `${c.where}: npm ${c.args.join(' ')}`)).toEqual([]);
  });
});
