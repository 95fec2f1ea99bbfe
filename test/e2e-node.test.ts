/**
 * End to end over HTTP on the Node host: the shared scenarios, plus what only the Node host can
 * show from inside this process (its memory while a large body passes through).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { ACCOUNTS_SECRET, API_TOKEN } from './support/fixtures';
import { defineAccountsScenario } from './support/e2e-accounts';
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
import { HttpVisitor, startNodeStack, type Stack } from './support/stack';
import { fakeProviderSettings, startFakeProvider, type FakeProvider } from './support/fake-siteverify';

let stack: Stack;
beforeAll(async () => {
  stack = await startNodeStack({}, undefined, { secrets: { admin_accounts: ACCOUNTS_SECRET } });
});
afterAll(async () => {
  await stack?.close();
});

describe('Node host', () => {
  defineEndToEnd(() => stack);
  defineAccountsScenario(() => stack);

  it('passes a 100 MiB response through with bounded memory', async () => {
    const v = new HttpVisitor(stack.url);
    await v.get('/');
    await fetch(`${stack.url}/__wr/api/admit?count=1`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } });
    await v.get('/');
    const response = await v.get('/big?mib=100');
    expect(response.headers.get('content-length')).toBe(String(100 * 1024 * 1024));
    const startRss = process.memoryUsage().rss;
    let peak = startRss;
    let received = 0;
    const reader = response.body!.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      received += r.value.byteLength;
      peak = Math.max(peak, process.memoryUsage().rss);
    }
    expect(received).toBe(100 * 1024 * 1024);
    // Buffering the body anywhere in this process would add at least 100 MiB.
    expect(peak - startRss).toBeLessThan(64 * 1024 * 1024);
  });
});

describe('Node host with the per-POP cache on', () => {
  let cached: Stack;
  beforeAll(async () => {
    cached = await startNodeStack({ state_cache_seconds: '2' });
  });
  afterAll(async () => {
    await cached?.close();
  });
  defineCacheScenario(() => cached, 2);
});

describe('Node host in capacity mode', () => {
  let capacity: Stack;
  beforeAll(async () => {
    capacity = await startNodeStack(CAPACITY_SETTINGS);
  });
  afterAll(async () => {
    await capacity?.close();
  });
  defineCapacityScenarios(() => capacity);
});

describe('Node host in capacity mode when the store forgets', () => {
  let forgetful: Stack;
  beforeAll(async () => {
    forgetful = await startNodeStack(LOST_STATE_SETTINGS);
  });
  afterAll(async () => {
    await forgetful?.close();
  });
  defineLostStateScenario(() => forgetful);
});

describe('Node host with a scheduled event', () => {
  let event: Stack;
  let startMs = 0;
  beforeAll(async () => {
    ({ stack: event, startMs } = await startBeforeEvent(startNodeStack, 4000));
  });
  afterAll(async () => {
    await event?.close();
  });
  defineEventScenario(() => event, () => startMs);
});

describe('Node host with the random method', () => {
  let random: Stack;
  beforeAll(async () => {
    random = await startNodeStack({ queue_method: 'random' });
  });
  afterAll(async () => {
    await random?.close();
  });
  defineRandomScenario(() => random);
});

describe('Node host with templates from a KV Store stand-in', () => {
  let templated: Stack;
  beforeAll(async () => {
    templated = await startNodeStack(TEMPLATE_SETTINGS, TEMPLATES);
  });
  afterAll(async () => {
    await templated?.close();
  });
  defineTemplateScenario(() => templated);
});

describe('Node host with bypass and queue path rules', () => {
  let paths: Stack;
  beforeAll(async () => {
    paths = await startNodeStack(PATH_SETTINGS);
  });
  afterAll(async () => {
    await paths?.close();
  });
  definePathScenarios(() => paths);
});

describe('Node host with the proof-of-work gate', () => {
  let gated: Stack;
  beforeAll(async () => {
    gated = await startNodeStack(POW_SETTINGS);
  });
  afterAll(async () => {
    await gated?.close();
  });
  definePowScenario(() => gated);
});

describe('Node host with a challenge provider (a local fake siteverify)', () => {
  let hooked: Stack;
  let provider: FakeProvider;
  beforeAll(async () => {
    provider = await startFakeProvider();
    hooked = await startNodeStack(fakeProviderSettings(provider));
  });
  afterAll(async () => {
    await hooked?.close();
    await provider?.close();
  });
  defineChallengeScenario(() => hooked, () => provider);
});

describe('Node host in front of a protected origin (signed admission)', () => {
  let protectedStack: Stack;
  beforeAll(async () => {
    protectedStack = await startNodeStack(ADMISSION_SETTINGS, undefined, { protectOrigin: true });
  });
  afterAll(async () => {
    await protectedStack?.close();
  });
  defineAdmissionScenario(() => protectedStack);
});

describe('Node host with several queues in front of a protected origin', () => {
  let unqueued: Stack;
  beforeAll(async () => {
    unqueued = await startNodeStack(UNQUEUED_ADMISSION_SETTINGS, undefined, { protectOrigin: true });
  });
  afterAll(async () => {
    await unqueued?.close();
  });
  defineUnqueuedAdmissionScenario(() => unqueued);
});

describe('Node host with the emergency switches', () => {
  let switched: Stack;
  beforeAll(async () => {
    switched = await startNodeStack(SWITCH_SETTINGS);
  });
  afterAll(async () => {
    await switched?.close();
  });
  defineSwitchScenario(() => switched);
});

describe('Node host under password and token guessing and a ticket flood', () => {
  let throttled: Stack;
  // The limiter's clock runs with the wall clock, and the test moves it on instead of waiting out
  // the penalty; everything else on this host keeps real time.
  let offsetMs = 0;
  beforeAll(async () => {
    const clock = { now: () => Date.now() + offsetMs };
    throttled = await startNodeStack(THROTTLE_SETTINGS, undefined, { authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock) });
  });
  afterAll(async () => {
    await throttled?.close();
  });
  const passTime = async (sinceMs: number, afterMs: number): Promise<void> => {
    offsetMs = Math.max(offsetMs, sinceMs + afterMs - Date.now());
  };
  const ticketsAgain = defineTicketLimitScenario(() => throttled);
  defineThrottleScenario(() => throttled, passTime);
  ticketsAgain(passTime);
});

describe("Node host with adaptive admission (the origin's answers counted at the edge)", () => {
  let adaptive: Stack;
  beforeAll(async () => {
    adaptive = await startNodeStack(ADAPTIVE_SETTINGS);
  });
  afterAll(async () => {
    await adaptive?.close();
  });
  defineAdaptiveScenario(() => adaptive);
});
