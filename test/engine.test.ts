/**
 * Checks inside the real Fastly engine. `node src/node/build.mjs engine-checks` compiles
 * test/engine/checks.ts to wasm; js-compute-runtime runs its top level inside the engine while it
 * builds, so the build's exit code is the checks' verdict and its stdout their report. A control
 * (test/engine/failing-check.ts) proves that a failing check fails the build. The same wasm is then
 * served by the local compute host (the Viceroy stand-in) to run the checks again at request time,
 * where the engine allows Request, Response and setTimeout. Last, the production build.
 *
 * js-compute-runtime is an npm dependency: when it is missing these tests fail, they never skip.
 */
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { serveWasm, STAND_IN_HOST as COMPUTE_HOST } from './support/compute-host';
import { runCommand, type RunResult } from './support/run-command';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RUNTIME_CLI = resolve(ROOT, 'node_modules/@fastly/js-compute/dist/cli/js-compute-runtime-cli.js');
const BUILD_SCRIPT = resolve(ROOT, 'src/node/build.mjs');
const CHECKS_WASM = resolve(ROOT, 'bin/engine-checks.wasm');
const CONTROL_WASM = resolve(ROOT, 'bin/engine-checks-fail.wasm');
const MAIN_WASM = resolve(ROOT, 'bin/main.wasm');
const BUILD_TIMEOUT_MS = 120_000;
const WASM_MAGIC = Buffer.from([0x00, 0x61, 0x73, 0x6d]); // "\0asm"

/** Checks that pass at build time and again at request time, in the order they print. */
const SHARED_CHECKS = [
  'platform: atob/btoa round-trip all byte values',
  'platform: TextEncoder/TextDecoder round-trip UTF-8',
  'platform: crypto.subtle HMAC-SHA-256 importKey/sign/verify (RFC 4231 case 2)',
  'platform: crypto.subtle.digest SHA-256',
  'platform: Headers keeps several Set-Cookie (getSetCookie), also in a copy',
  'platform: URL and URLSearchParams',
  'platform: ReadableStream getReader yields the bytes put in',
  'platform: Date.toISOString and crypto.randomUUID',
  'platform: no Buffer, process, Intl or AbortController (the core must not need them)',
  'tokens: signToken then verifyToken gives back the claims',
  'tokens: an old key still verifies after rotation',
  'tokens: a tampered payload fails with bad_signature',
  'tokens: re-signed with another secret under the same kid fails with bad_signature',
  'tokens: each kind has its own derived key, so a waiting ticket re-labelled as access fails',
  'tokens: an expired token fails with expired',
  'tokens: alg "none" (unsigned) fails',
  'tokens: a token under a removed key fails with unknown_key',
  'tokens: another queue, garbage and oversize tokens fail without throwing',
  'admission: the engine signs an ES256 admission (crypto.subtle ECDSA P-256): a JWS with our kid, a raw 64-byte signature, the claims',
  'admission: the engine has no Ed25519 in crypto.subtle, so admissions are ES256 (EdDSA would need it)',
  'accounts: no PBKDF2 in crypto.subtle; the password hash built on HMAC gives the RFC 7914 vector and verifies a hash Node made',
  'config: parseSecrets refuses a short signing key, naming the key',
  'pages: renderHoldingPage shows the place and escapes a hostile title',
  'pages: renderHoldingPage without a known place',
  "i18n: the visitor's language, its digits and plurals, without Intl",
  'shuffle: the event lottery is a permutation in the engine',
  'paths: hostile spellings have the same readings in the engine, and a VIP redirect stays on our site',
  'handler: a new visitor gets the holding page and a ticket cookie',
  'handler: a returning visitor keeps the same ticket (no second join)',
  'handler: the visitor status JSON reports the place',
  'handler: once admitted, the same cookie reaches the origin and gets an access cookie',
  'handler: an access cookie passes with a failing store and makes no store call',
  'handler: a forged cookie gets a new ticket and never reaches the origin',
  'handler: a failing store holds a new visitor (no 5xx, no ticket: only its join key)',
  'handler: admin state over Basic auth (atob, constant-time compare)',
  'handler: the origin admit API reads a streamed JSON body',
];

/**
 * Checks of what the build itself does, at build time only: the production wasm's warm-up
 * (src/platform/request-warm-up.ts) runs one admitted visitor through the core while the engine is
 * initialising, and must get to the end or every request pays for what it would have done.
 */
const BUILD_TIME_ONLY_CHECKS = [
  'warm-up: one admitted visitor ran through the core while the wasm was built (service, token, admitted visitor)',
  'build time: the freed memory was scrubbed after both warm-ups settled (64 zero-filled blocks of 64 KiB)',
];

/** Builtins the engine refuses during initialization (3.46); each prints a `skip` line or, if a later runtime allows it, an `ok` line. */
const INIT_REFUSED = ['setTimeout', 'Request', 'Response'];

const REQUEST_TIME_ONLY_CHECKS = [
  'platform: setTimeout fires and clearTimeout cancels (request time)',
  'platform: a Response copy with an added Set-Cookie keeps the origin one (request time)',
  'handler: a store that does not answer in time holds the visitor (timeout, request time)',
  "fastly:cache SimpleCache answers the second read from the POP's cache",
  'fastly:cache CoreCache keeps the last valid settings',
];

/** Runs a command from the project root, collecting its output; kills it (and only it) on timeout. */
function run(command: string, args: readonly string[], timeoutMs = BUILD_TIMEOUT_MS): Promise<RunResult> {
  return runCommand(command, args, { cwd: ROOT, timeoutMs });
}

function build(target: string): Promise<RunResult> {
  return run(process.execPath, [BUILD_SCRIPT, target]);
}

function requireRuntime(): void {
  expect(
    existsSync(RUNTIME_CLI),
    `js-compute-runtime is missing (${RUNTIME_CLI}); it comes with the @fastly/js-compute dependency: run npm install`,
  ).toBe(true);
}

function describeRun(label: string, result: RunResult): string {
  return `${label} exited ${result.code} after ${result.ms} ms\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`;
}

function expectWasm(path: string, minBytes: number, startedAt: number): void {
  expect(existsSync(path), `${path} was not written`).toBe(true);
  const stat = statSync(path);
  expect(stat.size, `${path} size`).toBeGreaterThan(minBytes);
  expect(stat.mtimeMs, `${path} is older than this build`).toBeGreaterThanOrEqual(startedAt - 1000);
  expect(readFileSync(path).subarray(0, 4).equals(WASM_MAGIC), `${path} does not start with \\0asm`).toBe(true);
}

/** Lines as the runner prints them. */
function lines(text: string): string[] {
  return text.split(/\r?\n/);
}

/** One build of the checks, shared by the tests that need it. */
let checksBuild: Promise<{ result: RunResult; startedAt: number }> | undefined;
function buildChecks(): Promise<{ result: RunResult; startedAt: number }> {
  checksBuild ??= (async () => {
    rmSync(CHECKS_WASM, { force: true });
    const startedAt = Date.now();
    return { result: await build('engine-checks'), startedAt };
  })();
  return checksBuild;
}

describe('engine checks: inside the Fastly engine, at build time', () => {
  it('js-compute-runtime is installed', () => {
    requireRuntime();
  });

  it(
    'every check passes in the engine and the build succeeds',
    async () => {
      requireRuntime();
      const { result, startedAt } = await buildChecks();
      const report = describeRun('node src/node/build.mjs engine-checks', result);
      console.log(`engine-checks build: ${result.ms} ms`);
      expect(result.code, report).toBe(0);

      const out = lines(result.stdout);
      expect(out.filter((line) => line.startsWith('FAIL')), report).toEqual([]);
      for (const name of [...SHARED_CHECKS, ...BUILD_TIME_ONLY_CHECKS]) expect(out, `missing check line for "${name}"\n${report}`).toContain(`ok   ${name}`);

      let allowedAtInit = 0;
      for (const builtin of INIT_REFUSED) {
        const usable = out.includes(`ok   platform: ${builtin} is usable during initialization`);
        const refused = out.some((line) => line.startsWith(`skip platform: ${builtin} during initialization: refused (`));
        expect(usable !== refused, `exactly one line about ${builtin} during initialization\n${report}`).toBe(true);
        if (usable) allowedAtInit += 1;
      }
      const expectedPassed = SHARED_CHECKS.length + BUILD_TIME_ONLY_CHECKS.length + allowedAtInit;
      const skipped = INIT_REFUSED.length - allowedAtInit;
      const summary = skipped > 0 ? `engine checks: ${expectedPassed} passed, ${skipped} skipped` : `engine checks: ${expectedPassed} passed`;
      expect(out, report).toContain(summary);
      expect(out.filter((line) => /^(ok|FAIL|skip) /.test(line)).length, report).toBe(SHARED_CHECKS.length + BUILD_TIME_ONLY_CHECKS.length + INIT_REFUSED.length);

      expectWasm(CHECKS_WASM, 1_000_000, startedAt);
    },
    BUILD_TIMEOUT_MS + 10_000,
  );

  it(
    'a failing check fails the build (the control)',
    async () => {
      requireRuntime();
      rmSync(CONTROL_WASM, { force: true });
      const result = await build('engine-checks-fail');
      const report = describeRun('node src/node/build.mjs engine-checks-fail', result);
      console.log(`engine-checks-fail build: ${result.ms} ms (exit ${result.code})`);
      expect(result.code, report).not.toBe(0);
      expect(result.code, `killed by the timeout?\n${report}`).not.toBeNull();
      const out = lines(result.stdout);
      // The build got as far as running checks: the passing one ran, and the failure is the assertion's.
      expect(out, report).toContain('ok   control: a genuine token verifies');
      expect(out, report).toContain('FAIL control: a forged token verifies (must fail): expected ok, got bad_signature');
      expect(result.stderr, report).toContain('engine checks failed: control: a forged token verifies (must fail)');
      // js-compute-runtime leaves an empty output file behind when initialization fails.
      const size = existsSync(CONTROL_WASM) ? statSync(CONTROL_WASM).size : 0;
      expect(size, `${CONTROL_WASM} should be absent or empty after a failed build`).toBe(0);
    },
    BUILD_TIMEOUT_MS + 10_000,
  );
});

describe('engine checks: inside the Fastly engine, at request time', () => {
  it.skipIf(!existsSync(COMPUTE_HOST))(
    `the same checks pass while handling a request (served by ${COMPUTE_HOST})`,
    async () => {
      requireRuntime();
      const { result } = await buildChecks();
      expect(result.code, describeRun('node src/node/build.mjs engine-checks', result)).toBe(0);

      const host = await serveWasm(CHECKS_WASM);
      try {
        const url = host.url;
        const started = Date.now();
        const response = await fetch(`${url}/`, { signal: AbortSignal.timeout(60_000) });
        const body = await response.text();
        console.log(`request-time checks: ${Date.now() - started} ms`);
        const report = `status ${response.status}\n${body}\n--- host\n${host.output()}`;
        expect(response.status, report).toBe(200);
        const out = lines(body);
        expect(out.filter((line) => line.startsWith('FAIL')), report).toEqual([]);
        const expected = [...SHARED_CHECKS, ...REQUEST_TIME_ONLY_CHECKS];
        for (const name of expected) expect(out, `missing check line for "${name}"\n${report}`).toContain(`ok   ${name}`);
        expect(out, report).toContain(`engine request-time checks: ${expected.length} passed`);
      } finally {
        await host.stop();
      }
    },
    BUILD_TIMEOUT_MS + 60_000,
  );
});

describe('production build', () => {
  it(
    'node src/node/build.mjs fastly writes bin/main.wasm',
    async () => {
      requireRuntime();
      const startedAt = Date.now();
      const result = await build('fastly');
      console.log(`fastly build: ${result.ms} ms`);
      expect(result.code, describeRun('node src/node/build.mjs fastly', result)).toBe(0);
      expectWasm(MAIN_WASM, 1_000_000, startedAt);
    },
    BUILD_TIMEOUT_MS + 10_000,
  );
});
