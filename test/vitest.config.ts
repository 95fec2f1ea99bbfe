import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { dirname, resolve } from 'node:path';
import { defineConfig } from 'vitest/config';
// @ts-expect-error: a build script in plain JavaScript, without declarations.
import { UPSTASH_HTTP_SPECIFIER, upstashHttpChunk } from '../src/node/upstash-chunk.mjs';

/**
 * Two workers while the machine is otherwise quiet, else one. Quiet is read from the CPU's idle time
 * over the half second before the run starts (/proc/stat): the 1-min load average still carries the
 * run's own `npm ci` and type check, which left it at 2 or more on an idle 2-core machine and gave
 * `.ci/run` one worker (25 minutes where two take about 13). Busy means other processes kept more
 * than one core's worth of the CPU busy. Where /proc/stat cannot be read, the load average decides.
 */
function testWorkers(): number {
  const asked = Number(process.env['WR_TEST_WORKERS']);
  if (Number.isInteger(asked) && asked >= 1) return asked;
  const cores = availableParallelism();
  const busy = busyCores(500);
  if (busy !== undefined) return busy < Math.max(1, cores / 2) ? 2 : 1;
  return (loadavg()[0] ?? 0) < cores ? 2 : 1;
}

/** How many cores' worth of CPU time went to anything but idle over `ms`, or undefined off Linux. */
function busyCores(ms: number): number | undefined {
  const sample = (): { idle: number; total: number } | undefined => {
    try {
      const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
      const ticks = line.trim().split(/\s+/).slice(1).map(Number);
      if (ticks.length < 5 || ticks.some((n) => !Number.isFinite(n))) return undefined;
      const total = ticks.reduce((a, b) => a + b, 0);
      return { idle: (ticks[3] ?? 0) + (ticks[4] ?? 0), total };
    } catch {
      return undefined;
    }
  };
  const before = sample();
  if (before === undefined) return undefined;
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  const after = sample();
  if (after === undefined || after.total <= before.total) return undefined;
  const busyShare = 1 - (after.idle - before.idle) / (after.total - before.total);
  return busyShare * availableParallelism();
}

// Templates and the store's Lua (src/store/lua) are imported as text, as esbuild's `text` loader does for the wasm and Node bundles.
// They resolve to a private id first, so Vite's own CSS handling never sees them.
const TEXT_EXTENSIONS = /\.(html|css|svg|txt|lua)$|\/templates\/[^/]+\.js$/;
const SUFFIX = '.as-text';

export default defineConfig({
  resolve: {
    // @upstash/redis's HTTP client alone, as the Fastly build bundles it (src/store/upstash-http.ts).
    alias: { [UPSTASH_HTTP_SPECIFIER as string]: upstashHttpChunk(resolve(dirname(new URL(import.meta.url).pathname), '..')) as string },
  },
  plugins: [
    {
      name: 'text-loader',
      enforce: 'pre',
      resolveId(source, importer) {
        if (!TEXT_EXTENSIONS.test(source) || importer === undefined) return null;
        return resolve(dirname(importer), source) + SUFFIX;
      },
      load(id) {
        if (!id.endsWith(SUFFIX)) return null;
        return `export default ${JSON.stringify(readFileSync(id.slice(0, -SUFFIX.length), 'utf8'))};`;
      },
    },
  ],
  test: {
    include: ['test/**/*.test.ts'],
    // A test's bound only ends a stuck run; with both cores busy CPU-bound tests take 2-3 times as
    // long, so the default leaves that room (the longest set their own: docs/tests.md).
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // expect.poll waits for a condition another process or the event loop reaches eventually (a log
    // line, a page's text). Its deadline only bounds a failure, so it is set for a busy machine
    // (vitest's default is 1 s); a condition met sooner still passes at once. See docs/tests.md.
    expect: { poll: { timeout: 10_000 } },
    pool: 'forks',
    // Two files at a time on a machine that is otherwise quiet: most of the suite waits on real
    // servers, hosts and browsers, so on the 2-core machine two workers take 12-13 minutes where one
    // took 19 (vitest's default is cores - 1, one here); the longest files start first (vitest
    // orders by their last time). On a machine already busy when the run starts, one: two workers
    // and two other busy processes left a store call past its 1-s test timeout once. WR_TEST_WORKERS
    // sets it (docs/tests.md).
    maxWorkers: testWorkers(),
    reporters: ['default', 'json'],
    outputFile: { json: 'test/.artifacts/results.json' },
  },
});
