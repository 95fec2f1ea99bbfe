/**
 * The ports of the local commands (`npm start`, `npm run serve:fastly`, `npm run redis:bridge`):
 * which environment variable moves each one, and a one-line answer, naming the port and that
 * variable, when a port is taken. Two checkouts or two runs on one machine then never collide
 * silently, and a command never talks to a process it did not start without saying so.
 *
 * Every port is on 127.0.0.1; 0 asks the system for a free one (printed once it is known).
 */
import { createServer } from 'node:net';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const LOCAL_HOST = '127.0.0.1';

export interface PortSpec {
  /** The environment variable that moves it. */
  readonly variable: string;
  /** Older names that mean the same, still read. */
  readonly aliases: readonly string[];
  /** 0: a free port, chosen at each start. */
  readonly defaultPort: number;
  /** What listens there, for messages. */
  readonly what: string;
}

export const LOCAL_PORTS = {
  /** The waiting room itself: the Node host of `npm start`, or the Compute host of `serve:fastly`. */
  host: { variable: 'PORT', aliases: [], defaultPort: 7676, what: 'the waiting room' },
  /** The demo origin both commands start unless ORIGIN_URL names another origin. */
  origin: { variable: 'WR_ORIGIN_PORT', aliases: [], defaultPort: 7677, what: 'the demo origin' },
  /** The Upstash REST bridge (`serve:fastly`, `redis:bridge`); BRIDGE_PORT is its older name. */
  bridge: { variable: 'WR_BRIDGE_PORT', aliases: ['BRIDGE_PORT'], defaultPort: 8079, what: 'the Upstash bridge' },
  /**
   * The redis-server `serve:fastly` starts unless REDIS_URL names a Redis: a free port by default,
   * since nothing outside the run needs to find it.
   */
  redis: { variable: 'WR_REDIS_PORT', aliases: [], defaultPort: 0, what: 'redis-server' },
} as const satisfies Record<string, PortSpec>;

export type PortName = keyof typeof LOCAL_PORTS;

/** A port as the environment chose it, with the variable that chose it (or would move it). */
export interface ChosenPort {
  readonly name: PortName;
  readonly port: number;
  readonly variable: string;
  readonly what: string;
  /** Where it listens, when not 127.0.0.1 (`redis:bridge` with BRIDGE_HOST). */
  readonly host?: string;
}

export type LocalPortErrorCode = 'ERR_PORT_INVALID' | 'ERR_PORT_TAKEN' | 'ERR_PORT_DENIED' | 'ERR_PORT_TWICE';

/** A port that cannot be used; its message is the one line to print, the command's name first. */
export class LocalPortError extends Error {
  constructor(
    readonly code: LocalPortErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'LocalPortError';
  }
}

/** The port `name` gets from `env`: its variable (or an alias), else its default. Throws on a bad value. */
export function readPort(command: string, name: PortName, env: NodeJS.ProcessEnv = process.env): ChosenPort {
  const spec: PortSpec = LOCAL_PORTS[name];
  const set = [spec.variable, ...spec.aliases].filter((v) => env[v] !== undefined && env[v] !== '');
  const distinct = new Set(set.map((v) => env[v]));
  if (distinct.size > 1) {
    throw new LocalPortError('ERR_PORT_INVALID', `${command}: ${set.map((v) => `${v}=${env[v]}`).join(' and ')} disagree; set only ${spec.variable}`);
  }
  const variable = set[0] ?? spec.variable;
  const value = set[0] === undefined ? undefined : env[set[0]];
  if (value === undefined) return { name, port: spec.defaultPort, variable, what: spec.what };
  const port = /^\d{1,5}$/.test(value.trim()) ? Number(value.trim()) : Number.NaN;
  if (!Number.isInteger(port) || port > 65_535) {
    throw new LocalPortError('ERR_PORT_INVALID', `${command}: ${variable} must be a port number from 0 to 65535 (0 picks a free one), got ${JSON.stringify(value)}`);
  }
  return { name, port, variable, what: spec.what };
}

/** What binding `port` on 127.0.0.1 would do now; the probe is closed again at once. */
export function probePort(port: number, host = LOCAL_HOST): Promise<'free' | 'taken' | 'denied'> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') done('taken');
      else if (error.code === 'EACCES') done('denied');
      else fail(error);
    });
    server.listen({ port, host, exclusive: true }, () => server.close(() => done('free')));
  });
}

/** A port near `port` that is free now, to suggest in a message (0 when none of the few tried is). */
async function suggestPort(port: number, host: string): Promise<number> {
  for (let step = 1; step <= 9; step++) {
    const candidate = port + step * 10;
    if (candidate > 65_535) break;
    if ((await probePort(candidate, host).catch(() => 'taken')) === 'free') return candidate;
  }
  return 0;
}

/**
 * The one line for a port that is in use (or, below 1024, not ours to open): which port, for what,
 * and the variable that moves it with a port that was free a moment ago. `hint` adds another way out.
 */
export async function portProblem(command: string, chosen: ChosenPort, problem: 'taken' | 'denied', hint?: string): Promise<LocalPortError> {
  const host = chosen.host ?? LOCAL_HOST;
  const free = await suggestPort(chosen.port < 1024 ? 8000 : chosen.port, host);
  const suggestion = free === 0 ? `(${chosen.variable}=0 ${command} picks one)` : `e.g. ${chosen.variable}=${free} ${command}`;
  const more = hint === undefined ? '' : `, or ${hint}`;
  if (problem === 'denied') {
    return new LocalPortError(
      'ERR_PORT_DENIED',
      `${command}: port ${chosen.port} for ${chosen.what} cannot be opened on ${host} (permission denied); set ${chosen.variable} to another port, ${suggestion}${more}`,
    );
  }
  return new LocalPortError(
    'ERR_PORT_TAKEN',
    `${command}: port ${chosen.port} for ${chosen.what} is taken (something else listens on ${host}:${chosen.port}); stop it or set ${chosen.variable} to a free port, ${suggestion}${more}`,
  );
}

/** Extra ways out of a taken port, by port name (`serve:fastly` can use a running origin with ORIGIN_URL). */
export type PortHints = Partial<Record<PortName, string>>;

/**
 * Before anything starts: every fixed port is distinct and free. Throws one error whose message has
 * one line per port that is not, so a run with two ports taken says so once, not in two tries.
 */
export async function checkPorts(command: string, ports: readonly ChosenPort[], hints: PortHints = {}): Promise<void> {
  const fixed = ports.filter((p) => p.port !== 0);
  for (const [i, a] of fixed.entries()) {
    const b = fixed.slice(i + 1).find((other) => other.port === a.port);
    if (b !== undefined) {
      throw new LocalPortError('ERR_PORT_TWICE', `${command}: ${a.variable} and ${b.variable} are both ${a.port} (${a.what} and ${b.what}); give each its own port`);
    }
  }
  const problems: LocalPortError[] = [];
  for (const chosen of fixed) {
    const state = await probePort(chosen.port, chosen.host ?? LOCAL_HOST);
    if (state !== 'free') problems.push(await portProblem(command, chosen, state, hints[chosen.name]));
  }
  if (problems.length === 1) throw problems[0]!;
  if (problems.length > 1) throw new LocalPortError(problems[0]!.code, problems.map((p) => p.message).join('\n'));
}

/**
 * Runs `start` (which listens on `chosen.port`) and turns the system's "address in use" or
 * "permission denied" into the one-line message, for a port taken between the check and the start.
 */
export async function listenOn<T>(command: string, chosen: ChosenPort, start: (port: number) => Promise<T>, hint?: string): Promise<T> {
  try {
    return await start(chosen.port);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    if (code === 'EADDRINUSE') throw await portProblem(command, chosen, 'taken', hint);
    if (code === 'EACCES') throw await portProblem(command, chosen, 'denied', hint);
    throw error;
  }
}

/** The line a command prints when it gives up: a port problem as it is, anything else after the command's name. */
export function failureLine(command: string, error: unknown): string {
  if (error instanceof LocalPortError) return `${error.message}\n`;
  return `${command}: ${error instanceof Error ? error.message : String(error)}\n`;
}

/**
 * `fastly.toml` with `[local_server]` pointed at this run: each backend named in `backends` gets
 * that URL, and each relative `file` becomes absolute (from `root`), or what `files` maps it to,
 * so the copy works from any folder. Throws when a backend it must move has no `url` line. The
 * backends of `added` (the further databases' `upstash_2`, … with store_shards above 1, which the
 * project's manifest does not declare for local runs) are moved the same way where the manifest has
 * them, and declared at its end where it does not.
 */
export function localServerManifest(
  text: string,
  options: {
    readonly root: string;
    readonly backends: Readonly<Record<string, string>>;
    readonly added?: Readonly<Record<string, string>>;
    readonly files?: Readonly<Record<string, string>>;
  },
): string {
  const urls: Readonly<Record<string, string>> = { ...options.added, ...options.backends };
  let table = '';
  const moved = new Set<string>();
  const tables = new Set<string>();
  const lines = text.split('\n').map((line) => {
    const header = /^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$/.exec(line);
    if (header) {
      table = header[1]!.replace(/\s+/g, '');
      tables.add(table);
      return line;
    }
    const backend = /^local_server\.backends\.([A-Za-z0-9_-]+)$/.exec(table)?.[1];
    const url = /^(\s*url\s*=\s*)"[^"]*"(.*)$/.exec(line);
    if (backend !== undefined && url && urls[backend] !== undefined) {
      moved.add(backend);
      return `${url[1]}${JSON.stringify(urls[backend])}${url[2]}`;
    }
    const file = /^(\s*file\s*=\s*)"([^"]*)"(.*)$/.exec(line);
    if (table.startsWith('local_server') && file) {
      const path = options.files?.[file[2]!] ?? resolve(options.root, file[2]!);
      return `${file[1]}${JSON.stringify(path)}${file[3]}`;
    }
    return line;
  });
  // A backend of `added` the manifest declares without a url line cannot be declared twice either.
  const missing = Object.keys(urls).filter((name) => !moved.has(name) && (options.backends[name] !== undefined || tables.has(`local_server.backends.${name}`)));
  if (missing.length > 0) {
    throw new Error(`fastly.toml has no url line under ${missing.map((name) => `[local_server.backends.${name}]`).join(' or ')} to point at this run`);
  }
  const declared = Object.entries(options.added ?? {})
    .filter(([name]) => !moved.has(name))
    .map(([name, url]) => `\n[local_server.backends.${name}]\nurl = ${JSON.stringify(url)}\n`);
  const copy = lines.join('\n');
  return declared.length === 0 ? copy : copy.replace(/\n*$/, '\n') + declared.join('');
}

/** The nearest folder with a package.json: right whether this runs from src/node or as a bundle in bin/. */
export function findProjectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
}
