/**
 * `npm start`: the waiting room on http://127.0.0.1:7676 in front of the demo origin on
 * 127.0.0.1:7677, with the embedded in-memory store and the dev values of `devconfig.json`. Zero
 * configuration.
 *
 * Ports: PORT moves the waiting room and WR_ORIGIN_PORT the demo origin (0 picks a free one). A
 * port that is taken stops the start before anything listens, with one line naming the port and
 * the variable that moves it, and exit status 1: it never serves beside, or in front of, a process
 * it did not start.
 *
 * Optional environment: ORIGIN_URL (use your own origin instead of the demo one),
 * WR_STORE=upstash (use the Upstash store at `upstash_url`, e.g. the local bridge), WR_STORE=redis
 * with REDIS_URL (Redis 7+ itself, one server or a cluster: see WR_REDIS_CLUSTER; several hosts
 * behind a load balancer then share the queues), WR_DEMO_PROTECTED=1 (the demo origin refuses
 * requests without the signed admission), CLIENT_COUNTRY_HEADER (the header a proxy in front sets
 * to the client's country, for queues chosen by country; none by default),
 * ORIGIN_FIRST_BYTE_TIMEOUT_MS and ORIGIN_BETWEEN_BYTES_TIMEOUT_MS (how long the origin may take:
 * 15000 and 10000 by default, Fastly's backend defaults), HOST (the address to listen on:
 * 127.0.0.1 by default), TRUSTED_PROXIES (the addresses or CIDRs of the proxies in front whose
 * X-Forwarded-For gives the client's address; none by default), and WR_<KEY> to override any setting or secret of devconfig.json.
 *
 * Anything but the demo (another store, or HOST off loopback) is a deployment: its secrets come
 * from the environment alone (WR_SIGNING_KEYS, WR_ADMIN_PASSWORD, …), the published development
 * values and weak ones are refused, naming each variable (see readLocalConfig).
 */
import { existsSync, watchFile } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from '@upstash/redis';
import { ConfigError, upstashShardProblems, type Config } from '../core/config';
import { MemoryFailureLimiter } from '../platform/memory-limiter';
import { MemoryOriginMeter } from '../platform/memory-meter';
import { capIdleConnections, directoryTemplateSource, parseOriginTimeouts, readLocalConfig, REDIS_SHARD_URLS_ENV, systemClock } from '../platform/node';
import { ShardedStore, shardCountProblem } from '../store/sharded-store';
import { MemoryQueueStore } from '../store/memory-store';
import { UpstashQueueStore } from '../store/upstash-store';
import { connectRedis, createRedisQueueStore, reportRedisErrors, waitUntilReady, type RedisConnection } from '../store/redis-store';
import { createNodeUpstashOptions } from '../platform/node';
import { startDemoOrigin } from './demo-origin';
import { parseCountryHeader, startHost } from './host';
import { checkPorts, failureLine, listenOn, readPort } from './local-ports';
import { buildWaitingRoom } from './waiting-room';

function findProjectFile(name: string): string {
  // The bundle runs from bin/; the project root is one level up. Fall back to the working directory.
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [resolve(here, '..', name), resolve(process.cwd(), name)]) {
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`${name} not found next to the project`);
}

const COMMAND = 'npm start';

async function main(): Promise<void> {
  const configPath = findProjectFile('devconfig.json');
  // The store and the bind address are chosen once at start (WR_STORE, HOST); a reload changes settings, not these.
  const hostOptions = readLocalConfig(configPath).host;
  const hostPort = { ...readPort(COMMAND, 'host'), ...(hostOptions.bind !== '127.0.0.1' && { host: hostOptions.bind }) };
  const originPort = process.env['ORIGIN_URL'] === undefined ? readPort(COMMAND, 'origin') : undefined;
  if (originPort === undefined && process.env['WR_ORIGIN_PORT']) process.stderr.write('note: WR_ORIGIN_PORT is ignored: ORIGIN_URL replaces the demo origin\n');
  // Both ports before either listens: a taken one stops the start with nothing left running.
  await checkPorts(COMMAND, originPort === undefined ? [hostPort] : [hostPort, originPort]);
  // The waiting room's port (with PORT=0, known once it listens), JWKS and audience (known once its
  // settings are read): the protected demo origin asks for them later.
  let port = hostPort.port;
  let jwksPath = '/__wr/.well-known/jwks.json';
  let audience = 'origin';
  // WR_DEMO_PROTECTED=1: the demo origin answers 403 to anything without the waiting room's signed admission.
  const protect = process.env['WR_DEMO_PROTECTED'] === '1' ? { jwksUrl: () => `http://127.0.0.1:${port}${jwksPath}`, get audience() { return audience; } } : undefined;
  // WR_DEMO_CAPACITY=<requests a second>: the demo origin slows down above it and fails above 1.5 × it
  // (to watch adaptive admission learn it).
  const capacityText = process.env['WR_DEMO_CAPACITY'];
  const capacity = capacityText === undefined ? undefined : /^[1-9][0-9]{0,5}$/.test(capacityText.trim()) ? Number(capacityText.trim()) : Number.NaN;
  if (Number.isNaN(capacity)) {
    process.stderr.write(`${COMMAND}: WR_DEMO_CAPACITY must be a whole number of requests a second from 1 to 999999, got ${JSON.stringify(capacityText)}\n`);
    process.exit(1);
  }
  const degrade = capacity === undefined ? undefined : { perSecond: capacity, slowMs: 2_000 };
  // CLIENT_COUNTRY_HEADER: the header a proxy in front sets to the client's country (queues by country).
  const country = parseCountryHeader(process.env['CLIENT_COUNTRY_HEADER']);
  // ORIGIN_FIRST_BYTE_TIMEOUT_MS, ORIGIN_BETWEEN_BYTES_TIMEOUT_MS: how long the origin may take.
  const timeouts = parseOriginTimeouts(process.env);
  // STORE_KEEPALIVE_MS: idle connections to the store are closed on our side before its front drops them.
  const keepAlive = capIdleConnections(process.env['STORE_KEEPALIVE_MS']);
  if (!keepAlive.ok) {
    process.stderr.write(`${COMMAND}: ${keepAlive.problem}\n`);
    process.exit(1);
  }
  // SHUTDOWN_GRACE_MS: how long a SIGTERM lets the requests in flight finish.
  const shutdown = parseShutdownGrace(process.env['SHUTDOWN_GRACE_MS']);
  if (!shutdown.ok) {
    process.stderr.write(`${COMMAND}: ${shutdown.problem}\n`);
    process.exit(1);
  }
  for (const problem of [...(country.ok ? [] : [country.problem]), ...(timeouts.ok ? [] : timeouts.problems)]) process.stderr.write(`${COMMAND}: ${problem}\n`);
  if (!country.ok || !timeouts.ok) process.exit(1);
  const origin = originPort === undefined ? undefined : await listenOn(COMMAND, originPort, (p) => startDemoOrigin({ port: p, ...(protect !== undefined && { protect }), ...(degrade !== undefined && { degrade }) }));
  const originUrl = process.env['ORIGIN_URL'] ?? origin!.url;
  const memoryStore = new MemoryQueueStore();
  // Kept across reloads of devconfig.json, as the store is: a new setting must not free a held guesser.
  const authLimiter = new MemoryFailureLimiter(systemClock);
  const ticketLimiter = new MemoryFailureLimiter(systemClock);
  const originMeter = new MemoryOriginMeter(systemClock);
  const useUpstash = hostOptions.store === 'upstash';
  // WR_STORE=redis: one connection for the life of the process (reloads keep it), made with the
  // store timeout and retries of the first valid settings: changing those needs a restart.
  let redisConnection: RedisConnection | undefined;
  // store_shards above 1: the other databases (REDIS_SHARD_URLS), connected once each, like the first.
  const shardConnections: RedisConnection[] = [];
  const redisStore = (config: Readonly<Config>) => {
    const timeoutMs = config.storeTimeoutMs;
    const retries = config.storeRetries;
    // No valid REDIS_URL: readLocalConfig reported it, and buildWaitingRoom refuses to start with
    // that problem among the others; this store is never used.
    if (hostOptions.redis === undefined) return memoryStore;
    const extra = hostOptions.redisShards;
    if (config.storeShards !== 1 + extra.length) {
      throw new ConfigError([{ key: 'store_shards', message: shardCountProblem(config.storeShards, extra.length, `the environment variable ${REDIS_SHARD_URLS_ENV}`) }]);
    }
    if (redisConnection === undefined) {
      redisConnection = connectRedis(hostOptions.redis, { timeoutMs, retries });
      reportRedisErrors(redisConnection, (line) => process.stderr.write(line));
    }
    const first = createRedisQueueStore({ redis: redisConnection });
    if (extra.length === 0) return first;
    extra.forEach((target, i) => {
      if (shardConnections[i] !== undefined) return;
      const connection = connectRedis(target, { timeoutMs, retries });
      reportRedisErrors(connection, (line) => process.stderr.write(`database ${i + 2}: ${line}`));
      shardConnections[i] = connection;
    });
    return new ShardedStore([first, ...shardConnections.map((redis) => createRedisQueueStore({ redis }))]);
  };
  // The demo's memory store with store_shards above 1: as many memory stores, kept across reloads.
  const memoryShards: MemoryQueueStore[] = [memoryStore];
  const memoryStores = (config: Readonly<Config>) => {
    while (memoryShards.length < config.storeShards) memoryShards.push(new MemoryQueueStore());
    return config.storeShards === 1 ? memoryStore : new ShardedStore(memoryShards.slice(0, config.storeShards));
  };
  let describe: (key: string) => string | undefined = () => undefined;
  let secretValue: (key: string) => string | undefined = () => undefined;
  const build = () => {
    const local = readLocalConfig(configPath);
    describe = local.describe;
    secretValue = local.secrets;
    return buildWaitingRoom({
      settings: local.settings,
      secrets: local.secrets,
      problems: local.problems,
      originUrl,
      originTimeouts: timeouts.timeouts,
      store: hostOptions.store === 'redis'
        ? redisStore
        : useUpstash
        ? (config, secrets) => {
            const upstash = (url: string, token: string) =>
              new UpstashQueueStore({ redis: new Redis(createNodeUpstashOptions({ url, token, retries: config.storeRetries, timeoutMs: config.storeTimeoutMs })) });
            const first = upstash(config.upstashUrl ?? '', secrets.upstashToken ?? '');
            if (config.storeShards === 1) return first;
            // The other databases: upstash_shard_urls with the secret upstash_shard_tokens, as many as store_shards says.
            const problems = upstashShardProblems(config, secrets.upstashShardTokens);
            if (problems.length > 0) throw new ConfigError(problems);
            return new ShardedStore([first, ...config.upstashShardUrls.map((url, i) => upstash(url, secrets.upstashShardTokens[i]!))]);
          }
        : memoryStores,
      authLimiter,
      ticketLimiter,
      originMeter,
      // Template overrides, as the KV Store wr_templates provides them on Fastly.
      templates: local.host.templatesDir === undefined ? undefined : directoryTemplateSource(local.host.templatesDir),
    });
  };
  // Each problem says where its value came from, so an environment variable that overrides the file is not hunted for in the file.
  const describeProblems = (error: ConfigError) =>
    error.problems
      .map((p) => {
        const from = describe(p.key);
        return `  - ${p.key}${from === undefined ? '' : ` (${from})`}: ${p.message}`;
      })
      .join('\n');
  let room;
  try {
    room = build();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`The settings are not valid (devconfig.json and WR_ environment variables):\n${describeProblems(error)}\n`);
      process.exit(1);
    }
    throw error;
  }
  let current = room.handler;
  // Edits to devconfig.json apply at once; a broken edit is refused and the running settings stay.
  watchFile(configPath, { interval: 500 }, () => {
    try {
      current = build().handler;
      process.stderr.write('devconfig.json changed: new settings in use\n');
    } catch (error) {
      const reason = error instanceof ConfigError ? describeProblems(error) : `  - ${error instanceof Error ? error.message : String(error)}`;
      process.stderr.write(`devconfig.json changed but is not valid; still running on the previous settings:\n${reason}\n`);
    }
  });
  // Listen once Redis answers, so the first visitors are not turned away by a connection still
  // being made; a Redis that is down at start only delays it (calls then fail fast, as later).
  if (redisConnection !== undefined && !(await waitUntilReady(redisConnection, 5_000))) {
    process.stderr.write('redis: not ready after 5 s; starting anyway (store calls fail until it is)\n');
  }
  for (const [i, connection] of shardConnections.entries()) {
    if (!(await waitUntilReady(connection, 5_000))) process.stderr.write(`redis: database ${i + 2} not ready after 5 s; starting anyway (its visitors wait until it is)\n`);
  }
  jwksPath = `${room.config.pathPrefix}.well-known/jwks.json`;
  audience = room.config.admissionAudience;
  const host = await listenOn(COMMAND, hostPort, (p) => startHost((request, client) => current(request, client), { port: p, host: hostOptions.bind, countryHeader: country.header, trustedProxies: hostOptions.trustedProxies }));
  port = host.port;
  const prefix = room.config.pathPrefix;
  // Where each secret comes from, never a production value; the demo's development values are
  // printed, since they are published anyway and the demo is for trying the room.
  const secretLine = (key: 'admin_password' | 'admin_api_token'): string => {
    const from = describe(key) ?? 'not set';
    if (hostOptions.deployment) return `from ${from}`;
    const value = secretValue(key);
    return from.includes('dev_secrets') && value !== undefined ? `${JSON.stringify(value)} (a development value, from ${from})` : `from ${from}`;
  };
  process.stderr.write(
    [
      '',
      `Waiting room (${storeLabel(hostOptions, room.config.upstashUrl)}) in front of ${originUrl}${origin === undefined ? ' (ORIGIN_URL)' : ` (the demo origin; ${originPort!.variable} moves it)`}`,
      `  Visitors:  ${host.url}/   (${hostPort.variable} moves it)`,
      ...(hostOptions.trustedProxies.length === 0 ? [] : [`  Proxies:   client addresses from X-Forwarded-For when the peer is ${hostOptions.trustedProxies.map((r) => r.source).join(', ')} (TRUSTED_PROXIES)`]),
      hostOptions.deployment
        ? '  Secrets:   from the environment only (a deployment: not the in-memory demo on loopback)'
        : '  Secrets:   development values from devconfig.json (the zero-configuration demo; a deployment takes them from the environment)',
      `  Admin:     ${host.url}${prefix}admin   user "${room.config.adminUser}", password ${secretLine('admin_password')}`,
      `  Origin API: curl -X POST -H "Authorization: Bearer <admin_api_token>" "${host.url}${prefix}api/admit?count=5"   token ${secretLine('admin_api_token')}`,
      ...(protect === undefined ? [] : [`  Origin:    protected: 403 without the signed admission (keys at ${host.url}${jwksPath})`]),
      '  Request log lines (JSON) follow on stdout. Ctrl-C stops.',
      '',
    ].join('\n'),
  );
  // SIGTERM (a process manager, a deploy): stop accepting, let the requests in flight finish
  // (downloads included) for up to SHUTDOWN_GRACE_MS, then close the store and go. A second signal,
  // or Ctrl-C, stops at once.
  let stopping = false;
  const stop = async (graceful: boolean): Promise<void> => {
    if (stopping) process.exit(1);
    stopping = true;
    if (graceful && host.drain !== undefined) {
      process.stderr.write(`stopping: no new connections; finishing the requests in flight (at most ${shutdown.graceMs} ms)\n`);
      const finished = await host.drain(shutdown.graceMs);
      process.stderr.write(finished ? 'stopping: every request finished\n' : `stopping: requests still open after ${shutdown.graceMs} ms were closed\n`);
    } else {
      await host.close();
    }
    await origin?.close();
    await redisConnection?.quit().catch(() => redisConnection?.disconnect());
    process.exit(0);
  };
  process.on('SIGINT', () => void stop(false));
  process.on('SIGTERM', () => void stop(true));
}

/** SHUTDOWN_GRACE_MS: 25 s unless set (under systemd's 90 s and Kubernetes' 30 s stop timeouts); 1 ms to 10 minutes. */
function parseShutdownGrace(text: string | undefined): { readonly ok: true; readonly graceMs: number } | { readonly ok: false; readonly problem: string } {
  if (text === undefined || text.trim() === '') return { ok: true, graceMs: 25_000 };
  const value = Number(text.trim());
  if (!/^[0-9]+$/.test(text.trim()) || value < 1 || value > 600_000) return { ok: false, problem: `SHUTDOWN_GRACE_MS must be a whole number of ms from 1 to 600000, got ${JSON.stringify(text).slice(0, 40)}` };
  return { ok: true, graceMs: value };
}

function storeLabel(host: ReturnType<typeof readLocalConfig>['host'], upstashUrl: string | undefined): string {
  if (host.store === 'upstash') return `Upstash store at ${upstashUrl ?? ''}`;
  if (host.store === 'redis' && host.redis !== undefined) {
    // The URLs without their passwords: this line goes to logs.
    const where = host.redis.urls.map((u) => {
      const url = new URL(u);
      return `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
    });
    return `Redis${host.redis.cluster ? ' Cluster' : ''} store at ${where.join(', ')}`;
  }
  return 'in-memory store';
}

main().catch((error: unknown) => {
  process.stderr.write(failureLine(COMMAND, error));
  process.exit(1);
});
