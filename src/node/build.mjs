// Builds the project's bundles with esbuild and, for Fastly, compiles them to wasm.
//   node src/node/build.mjs node           bin/node-host.mjs, bin/redis-bridge.mjs, bin/check-config.mjs, bin/keys.mjs, bin/docs.mjs, bin/smoke.mjs, bin/bench.mjs
//   node src/node/build.mjs fastly [--out DIR]  bin/main.wasm (+ the local_server files from devconfig.json)
//   node src/node/build.mjs fastly-floor [--out DIR]  bin/floor.wasm: the room's code behind a bare proxy (the bench's floor)
//   node src/node/build.mjs fastly-reuse-sim [--out DIR]  bin/reuse-sim.wasm: a reused sandbox's second request, timed in one instance (the bench)
//   node src/node/build.mjs engine-checks  bin/engine-checks.wasm: checks that run inside the engine at build time
//   node src/node/build.mjs engine-checks-fail  the same with a check that must fail (a control)
//   node src/node/build.mjs pins           rewrites the scripts' SHA-1 pins in src/store/scripts.ts after a Lua edit
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { UPSTASH_HTTP_SPECIFIER, upstashHttpChunk } from './upstash-chunk.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
// `--out DIR` puts the build elsewhere (the wasm end-to-end tests build into their own folder; the
// production-install test builds the Node host into a fresh clone's bin/).
const outIndex = process.argv.indexOf('--out');
const bin = outIndex > 0 ? resolve(process.argv[outIndex + 1] ?? 'bin') : resolve(root, 'bin');
mkdirSync(bin, { recursive: true });

// .lua: the store's scripts (src/store/lua), put together by src/store/lua-compose.ts at module load.
const textLoaders = { '.html': 'text', '.css': 'text', '.svg': 'text', '.lua': 'text' };
// Scripts under templates/ are served to browsers, not bundled: load them as text too.
const templateScripts = {
  name: 'template-scripts-as-text',
  setup(b) {
    b.onLoad({ filter: /[\\/]templates[\\/][^\\/]+\.js$/ }, async (args) => ({ contents: readFileSync(args.path, 'utf8'), loader: 'text' }));
  },
};

// @upstash/redis's HTTP client alone, from the chunk the package does not export by name (see upstash-chunk.mjs).
const upstashHttpClient = {
  name: 'upstash-http-client',
  setup(b) {
    b.onResolve({ filter: new RegExp(`^${UPSTASH_HTTP_SPECIFIER.replace(/[/.]/g, '\\$&')}$`) }, () => ({ path: upstashHttpChunk(root) }));
  },
};

async function buildNode() {
  const entries = {
    'node-host': 'src/node/start.ts',
    'redis-bridge': 'src/node/redis-bridge-cli.ts',
    bench: 'test/bench/bench.ts',
    'serve-fastly': 'src/node/serve-fastly.ts',
    simulate: 'test/sim/simulate.ts',
    'check-config': 'src/node/check-config.ts',
    keys: 'src/node/keys.ts',
    docs: 'src/node/docs.ts',
    smoke: 'src/node/smoke.ts',
  };
  for (const [name, entry] of Object.entries(entries)) {
    if (!existsSync(resolve(root, entry))) continue;
    await build({
      absWorkingDir: root,
      entryPoints: [entry],
      outfile: join(bin, `${name}.mjs`),
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      packages: 'external',
      loader: textLoaders,
      plugins: [templateScripts],
      sourcemap: 'inline',
      logLevel: 'warning',
    });
  }
}

/**
 * Reusable sandboxes (src/platform/sandbox-reuse.ts), on unless WR_SANDBOX_REUSE=0 when building.
 * Any other value stops the build: a typo must not quietly turn it on or off.
 */
function sandboxReuse() {
  const value = process.env.WR_SANDBOX_REUSE;
  if (value === undefined || value === '' || value === '1') return true;
  if (value === '0') return false;
  console.error(`WR_SANDBOX_REUSE must be 0 (one request per sandbox) or 1 (reuse, the default), not ${JSON.stringify(value)}`);
  process.exit(1);
}

/**
 * The heap above which a reused sandbox is recycled (src/platform/sandbox-reuse.ts), in MiB, when
 * WR_SANDBOX_MAX_MEMORY_MIB says; else undefined (SANDBOX_REUSE's). The tests build with a low one to watch the
 * heap through the engine's own check (test/reuse-engine.test.ts). A whole number from 1 to 4096.
 */
function sandboxMaxMemoryMiB() {
  const value = process.env.WR_SANDBOX_MAX_MEMORY_MIB;
  if (value === undefined || value === '') return undefined;
  if (/^[1-9][0-9]{0,3}$/.test(value) && Number(value) <= 4096) return Number(value);
  console.error(`WR_SANDBOX_MAX_MEMORY_MIB must be a whole number of MiB from 1 to 4096, not ${JSON.stringify(value)}`);
  process.exit(1);
}

async function bundleForEngine(entry, outfile) {
  await build({
    absWorkingDir: root,
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'neutral',
    mainFields: ['module', 'main'],
    conditions: ['fastly', 'import', 'default'],
    format: 'esm',
    target: 'es2022',
    external: ['fastly:*'],
    define: { WR_SANDBOX_REUSE: String(sandboxReuse()), WR_SANDBOX_MAX_MEMORY_MIB: String(sandboxMaxMemoryMiB()) },
    loader: textLoaders,
    plugins: [templateScripts, upstashHttpClient],
    logLevel: 'warning',
  });
}

function compileWasm(input, output, extraArgs = []) {
  const cli = resolve(root, 'node_modules/@fastly/js-compute/dist/cli/js-compute-runtime-cli.js');
  if (!existsSync(cli)) {
    console.error(`js-compute-runtime not found at ${cli}: run npm ci`);
    process.exit(1);
  }
  // js-compute-runtime bundles into `__input_bundled.js` in its working directory before moving it
  // to its own temporary folder: two builds sharing a directory (the tests build several wasm at
  // once) would take each other's file. Each build gets a directory of its own.
  const scratch = mkdtempSync(join(tmpdir(), 'wr-js-compute-'));
  let result;
  try {
    result = spawnSync(process.execPath, [cli, ...extraArgs, resolve(root, input), resolve(root, output)], { cwd: scratch, stdio: 'inherit' });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  if (result.status !== 0) {
    // A failed build-time run leaves an empty output behind; remove it so nothing mistakes it for a build.
    rmSync(resolve(root, output), { force: true });
    process.exit(result.status ?? 1);
  }
}

/**
 * `fastly compute serve` reads flat JSON files: split devconfig.json into the config store (its
 * settings as the one `settings` item, a JSON object, as on Fastly) and the dev secrets.
 */
function writeLocalServerFiles() {
  const dev = JSON.parse(readFileSync(resolve(root, 'devconfig.json'), 'utf8'));
  const settings = Object.fromEntries(Object.entries(dev.config ?? {}).filter(([key]) => !key.startsWith('//')));
  writeFileSync(resolve(bin, 'local-config.json'), `${JSON.stringify({ settings: JSON.stringify(settings) }, null, 2)}\n`);
  writeFileSync(resolve(bin, 'local-secrets.json'), `${JSON.stringify(dev.dev_secrets ?? {}, null, 2)}\n`);
}

// Composes every script as the store sends it and writes each one's SHA-1 over its `<NAME>_SHA1`
// literal; the contract suite still checks each pin against SCRIPT LOAD. The webhook outbox's
// scripts (src/store/outbox.ts) are pinned the same way, in their own file.
async function pinScripts() {
  for (const source of ['src/store/scripts.ts', 'src/store/outbox.ts']) {
    const out = resolve(bin, 'scripts-for-pins.mjs');
    await build({ absWorkingDir: root, entryPoints: [source], outfile: out, bundle: true, platform: 'node', format: 'esm', loader: textLoaders, logLevel: 'warning' });
    const scripts = await import(`${out}?${Date.now()}`);
    const file = resolve(root, source);
    let text = readFileSync(file, 'utf8');
    for (const value of Object.values(scripts)) {
      if (value === null || typeof value !== 'object' || typeof value.text !== 'string' || typeof value.sha1 !== 'string') continue;
      const constant = `${value.name.toUpperCase()}_SHA1`;
      const sha1 = createHash('sha1').update(value.text).digest('hex');
      const pattern = new RegExp(`(export const ${constant} = ')[0-9a-f]{40}(')`);
      if (!pattern.test(text)) throw new Error(`no ${constant} literal in ${source}`);
      if (value.sha1 !== sha1) console.log(`${constant}: ${value.sha1} -> ${sha1}`);
      text = text.replace(pattern, `$1${sha1}$2`);
    }
    writeFileSync(file, text);
    rmSync(out);
  }
}

const target = process.argv[2];
if (target === 'node') {
  await buildNode();
} else if (target === 'fastly') {
  await bundleForEngine('src/index.ts', resolve(bin, 'index.js'));
  compileWasm(resolve(bin, 'index.js'), resolve(bin, 'main.wasm'));
  writeLocalServerFiles();
} else if (target === 'fastly-floor') {
  // The bench's code-size floor: the room's bundle behind a bare proxy's handler (test/engine/floor.ts).
  await bundleForEngine('test/engine/floor.ts', resolve(bin, 'floor.js'));
  compileWasm(resolve(bin, 'floor.js'), resolve(bin, 'floor.wasm'));
} else if (target === 'fastly-reuse-sim') {
  // The bench's measure of what a reused sandbox saves, on a host that cannot reuse one (test/engine/reuse-sim.ts).
  await bundleForEngine('test/engine/reuse-sim.ts', resolve(bin, 'reuse-sim.js'));
  compileWasm(resolve(bin, 'reuse-sim.js'), resolve(bin, 'reuse-sim.wasm'));
} else if (target === 'engine-checks' || target === 'engine-checks-fail') {
  const entry = target === 'engine-checks' ? 'test/engine/checks.ts' : 'test/engine/failing-check.ts';
  await bundleForEngine(entry, `bin/${target}.js`);
  compileWasm(`bin/${target}.js`, `bin/${target}.wasm`, ['--enable-experimental-top-level-await']);
} else if (target === 'pins') {
  await pinScripts();
} else {
  console.error('usage: node src/node/build.mjs node|fastly|fastly-floor|fastly-reuse-sim|engine-checks|engine-checks-fail|pins');
  process.exit(2);
}
