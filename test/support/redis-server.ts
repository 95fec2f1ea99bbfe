/**
 * A throwaway `redis-server` for tests: its own free port (never the machine's 6379), no
 * persistence, and gone when the test process goes, however that happens.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RedisServer {
  port: number;
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /** Stops the server and resolves once the process has exited. */
  stop(): Promise<void>;
  /**
   * Freezes the process (SIGSTOP): connections stay open and commands go unanswered, a store that
   * hangs rather than refuses. `resume` (SIGCONT) lets it answer what it was sent meanwhile.
   */
  pause(): void;
  resume(): void;
}

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;
// The free port is released before redis-server binds it, so another process may take it first.
const START_ATTEMPTS = 3;

// `setpriv --pdeathsig KILL` makes the kernel kill redis-server when this process dies, even by
// SIGKILL, where no exit handler runs. Without setpriv we fall back to the exit handler alone.
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));

const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of running) child.kill('SIGKILL');
  });
}

/** `extraArgs(port)`: more redis-server arguments, which may depend on the port it gets. */
export async function startRedisServer(extraArgs: (port: number) => string[] = () => []): Promise<RedisServer> {
  let lastError: unknown;
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    try {
      const port = await findFreePort();
      return await startOnce(port, extraArgs(port));
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}

/** A fresh redis-server on `port` (one that was stopped, to play a restart with its data gone); `extraArgs` as for startRedisServer. */
export function startRedisServerOnPort(port: number, extraArgs: string[] = []): Promise<RedisServer> {
  return startOnce(port, extraArgs);
}

async function startOnce(port: number, extraArgs: string[]): Promise<RedisServer> {
  const redisArgs = ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', ...extraArgs];
  const child = SETPRIV
    ? spawn(SETPRIV, ['--pdeathsig', 'KILL', 'redis-server', ...redisArgs], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn('redis-server', redisArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  installExitHook();
  running.add(child);

  // Keep the tail of the log to explain a failed start; it also keeps the pipes drained.
  let log = '';
  const keepLog = (chunk: Buffer) => {
    log = (log + chunk.toString('utf8')).slice(-4_000);
  };
  child.stdout?.on('data', keepLog);
  child.stderr?.on('data', keepLog);

  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      running.delete(child);
      resolve();
    });
  });
  let spawnError: Error | undefined;
  child.once('error', (error) => {
    spawnError = error;
    running.delete(child);
  });

  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null || spawnError) return;
    // A paused server would not act on SIGTERM until continued.
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  };

  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await answersPing(port))) {
    if (spawnError) throw new Error(`could not start redis-server: ${spawnError.message}`);
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server exited before it was ready on port ${port}:\n${log}`);
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer PING on port ${port} within ${READY_TIMEOUT_MS} ms:\n${log}`);
    }
    await sleep(20);
  }
  const signal = (name: NodeJS.Signals) => () => {
    if (child.exitCode === null && child.signalCode === null && !spawnError) child.kill(name);
  };
  return { port, url: `redis://${HOST}:${port}`, stop, pause: signal('SIGSTOP'), resume: signal('SIGCONT') };
}

function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** One inline PING over a fresh connection; false on any failure, so the caller can poll. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: HOST, port });
    let reply = '';
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1');
      // A server still loading answers -LOADING; only +PONG means ready.
      if (reply.includes('\r\n')) finish(reply.startsWith('+PONG'));
    });
  });
}

export interface RedisCluster {
  /** The nodes' URLs, `redis://127.0.0.1:<port>` each: a cluster's seed list. */
  readonly urls: readonly string[];
  readonly nodes: readonly RedisServer[];
  /** Starts node `i` again on its port after it was stopped, from its cluster config (its data gone). */
  restartNode(i: number): Promise<RedisServer>;
  stop(): Promise<void>;
}

/**
 * A throwaway Redis Cluster of `size` masters, no replicas: the 16384 slots split evenly (CLUSTER
 * ADDSLOTSRANGE), the nodes introduced (CLUSTER MEET), resolved once every node reports the
 * cluster ok. Each node's cluster bus is its port + 10000, so ports stay below 55535.
 */
export async function startRedisCluster(size = 3): Promise<RedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'wr-cluster-'));
  const nodes: RedisServer[] = [];
  const clusterArgs = (port: number) => ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--dir', dir];
  const stop = async (): Promise<void> => {
    await Promise.allSettled(nodes.map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    while (nodes.length < size) {
      const node = await startRedisServer(clusterArgs);
      if (node.port > 55_535) {
        await node.stop();
        continue;
      }
      nodes.push(node);
    }
    const per = Math.ceil(16_384 / size);
    for (const [i, node] of nodes.entries()) {
      await command(node.port, ['CLUSTER', 'ADDSLOTSRANGE', String(i * per), String(Math.min(16_383, (i + 1) * per - 1))]);
    }
    for (const node of nodes.slice(1)) await command(nodes[0]!.port, ['CLUSTER', 'MEET', HOST, String(node.port)]);
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (const node of nodes) {
      while (!(await command(node.port, ['CLUSTER', 'INFO'])).includes('cluster_state:ok')) {
        if (Date.now() > deadline) throw new Error(`cluster not ok on port ${node.port}`);
        await sleep(50);
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const restartNode = async (i: number): Promise<RedisServer> => {
    const port = nodes[i]!.port;
    nodes[i] = await startOnce(port, clusterArgs(port));
    return nodes[i]!;
  };
  return { urls: nodes.map((n) => n.url), nodes, restartNode, stop };
}

/** One command in RESP over a fresh connection; resolves with the raw reply text. */
function command(port: number, argv: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: HOST, port });
    let reply = '';
    socket.setTimeout(2_000, () => {
      socket.destroy();
      reject(new Error(`no reply to ${argv.join(' ')} on port ${port}`));
    });
    socket.once('error', reject);
    socket.once('connect', () => socket.write(`*${argv.length}\r\n${argv.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`));
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8');
      const complete = reply.startsWith('$') ? reply.length >= Number(/^\$(-?\d+)/.exec(reply)?.[1] ?? 0) + reply.indexOf('\r\n') + 4 : reply.endsWith('\r\n');
      if (!complete) return;
      socket.destroy();
      if (reply.startsWith('-')) reject(new Error(reply.trim()));
      else resolve(reply);
    });
  });
}
