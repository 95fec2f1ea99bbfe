/**
 * Finding a Compute host for the wasm tier: Viceroy itself, or a stand-in that takes Viceroy's
 * command line. VICEROY_PATH wins; then `viceroy` on PATH; then the stand-in kept beside the
 * project (../shared/tools/compute-host/viceroy).
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

export const PROJECT_ROOT = resolve(import.meta.dirname, '..', '..');

export type ComputeHost = { readonly found: true; readonly path: string } | { readonly found: false; readonly reason: string };

export function findComputeHost(env: NodeJS.ProcessEnv = process.env): ComputeHost {
  const fromEnv = env['VICEROY_PATH'];
  if (fromEnv !== undefined && fromEnv !== '') {
    const path = resolve(PROJECT_ROOT, fromEnv);
    return existsSync(path) ? { found: true, path } : { found: false, reason: `VICEROY_PATH=${fromEnv} does not exist` };
  }
  const onPath = spawnSync('sh', ['-c', 'command -v viceroy'], { encoding: 'utf8' });
  if (onPath.status === 0 && onPath.stdout.trim() !== '') return { found: true, path: onPath.stdout.trim() };
  const standIn = resolve(PROJECT_ROOT, '..', 'shared', 'tools', 'compute-host', 'viceroy');
  if (existsSync(standIn)) return { found: true, path: standIn };
  return {
    found: false,
    reason: 'no Compute host: Viceroy is not on PATH, VICEROY_PATH is not set, and ../shared/tools/compute-host/viceroy is absent',
  };
}

/** The stand-in's host script, run directly (without the Fastly CLI) by the tests that serve a bare wasm. */
export const STAND_IN_HOST = resolve(process.env['COMPUTE_HOST_DIR'] ?? resolve(PROJECT_ROOT, '..', 'shared', 'tools', 'compute-host'), 'host.mjs');

export interface ServedWasm {
  readonly url: string;
  /** Everything the host printed so far (its request lines, `--trace` hostcall counts, errors). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Serves `wasm` with the stand-in's host.mjs on a free port, one worker, no stores or backends
 * (`extraArgs`: `--trace`, say); resolves once it listens, rejects with its output if it exits or
 * does not start within 30 s.
 */
export async function serveWasm(wasm: string, extraArgs: readonly string[] = []): Promise<ServedWasm> {
  const host = spawn(process.execPath, [STAND_IN_HOST, '--wasm', wasm, '--addr', '127.0.0.1', '--port', '0', '--workers', '1', ...extraArgs], {
    cwd: PROJECT_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const stop = async (): Promise<void> => {
    if (host.exitCode !== null || host.signalCode !== null) return;
    const exited = once(host, 'exit');
    host.kill('SIGTERM');
    await exited;
  };
  try {
    const url = await new Promise<string>((found, fail) => {
      const timer = setTimeout(() => fail(new Error(`compute host did not start:\n${output}`)), 30_000);
      const read = (chunk: Buffer): void => {
        output += chunk.toString('utf8');
        const match = /Listening on (http:\/\/\S+)/.exec(output);
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          found(match[1]);
        }
      };
      host.stdout.on('data', read);
      host.stderr.on('data', read);
      host.on('exit', (code) => {
        clearTimeout(timer);
        fail(new Error(`compute host exited ${code}:\n${output}`));
      });
    });
    return { url, output: () => output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
