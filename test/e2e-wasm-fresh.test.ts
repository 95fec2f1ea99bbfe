/**
 * The wasm tier's main scenarios again with one request per sandbox: built with WR_SANDBOX_REUSE=0
 * and served by a host that starts a fresh instance for every request. The rest of the wasm tier
 * runs with reused sandboxes, as Fastly runs the wasm we ship (test/e2e-wasm.test.ts); Fastly may
 * still start a fresh sandbox for any request (a new POP, a recycled or busy one), so nothing may
 * work only in an instance that has served a request before.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { findComputeHost } from './support/compute-host';
import {
  CAPACITY_SETTINGS,
  defineCacheScenario,
  defineCapacityScenarios,
  defineEndToEnd,
  defineLostStateScenario,
  defineSwitchScenario,
  LOST_STATE_SETTINGS,
  SWITCH_SETTINGS,
} from './support/e2e-scenarios';
import { startWasmStack, type Stack } from './support/stack';

const host = findComputeHost();

/** A describe whose scenarios run on a wasm stack of `settings` with fresh sandboxes. */
function freshSandboxes(title: string, settings: Record<string, string>, define: (stack: () => Stack) => void): void {
  describe.skipIf(!host.found)(`wasm, one request per sandbox (WR_SANDBOX_REUSE=0): ${title}`, () => {
    let stack: Stack;
    beforeAll(async () => {
      if (!host.found) return;
      stack = await startWasmStack({ viceroyPath: host.path, settings, sandboxReuse: false });
    }, 120_000);
    afterAll(async () => {
      await stack?.close();
    });
    define(() => stack);
  });
}

freshSandboxes('the main scenarios', {}, defineEndToEnd);
freshSandboxes('the per-POP cache', { state_cache_seconds: '2' }, (stack) => defineCacheScenario(stack, 2));
freshSandboxes('capacity mode', CAPACITY_SETTINGS, defineCapacityScenarios);
freshSandboxes('capacity mode when the store forgets', LOST_STATE_SETTINGS, defineLostStateScenario);
freshSandboxes('the emergency switches', SWITCH_SETTINGS, defineSwitchScenario);
