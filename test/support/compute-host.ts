/**
 * Finding a Compute host for the wasm tier: Viceroy itself, or a stand-in that takes Viceroy's
 * command line. VICEROY_PATH wins; then `viceroy` on PATH; then the stand-in kept beside the
 * project (../shared/tools/compute-host/viceroy).
 */
import { spawnSync } from 'node:child_process';
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
