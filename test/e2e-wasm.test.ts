/**
 * End to end over HTTP on the real artifact: bin/main.wasm served by `fastly compute serve` on a
 * Compute host (Viceroy, or the stand-in named by VICEROY_PATH / kept beside the project), running
 * the same scenarios as the Node host. Sandboxes are reused, as Fastly runs the wasm we ship (see
 * startWasmStack); test/e2e-wasm-fresh.test.ts runs the main scenarios again with one request per
 * sandbox. Skipped, saying why, when no Compute host is available.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findComputeHost, PROJECT_ROOT } from './support/compute-host';
import {
  CAPACITY_SETTINGS,
  LOST_STATE_SETTINGS,
  defineCacheScenario,
  defineCapacityScenarios,
  defineLostStateScenario,
  defineEndToEnd,
  defineEventScenario,
  defineRandomScenario,
  definePathScenarios,
  defineTemplateScenario,
  defineThrottleScenario,
  defineTicketLimitScenario,
  definePowScenario,
  defineChallengeScenario,
  defineAdmissionScenario,
  defineUnqueuedAdmissionScenario,
  UNQUEUED_ADMISSION_SETTINGS,
  defineSwitchScenario,
  SWITCH_SETTINGS,
  ADAPTIVE_SETTINGS,
  defineAdaptiveScenario,
  ADMISSION_SETTINGS,
  POW_SETTINGS,
  startBeforeEvent,
  PATH_SETTINGS,
  TEMPLATE_SETTINGS,
  TEMPLATES,
  THROTTLE_SETTINGS,
} from './support/e2e-scenarios';
import { buildWasmInto, configStoreItems, startWasmStack, type Stack } from './support/stack';
import { ACCOUNTS_SECRET } from './support/fixtures';
import { defineAccountsScenario } from './support/e2e-accounts';
import { fakeProviderSettings, startFakeProvider, type FakeProvider } from './support/fake-siteverify';

const host = findComputeHost();
if (!host.found) console.warn(`wasm end-to-end tier skipped: ${host.reason}`);

describe.skipIf(!host.found)('wasm on a Compute host (fastly compute serve)', () => {
  let stack: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    console.log(`wasm end-to-end tier: fastly compute serve --viceroy-path ${host.path}`);
    stack = await startWasmStack({ viceroyPath: host.path, secrets: { admin_accounts: ACCOUNTS_SECRET } });
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
  });

  defineEndToEnd(() => stack);
  defineAccountsScenario(() => stack);

  // Said in the test output rather than silently left out.
  it.skip('passes a 100 MiB response with bounded memory — Node host only: the wasm runs in the compute host, another process whose memory this test cannot sample; the stand-in streams bodies with backpressure and the 100 MiB scenario above checks the bytes', () => {});
});

describe.skipIf(!host.found)('wasm with the per-POP cache on (fastly:cache SimpleCache)', () => {
  let cached: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    cached = await startWasmStack({ viceroyPath: host.path, settings: { state_cache_seconds: '2' } });
  }, 120_000);
  afterAll(async () => {
    await cached?.close();
  });
  defineCacheScenario(() => cached, 2);
});

describe.skipIf(!host.found)('wasm in capacity mode', () => {
  let capacity: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    capacity = await startWasmStack({ viceroyPath: host.path, settings: CAPACITY_SETTINGS });
  }, 120_000);
  afterAll(async () => {
    await capacity?.close();
  });
  defineCapacityScenarios(() => capacity);
});

describe.skipIf(!host.found)('wasm in capacity mode when the store forgets', () => {
  let forgetful: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    forgetful = await startWasmStack({ viceroyPath: host.path, settings: LOST_STATE_SETTINGS });
  }, 120_000);
  afterAll(async () => {
    await forgetful?.close();
  });
  defineLostStateScenario(() => forgetful);
});

describe.skipIf(!host.found)('wasm: the settings item as the Config Store holds it', () => {
  it('names an unknown key of the settings item on our paths and keeps visitors off the origin', async () => {
    if (!host.found) return;
    const stack = await startWasmStack({ viceroyPath: host.path, configItems: (settings) => ({ settings: JSON.stringify({ ...settings, max_activ: '5' }) }) });
    try {
      const status = await fetch(`${stack.url}/__wr/health`);
      expect(status.status).toBe(503);
      expect(await status.text()).toContain('Config Store item settings key max_activ: is not a setting of the waiting room; did you mean max_active?');
      // A visitor gets the "checking your place" page, not the origin and not an error.
      const page = await fetch(`${stack.url}/products`);
      expect(page.status).toBeLessThan(500);
      await expect.poll(() => stack.logs().filter((l) => l.decision === 'config_invalid' && l.path === '/products').length).toBe(1);
      expect(stack.logs().find((l) => l.path === '/products')?.reason).toContain('settings key max_activ');
    } finally {
      await stack.close();
    }
  }, 120_000);

  it("refuses fastly.toml's placeholder hosts, naming each and what to put there, and keeps visitors off the origin", async () => {
    if (!host.found) return;
    // What a first `fastly compute publish` that took [setup]'s offered values would run.
    const stack = await startWasmStack({
      viceroyPath: host.path,
      originBackendUrl: 'http://origin.example.com',
      configItems: (settings) => configStoreItems({ ...settings, upstash_url: 'https://your-db.upstash.io' }),
    });
    try {
      const status = await fetch(`${stack.url}/__wr/health`);
      expect(status.status).toBe(503);
      const text = await status.text();
      expect(text).toContain('backend origin: is still the placeholder origin.example.com from fastly.toml: set it to the host name of your site');
      expect(text).toContain("upstash_url: is still the placeholder your-db.upstash.io from fastly.toml: set it to your Upstash database's REST host");
      const page = await fetch(`${stack.url}/products`);
      expect(page.status).toBeLessThan(500);
      expect(await page.text()).toContain('holding.js');
      await expect.poll(() => stack.logs().filter((l) => l.decision === 'config_invalid' && l.path === '/products').length).toBe(1);
    } finally {
      await stack.close();
    }
  }, 120_000);

  it('still reads the per-setting layout when there is no settings item', async () => {
    if (!host.found) return;
    const stack = await startWasmStack({ viceroyPath: host.path, configItems: (settings) => ({ ...settings, page_title: 'Per item' }) });
    try {
      expect(await (await fetch(`${stack.url}/__wr/health`)).json()).toEqual({ ok: true });
      expect(await (await fetch(`${stack.url}/products`)).text()).toContain('Per item');
    } finally {
      await stack.close();
    }
  }, 120_000);
});

describe.skipIf(!host.found)("the project's own fastly.toml under fastly compute serve", () => {
  it('loads the config store and the dev secret store from devconfig.json and serves', async () => {
    if (!host.found) return;
    const dir = mkdtempSync(join(tmpdir(), 'wr-toml-'));
    buildWasmInto(dir);
    copyFileSync(resolve(PROJECT_ROOT, 'fastly.toml'), join(dir, 'fastly.toml'));
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const child = spawn(
      resolve(PROJECT_ROOT, 'node_modules/.bin/fastly'),
      ['compute', 'serve', '--skip-build', '--non-interactive', '--dir', dir, '--viceroy-path', host.path, '--addr', `127.0.0.1:${port}`],
      { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, COMPUTE_HOST_REUSE: '1' } },
    );
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    try {
      await expect.poll(() => output, { timeout: 60_000 }).toContain('Listening on');
      // The health check reads and validates every setting and secret: a store that did not
      // load, or a devconfig value that does not parse, answers 503 naming the key.
      const health = await fetch(`http://127.0.0.1:${port}/__wr/health`);
      expect(await health.json()).toEqual({ ok: true });
      // The admin password comes from the dev secret store.
      const basic = `Basic ${Buffer.from('admin:dev-only-admin-password').toString('base64')}`;
      const denied = await fetch(`http://127.0.0.1:${port}/__wr/admin/state`, { headers: { authorization: 'Basic eDp5' } });
      expect(denied.status).toBe(401);
      // No bridge runs on 8079 here: the admin page reports the store, not a crash.
      const state = await fetch(`http://127.0.0.1:${port}/__wr/admin/state`, { headers: { authorization: basic } });
      expect([200, 503]).toContain(state.status);
    } finally {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe.skipIf(!host.found)('wasm with a scheduled event', () => {
  let event: Stack;
  let startMs = 0;
  beforeAll(async () => {
    if (!host.found) return;
    // The lead covers building and starting the wasm; a busy machine that takes longer gets a longer one.
    ({ stack: event, startMs } = await startBeforeEvent((settings) => startWasmStack({ viceroyPath: host.path, settings }), 15_000));
  }, 300_000);
  afterAll(async () => {
    await event?.close();
  });
  defineEventScenario(() => event, () => startMs);
});

describe.skipIf(!host.found)('wasm with the random method', () => {
  let random: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    random = await startWasmStack({ viceroyPath: host.path, settings: { queue_method: 'random' } });
  }, 120_000);
  afterAll(async () => {
    await random?.close();
  });
  defineRandomScenario(() => random);
});

describe.skipIf(!host.found)('wasm with templates from the KV Store', () => {
  let templated: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    templated = await startWasmStack({ viceroyPath: host.path, settings: TEMPLATE_SETTINGS, templates: TEMPLATES });
  }, 120_000);
  afterAll(async () => {
    await templated?.close();
  });
  defineTemplateScenario(() => templated);
});

describe.skipIf(!host.found)('wasm with bypass and queue path rules', () => {
  let paths: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    paths = await startWasmStack({ viceroyPath: host.path, settings: PATH_SETTINGS });
  }, 120_000);
  afterAll(async () => {
    await paths?.close();
  });
  definePathScenarios(() => paths);
});

describe.skipIf(!host.found)('wasm with the proof-of-work gate (WebCrypto SHA-256 in the engine)', () => {
  let gated: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    gated = await startWasmStack({ viceroyPath: host.path, settings: POW_SETTINGS });
  }, 120_000);
  afterAll(async () => {
    await gated?.close();
  });
  definePowScenario(() => gated);
});

describe.skipIf(!host.found)('wasm with a challenge provider (siteverify through the backend `challenge`)', () => {
  let hooked: Stack;
  let provider: FakeProvider;
  beforeAll(async () => {
    if (!host.found) return;
    provider = await startFakeProvider();
    hooked = await startWasmStack({ viceroyPath: host.path, settings: fakeProviderSettings(provider), backends: { challenge: provider.url } });
  }, 120_000);
  afterAll(async () => {
    await hooked?.close();
    await provider?.close();
  });
  defineChallengeScenario(() => hooked, () => provider);
});

describe.skipIf(!host.found)('wasm in front of a protected origin (an ES256 admission signed in the engine)', () => {
  let protectedStack: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    protectedStack = await startWasmStack({ viceroyPath: host.path, settings: ADMISSION_SETTINGS, protectOrigin: true });
  }, 120_000);
  afterAll(async () => {
    await protectedStack?.close();
  });
  defineAdmissionScenario(() => protectedStack);
});

describe.skipIf(!host.found)('wasm with several queues in front of a protected origin', () => {
  let unqueued: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    unqueued = await startWasmStack({ viceroyPath: host.path, settings: UNQUEUED_ADMISSION_SETTINGS, protectOrigin: true });
  }, 120_000);
  afterAll(async () => {
    await unqueued?.close();
  });
  defineUnqueuedAdmissionScenario(() => unqueued);
});

describe.skipIf(!host.found)('wasm with the emergency switches (through the POP cache)', () => {
  let switched: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    switched = await startWasmStack({ viceroyPath: host.path, settings: SWITCH_SETTINGS });
  }, 120_000);
  afterAll(async () => {
    await switched?.close();
  });
  defineSwitchScenario(() => switched);
});

describe.skipIf(!host.found)('wasm under password and token guessing and a ticket flood (fastly:edge-rate-limiter)', () => {
  let throttled: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    throttled = await startWasmStack({ viceroyPath: host.path, settings: THROTTLE_SETTINGS });
  }, 120_000);
  afterAll(async () => {
    await throttled?.close();
  });
  // The penalty box holds for whole minutes (one at least), on the compute host's own clock: these
  // scenarios wait the minute out once, about 60 s of the tier's time (the ticket limit's client is
  // held first, and checked again after the sign-in throttle's wait).
  const passTime = async (sinceMs: number, afterMs: number): Promise<void> => {
    const wait = sinceMs + afterMs - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  };
  const ticketsAgain = defineTicketLimitScenario(() => throttled);
  defineThrottleScenario(() => throttled, passTime);
  ticketsAgain(passTime);
});

describe.skipIf(!host.found)("wasm with adaptive admission (the origin's answers counted at the edge)", () => {
  let adaptive: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    adaptive = await startWasmStack({ viceroyPath: host.path, settings: ADAPTIVE_SETTINGS });
  }, 120_000);
  afterAll(async () => {
    await adaptive?.close();
  });
  defineAdaptiveScenario(() => adaptive);
});
