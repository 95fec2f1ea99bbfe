/**
 * `npm run docs`: writes the configuration reference in docs/configuration.md from the schema
 * (src/core/config-reference.ts). `npm run docs -- --check` changes nothing and exits 1 when the
 * file is out of date (the test suite makes the same comparison).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderConfigurationReference, replaceGenerated } from '../core/config-reference';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const file = resolve(root, 'docs', 'configuration.md');
const current = readFileSync(file, 'utf8');
const next = replaceGenerated(current, renderConfigurationReference());
if (process.argv.includes('--check')) {
  if (next !== current) {
    console.error('docs/configuration.md differs from the schema: run npm run docs');
    process.exit(1);
  }
  console.log('docs/configuration.md matches the schema');
} else if (next === current) {
  console.log('docs/configuration.md is up to date');
} else {
  writeFileSync(file, next);
  console.log('docs/configuration.md: reference rewritten from the schema');
}
