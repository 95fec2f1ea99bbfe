/**
 * The harness every pass runs on: two "arms", each a complete stack on 127.0.0.1 with its own
 * store, and the same narrow interface (`Arm`) for the passes to drive.
 *
 * The Node arm:
 *   - redis-server (test harness, own free port)        child process
 *   - Upstash REST bridge over it + the demo origin       worker thread "backends"
 *   - the Node hosts with the REAL UpstashQueueStore, and
 *     a bare pass-through proxy (startHost + forward)     main thread (the "edge")
 *   - the load generator                                  worker thread "load" (shared by both arms)
 * so the edge's event loop runs only the hosts, not the client or the backends.
 *
 * The wasm arm: bin/main.wasm on a Compute host (Viceroy, or the stand-in beside the project; see
 * test/support/compute-host.ts), started with the real Fastly CLI (`fastly compute serve
 * --skip-build --viceroy-path …`) over a second, separate harness:
 *   - its own redis-server                                child process
 *   - its own Upstash bridge + demo origin                a second "backends" worker thread
 *   - a counting HTTP proxy in front of that bridge       main thread
 *   - the Fastly CLI and the host it starts               child process group (killed as a group)
 *
 * Store round trips are counted twice, independently, on each arm:
 *   - HTTP requests that reach the bridge (node: a counting wrapper around the global `fetch`,
 *     which `@upstash/redis` calls for every request attempt, retries included; wasm: the proxy);
 *   - script commands Redis executed (INFO commandstats: calls + rejected_calls of EVALSHA,
 *     EVAL and their _RO forms), before and after each measured step.
 * and beside them, from the same INFO, what Upstash bills: every command Redis ran, the commands
 * the scripts ran included, but not the harness's own (HARNESS_COMMANDS).
 *
 * Each pass asks an arm for a room (`RoomSpec`: the settings over devconfig.json, a queue of its
 * own): the arm starts that room's host once, the first time a pass asks, and every later pass
 * that asks gets the same host (the methods pass polls the cache pass's host).
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Worker } from 'node:worker_threads';
import { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import type { Config } from '../../src/core/config';
import { startHost } from '../../src/node/host';
import { buildWaitingRoom, type WaitingRoom } from '../../src/node/waiting-room';
import { createHttpOrigin, readLocalConfig } from '../../src/platform/node';
import { STORE_SCRIPTS } from '../../src/store/scripts';
import { createUpstashClientOptions, UpstashQueueStore } from '../../src/store/upstash-store';
import { table } from '../support/markdown-table';
import { parseCommandstats } from '../support/command-stats';
import { startRedisServer } from '../support/redis-server';
import { configStoreItems, localServerSection } from '../support/stack';
import { RequestLogKeeper, type TroubleSource } from './trouble';
import { cookieFrom, findProjectFile, log, median, PATH, runConcurrent, send, tokenKind, type Cleanups, type Reply } from './util';
import { locateComputeHost, runCommand, startComputeHost, startCountingProxy, type HostRequestStat } from './wasm-host';
import { readWasmImageFile, type WasmImage } from './wasm-image';
import { startBackends, startLoadWorker } from './workers';
import { SANDBOX_REUSE } from '../../src/platform/sandbox-reuse-options';

export type ArmName = 'node' | 'wasm';

/** Concurrency of each arm's counts (the stand-in runs 4 wasm instances at once by default). */
export const ARM_CONCURRENCY: Readonly<Record<ArmName, number>> = { node: 8, wasm: 4 };
/** Building bin/main.wasm (and the bare proxy wasm). */
const WASM_BUILD_TIMEOUT_MS = 60_000;

/**
 * The room of the round-trip and latency passes. Settings over devconfig.json, the same on both
 * hosts: only the admin/origin admits visitors, a store failure holds, and the per-POP state cache
 * is off, so that every waiting poll is a cache miss and the counts are the per-request cost the
 * budgets bound (with the cache on, polls within one lifetime cost nothing, and a miss that cost
 * too much would hide among the hits).
 */
export const MAIN_ROOM: RoomSpec = {
  variant: 'main',
  overrides: { admit_per_period: '0', store_failure: 'hold', state_cache_seconds: '0' },
  nodeLogName: 'node waiting room (counts, latency)',
  sockets: ARM_CONCURRENCY,
};

// ---------------------------------------------------------------------------------------------
// Counting

/** One arm's counts so far, or between two snapshots. */
export interface Counts {
  /** HTTP requests that reached the bridge. */
  readonly http: number;
  /** Script commands Redis executed (EVALSHA, EVAL and their _RO forms). */
  readonly redis: number;
  /**
   * Commands Upstash bills: every command Redis ran (calls + rejected_calls over all of INFO
   * commandstats), the commands inside scripts included, less the harness's own.
   */
  readonly billed: number;
}

/** The counts of one arm so far. */
export type Snapshot = () => Promise<Counts>;

export function countsBetween(before: Counts, after: Counts): Counts {
  return { http: after.http - before.http, redis: after.redis - before.redis, billed: after.billed - before.billed };
}

/** The counts of `task` alone: a snapshot before, one after. */
export async function counted(snapshot: Snapshot, task: () => Promise<unknown>): Promise<Counts> {
  const before = await snapshot();
  await task();
  return countsBetween(before, await snapshot());
}

/** A request class sent one request at a time: its store counts, median latency and, on the wasm, the engine's vCPU. */
export interface SequentialResult {
  readonly requests: number;
  readonly counts: Counts;
  readonly p50Ms: number;
  /** Median `vcpu_ms` of the class's log lines (the Fastly adapter writes it; the Node host does not). */
  readonly vcpuMs: number | undefined;
}

/**
 * Sends `GET PATH` to `host` once per entry of `headers`, one at a time, checking every answer,
 * with the store counted between snapshots (the preparation of the headers is the caller's, and
 * not counted).
 */
export async function sequentialClass(
  arm: Arm,
  host: RoomHost,
  headers: readonly http.OutgoingHttpHeaders[],
  check: (reply: Reply) => boolean,
  what: string,
): Promise<SequentialResult> {
  const mark = host.log.vcpuCount();
  const latencies: number[] = [];
  const counts = await counted(arm.snapshot, async () => {
    for (const h of headers) {
      const started = performance.now();
      const reply = await send(host.agent, 'GET', `${host.url}${PATH}`, h);
      latencies.push(performance.now() - started);
      if (!check(reply)) throw new Error(`${what}: unexpected answer ${reply.status} ${reply.body.slice(0, 200)}`);
    }
  });
  // The wasm's log lines arrive through the host's stdout: give them a moment.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const vcpu = host.log.vcpuSince(mark).map((l) => l.ms);
  return { requests: headers.length, counts, p50Ms: median(latencies), vcpuMs: vcpu.length > 0 ? median(vcpu) : undefined };
}

/** Microseconds per call of `run` in this process: the median of 10 batches of `repeats / 10`. */
export async function microsPerCall(repeats: number, run: (i: number) => Promise<unknown>): Promise<number> {
  const perBatch: number[] = [];
  const size = Math.max(1, Math.floor(repeats / 10));
  for (let b = 0; b < 10; b++) {
    const started = performance.now();
    for (let i = b * size; i < (b + 1) * size; i++) await run(i);
    perBatch.push(((performance.now() - started) * 1000) / size);
  }
  return median(perBatch);
}

/**
 * Commands the harness sends itself, never the waiting room (whose store sends nothing but EVALSHA
 * and EVAL, src/store/upstash-store.ts, and whose scripts cannot run these): INFO (every snapshot,
 * and the ready check of each ioredis connection), SCRIPT (loadStoreScripts' SCRIPT LOAD, through
 * the bridge) and CLIENT (what ioredis sends on connecting). Redis 7 names subcommands `script|load`.
 */
const HARNESS_COMMANDS: ReadonlySet<string> = new Set(['info', 'script', 'client']);

/** From one INFO commandstats: the script commands Redis executed, and the commands Upstash would bill. */
async function redisCounts(redis: IORedis): Promise<{ redis: number; billed: number }> {
  const { scripts, billed } = parseCommandstats(await redis.info('commandstats'), HARNESS_COMMANDS);
  return { redis: scripts, billed };
}

/** An arm's snapshot, checked once: two in a row must count nothing (the INFO it sends is not billed). */
async function checkedSnapshot(what: string, snapshot: Snapshot): Promise<Snapshot> {
  const between = countsBetween(await snapshot(), await snapshot());
  if (between.http !== 0 || between.redis !== 0 || between.billed !== 0) {
    throw new Error(`${what}: two snapshots in a row counted ${JSON.stringify(between)}; the harness's own commands are not all excluded`);
  }
  return snapshot;
}

/** A connection of the harness's own to an arm's redis-server, for INFO only. */
async function statsConnection(url: string, what: string, cleanups: Cleanups): Promise<IORedis> {
  const stats = new IORedis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  stats.on('error', () => {});
  await stats.connect();
  cleanups.add(what, () => stats.quit().catch(() => stats.disconnect()));
  return stats;
}

/**
 * Loads every store script through an arm's bridge (which adapts the text for Redis and maps the
 * SHA-1s): a warm script cache, outside any count. SCRIPT LOAD is not a script call, so Redis does
 * not count it as one either.
 */
export async function loadStoreScripts(bridge: { readonly url: string; readonly token: string }, what: string): Promise<void> {
  const loader = new Redis(createUpstashClientOptions({ url: bridge.url, token: bridge.token, retries: 0 }));
  for (const script of STORE_SCRIPTS) {
    const sha = await loader.scriptLoad(script.text);
    if (sha !== script.sha1) throw new Error(`${what}: SCRIPT LOAD of ${script.name} gave ${sha}, pinned ${script.sha1}`);
  }
}

// ---------------------------------------------------------------------------------------------
// The request classes of the round-trip, latency, cache and methods passes

/** One visitor per class, each checking that the answer is what its class expects. */
export interface VisitorClasses {
  /** The queued page every visitor asks for. */
  readonly page: string;
  /** No cookie: holding page and a waiting ticket (`k: w`). Returns the cookie. */
  newVisitor(): Promise<string>;
  /** Waiting ticket, not called yet: holding page and a renewed waiting ticket. */
  waitingPoll(cookie: string): Promise<void>;
  /** Waiting ticket that has been called: the origin's page and an access token (`k: a`). Returns it. */
  upgradePoll(cookie: string): Promise<string>;
  /** Access token: the origin's page, cookie untouched. */
  admitted(cookie: string): Promise<void>;
  /** POST api/admit?count=1 with the origin API token: 200 and `admitted: 1`. */
  adminAdmit(): Promise<void>;
}

/** `label` names the host in error messages. */
export function visitorClasses(label: string, host: RoomHost, apiToken: string): VisitorClasses {
  const { agent, config } = host;
  const page = `${host.url}${PATH}`;
  const admitUrl = `${host.url}${config.pathPrefix}api/admit?count=1`;
  const isHolding = (r: Reply): boolean => r.status === config.holdStatus && r.headers['refresh'] !== undefined && r.headers['x-origin'] === undefined;
  const isOrigin = (r: Reply): boolean => r.status === 200 && r.headers['x-origin'] === 'demo';
  const expect = (ok: boolean, what: string, r: Reply): void => {
    if (!ok) throw new Error(`${label}, ${what}: unexpected answer ${r.status} ${JSON.stringify(r.headers)} ${r.body.slice(0, 200)}`);
  };
  return {
    page,
    async newVisitor() {
      const r = await send(agent, 'GET', page);
      const cookie = cookieFrom(r, config.cookieName);
      expect(isHolding(r) && cookie !== undefined && tokenKind(cookie) === 'w', 'new visitor: holding page with a waiting ticket', r);
      return cookie!;
    },
    async waitingPoll(cookie) {
      const r = await send(agent, 'GET', page, { cookie });
      const renewed = cookieFrom(r, config.cookieName);
      expect(isHolding(r) && renewed !== undefined && tokenKind(renewed) === 'w', 'waiting poll: holding page', r);
    },
    async upgradePoll(cookie) {
      const r = await send(agent, 'GET', page, { cookie });
      const access = cookieFrom(r, config.cookieName);
      expect(isOrigin(r) && access !== undefined && tokenKind(access) === 'a', 'called poll: origin page with an access token', r);
      // The signed admission the visitor carries from now on, as a browser would send it back.
      const carried = cookieFrom(r, `${config.cookieName}_adm`);
      return carried === undefined ? access! : `${access!}; ${carried}`;
    },
    async admitted(cookie) {
      const r = await send(agent, 'GET', page, { cookie });
      expect(isOrigin(r) && cookieFrom(r, config.cookieName) === undefined, 'admitted visitor: origin page, cookie untouched', r);
    },
    async adminAdmit() {
      const r = await send(agent, 'POST', admitUrl, { authorization: `Bearer ${apiToken}` });
      let body: unknown;
      try {
        body = JSON.parse(r.body);
      } catch {
        body = undefined;
      }
      expect(r.status === 200 && (body as { admitted?: unknown } | undefined)?.admitted === 1, 'admin admit: 200 with admitted 1', r);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Arms and rooms

/** A waiting room a pass runs on: its settings and the hosts' client connections. */
export interface RoomSpec {
  /** Names the room's host, its wasm folder and its queue's purpose ("main", "cached", …). */
  readonly variant: string;
  /** Settings over devconfig.json (the store's URL is added by each arm). */
  readonly overrides: Readonly<Record<string, string>>;
  /** The Node host's request log, as the report names it. */
  readonly nodeLogName: string;
  /**
   * Wasm only: served with reusable sandboxes, as Fastly serves bin/main.wasm (which asks for
   * them); off, every request gets a fresh instance. The Node host keeps its state either way.
   */
  readonly reuse?: boolean;
  /** Keep-alive client connections to the room's host, per arm: the most any pass sends at once. */
  readonly sockets: Readonly<Record<ArmName, number>>;
}

/** A room's running host on one arm. */
export interface RoomHost {
  readonly url: string;
  /** The room's settings, as the Node host parsed them (the wasm gets the same). */
  readonly config: Config;
  readonly log: RequestLogKeeper;
  /** The client agent every pass uses towards this host. */
  readonly agent: http.Agent;
  /** `GET /__host/stats` of the stand-in: its timings per request (undefined where there are none). */
  stats(): Promise<HostRequestStat[] | undefined>;
}

/** What a pass drives: one kind of host over its own store, counted two ways. */
export interface Arm {
  readonly name: ArmName;
  readonly originUrl: string;
  /** The origin API token (admin admit, control, stats). */
  readonly apiToken: string;
  /** This arm's Upstash bridge (for loading the store's scripts). */
  readonly bridge: { readonly url: string; readonly token: string };
  readonly load: Worker;
  readonly snapshot: Snapshot;
  /** `performance.now()` of every HTTP request that reached this arm's bridge so far. */
  storeTimes(): readonly number[];
  /** A room's settings, parsed (without starting its host). */
  config(room: RoomSpec): Config;
  /** The room's host: started (and on the wasm, warmed) the first time, the same one after. */
  host(room: RoomSpec): Promise<RoomHost>;
  /**
   * A bare pass-through proxy to the origin on the same kind of host: its URL. On the wasm it asks
   * for reusable sandboxes as bin/main.wasm does, and `reuse` says whether its host grants them.
   */
  bare(reuse?: boolean): Promise<string>;
  /**
   * Wasm only: the room's whole code, built as bin/main.wasm is, behind the bare proxy's handler
   * (test/engine/floor.ts): what the larger initial memory costs before the room does anything.
   */
  floor?(reuse?: boolean): Promise<string>;
  /** Wasm only: the initial memory each build's instances start from (see wasm-image.ts). */
  images?(): readonly { readonly name: string; readonly image: WasmImage }[];
  /** What explains a failure of a pass on `room`: its host's log and, on the wasm, the counting proxy. */
  troubleSources(room: RoomSpec): TroubleSource[];
  /** Access cookies of the visitors the round-trip pass admitted (for the latency pass). */
  admitted: readonly string[] | undefined;
}

/** What the run shares: the bundle (the workers' entry), what to stop, and every log to report. */
export interface Run {
  readonly bundle: string;
  readonly cleanups: Cleanups;
  /** Every host's request log and the counting proxy, as they start: the report's last section. */
  readonly trouble: TroubleSource[];
}

/** The same promise for the same key: a room's host is started once. */
function once<T>(cache: Map<string, Promise<T>>, key: string, start: () => Promise<T>): Promise<T> {
  let started = cache.get(key);
  if (started === undefined) {
    started = start();
    cache.set(key, started);
  }
  return started;
}

/** Starts the Node arm's store, bridge, origin and load thread; rooms start as passes ask. */
export async function startNodeArm(run: Run): Promise<{ arm: Arm; redisVersion: string; root: string }> {
  const { cleanups } = run;
  const redisServer = await startRedisServer();
  cleanups.add('redis-server', () => redisServer.stop());
  const token = `bench-${randomUUID()}`;
  const { originUrl, bridgeUrl } = await startBackends(run.bundle, redisServer.url, token, 'backends worker', cleanups);
  const stats = await statsConnection(redisServer.url, 'stats connection', cleanups);
  const redisVersion = /redis_version:(\S+)/.exec(await stats.info('server'))?.[1] ?? '?';

  // Count 1: every HTTP request attempt the Upstash client makes to the bridge.
  const realFetch = globalThis.fetch;
  let bridgeRequests = 0;
  const bridgeTimes: number[] = [];
  const countingFetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (url.startsWith(bridgeUrl)) {
      bridgeRequests++;
      bridgeTimes.push(performance.now());
    }
    return realFetch(input, init);
  };
  globalThis.fetch = countingFetch as typeof fetch;
  cleanups.add('fetch counter', async () => void (globalThis.fetch = realFetch));
  // Count 2: script commands Redis executed; and what Upstash bills.
  const snapshot = await checkedSnapshot('node', async () => ({ http: bridgeRequests, ...(await redisCounts(stats)) }));

  const devconfig = findProjectFile('devconfig.json');
  const local = readLocalConfig(devconfig);
  const secretOverrides: Record<string, string> = { upstash_token: token };
  const rooms = new Map<string, { room: WaitingRoom; log: RequestLogKeeper }>();
  /** Builds a room once (nothing starts): its log joins the report from then on. */
  const built = (spec: RoomSpec): { room: WaitingRoom; log: RequestLogKeeper } => {
    let entry = rooms.get(spec.variant);
    if (entry === undefined) {
      // One load generator's address stands for thousands of visitors: no per-client ticket limit.
      const overrides: Record<string, string> = { ticket_limit: '0', ...spec.overrides, upstash_url: bridgeUrl };
      const requestLog = new RequestLogKeeper(spec.nodeLogName);
      run.trouble.push(requestLog);
      const room = buildWaitingRoom({
        settings: (key) => overrides[key] ?? local.settings(key),
        secrets: (key) => secretOverrides[key] ?? local.secrets(key),
        originUrl,
        // Nothing printed (the bench measures the request path, not stdout): the records are counted,
        // and those of requests that met a store failure kept, for the report.
        logger: requestLog.logger,
        store: (config, secrets) =>
          new UpstashQueueStore({
            redis: new Redis(createUpstashClientOptions({ url: config.upstashUrl ?? '', token: secrets.upstashToken ?? '', retries: config.storeRetries })),
          }),
      });
      entry = { room, log: requestLog };
      rooms.set(spec.variant, entry);
    }
    return entry;
  };
  const apiToken = built(MAIN_ROOM).room.secrets.adminApiToken;
  if (apiToken === undefined) throw new Error('devconfig.json sets no admin_api_token; the admin admit class needs it');
  const load = startLoadWorker(run.bundle, cleanups);
  log(`node: redis ${redisServer.url}, bridge ${bridgeUrl}, origin ${originUrl}`);

  const hosts = new Map<string, Promise<RoomHost>>();
  const bares = new Map<string, Promise<string>>();
  const arm: Arm = {
    name: 'node',
    originUrl,
    apiToken,
    bridge: { url: bridgeUrl, token },
    load,
    snapshot,
    storeTimes: () => bridgeTimes,
    config: (spec) => built(spec).room.config,
    host: (spec) =>
      once(hosts, spec.variant, async () => {
        const { room, log: requestLog } = built(spec);
        const server = await startHost(room.handler);
        cleanups.add(`${spec.variant} waiting room host`, () => server.close());
        const agent = new http.Agent({ keepAlive: true, maxSockets: spec.sockets.node });
        cleanups.add(`${spec.variant} client agent`, async () => agent.destroy());
        log(`node: ${spec.variant} waiting room ${server.url}`);
        return { url: server.url, config: room.config, log: requestLog, agent, stats: async () => undefined };
      }),
    bare: () =>
      once(bares, 'bare', async () => {
        const bareOrigin = createHttpOrigin(originUrl);
        const proxy = await startHost((request) => bareOrigin.forward(request));
        cleanups.add('bare proxy host', () => proxy.close());
        log(`node: bare proxy ${proxy.url}`);
        return proxy.url;
      }),
    troubleSources: (spec) => [built(spec).log],
    admitted: undefined,
  };
  return { arm, redisVersion, root: dirname(devconfig) };
}

/**
 * Warms a fresh Compute host: its workers compile the wasm as it starts, and the first requests on
 * them are slow enough, on a busy machine, to run into store_timeout_ms. A bypass path
 * (devconfig.json: /health) reaches the origin and never the store.
 */
async function warmComputeHost(what: string, url: string, agent: http.Agent, concurrency: number, snapshot: Snapshot): Promise<void> {
  const before = await snapshot();
  await runConcurrent(5 * concurrency, concurrency, async () => {
    const r = await send(agent, 'GET', `${url}/health`);
    if (r.headers['x-origin'] !== 'demo') throw new Error(`${what} warm-up: GET /health answered ${r.status} without the origin's header`);
  });
  const after = await snapshot();
  if (after.http !== before.http) throw new Error(`${what} warm-up: GET /health reached the store`);
}

/**
 * Starts the wasm arm's own store, bridge, origin and counting proxy, and builds bin/main.wasm and
 * a bare pass-through wasm (one fetch to the origin backend, the latency baseline on the same host).
 * Rooms start as passes ask, each on a Compute host of its own with the same settings as the Node
 * arm's room (`configOf`). `sources` receives what would explain a failure, as it starts.
 */
export async function startWasmArm(
  run: Run,
  /** The project's root: devconfig.json, src/node/build.mjs, node_modules. */
  root: string,
  node: Arm,
  sources: TroubleSource[],
): Promise<{ kind: 'ran'; arm: Arm; hostPath: string } | { kind: 'skipped'; reason: string }> {
  const found = locateComputeHost(root);
  if (!found.found) return { kind: 'skipped', reason: found.reason };
  const { cleanups } = run;
  const watch = (source: TroubleSource): void => {
    sources.push(source);
    run.trouble.push(source);
  };
  log(`wasm: Compute host ${found.path}`);
  const redisServer = await startRedisServer();
  cleanups.add('wasm redis-server', () => redisServer.stop());
  const token = `bench-wasm-${randomUUID()}`;
  const { originUrl, bridgeUrl } = await startBackends(run.bundle, redisServer.url, token, 'wasm backends worker', cleanups);
  const proxy = await startCountingProxy(bridgeUrl);
  cleanups.add('wasm counting proxy', () => proxy.close());
  watch(proxy);
  const stats = await statsConnection(redisServer.url, 'wasm stats connection', cleanups);
  const snapshot = await checkedSnapshot('wasm', async () => ({ http: proxy.count(), ...(await redisCounts(stats)) }));

  // Each app in its own folder with its own fastly.toml: the rooms (the same bin/main.wasm, each
  // with its settings), and the bare proxy.
  const dir = mkdtempSync(join(os.tmpdir(), 'wr-bench-wasm-'));
  cleanups.add('wasm build folder', async () => rmSync(dir, { recursive: true, force: true }));
  const buildDir = join(dir, 'build');
  const bareDir = join(dir, 'bare');
  const floorDir = join(dir, 'floor');
  mkdirSync(join(bareDir, 'bin'), { recursive: true });
  mkdirSync(join(floorDir, 'bin'), { recursive: true });
  // The bare proxy asks for reusable sandboxes with bin/main.wasm's options, so that on a host that
  // grants them both are served alike and the comparison is the room's work alone.
  writeFileSync(
    join(bareDir, 'bare.js'),
    [
      "import { setReusableSandboxOptions } from 'fastly:experimental';",
      `setReusableSandboxOptions(${JSON.stringify(SANDBOX_REUSE)});`,
      "addEventListener('fetch', (event) => event.respondWith(fetch(event.request, { backend: 'origin' })));",
      '',
    ].join('\n'),
  );
  const started = performance.now();
  await Promise.all([
    runCommand(process.execPath, [join(root, 'src/node/build.mjs'), 'fastly', '--out', buildDir], root, WASM_BUILD_TIMEOUT_MS),
    runCommand(process.execPath, [join(root, 'src/node/build.mjs'), 'fastly-floor', '--out', join(floorDir, 'build')], root, WASM_BUILD_TIMEOUT_MS),
    runCommand(
      process.execPath,
      [join(root, 'node_modules/@fastly/js-compute/dist/cli/js-compute-runtime-cli.js'), join(bareDir, 'bare.js'), join(bareDir, 'bin', 'main.wasm')],
      root,
      WASM_BUILD_TIMEOUT_MS,
    ),
  ]);
  log(`wasm: built bin/main.wasm, the bare proxy and the code-size floor in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  copyFileSync(join(floorDir, 'build', 'floor.wasm'), join(floorDir, 'bin', 'main.wasm'));
  const images = [
    { name: 'bare proxy wasm', image: readWasmImageFile(join(bareDir, 'bin', 'main.wasm')) },
    { name: 'waiting room wasm (bin/main.wasm)', image: readWasmImageFile(join(buildDir, 'main.wasm')) },
    { name: 'code-size floor wasm', image: readWasmImageFile(join(floorDir, 'bin', 'main.wasm')) },
  ];
  log(`wasm: redis ${redisServer.url}, bridge ${bridgeUrl} behind counting proxy ${proxy.url}, origin ${originUrl}`);

  // A room's settings: devconfig.json with the room's overrides, as on the Node arm; the Upstash URL
  // and the `upstash` backend are the counting proxy.
  const dev = JSON.parse(readFileSync(join(root, 'devconfig.json'), 'utf8')) as { config?: Record<string, string>; dev_secrets?: Record<string, string> };
  const secrets = { ...dev.dev_secrets, upstash_token: token };
  const manifest = (name: string, lines: readonly string[]): string =>
    ['manifest_version = 3', `name = "${name}"`, 'language = "javascript"', '[local_server]', ...lines, ''].join('\n');
  writeFileSync(join(bareDir, 'fastly.toml'), manifest('bare-proxy-bench', ['[local_server.backends.origin]', `url = "${originUrl}/"`]));
  writeFileSync(join(floorDir, 'fastly.toml'), manifest('code-size-floor-bench', ['[local_server.backends.origin]', `url = "${originUrl}/"`]));
  const writeRoom = (spec: RoomSpec, wasm = join(buildDir, 'main.wasm'), folder = spec.variant): string => {
    const roomDir = join(dir, folder);
    mkdirSync(join(roomDir, 'bin'), { recursive: true });
    copyFileSync(wasm, join(roomDir, 'bin', 'main.wasm'));
    writeFileSync(join(roomDir, 'bin', 'config.json'), JSON.stringify(configStoreItems({ ...dev.config, ticket_limit: '0', ...spec.overrides, upstash_url: proxy.url })));
    writeFileSync(join(roomDir, 'bin', 'secrets.json'), JSON.stringify(secrets));
    const name = spec.variant === MAIN_ROOM.variant ? 'waiting-room-bench' : `waiting-room-bench-${spec.variant}`;
    writeFileSync(join(roomDir, 'fastly.toml'), manifest(name, localServerSection(originUrl, proxy.url)));
    return roomDir;
  };
  const fastlyCli = join(root, 'node_modules/.bin/fastly');
  const hostName = (spec: RoomSpec): string => (spec.variant === MAIN_ROOM.variant ? 'waiting room wasm' : `${spec.variant} waiting room wasm`);
  const logs = new Map<string, RequestLogKeeper>();
  const hosts = new Map<string, Promise<RoomHost>>();
  const bares = new Map<string, Promise<string>>();
  const arm: Arm = {
    name: 'wasm',
    originUrl,
    apiToken: node.apiToken,
    bridge: { url: bridgeUrl, token },
    load: node.load,
    snapshot,
    storeTimes: () => proxy.times(),
    config: (spec) => node.config(spec),
    host: (spec) =>
      once(hosts, spec.variant, async () => {
        const name = hostName(spec);
        const app = await startComputeHost(name, fastlyCli, found.path, writeRoom(spec), { reuse: spec.reuse === true });
        cleanups.add(`${name} host (fastly compute serve)`, () => app.stop());
        watch(app.log);
        logs.set(spec.variant, app.log);
        log(`wasm: ${name.replace(/ wasm$/, '')} ${app.url}`);
        const agent = new http.Agent({ keepAlive: true, maxSockets: spec.sockets.wasm });
        cleanups.add(`${name} client agent`, async () => agent.destroy());
        await warmComputeHost(`wasm (${spec.variant})`, app.url, agent, spec.sockets.wasm, snapshot);
        return { url: app.url, config: node.config(spec), log: app.log, agent, stats: () => app.stats() };
      }),
    bare: (reuse = false) =>
      once(bares, `bare${reuse ? ' reused' : ''}`, async () => {
        const name = `bare proxy wasm${reuse ? ', sandboxes reused' : ''}`;
        const bare = await startComputeHost(name, fastlyCli, found.path, bareDir, { reuse });
        cleanups.add(`${name} host (fastly compute serve)`, () => bare.stop());
        log(`wasm: ${name} ${bare.url}`);
        return bare.url;
      }),
    floor: (reuse = false) =>
      once(bares, `floor${reuse ? ' reused' : ''}`, async () => {
        const name = `code-size floor wasm${reuse ? ', sandboxes reused' : ''}`;
        const floor = await startComputeHost(name, fastlyCli, found.path, floorDir, { reuse });
        cleanups.add(`${name} host (fastly compute serve)`, () => floor.stop());
        log(`wasm: ${name} ${floor.url}`);
        return floor.url;
      }),
    images: () => images,
    troubleSources: (spec) => {
      const hostLog = logs.get(spec.variant);
      return hostLog === undefined ? [proxy] : [hostLog, proxy];
    },
    admitted: undefined,
  };
  return { kind: 'ran', arm, hostPath: found.path };
}

// ---------------------------------------------------------------------------------------------
// Passes

export type PassName = 'round-trips' | 'latency' | 'cache' | 'capacity' | 'methods' | 'gates' | 'admission' | 'blocks';

/** How the wasm arm went, for the reports: a pass without a wasm result says why from this. */
export type WasmStatus =
  | { readonly kind: 'ran'; readonly hostPath: string }
  | { readonly kind: 'skipped'; readonly reason: string }
  | { readonly kind: 'error'; readonly message: string };

/** A pass's outcome on one arm: what it measured, or why not. */
export type Outcome<T> =
  | { readonly kind: 'ran'; readonly result: T }
  | { readonly kind: 'error'; readonly message: string }
  | { readonly kind: 'skipped'; readonly reason: string };

/** The wasm side of a pass for its report: its outcome, or why it has none. */
export function wasmOutcome<T>(outcome: Outcome<T> | undefined, wasm: WasmStatus): Outcome<T> {
  if (outcome !== undefined) return outcome;
  if (wasm.kind === 'skipped') return wasm;
  return { kind: 'error', message: wasm.kind === 'error' ? 'the wasm arm failed before it' : 'it did not run' };
}

/** A pass's section of the report, and the FAIL lines that fail the run (none when it passed). */
export interface PassReport {
  readonly text: string;
  readonly failures: readonly string[];
  /** Every request class the pass counted, on each arm, for the billed-commands table. */
  readonly billed: readonly BilledRow[];
}

/** One request class on one arm: its counts, for the billed-commands table. */
export interface BilledRow {
  readonly pass: PassName;
  readonly arm: ArmName;
  readonly label: string;
  readonly requests: number;
  readonly counts: Counts;
  /** Billed commands allowed per request; none yet (issue 13 sets them after the store rework). */
  readonly billedBudget?: number | undefined;
}

/** A billed row over budget: more billed commands than its budget allows for its requests. */
function overBilledBudget(row: BilledRow): boolean {
  return row.billedBudget !== undefined && row.counts.billed > row.billedBudget * row.requests;
}

/** The billed-commands section: every counted class of every pass that ran, and the budgets' verdicts. */
export function billedReport(rows: readonly BilledRow[]): PassReport {
  const over = rows.filter(overBilledBudget);
  const perRequest = (row: BilledRow): string => (row.requests > 0 ? (row.counts.billed / row.requests).toFixed(2) : 'n/a');
  const text = [
    '### Billed commands per request class (what Upstash bills: every command a script runs, not only the EVALSHA that carries it)',
    '',
    table(
      ['pass', 'host', 'request class', 'requests', 'round trips (HTTP)', 'script calls', 'billed commands', 'billed per request', 'billed budget', 'result'],
      ['l', 'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
      rows.map((row) => [
        row.pass,
        row.arm,
        row.label,
        String(row.requests),
        String(row.counts.http),
        String(row.counts.redis),
        String(row.counts.billed),
        perRequest(row),
        row.billedBudget === undefined ? '—' : `≤ ${row.billedBudget}`,
        row.billedBudget === undefined ? '' : overBilledBudget(row) ? 'FAIL' : 'PASS',
      ]),
    ),
    '',
    'The same steps as the passes above, counted between the same snapshots. Round trips: HTTP requests that reached the bridge. ' +
      'Script calls: EVALSHA/EVAL (and _RO) in `INFO commandstats`. Billed commands: calls + rejected_calls summed over every ' +
      '`cmdstat_*` entry of `INFO commandstats`, which counts each command a script runs as well as the script call itself, ' +
      `excluding the harness's own commands: ${[...HARNESS_COMMANDS].map((c) => c.toUpperCase()).join(', ')} (INFO: each snapshot and ` +
      'the connections\' ready checks; SCRIPT: the SCRIPT LOADs that warm the script cache; CLIENT: what the Redis clients send on ' +
      'connecting). Two snapshots in a row are checked to count nothing. A first call on a cold script cache is billed for the ' +
      'NOSCRIPT answer as well as for the EVAL. Budgets are per request on average over the class; a class over its budget fails the run.',
    '',
  ].join('\n');
  return { text, failures: over.map((row) => `${row.pass}, ${row.arm}, ${row.label}: ${row.counts.billed} billed commands for ${row.requests} requests, over ${row.billedBudget} per request`), billed: [] };
}

/**
 * One pass: it runs on the Node arm, then (when there is one) on the wasm arm, and reports both.
 * A throw from run() ends that arm: the whole run on the Node arm (exit 2), the rest of the wasm
 * arm's passes on the wasm arm. Passes that keep going record their own failure instead.
 */
export interface Pass {
  readonly name: PassName;
  /** Starts the hosts the pass measures before any pass runs on the arm (so they are not cold). */
  prepare?(arm: Arm): Promise<void>;
  run(arm: Arm): Promise<void>;
  report(wasm: WasmStatus): PassReport;
}
