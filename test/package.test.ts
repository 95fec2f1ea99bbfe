/**
 * The package an operator publishes is the one tested: the wasm is built once as the wasm tier
 * builds it (buildWasmInto), packed by the real Fastly CLI with the project's own fastly.toml
 * (`fastly compute pack --wasm-binary`, then `fastly compute validate --package`, both offline),
 * and the package is opened to check that it holds exactly that manifest and those wasm bytes and
 * nothing else (no dev secrets). With a Compute host, the wasm taken out of the package is then
 * served under the packaged manifest and answers its health check. Everything happens in a
 * temporary folder: nothing is written to the working tree (pkg/ included).
 */
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../src/node/host';
import { findComputeHost, PROJECT_ROOT } from './support/compute-host';
import { buildWasmInto } from './support/stack';

const FASTLY = resolve(PROJECT_ROOT, 'node_modules/.bin/fastly');
const MANIFEST = readFileSync(resolve(PROJECT_ROOT, 'fastly.toml'));
/** The package is named after the manifest's `name`. */
const NAME = /^name = "([^"]+)"$/m.exec(MANIFEST.toString('utf8'))?.[1] ?? '';
const WASM_MAGIC = Buffer.from([0x00, 0x61, 0x73, 0x6d]);

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

function fastly(args: readonly string[], cwd: string): SpawnSyncReturns<string> {
  return spawnSync(FASTLY, [...args, '--non-interactive'], { cwd, encoding: 'utf8', timeout: 60_000 });
}

const said = (run: SpawnSyncReturns<string>): string => `exit ${run.status}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;

describe('the package fastly compute publish would upload', () => {
  let dir: string;
  /** The built wasm, as the tests of the wasm tier build and run it. */
  let tested: Buffer;
  let pkg: string;
  let pack: SpawnSyncReturns<string>;
  /** The package, unpacked. */
  let unpacked: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'wr-package-'));
    buildWasmInto(dir);
    tested = readFileSync(join(dir, 'bin', 'main.wasm'));
    // The CLI packs the fastly.toml of the folder it runs in: the project's, copied byte for byte,
    // so that its pkg/ goes to the temporary folder and not into the working tree.
    copyFileSync(resolve(PROJECT_ROOT, 'fastly.toml'), join(dir, 'fastly.toml'));
    pack = fastly(['compute', 'pack', '--wasm-binary', join(dir, 'bin', 'main.wasm')], dir);
    pkg = join(dir, 'pkg', `${NAME}.tar.gz`);
    unpacked = join(dir, 'unpacked');
    mkdirSync(unpacked);
    if (pack.status === 0) spawnSync('tar', ['-xzf', pkg, '-C', unpacked]);
  }, 120_000);

  afterAll(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('is made by fastly compute pack from the tested wasm and passes fastly compute validate', () => {
    expect(NAME).toBe('edge-waiting-room');
    expect(tested.subarray(0, 4).equals(WASM_MAGIC), 'the build is a wasm module').toBe(true);
    expect(pack.status, said(pack)).toBe(0);
    const validate = fastly(['compute', 'validate', '--package', pkg], dir);
    expect(validate.status, said(validate)).toBe(0);
    expect(validate.stdout).toContain(`Validated package ${pkg}`);
  });

  it("holds the project's fastly.toml and the tested wasm, byte for byte, and nothing else", () => {
    const listed = spawnSync('tar', ['-tzf', pkg], { encoding: 'utf8' });
    expect(listed.status, listed.stderr).toBe(0);
    // No dev secrets, no local config, no sources: the manifest and the wasm.
    const entries = listed.stdout.trim().split('\n').map((entry) => entry.replace(/\/$/, ''));
    expect(entries.sort()).toEqual([NAME, `${NAME}/bin`, `${NAME}/bin/main.wasm`, `${NAME}/fastly.toml`]);
    const manifest = readFileSync(join(unpacked, NAME, 'fastly.toml'));
    expect(manifest.equals(MANIFEST), 'the packaged fastly.toml is the project file').toBe(true);
    // What a first publish provisions comes from it: the [setup] stores and backends are all there.
    for (const entry of ['manifest_version = 3', '[setup.backends.origin]', '[setup.backends.upstash]', '[setup.config_stores.wr_config]', '[setup.secret_stores.wr_secrets]', '[setup.log_endpoints.wr_log]']) {
      expect(manifest.toString('utf8')).toContain(entry);
    }
    expect(sha256(readFileSync(join(unpacked, NAME, 'bin', 'main.wasm')))).toBe(sha256(tested));
  });

  const host = findComputeHost();
  it.skipIf(!host.found)('serves from the package: its wasm under its manifest answers the health check', async () => {
    if (!host.found) return;
    const root = join(unpacked, NAME);
    // [local_server] reads the stores from the files the build writes from devconfig.json; they are
    // not in the package, so they come from the build beside it.
    for (const file of readdirSync(join(dir, 'bin')).filter((f) => f.startsWith('local-'))) copyFileSync(join(dir, 'bin', file), join(root, 'bin', file));
    const port = await freePort();
    const child = spawn(FASTLY, ['compute', 'serve', '--skip-build', '--non-interactive', '--dir', root, '--viceroy-path', host.path, '--addr', `127.0.0.1:${port}`], {
      cwd: root,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FASTLY_DISABLE_WASM_METRICS: '1', COMPUTE_HOST_REUSE: '1' },
    });
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    try {
      await expect.poll(() => output, { timeout: 60_000 }).toContain('Listening on');
      // The health check reads and checks every setting and secret inside the packaged wasm.
      const health = await fetch(`http://127.0.0.1:${port}/__wr/health`);
      expect(await health.json()).toEqual({ ok: true });
      // Served bytes are the packaged ones, which are the tested ones.
      expect(sha256(readFileSync(join(root, 'bin', 'main.wasm')))).toBe(sha256(tested));
    } finally {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }
  }, 90_000);
});
