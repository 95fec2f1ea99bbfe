// Where @upstash/redis keeps its HTTP client. The package exports only whole clients (`Redis`, with
// a method and a class for each of its ~300 commands); the Fastly build needs just the client that
// sends a command, which lives in the shared chunk its entry points import. The chunk's name carries
// a hash that changes with each release of the package, so it is found here, by reading the package's
// Fastly entry, rather than written into an import.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** The specifier src/store/upstash-http.ts imports; the esbuild and vitest configurations map it here. */
export const UPSTASH_HTTP_SPECIFIER = '@upstash/redis/http-client';

/** The absolute path of the chunk that defines and exports `HttpClient` and `error_exports`. */
export function upstashHttpChunk(root) {
  const entry = resolve(root, 'node_modules/@upstash/redis/fastly.mjs');
  const source = readFileSync(entry, 'utf8');
  const match = /\bHttpClient\b[^;]*?\bfrom\s+["'](\.\/chunk-[\w-]+\.mjs)["']/.exec(source);
  if (match === null) throw new Error(`${entry} no longer imports HttpClient from a chunk: see src/node/upstash-chunk.mjs`);
  const chunk = resolve(dirname(entry), match[1]);
  const exported = /export\s*\{([^}]*)\}\s*;?\s*$/.exec(readFileSync(chunk, 'utf8'));
  const names = new Set((exported?.[1] ?? '').split(',').map((name) => name.trim()));
  for (const name of ['HttpClient', 'error_exports']) {
    if (!names.has(name)) throw new Error(`${chunk} no longer exports ${name}: see src/node/upstash-chunk.mjs`);
  }
  return chunk;
}
