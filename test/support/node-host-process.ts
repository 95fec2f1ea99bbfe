/**
 * The Node host as its own process, as a self-hoster runs it: bin/node-host.mjs (built by
 * `node src/node/build.mjs node`) with the environment a test gives it and nothing else of ours
 * (the host refuses WR_ names it does not know). Resolves once it prints where visitors reach it,
 * which it does after Redis answers.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import type { RequestLog } from '../../src/core/ports';
import { freePort } from '../../src/node/host';
import { PROJECT_ROOT } from './compute-host';
import { ADMIN_PASSWORD, API_TOKEN, KEY_1 } from './fixtures';

export interface NodeHostProcess {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** What it wrote to stderr: the banner, refusals, Redis lines. */
  output(): string;
  /** What it wrote to stdout: one JSON log line per request, as written. */
  logText(): string;
  /** The same lines, parsed. */
  logs(): RequestLog[];
}

/** The process environment without our own variables, so that only the test's reach the host. */
export function hostBaseEnv(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined && !entry[0].startsWith('WR_') && !['REDIS_URL', 'REDIS_SHARD_URLS', 'HOST', 'TRUSTED_PROXIES'].includes(entry[0])),
  );
}

/** Builds bin/node-host.mjs (and the other Node bundles) as `npm start` and `npm run build:node` do: it must carry the Lua files too. */
export function buildNodeBundles(outDir?: string): void {
  const build = spawnSync(process.execPath, [resolve(PROJECT_ROOT, 'src/node/build.mjs'), 'node', ...(outDir === undefined ? [] : ['--out', outDir])], { cwd: PROJECT_ROOT, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}\n${build.stderr}`);
}

/**
 * A self-hosted deployment's environment: the Redis store, the origin, and the secrets from the
 * environment (a deployment never reads devconfig.json's development values), the tests' own.
 */
export function deploymentEnv(redisUrl: string, originUrl: string): Record<string, string> {
  return { WR_STORE: 'redis', REDIS_URL: redisUrl, ORIGIN_URL: originUrl, WR_SIGNING_KEYS: `k1:${KEY_1}`, WR_ADMIN_PASSWORD: ADMIN_PASSWORD, WR_ADMIN_API_TOKEN: API_TOKEN };
}

/** A port found free can be taken by another test's server before the host binds it: tried again on another. */
class PortTaken extends Error {}

export async function startNodeHostProcess(env: Record<string, string>): Promise<NodeHostProcess> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startOnce(env, await freePort());
    } catch (error) {
      if (!(error instanceof PortTaken) || attempt >= 5) throw error;
    }
  }
}

async function startOnce(env: Record<string, string>, port: number): Promise<NodeHostProcess> {
  const child = spawn(process.execPath, [resolve(PROJECT_ROOT, 'bin/node-host.mjs')], { cwd: PROJECT_ROOT, env: { ...hostBaseEnv(), ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  let logs = '';
  child.stdout!.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`host did not start:\n${output}`)), 20_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const match = /Visitors:\s+(http:\/\/\S+)\//.exec(output);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      const taken = new RegExp(`port ${port} for the waiting room is taken`).test(output);
      reject(new (taken ? PortTaken : Error)(`host exited with ${String(code)}:\n${output}`));
    });
  });
  return {
    url,
    port,
    child,
    output: () => output,
    logText: () => logs,
    logs: () =>
      logs
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as RequestLog),
  };
}
