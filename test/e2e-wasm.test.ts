/**
 * End to end over HTTP on the real artifact: bin/main.wasm served by `fastly compute serve` on a
 * Compute host (Viceroy, or the stand-in named by VICEROY_PATH / kept beside the project), running
 * the same scenarios as the Node host. Skipped, saying why, when no Compute host is available.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { findComputeHost } from './support/compute-host';
import { defineEndToEnd } from './support/e2e-scenarios';
import { startWasmStack, type Stack } from './support/stack';

const host = findComputeHost();
if (!host.found) console.warn(`wasm end-to-end tier skipped: ${host.reason}`);

describe.skipIf(!host.found)('wasm on a Compute host (fastly compute serve)', () => {
  let stack: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    console.log(`wasm end-to-end tier: fastly compute serve --viceroy-path ${host.path}`);
    stack = await startWasmStack({ viceroyPath: host.path });
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
  });

  defineEndToEnd(() => stack);
});
