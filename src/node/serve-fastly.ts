/**
 * `npm run serve:fastly`: serves bin/main.wasm with `fastly compute serve` on 127.0.0.1:7676, from
 * the project's fastly.toml `[local_server]`, after bringing up what that section points at: the
 * demo origin on 127.0.0.1:7677 (unless something already listens there) and the Upstash bridge on
 * 127.0.0.1:8079 over a real Redis (REDIS_URL, else 127.0.0.1:6379, else a redis-server it starts).
 *
 * Viceroy: with VICEROY_PATH set, that binary (Viceroy or a stand-in with its command line) is used;
 * otherwise the Fastly CLI uses its own Viceroy, as `fastly compute serve` always does.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createConnection } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkLocalConfig } from './check-config';
import { startDemoOrigin } from './demo-origin';
import { freePort, type RunningServer } from './host';
import { startUpstashBridge } from './upstash-bridge';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const children: ChildProcess[] = [];
const servers: { close(): Promise<void> }[] = [];

function isListening(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
  });
}

async function redisUrl(): Promise<string> {
  if (process.env['REDIS_URL']) return process.env['REDIS_URL'];
  if (await isListening(6379)) return 'redis://127.0.0.1:6379';
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  children.push(child);
  for (let i = 0; i < 50 && !(await isListening(port)); i++) await new Promise((r) => setTimeout(r, 100));
  process.stderr.write(`started redis-server on 127.0.0.1:${port}\n`);
  return `redis://127.0.0.1:${port}`;
}

function devToken(): string {
  // The bridge must accept the token the wasm sends: dev_secrets.upstash_token in devconfig.json.
  return process.env['UPSTASH_TOKEN'] ?? 'dev-only-upstash-token';
}

async function stop(code: number): Promise<never> {
  for (const child of children) child.kill('SIGTERM');
  await Promise.allSettled(servers.map((s) => s.close()));
  process.exit(code);
}

async function main(): Promise<void> {
  if (!existsSync(resolve(root, 'bin/main.wasm'))) throw new Error('bin/main.wasm is missing: run npm run build');
  // The wasm cannot list its config store, so a misspelt key of devconfig.json is caught here.
  // No environment: `fastly compute serve` reads the file alone (bin/local-config.json).
  const problems = checkLocalConfig(resolve(root, 'devconfig.json'), {});
  if (problems.length > 0) {
    throw new Error(`devconfig.json is not valid:\n${problems.map((p) => `  - ${p.key}: ${p.message}`).join('\n')}`);
  }
  let origin: RunningServer | undefined;
  if (await isListening(7677)) {
    process.stderr.write('origin: something already listens on 127.0.0.1:7677; using it\n');
  } else {
    origin = await startDemoOrigin({ port: 7677 });
    servers.push(origin);
  }
  if (await isListening(8079)) {
    process.stderr.write('upstash: something already listens on 127.0.0.1:8079 (a bridge?); using it\n');
  } else {
    const bridge = await startUpstashBridge({ redisUrl: await redisUrl(), token: devToken(), port: 8079 });
    servers.push(bridge);
  }
  const args = ['compute', 'serve', '--skip-build', '--addr', '127.0.0.1:7676'];
  const viceroy = process.env['VICEROY_PATH'];
  if (viceroy) args.push('--viceroy-path', resolve(root, viceroy));
  process.stderr.write(
    [
      '',
      `fastly ${args.join(' ')}`,
      '  Visitors: http://127.0.0.1:7676/',
      '  Admin:    http://127.0.0.1:7676/__wr/admin  (user admin, password dev_secrets.admin_password in devconfig.json)',
      '',
    ].join('\n'),
  );
  const cli = spawn(resolve(root, 'node_modules/.bin/fastly'), args, { cwd: root, stdio: 'inherit' });
  children.push(cli);
  cli.once('exit', (code) => void stop(code ?? 0));
  process.once('SIGINT', () => void stop(0));
  process.once('SIGTERM', () => void stop(0));
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  void stop(1);
});
