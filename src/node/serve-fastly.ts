/**
 * `npm run serve:fastly`: serves bin/main.wasm with `fastly compute serve`, after starting what the
 * manifest's `[local_server]` points at: the demo origin, and the Upstash bridge over a Redis.
 *
 * Ports (all on 127.0.0.1; 0 picks a free one): PORT (the wasm, default 7676), WR_ORIGIN_PORT
 * (the demo origin, default 7677), WR_BRIDGE_PORT (the bridge, default 8079; BRIDGE_PORT is read
 * too) and WR_REDIS_PORT (the redis-server it starts, default a free port). The project's
 * fastly.toml names 7677 and 8079, so each run writes a copy pointed at its own ports,
 * bin/serve-fastly-<PORT>/fastly.toml (with the config store's upstash_url set to its bridge;
 * removed when the run stops), and serves with `--dir` on that folder: two runs with different
 * ports never share a process or a Redis.
 *
 * Several databases (`store_shards` above 1 in devconfig.json, as the build copied it to
 * bin/local-config.json): one bridge per database, the first on WR_BRIDGE_PORT and the others on
 * free ports, each over a Redis database of its own (the run's redis-server's logical databases 0,
 * 1, …, or REDIS_URL and REDIS_SHARD_URLS), declared in the manifest copy as the backends upstash_2,
 * upstash_3, …; the config store copy's `upstash_shard_urls` names them and the secret store copy's
 * `upstash_shard_tokens` holds the token they accept.
 *
 * It only talks to what it started, unless told otherwise: ORIGIN_URL uses your origin instead of
 * the demo one, REDIS_URL your Redis instead of a redis-server of its own, and both are said on
 * the console. A port that is taken stops it before anything starts, with one line naming the port
 * and the variable that moves it, and exit status 1.
 *
 * Viceroy: with VICEROY_PATH set, that binary (Viceroy or a stand-in with its command line) is used;
 * otherwise the Fastly CLI uses its own Viceroy, as `fastly compute serve` always does.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join, relative, resolve } from 'node:path';
import { shardCountProblem } from '../store/sharded-store';
import { checkLocalConfig } from './check-config';
import { startDemoOrigin } from './demo-origin';
import { freePort } from './host';
import { checkPorts, failureLine, findProjectRoot, listenOn, LOCAL_HOST, localServerManifest, portProblem, readPort, type ChosenPort } from './local-ports';
import { startUpstashBridge, type UpstashBridge } from './upstash-bridge';

const COMMAND = 'npm run serve:fastly';
const children: ChildProcess[] = [];
const servers: { close(): Promise<void> }[] = [];
/** The process group of `fastly compute serve` (its own, so that stopping it stops everything it started). */
let cliGroup: number | undefined;
/** This run's folder under bin/ (its manifest copy), removed when the run stops. */
let runDir: string | undefined;

function isListening(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = createConnection({ port, host: LOCAL_HOST });
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
  });
}

/** A Redis URL as it may be printed: without its password. */
function printableRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
  } catch {
    return '(REDIS_URL, not a URL)';
  }
}

// `setpriv --pdeathsig KILL`: the kernel ends redis-server with this process, even when it is
// killed outright, so a run never leaves a Redis behind on a fixed WR_REDIS_PORT.
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));

/** A redis-server of this run's own on `chosen` (its port checked free just before), up when this returns. */
async function startRedisServer(chosen: ChosenPort): Promise<string> {
  const port = chosen.port === 0 ? await freePort() : chosen.port;
  const args = ['--port', String(port), '--bind', LOCAL_HOST, '--save', '', '--appendonly', 'no'];
  const child = SETPRIV
    ? spawn(SETPRIV, ['--pdeathsig', 'KILL', 'redis-server', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let log = '';
  const keep = (chunk: Buffer) => (log = (log + chunk.toString('utf8')).slice(-2_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let spawnError: NodeJS.ErrnoException | undefined;
  child.once('error', (error) => (spawnError = error));
  const gone = () => spawnError !== undefined || child.exitCode !== null || child.signalCode !== null;
  for (let i = 0; i < 100 && !gone() && !(await isListening(port)); i++) await new Promise((r) => setTimeout(r, 50));
  // setpriv reports a missing program itself, with exit status 127.
  if (spawnError?.code === 'ENOENT' || child.exitCode === 127) {
    throw new Error('redis-server was not found: install it (apt-get install redis-server) or set REDIS_URL to a Redis you run');
  }
  if (/already in use/i.test(log)) throw await portProblem(COMMAND, { ...chosen, port }, 'taken');
  if (gone()) throw new Error(`redis-server did not start on ${LOCAL_HOST}:${port}: ${log.trim().split('\n').pop() ?? spawnError?.message ?? ''}`);
  if (!(await isListening(port))) throw new Error(`redis-server did not listen on ${LOCAL_HOST}:${port} within 5 s`);
  return `redis://${LOCAL_HOST}:${port}`;
}

function devToken(): string {
  // The bridge must accept the token the wasm sends: dev_secrets.upstash_token in devconfig.json.
  return process.env['UPSTASH_TOKEN'] ?? 'dev-only-upstash-token';
}

/** ORIGIN_URL as the backend takes it (http or https, no query), or a one-line error. */
function readOriginUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`ORIGIN_URL must be an http:// or https:// URL, got ${JSON.stringify(value)}`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '') {
    throw new Error(`ORIGIN_URL must be an http:// or https:// URL without a query, got ${JSON.stringify(value)}`);
  }
  return url.href.replace(/\/+$/, '');
}

/** The config store file the build wrote (bin/local-config.json, devconfig.json's split): its items, and its settings parsed. */
function readBuiltConfig(root: string): { items: Record<string, string>; settings: Record<string, unknown> } {
  const source = resolve(root, BUILT_CONFIG);
  if (!existsSync(source)) throw new Error(`${BUILT_CONFIG} is missing: run npm run build`);
  const items = JSON.parse(readFileSync(source, 'utf8')) as Record<string, string>;
  const settings = typeof items['settings'] === 'string' ? (JSON.parse(items['settings']) as Record<string, unknown>) : {};
  return { items, settings };
}

const BUILT_CONFIG = 'bin/local-config.json';
const BUILT_SECRETS = 'bin/local-secrets.json';

/** How many databases the wasm will spread its queue over: `store_shards` of the built settings (1 without). */
function storeShardsOf(settings: Record<string, unknown>): number {
  const value = settings['store_shards'];
  if (value === undefined || value === '') return 1;
  const text = String(value).trim();
  if (!/^[1-8]$/.test(text)) throw new Error(`store_shards in ${BUILT_CONFIG} must be 1 to 8, got ${JSON.stringify(value)}: fix devconfig.json and run npm run build`);
  return Number(text);
}

/**
 * The store files for this run, in its folder: the config store with `upstash_url` (and, with
 * several databases, `upstash_shard_urls`) set to this run's bridges, so the settings name the
 * backends they really reach; with several databases, the secret store too, its
 * `upstash_shard_tokens` the token the further bridges accept. Returns what the manifest's `file`
 * lines become.
 */
function writeRunStores(root: string, dir: string, built: ReturnType<typeof readBuiltConfig>, bridgeUrls: readonly string[], token: string): Record<string, string> {
  const items = { ...built.items };
  if (typeof items['settings'] === 'string') {
    const shards = bridgeUrls.length > 1 ? { upstash_shard_urls: bridgeUrls.slice(1).join(',') } : {};
    items['settings'] = JSON.stringify({ ...built.settings, upstash_url: bridgeUrls[0], ...shards });
  }
  const config = join(dir, 'local-config.json');
  writeFileSync(config, `${JSON.stringify(items, null, 2)}\n`);
  if (bridgeUrls.length === 1) return { [BUILT_CONFIG]: config };
  const secretsFile = resolve(root, BUILT_SECRETS);
  if (!existsSync(secretsFile)) throw new Error(`${BUILT_SECRETS} is missing: run npm run build`);
  const secrets = JSON.parse(readFileSync(secretsFile, 'utf8')) as Record<string, string>;
  const target = join(dir, 'local-secrets.json');
  writeFileSync(target, `${JSON.stringify({ ...secrets, upstash_shard_tokens: bridgeUrls.slice(1).map(() => token).join(',') }, null, 2)}\n`);
  return { [BUILT_CONFIG]: config, [BUILT_SECRETS]: target };
}

/** REDIS_SHARD_URLS beside REDIS_URL: the Redis of each database after the first, exactly store_shards − 1 of them. */
function redisShardUrlsFromEnv(shards: number, env: NodeJS.ProcessEnv): string[] {
  const given = (env['REDIS_SHARD_URLS'] ?? '').split(',').map((url) => url.trim()).filter((url) => url !== '');
  if (given.length !== shards - 1) {
    throw new Error(`store_shards ${shardCountProblem(shards, given.length, 'REDIS_SHARD_URLS')} (beside REDIS_URL; or leave REDIS_URL unset to use databases of a redis-server of this run)`);
  }
  return given;
}

let stopping: Promise<never> | undefined;

/** Ends what this run started (the first reason to stop sets the exit status). */
function stop(code: number): Promise<never> {
  stopping ??= stopAll(code);
  return stopping;
}

/** Whether any process of the group `pgid` is still there. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

async function stopAll(code: number): Promise<never> {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  // node_modules/.bin/fastly is a Node wrapper around the CLI's binary, which starts Viceroy: the
  // whole process group goes, or the binary and Viceroy would outlive this run and keep its port.
  if (cliGroup !== undefined && groupAlive(cliGroup)) {
    process.kill(-cliGroup, 'SIGTERM');
    for (let i = 0; i < 30 && groupAlive(cliGroup); i++) await new Promise((r) => setTimeout(r, 100));
    if (groupAlive(cliGroup)) process.kill(-cliGroup, 'SIGKILL');
  }
  await Promise.allSettled(servers.map((s) => s.close()));
  if (runDir !== undefined) rmSync(runDir, { recursive: true, force: true });
  process.exit(code);
}

async function main(): Promise<void> {
  process.once('SIGINT', () => void stop(0));
  process.once('SIGTERM', () => void stop(0));
  const root = findProjectRoot();
  const env = process.env;
  const originUrlFromEnv = env['ORIGIN_URL'] ? readOriginUrl(env['ORIGIN_URL']) : undefined;
  const redisUrlFromEnv = env['REDIS_URL'] || undefined;
  const hostPort = readPort(COMMAND, 'host', env);
  const originPort = originUrlFromEnv === undefined ? readPort(COMMAND, 'origin', env) : undefined;
  const bridgePort = readPort(COMMAND, 'bridge', env);
  const redisPort = redisUrlFromEnv === undefined ? readPort(COMMAND, 'redis', env) : undefined;
  const wasm = resolve(root, 'bin/main.wasm');
  if (!existsSync(wasm)) throw new Error('bin/main.wasm is missing: run npm run build');
  const built = readBuiltConfig(root);
  const shards = storeShardsOf(built.settings);
  // With REDIS_URL and several databases, the others are the caller's too (checked before anything starts).
  const shardRedisFromEnv = redisUrlFromEnv !== undefined && shards > 1 ? redisShardUrlsFromEnv(shards, env) : undefined;
  // The wasm cannot list its config store, so a misspelt key of devconfig.json is caught here.
  // No environment: `fastly compute serve` reads the file alone (bin/local-config.json).
  const problems = checkLocalConfig(resolve(root, 'devconfig.json'), {});
  if (problems.length > 0) {
    throw new Error(`devconfig.json is not valid:\n${problems.map((p) => `  - ${p.key}: ${p.message}`).join('\n')}`);
  }
  // Before anything starts: a taken port stops the run here, with nothing to clean up.
  const originHint = (port: number) => `set ORIGIN_URL=http://${LOCAL_HOST}:${port} if that is an origin to use`;
  const hints = originPort === undefined ? {} : { origin: originHint(originPort.port) };
  await checkPorts(COMMAND, [hostPort, originPort, bridgePort, redisPort].filter((p) => p !== undefined), hints);
  if (originUrlFromEnv !== undefined && env['WR_ORIGIN_PORT']) process.stderr.write('note: WR_ORIGIN_PORT is ignored: ORIGIN_URL replaces the demo origin\n');
  if (redisUrlFromEnv !== undefined && env['WR_REDIS_PORT']) process.stderr.write('note: WR_REDIS_PORT is ignored: REDIS_URL replaces the redis-server of this run\n');
  if (redisUrlFromEnv === undefined && env['REDIS_SHARD_URLS']) process.stderr.write('note: REDIS_SHARD_URLS is ignored without REDIS_URL: the further databases are databases of the redis-server of this run\n');
  if (redisUrlFromEnv !== undefined && shards === 1 && env['REDIS_SHARD_URLS']) process.stderr.write('note: REDIS_SHARD_URLS is ignored: store_shards is 1\n');

  let originUrl: string;
  let originLine: string;
  if (originPort === undefined) {
    originUrl = originUrlFromEnv!;
    originLine = `${originUrl} (ORIGIN_URL: yours, not started here)`;
  } else {
    const origin = await listenOn(COMMAND, originPort, (port) => startDemoOrigin({ port }), originHint(originPort.port));
    servers.push(origin);
    originUrl = origin.url;
    originLine = `${origin.url} (the demo origin, started here; ${originPort.variable} moves it)`;
  }

  let redisUrl: string;
  let redisLine: string;
  if (redisPort === undefined) {
    redisUrl = redisUrlFromEnv!;
    redisLine = `the Redis at ${printableRedisUrl(redisUrl)} (REDIS_URL: yours, not started here)`;
  } else {
    redisUrl = await startRedisServer(redisPort);
    redisLine = `a redis-server of its own at ${redisUrl} (${redisPort.variable} fixes its port)`;
  }
  // The further databases: REDIS_SHARD_URLS, or logical databases 1, 2, … of the run's own redis-server.
  const redisUrls = [redisUrl, ...(shardRedisFromEnv ?? Array.from({ length: shards - 1 }, (_, i) => `${redisUrl}/${i + 1}`))];
  const bridge = await listenOn(COMMAND, bridgePort, (port) => startUpstashBridge({ redisUrl, token: devToken(), port }));
  servers.push(bridge);
  // The further databases' bridges: free ports, as nothing outside this run needs to find them (the
  // manifest copy and the config store copy name them).
  const further: UpstashBridge[] = [];
  for (const url of redisUrls.slice(1)) {
    const more = await startUpstashBridge({ redisUrl: url, token: devToken(), port: 0 });
    servers.push(more);
    further.push(more);
  }
  const bridgeUrls = [bridge.url, ...further.map((b) => b.url)];

  const port = hostPort.port === 0 ? await freePort() : hostPort.port;
  // This run's manifest: the project's fastly.toml with [local_server] pointed at what it started.
  const dir = resolve(root, 'bin', `serve-fastly-${port}`);
  mkdirSync(dir, { recursive: true });
  runDir = dir;
  const manifest = localServerManifest(readFileSync(resolve(root, 'fastly.toml'), 'utf8'), {
    root,
    backends: { origin: `${originUrl}/`, upstash: `${bridge.url}/` },
    added: Object.fromEntries(further.map((b, i) => [`upstash_${i + 2}`, `${b.url}/`])),
    files: writeRunStores(root, dir, built, bridgeUrls, devToken()),
  });
  const header = `# Written by ${COMMAND} for its run on port ${port}, and removed when it stops: the project's\n# fastly.toml with [local_server] pointed at the origin and bridge of that run. Edit fastly.toml instead.\n\n`;
  writeFileSync(join(dir, 'fastly.toml'), header + manifest);

  const args = ['compute', 'serve', '--skip-build', '--non-interactive', '--dir', dir, '--file', wasm, '--addr', `${LOCAL_HOST}:${port}`];
  const viceroy = env['VICEROY_PATH'];
  if (viceroy) args.push('--viceroy-path', resolve(root, viceroy));
  const shown = args.map((arg) => (arg.startsWith(root) ? relative(root, arg) || '.' : arg));
  process.stderr.write(
    [
      '',
      `fastly ${shown.join(' ')}`,
      `  Visitors: http://${LOCAL_HOST}:${port}/   (${hostPort.variable} moves it)`,
      `  Admin:    http://${LOCAL_HOST}:${port}/__wr/admin  (user admin, password dev_secrets.admin_password in devconfig.json)`,
      `  Origin:   ${originLine}`,
      shards === 1
        ? `  Store:    the Upstash bridge at ${bridge.url} (started here; ${bridgePort.variable} moves it) over ${redisLine}`
        : `  Store:    ${shards} databases (store_shards = ${shards}): the Upstash bridges at ${bridgeUrls.join(', ')} (backends upstash, ${further.map((_, i) => `upstash_${i + 2}`).join(', ')}; started here; ${bridgePort.variable} moves the first) over ${redisPort === undefined ? `${redisLine} and REDIS_SHARD_URLS` : `databases 0 to ${shards - 1} of ${redisLine}`}`,
      `  Manifest: ${relative(root, join(dir, 'fastly.toml'))} (fastly.toml with these ports)`,
      `  Sandbox:  ${env['WR_SANDBOX_REUSE'] === '0' ? 'one request per instance (WR_SANDBOX_REUSE=0)' : 'reused for later requests, as on Fastly (WR_SANDBOX_REUSE=0 for one request each)'}`,
      '',
    ].join('\n'),
  );
  // Its own process group: Ctrl-C reaches this process, which stops the group. No stdin: a
  // background group that reads the terminal is stopped, and --non-interactive never asks.
  // Sandboxes reused as Fastly reuses them for the wasm we ship (the stand-in and Viceroy do it
  // only when asked), unless the wasm was built with WR_SANDBOX_REUSE=0 or the caller says otherwise.
  const hostEnv = { ...env, COMPUTE_HOST_REUSE: env['COMPUTE_HOST_REUSE'] ?? (env['WR_SANDBOX_REUSE'] === '0' ? '0' : '1') };
  const cli = spawn(resolve(root, 'node_modules/.bin/fastly'), args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], detached: true, env: hostEnv });
  cliGroup = cli.pid;
  cli.once('exit', (code) => void stop(code ?? 0));
}

main().catch((error: unknown) => {
  process.stderr.write(failureLine(COMMAND, error));
  void stop(1);
});
