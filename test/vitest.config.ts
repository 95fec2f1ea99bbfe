import { readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

// Templates are imported as text, as esbuild's `text` loader does for the wasm and Node bundles.
const TEXT_EXTENSIONS = /\.(html|css|svg|txt)$/;

export default defineConfig({
  plugins: [
    {
      name: 'text-loader',
      enforce: 'pre',
      load(id) {
        if (!TEXT_EXTENSIONS.test(id)) return null;
        return `export default ${JSON.stringify(readFileSync(id, 'utf8'))};`;
      },
    },
  ],
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default', 'json'],
    outputFile: { json: 'test/.artifacts/results.json' },
  },
});
