/**
 * Debian's HAProxy in front of Node hosts, for the load-balancer scenarios (test/e2e-haproxy.test.ts,
 * test/e2e-blocks-hosts.test.ts): HTTP mode, `option forwardfor`, round robin, a health check on
 * `/__wr/health`, and `x-served-by` (the server's name) added to each answer so a test knows which
 * host answered. On loopback ports only; HAProxy ends with the test process, however it ends.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../src/node/host';

// Debian installs it in /usr/sbin, which an unprivileged user's PATH may lack.
export const HAPROXY = spawnSync('haproxy', ['-v']).error === undefined || !existsSync('/usr/sbin/haproxy') ? 'haproxy' : '/usr/sbin/haproxy';

/** Why a HAProxy scenario cannot run here, or undefined when HAProxy is installed. */
export function haproxyMissing(): string | undefined {
  const probe = spawnSync(HAPROXY, ['-v'], { encoding: 'utf8' });
  if (probe.error !== undefined) return `haproxy is not installed (${probe.error.message}); .ci/run installs Debian's haproxy with apt-get`;
  if (probe.status !== 0) return `haproxy -v failed: ${probe.stderr.slice(0, 200)}`;
  return undefined;
}

const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));

/** Ends a child process: SIGTERM, then SIGKILL after 5 s. */
export async function stopProcess(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

export interface HaproxyServer {
  readonly name: string;
  readonly port: number;
}

/** The configuration docs/self-hosting.md shows, on loopback ports and with the check interval given. */
export function haproxyConfig(lbPort: number, statsPort: number, servers: readonly HaproxyServer[], checkIntervalMs: number, checkFall: number): string {
  return `global
    maxconn 1000

defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    option forwardfor
    option redispatch
    retries 2

frontend visitors
    bind 127.0.0.1:${lbPort}
    default_backend waiting_room

backend waiting_room
    balance roundrobin
    option httpchk
    http-check send meth GET uri /__wr/health ver HTTP/1.1 hdr host localhost
    http-check expect status 200
    default-server check inter ${checkIntervalMs}ms fall ${checkFall} rise 2
    http-response set-header x-served-by %[srv_name]
${servers.map((s) => `    server ${s.name} 127.0.0.1:${s.port}`).join('\n')}

frontend stats
    bind 127.0.0.1:${statsPort}
    stats enable
    stats uri /stats
`;
}

export interface RunningHaproxy {
  /** Where visitors reach the hosts through it. */
  readonly url: string;
  readonly child: ChildProcess;
  /** Each server's state as its stats page says (`UP`, `DOWN`, `UP 1/2` while going down, …). */
  states(): Promise<Record<string, string>>;
  /** Polls the states until `done` holds, or fails at the deadline naming what it last saw. */
  waitForStates(done: (states: Record<string, string>) => boolean, deadlineMs: number, what: string): Promise<void>;
  stop(): Promise<void>;
}

/** Starts HAProxy over `servers` with its configuration in `dir`, and waits until every server is UP. */
export async function startHaproxy(dir: string, servers: readonly HaproxyServer[], checkIntervalMs: number, checkFall: number): Promise<RunningHaproxy> {
  const [lbPort, statsPort] = [await freePort(), await freePort()];
  const stats = `http://127.0.0.1:${statsPort}`;
  const config = join(dir, 'haproxy.cfg');
  writeFileSync(config, haproxyConfig(lbPort, statsPort, servers, checkIntervalMs, checkFall));
  const args = ['-db', '-f', config];
  // The kernel ends HAProxy with this process, however it ends.
  const child = SETPRIV ? spawn(SETPRIV, ['--pdeathsig', 'KILL', HAPROXY, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }) : spawn(HAPROXY, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const keep = (chunk: Buffer) => (log = (log + chunk.toString('utf8')).slice(-4_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const states = async (): Promise<Record<string, string>> => {
    const csv = await (await fetch(`${stats}/stats;csv`)).text();
    const [header, ...rows] = csv.trim().split('\n');
    const columns = header!.replace(/^# /, '').split(',');
    const at = (name: string) => columns.indexOf(name);
    const found: Record<string, string> = {};
    for (const row of rows) {
      const cells = row.split(',');
      if (cells[at('pxname')] === 'waiting_room' && cells[at('svname')] !== 'BACKEND') found[cells[at('svname')]!] = cells[at('status')]!;
    }
    return found;
  };
  const waitForStates = async (done: (s: Record<string, string>) => boolean, deadlineMs: number, what: string): Promise<void> => {
    const deadline = Date.now() + deadlineMs;
    let last: Record<string, string> | string = 'nothing yet';
    for (;;) {
      try {
        last = await states();
        if (done(last)) return;
      } catch (error) {
        last = String(error);
      }
      if (Date.now() > deadline) throw new Error(`${what}: not within ${deadlineMs} ms; HAProxy last said ${JSON.stringify(last)}\n${log}`);
      await sleep(50);
    }
  };
  const running: RunningHaproxy = { url: `http://127.0.0.1:${lbPort}`, child, states, waitForStates, stop: () => stopProcess(child) };
  try {
    await waitForStates((s) => servers.every((server) => s[server.name] === 'UP'), 20_000, 'every host up in HAProxy');
  } catch (error) {
    await running.stop();
    throw error;
  }
  return running;
}
