/**
 * The whole local stack for end-to-end tests, on either host:
 * - `node`: the waiting room on the Node host, in this process;
 * - `wasm`: bin/main.wasm built from the same source and served by the real Fastly CLI
 *   (`fastly compute serve`) on a Compute host, with backends, config store and secret store
 *   declared in a generated fastly.toml `[local_server]`.
 * Both use a real redis-server on a free port, the Upstash bridge over it and the demo origin.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { SETTINGS_ITEM } from '../../src/core/config';
import type { Clock, FailureLimiter, RequestLog } from '../../src/core/ports';
import { startDemoOrigin, type DemoOriginOptions } from '../../src/node/demo-origin';
import { freePort, startHost, type RunningServer } from '../../src/node/host';
import { startUpstashBridge, type UpstashBridge } from '../../src/node/upstash-bridge';
import { buildWaitingRoom } from '../../src/node/waiting-room';
import { createNodeUpstashOptions, directoryTemplateSource } from '../../src/platform/node';
import { UpstashQueueStore } from '../../src/store/upstash-store';
import { PROJECT_ROOT } from './compute-host';
import { BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './fixtures';
import { startRedisServer, type RedisServer } from './redis-server';

export const UPSTASH_TOKEN = BASE_SECRETS['upstash_token']!;

export type HostKind = 'node' | 'wasm';

export interface Stack {
  readonly kind: HostKind;
  /** Base URL of the waiting room. */
  readonly url: string;
  readonly redis: RedisServer;
  /** Direct access to Redis, to check what the waiting room wrote. */
  readonly direct: IORedis;
  readonly origin: RunningServer;
  /** With a protected origin: the admission headers it received, in order. */
  readonly admissions: readonly (string | undefined)[];
  /** The structured log lines written so far. */
  logs(): RequestLog[];
  clearLogs(): void;
  /** Stops the bridge: the store becomes unreachable. */
  stopBridge(): Promise<void>;
  /** Starts the bridge again on the same port. */
  startBridge(): Promise<void>;
  close(): Promise<void>;
  /** wasm: everything the Compute host printed so far (with `trace`, each request's hostcall counts). */
  hostOutput?(): string;
}

interface Shared {
  /** With a protected origin: the admission headers it received, in order. */
  admissions: (string | undefined)[];
  /** Tells a protected origin where the waiting room publishes its keys. */
  roomUrl: string;
  redis: RedisServer;
  direct: IORedis;
  origin: RunningServer;
  bridge: UpstashBridge;
  bridgePort: number;
}

/**
 * `protect`: the demo origin requires the waiting room's signed admission (see
 * src/node/admission-check.ts); `degrade`: it slows down and fails above a load (DemoOriginOptions).
 */
async function startShared(protect = false, degrade?: DemoOriginOptions['degrade']): Promise<Shared> {
  const redis = await startRedisServer();
  const bridge = await startUpstashBridge({ redisUrl: redis.url, token: UPSTASH_TOKEN });
  const admissions: (string | undefined)[] = [];
  let roomUrl = '';
  const origin = await startDemoOrigin({
    ...(protect && { protect: { jwksUrl: () => `${roomUrl}/__wr/.well-known/jwks.json`, seen: admissions } }),
    ...(degrade !== undefined && { degrade }),
  });
  const direct = new IORedis(redis.url, { maxRetriesPerRequest: 1 });
  return {
    admissions,
    get roomUrl() {
      return roomUrl;
    },
    set roomUrl(url: string) {
      roomUrl = url;
    },
    redis,
    direct,
    origin,
    bridge,
    bridgePort: bridge.port,
  };
}

function commonParts(shared: Shared, kind: HostKind, url: string, readLogs: () => RequestLog[], clear: () => void, stopHost: () => Promise<void>): Stack {
  return {
    kind,
    url,
    redis: shared.redis,
    direct: shared.direct,
    origin: shared.origin,
    admissions: shared.admissions,
    logs: readLogs,
    clearLogs: clear,
    async stopBridge() {
      await shared.bridge.close();
    },
    async startBridge() {
      shared.bridge = await startUpstashBridge({ redisUrl: shared.redis.url, token: UPSTASH_TOKEN, port: shared.bridgePort });
    },
    async close() {
      shared.direct.disconnect();
      await Promise.allSettled([stopHost(), shared.origin.close(), shared.bridge.close()]);
      await shared.redis.stop();
    },
  };
}

function settingsFor(shared: Shared, settings: Record<string, string>): Record<string, string> {
  // Every scenario's visitors come from loopback addresses, most from one: the per-client ticket
  // limit is off unless a scenario sets it (the ticket-limit scenario does).
  return { ...BASE_SETTINGS, upstash_url: shared.bridge.url, store_timeout_ms: '1000', ticket_limit: '0', ...settings };
}

/**
 * `templates`: KV Store entries (`holding.html`, `<queue>/holding.html`, `style.css`), written to a
 * directory that stands in for the KV Store on the Node host.
 */
export async function startNodeStack(
  settings: Record<string, string> = {},
  templates?: Record<string, string>,
  options: {
    readonly authLimiter?: FailureLimiter;
    readonly ticketLimiter?: FailureLimiter;
    readonly protectOrigin?: boolean;
    readonly degradeOrigin?: DemoOriginOptions['degrade'];
    /** Secrets over BASE_SECRETS (`admin_accounts`, say). */
    readonly secrets?: Record<string, string>;
    /** The room's clock (a manual one: time that moves only when the test says). */
    readonly clock?: Clock;
  } = {},
): Promise<Stack> {
  const shared = await startShared(options.protectOrigin, options.degradeOrigin);
  const logger = new MemoryLogger();
  let templateDir: string | undefined;
  if (templates !== undefined) {
    templateDir = mkdtempSync(join(tmpdir(), 'wr-templates-'));
    for (const [key, text] of Object.entries(templates)) {
      mkdirSync(dirname(join(templateDir, key)), { recursive: true });
      writeFileSync(join(templateDir, key), text);
    }
  }
  const built = buildWaitingRoom({
    settings: source(settingsFor(shared, settings)),
    secrets: source({ ...BASE_SECRETS, ...options.secrets }),
    originUrl: shared.origin.url,
    logger,
    store: (config, secrets) =>
      new UpstashQueueStore({
        redis: new Redis(
          createNodeUpstashOptions({ url: config.upstashUrl!, token: secrets.upstashToken!, retries: config.storeRetries, timeoutMs: config.storeTimeoutMs }),
        ),
      }),
    templates: templateDir === undefined ? undefined : directoryTemplateSource(templateDir),
    ...(options.authLimiter !== undefined && { authLimiter: options.authLimiter }),
    ...(options.ticketLimiter !== undefined && { ticketLimiter: options.ticketLimiter }),
    ...(options.clock !== undefined && { clock: options.clock }),
  });
  const room = await startHost(built.handler);
  shared.roomUrl = room.url;
  const stop = async () => {
    await room.close();
    if (templateDir !== undefined) rmSync(templateDir, { recursive: true, force: true });
  };
  return commonParts(shared, 'node', room.url, () => logger.records, () => (logger.records.length = 0), stop);
}

/**
 * Builds bin/main.wasm into `dir/bin` (its own folder, so parallel suites never share a file), or
 * with `reuse-sim` test/engine/reuse-sim.ts in its place (the room behind a runner of sequences).
 */
export function buildWasmInto(dir: string, entry: 'main' | 'reuse-sim' = 'main', buildEnv: Record<string, string> = {}): void {
  const target = entry === 'main' ? 'fastly' : 'fastly-reuse-sim';
  const result = spawnSync(process.execPath, [resolve(PROJECT_ROOT, 'src/node/build.mjs'), target, '--out', join(dir, 'bin')], {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
    env: { ...process.env, ...buildEnv },
  });
  if (result.status !== 0) throw new Error(`wasm build failed:\n${result.stdout}\n${result.stderr}`);
  if (entry === 'reuse-sim') copyFileSync(join(dir, 'bin', 'reuse-sim.wasm'), join(dir, 'bin', 'main.wasm'));
}

/**
 * The `[local_server]` lines of a test fastly.toml: the two backends, and the config and secret
 * stores read from bin/config.json and bin/secrets.json.
 */
export function localServerSection(originUrl: string, upstashUrl: string): string[] {
  return [
    '[local_server.backends.origin]',
    `url = "${originUrl}/"`,
    '[local_server.backends.upstash]',
    `url = "${upstashUrl}/"`,
    '[local_server.config_stores.wr_config]',
    'file = "bin/config.json"',
    'format = "json"',
    '[local_server.secret_stores.wr_secrets]',
    'file = "bin/secrets.json"',
    'format = "json"',
  ];
}

/** A Config Store's items for these settings: the one `settings` item, a JSON object (see SETTINGS_ITEM). */
export function configStoreItems(settings: Record<string, string>): Record<string, string> {
  return { [SETTINGS_ITEM]: JSON.stringify(settings) };
}

export interface WasmOptions {
  /** Path of Viceroy or a stand-in taking its command line. */
  readonly viceroyPath: string;
  readonly settings?: Record<string, string>;
  /** Secret Store entries over BASE_SECRETS; one given as `undefined` is left out of the store. */
  readonly secrets?: Record<string, string | undefined>;
  /** The host prints each request's hostcall counts (`--trace`), read with `hostOutput()`. */
  readonly trace?: boolean;
  /**
   * The Config Store's items as given, instead of the `settings` item made from `settings` (the
   * per-setting layout, a broken item); `settingsFor` gives the settings the stack needs.
   */
  readonly configItems?: (settings: Record<string, string>) => Record<string, string>;
  /** Entries of the KV Store `wr_templates`, served from bin/templates.json. */
  readonly templates?: Record<string, string>;
  /** More named backends: name → URL (the challenge provider's `challenge`). */
  readonly backends?: Record<string, string>;
  /** The demo origin requires the signed admission. */
  readonly protectOrigin?: boolean;
  /** The `origin` backend's URL instead of the demo origin's (a placeholder host, say). */
  readonly originBackendUrl?: string;
  /** What is built: bin/main.wasm (the default) or the reuse simulation (see buildWasmInto). */
  readonly entry?: 'main' | 'reuse-sim';
  /**
   * Reused sandboxes, as Fastly runs the wasm we ship (the default): built as shipped, and served by
   * a host that reuses an instance that asks (the stand-in's COMPUTE_HOST_REUSE=1). `false`: built
   * with WR_SANDBOX_REUSE=0 and served one request per instance, as Fastly may also do at any time
   * (a fresh sandbox). The environment's WR_SANDBOX_REUSE=0 makes every stack of a run `false`.
   */
  readonly sandboxReuse?: boolean;
  /** The host's worker threads (COMPUTE_HOST_WORKERS; the stand-in's default is 4). With 1 and reuse, one instance serves every request in turn. */
  readonly workers?: number;
  /** More build-time variables (WR_SANDBOX_MAX_MEMORY_MIB, say). */
  readonly buildEnv?: Record<string, string>;
}

/** Whether a wasm stack reuses sandboxes: the option, else on unless the run says WR_SANDBOX_REUSE=0. */
export function wasmSandboxReuse(options: Pick<WasmOptions, 'sandboxReuse'>): boolean {
  return options.sandboxReuse ?? process.env['WR_SANDBOX_REUSE'] !== '0';
}

export async function startWasmStack(options: WasmOptions): Promise<Stack> {
  const shared = await startShared(options.protectOrigin);
  const dir = mkdtempSync(join(tmpdir(), 'wr-wasm-'));
  const reuse = wasmSandboxReuse(options);
  buildWasmInto(dir, options.entry, { WR_SANDBOX_REUSE: reuse ? '1' : '0', ...options.buildEnv });
  writeFileSync(join(dir, 'bin', 'config.json'), JSON.stringify((options.configItems ?? configStoreItems)(settingsFor(shared, options.settings ?? {}))));
  writeFileSync(join(dir, 'bin', 'secrets.json'), JSON.stringify({ ...BASE_SECRETS, ...options.secrets }));
  if (options.templates !== undefined) writeFileSync(join(dir, 'bin', 'templates.json'), JSON.stringify(options.templates));
  writeFileSync(
    join(dir, 'fastly.toml'),
    [
      'manifest_version = 3',
      'name = "waiting-room-e2e"',
      'language = "javascript"',
      ...localServerSection(options.originBackendUrl ?? shared.origin.url, shared.bridge.url),
      ...(options.templates === undefined ? [] : ['[local_server.kv_stores.wr_templates]', 'file = "bin/templates.json"', 'format = "json"']),
      ...Object.entries(options.backends ?? {}).flatMap(([name, url]) => [`[local_server.backends.${name}]`, `url = "${url}/"`]),
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const fastly = resolve(PROJECT_ROOT, 'node_modules/.bin/fastly');
  const child: ChildProcess = spawn(
    fastly,
    ['compute', 'serve', '--skip-build', '--non-interactive', '--dir', dir, '--viceroy-path', options.viceroyPath, '--addr', `127.0.0.1:${port}`, ...(options.trace === true ? ['--viceroy-args=--trace'] : [])],
    {
      cwd: dir,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        FASTLY_DISABLE_WASM_METRICS: '1',
        COMPUTE_HOST_REUSE: reuse ? '1' : '0',
        ...(options.workers !== undefined && { COMPUTE_HOST_WORKERS: String(options.workers) }),
      },
    },
  );
  const logs: RequestLog[] = [];
  let output = '';
  let buffered = '';
  const ready = new Promise<void>((resolveReady, reject) => {
    const timer = setTimeout(() => reject(new Error(`compute host did not start within 60 s:\n${output}`)), 60_000);
    child.once('exit', (code) => reject(new Error(`fastly compute serve exited (${code}):\n${output}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output += text;
      buffered += text;
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        // Log endpoints print `name :: line`.
        const match = /^wr_log :: (\{.*\})\s*$/.exec(line);
        if (match?.[1]) logs.push(JSON.parse(match[1]) as RequestLog);
        if (line.includes('Listening on')) {
          clearTimeout(timer);
          resolveReady();
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  });
  const stopHost = async () => {
    if (child.exitCode === null && child.pid !== undefined) {
      const exited = new Promise((r) => child.once('exit', r));
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await ready;
  } catch (error) {
    await stopHost();
    await commonParts(shared, 'wasm', '', () => logs, () => {}, async () => {}).close();
    throw error;
  }
  shared.roomUrl = `http://127.0.0.1:${port}`;
  return { ...commonParts(shared, 'wasm', shared.roomUrl, () => logs, () => (logs.length = 0), stopHost), hostOutput: () => output };
}

/** A visitor with a one-cookie jar, talking HTTP to the waiting room. */
export class HttpVisitor {
  cookie: string | undefined;
  constructor(
    private readonly base: string,
    private readonly cookieName = 'waiting_room',
  ) {}

  async get(path = '/', init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookie !== undefined) headers.set('cookie', `${this.cookieName}=${this.cookie}`);
    const response = await fetch(`${this.base}${path}`, { ...init, headers, redirect: 'manual' });
    for (const header of response.headers.getSetCookie()) {
      const [pair] = header.split(';');
      if (pair?.startsWith(`${this.cookieName}=`)) this.cookie = pair.slice(this.cookieName.length + 1);
    }
    return response;
  }

  /** The claims of the current cookie (unverified: for assertions). */
  get claims(): Record<string, unknown> {
    const part = (this.cookie ?? '').split('.')[1] ?? '';
    return part === '' ? {} : (JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>);
  }
}

export interface RawResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/**
 * A GET whose request target is sent exactly as given (`/static/..;/shop`, `/.//evil.example/`):
 * fetch and URL would resolve dot segments and backslashes before the request leaves.
 */
export function rawGet(base: string, path: string, headers: Record<string, string> = {}): Promise<RawResponse> {
  const url = new URL(base);
  return new Promise((resolveResponse, reject) => {
    const outgoing = httpRequest({ host: url.hostname, port: url.port, method: 'GET', path, headers: { connection: 'close', ...headers } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolveResponse({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}
