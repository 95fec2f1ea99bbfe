/**
 * The wasm arm's own pieces: finding the Compute host, a counting HTTP proxy in front of the
 * Upstash bridge, and `fastly compute serve --skip-build` in its own process group.
 *
 * The wasm runs in the host's process, so a fetch wrapper in the bench cannot see its store
 * requests: its `upstash` backend points at the counting proxy, which counts every HTTP request
 * that reaches the bridge.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { RequestLog } from '../../src/core/ports';
import { freePort } from '../../src/node/host';
import { findComputeHost, PROJECT_ROOT, type ComputeHost } from '../support/compute-host';
import { RequestLogKeeper, type TroubleSource } from './trouble';
import { send } from './util';

/** Starting `fastly compute serve`: until its "Listening on". */
const HOST_START_TIMEOUT_MS = 30_000;

/**
 * `findComputeHost()`, with its paths resolved against the real project root: it derives the root
 * from its own file's location, which inside the bundle (bin/bench.mjs) is one level too high.
 * Same order as there: VICEROY_PATH, then viceroy on PATH, then the stand-in beside the project.
 */
export function locateComputeHost(root: string): ComputeHost {
  const env: NodeJS.ProcessEnv = { ...process.env };
  const fromEnv = env['VICEROY_PATH'];
  if (fromEnv !== undefined && fromEnv !== '') env['VICEROY_PATH'] = resolve(root, fromEnv);
  const found = findComputeHost(env);
  if (found.found || (fromEnv !== undefined && fromEnv !== '') || PROJECT_ROOT === root) return found;
  const standIn = resolve(root, '..', 'shared', 'tools', 'compute-host', 'viceroy');
  return existsSync(standIn) ? findComputeHost({ ...env, VICEROY_PATH: standIn }) : found;
}

/** Runs a command to completion; rejects with its output when it fails or takes too long. */
export function runCommand(command: string, args: readonly string[], cwd: string, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (chunk: Buffer): void => void (output = (output + chunk.toString('utf8')).slice(-4_000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolvePromise();
      else reject(new Error(`${command} ${args.join(' ')} failed (${signal ?? `exit ${String(code)}`}):\n${output}`));
    });
  });
}

export interface CountingProxy extends TroubleSource {
  readonly url: string;
  /** HTTP requests received so far (each one forwarded to the target). */
  count(): number;
  /** `performance.now()` of each of them. */
  times(): readonly number[];
  close(): Promise<void>;
}

/**
 * An HTTP proxy that counts every request it forwards to `target`, bodies streamed both ways. It
 * keeps its own failures (a forward that failed, on a reused keep-alive socket or a new one; a
 * client connection error; a request the client gave up on; a 5xx from the target) for the report.
 */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const upstream = new URL(target);
  // Keep-alive to the bridge, but an idle socket is dropped here after 2 s, well before the bridge
  // (a Node server: keepAliveTimeout 5 s, closed at 6 s) closes it. Without a timeout of its own
  // the agent keeps idle sockets until the bridge closes them, and a request that picks one at that
  // moment fails (ECONNRESET / socket hang up): measured 10 of 300 reuses between 5.9 and 6.1 s idle.
  // This proxy would answer that with a 502 text body, which the Upstash client does not retry
  // (it retries only a fetch that throws) and cannot parse: a store error in the wasm that no
  // production path has. The bench's quiet stretches (a host starting, the capacity pass's sleep
  // for the refresh interval) are about that long.
  const agent = new http.Agent({ keepAlive: true, timeout: 2_000 });
  let requests = 0;
  const times: number[] = [];
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  const at = (): string => new Date().toISOString();
  const server = http.createServer((req, res) => {
    requests++;
    times.push(performance.now());
    const headers = { ...req.headers };
    delete headers['connection'];
    delete headers['keep-alive'];
    headers['host'] = upstream.host;
    const clientReused = (req.socket as { _wrBenchServed?: number })._wrBenchServed ?? 0;
    (req.socket as { _wrBenchServed?: number })._wrBenchServed = clientReused + 1;
    const forward = http.request(
      { protocol: upstream.protocol, hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, agent },
      (answer) => {
        const status = answer.statusCode ?? 502;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status >= 500) failures.push(`${at()} ${req.method} ${req.url}: the bridge answered ${status}`);
        res.writeHead(status, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', (error) => {
      failures.push(
        `${at()} ${req.method} ${req.url}: forward to the bridge failed on a ${forward.reusedSocket ? 'reused keep-alive' : 'new'} socket: ` +
          `${(error as NodeJS.ErrnoException).code ?? ''} ${error.message}; answered 502`,
      );
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`counting proxy: ${error.message}`);
    });
    res.on('close', () => {
      if (!res.writableFinished) failures.push(`${at()} ${req.method} ${req.url}: the client connection closed before the answer was sent (its request #${clientReused + 1})`);
    });
    req.pipe(forward);
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    failures.push(`${at()} client connection error: ${error.code ?? ''} ${error.message}`);
    socket.destroy();
  });
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolveListen());
  });
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('counting proxy: no address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    name: 'wasm counting proxy',
    count: () => requests,
    times: () => times,
    report: () => (failures.length === 0 ? [] : [`wasm counting proxy: ${failures.length} failure(s):`, ...failures.slice(0, 12).map((f) => `    ${f}`)]),
    summary: () =>
      `wasm counting proxy: ${requests} requests forwarded (bridge statuses ${[...statuses].map(([k, n]) => `${k}: ${n}`).join(', ') || 'none'}), ${failures.length} failure(s)`,
    close: () =>
      new Promise<void>((resolveClose) => {
        server.close(() => resolveClose());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}

/** One request as the stand-in's `GET /__host/stats` reports it. */
export interface HostRequestStat {
  readonly ms: number;
  /** Instantiating the wasm. */
  readonly tInst: number;
  /** The wasm's run, instantiation included. */
  readonly tRun?: number;
  /** Every fastly_* hostcall the request made. */
  readonly hostcalls?: number;
  /** With reusable sandboxes: served by an instance that had served a request before. */
  readonly reused?: boolean;
}

/** `GET /__host/stats` of a stand-in at `url` (undefined from a host that has no such path). */
export async function hostStats(url: string): Promise<HostRequestStat[] | undefined> {
  const agent = new http.Agent({ keepAlive: false });
  try {
    const reply = await send(agent, 'GET', `${url}/__host/stats`);
    const parsed: unknown = JSON.parse(reply.body);
    if (!Array.isArray(parsed)) return undefined;
    return parsed.filter((e): e is HostRequestStat => typeof e === 'object' && e !== null && typeof e.tInst === 'number' && typeof e.ms === 'number');
  } catch {
    return undefined;
  } finally {
    agent.destroy();
  }
}

export interface ComputeHostProcess {
  readonly url: string;
  /** The host's request log: its `wr_log :: {json}` lines on stdout. */
  readonly log: RequestLogKeeper;
  /** `GET /__host/stats` of the stand-in (undefined from a host that has no such path). */
  stats(): Promise<HostRequestStat[] | undefined>;
  stop(): Promise<void>;
}

/** How a Compute host serves its wasm. */
export interface HostMode {
  /**
   * Reusable sandboxes (the stand-in's COMPUTE_HOST_REUSE=1): an instance whose wasm asks for a
   * next request serves it, as Fastly does for bin/main.wasm. Off: a fresh instance per request.
   * The setting is the stand-in's; Viceroy itself reuses a sandbox whenever the wasm asks.
   */
  readonly reuse?: boolean;
}

/**
 * `fastly compute serve --skip-build` on `dir` (its fastly.toml and bin/main.wasm), in its own
 * process group: the CLI starts the host as its child, and stop() kills the whole group.
 */
export async function startComputeHost(name: string, fastlyCli: string, viceroyPath: string, dir: string, mode: HostMode = {}): Promise<ComputeHostProcess> {
  const port = await freePort();
  // Said either way, so that a COMPUTE_HOST_REUSE left in the bench's own environment cannot turn
  // a host of the other mode into this one.
  const env: NodeJS.ProcessEnv = { ...process.env, FASTLY_DISABLE_WASM_METRICS: '1', COMPUTE_HOST_REUSE: mode.reuse === true ? '1' : '0' };
  const child: ChildProcess = spawn(
    fastlyCli,
    ['compute', 'serve', '--skip-build', '--non-interactive', '--dir', dir, '--viceroy-path', viceroyPath, '--addr', `127.0.0.1:${port}`],
    { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env },
  );
  const killGroup = (): void => {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  };
  // Last resort for exits that skip the cleanup (process.exit from elsewhere).
  process.once('exit', killGroup);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  // The host writes a line per request (and the wasm's log lines) for as long as it runs: keep the
  // pipes drained, a tail to explain a failure, and the waiting room's request log (the `wr_log`
  // endpoint prints `wr_log :: {json}` lines on stdout) for the store errors behind a failure.
  let tail = '';
  let listening = false;
  const requestLog = new RequestLogKeeper(name);
  let partial = '';
  let partialErr = '';
  // The host's stderr carries its own errors ("[host] wasm error: …" for a trap, "[host] backend
  // error: …"); a healthy run prints nothing there. Stdout lines other than the request log and the
  // per-request INFO lines are kept when they look like errors.
  child.stderr!.on('data', (chunk: Buffer) => {
    const lines = (partialErr + chunk.toString('utf8')).split('\n');
    partialErr = lines.pop() ?? '';
    for (const line of lines) if (line.trim() !== '') requestLog.addHostLine(`stderr: ${line}`);
  });
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const match = /^wr_log :: (\{.*\})\s*$/.exec(line);
      if (match?.[1] === undefined) {
        if (/\b(ERROR|WARN)\b|\[host\]|trap|panic|-> 5\d\d /i.test(line)) requestLog.addHostLine(`stdout: ${line}`);
        continue;
      }
      try {
        requestLog.add(JSON.parse(match[1]) as RequestLog);
      } catch {
        requestLog.add({ ts: new Date().toISOString(), method: '?', path: '?', status: 0, decision: 'unreadable', store_error: `unreadable log line: ${line.slice(0, 200)}` });
      }
    }
  });
  const ready = new Promise<void>((resolveReady, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name}: no "Listening on" within ${HOST_START_TIMEOUT_MS / 1000} s:\n${tail}`)), HOST_START_TIMEOUT_MS);
    const onData = (chunk: Buffer): void => {
      tail = (tail + chunk.toString('utf8')).slice(-4_000);
      if (!listening && tail.includes('Listening on')) {
        listening = true;
        clearTimeout(timer);
        resolveReady();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`${name}: ${error.message}`));
    });
    // 'close', not 'exit': by then the pipes are drained, so the message carries the last output.
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name}: fastly compute serve exited (${signal ?? `exit ${String(code)}`}):\n${tail}`));
    });
  });
  const stop = async (): Promise<void> => {
    killGroup();
    await exited;
    process.off('exit', killGroup);
  };
  try {
    await ready;
  } catch (error) {
    await stop();
    throw error;
  }
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    log: requestLog,
    stats: () => hostStats(url),
    stop,
  };
}
