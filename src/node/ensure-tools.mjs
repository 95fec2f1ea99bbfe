// Before the tests: make sure the machine has what they need, installing it with apt-get when it is
// missing and we may (root on Debian). redis-server is required; Chromium only for browser tests,
// which say clearly that they were skipped when it cannot be had.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const has = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
const canInstall = process.getuid?.() === 0 && has('apt-get');
let updated = false;

function install(pkg) {
  if (!canInstall) return false;
  console.log(`ensure-tools: installing ${pkg} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  try {
    if (!updated) execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    updated = true;
    execFileSync('apt-get', ['install', '-y', '-qq', pkg], { stdio: ['ignore', 'ignore', 'inherit'], env });
    return true;
  } catch {
    return false;
  }
}

if (!has('redis-server') && !install('redis-server')) {
  console.error('ensure-tools: redis-server is required by the tests and could not be installed (apt-get install redis-server)');
  process.exit(1);
}
if (!existsSync('/usr/bin/chromium') && !install('chromium')) {
  console.warn('ensure-tools: /usr/bin/chromium is missing; the browser tests will be skipped (apt-get install chromium)');
}
// Japanese and Chinese glyphs for the screenshots the browser tests save (visitors have their own
// fonts; without these the Japanese page would be photographed as empty boxes).
if (existsSync('/usr/bin/chromium') && !existsSync('/usr/share/fonts/opentype/ipafont-gothic') && !install('fonts-ipafont-gothic')) {
  console.warn('ensure-tools: no Japanese font (apt-get install fonts-ipafont-gothic); Japanese screenshots will show boxes');
}
