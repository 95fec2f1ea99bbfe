// Completes package-lock.json for registries that do not serve every platform build.
//
// npm leaves an optional dependency out of the lockfile when the registry it can reach does not
// have it (here: e.g. @fastly/cli-darwin-arm64), and `npm ci` then refuses the lockfile as out of
// sync. This records each unresolvable optional dependency where npm would place it, with the
// os/cpu/libc its name declares, so every platform skips the ones that are not its own.
// Run after `npm install` changes dependencies: node src/node/complete-lockfile.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const lockPath = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'package-lock.json');
const lock = JSON.parse(readFileSync(lockPath, 'utf8'));
const packages = lock.packages;
const OS = ['darwin', 'win32', 'linux', 'freebsd', 'android', 'openharmony', 'netbsd', 'openbsd', 'sunos', 'aix'];
const CPU = { arm64: 'arm64', x64: 'x64', x32: 'ia32', ia32: 'ia32', arm: 'arm', ppc64: 'ppc64', s390x: 's390x', wasm32: 'wasm32', riscv64: 'riscv64', loong64: 'loong64' };

/** Where Node would find `name` from the package at `from` (walking up the node_modules chain). */
function resolveFrom(from, name) {
  let dir = from;
  for (;;) {
    const candidate = `${dir}/node_modules/${name}`.replace(/^\//, '');
    if (packages[candidate]) return candidate;
    const up = dir.lastIndexOf('/node_modules/');
    if (up < 0) return packages[`node_modules/${name}`] ? `node_modules/${name}` : undefined;
    dir = dir.slice(0, up);
  }
}

function platformOf(name) {
  const parts = name.split('/').pop().split('-');
  const entry = {};
  const os = parts.find((p) => OS.includes(p));
  const cpu = parts.map((p) => CPU[p]).find(Boolean);
  if (os) entry.os = [os];
  if (cpu) entry.cpu = [cpu];
  if (parts.includes('musl')) entry.libc = ['musl'];
  if (parts.includes('gnu') || parts.includes('gnueabihf')) entry.libc = ['glibc'];
  return entry;
}

let added = 0;
for (const [path, entry] of Object.entries(packages)) {
  for (const [name, spec] of Object.entries(entry.optionalDependencies ?? {})) {
    const version = spec.replace(/^[=^~]/, '');
    const found = resolveFrom(path, name);
    if (found !== undefined && packages[found].version === version) continue;
    // Not resolvable: place it beside the parent, or inside the parent when another version
    // already sits there (as npm nests a conflicting version).
    const container = path.includes('/node_modules/') ? path.slice(0, path.lastIndexOf('/node_modules/')) + '/node_modules' : 'node_modules';
    const beside = `${container}/${name}`;
    const at = packages[beside] ? `${path}/node_modules/${name}` : beside;
    if (packages[at]) continue;
    packages[at] = { version, ...(entry.dev ? { dev: true } : {}), optional: true, ...platformOf(name) };
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)));
writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`complete-lockfile: recorded ${added} optional platform package(s)`);
