/**
 * Adaptive admission end to end on the Node host, in real time: the waiting room (its own HTTP host,
 * the Upstash store through the bridge on a real redis-server) in front of the demo origin set to
 * degrade above CAPACITY requests a second (slow above it, 503 above 1.5 × it). Visitors arrive
 * faster than that and poll the holding page each second; each one let in makes one request to the
 * origin, so the origin's load is the admission rate. The configured rate (START a second) is more
 * than twice what the origin takes; the controller must learn a rate near CAPACITY.
 *
 * About 80 s: the controller moves at most once per AC_WINDOW_MS (10 s), the shortest span Fastly's
 * rate counters count over.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_TOKEN } from './support/fixtures';
import { startNodeStack, type Stack } from './support/stack';

const CAPACITY = 10;
const START = 25;
const ARRIVALS_PER_S = 12;
const RUN_S = 75;

describe('adaptive admission on the Node host, against an origin that degrades above a load', () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startNodeStack(
      {
        store_timeout_ms: '2000',
        refresh_seconds: '1',
        queue_timeout_seconds: '30',
        state_cache_seconds: '1',
        admit_per_period: String(START),
        admit_period_seconds: '1',
        adaptive_admission: 'on',
        adaptive_min: '2',
        adaptive_max: '60',
        adaptive_slow_ms: '1000',
        adaptive_slow_percent: '10',
        adaptive_error_percent: '2',
      },
      undefined,
      { degradeOrigin: { perSecond: CAPACITY, slowMs: 1_500 } },
    );
  });

  afterAll(async () => {
    await stack?.close();
  });

  it(`learns a rate near the origin's ${CAPACITY} requests a second from the configured ${START}`, { timeout: (RUN_S + 30) * 1000 }, async () => {
    const started = Date.now();
    let stop = false;
    let letIn = 0;
    let originErrors = 0;
    const visitors: Promise<void>[] = [];
    const visitor = async (n: number): Promise<void> => {
      let cookie = '';
      while (!stop) {
        const response = await fetch(`${stack.url}/shop`, { headers: { cookie, 'x-forwarded-for': `10.0.${n >> 8}.${n & 255}` } }).catch(() => undefined);
        if (response !== undefined) {
          const set = response.headers.get('set-cookie');
          if (set !== null) cookie = set.split(';')[0]!;
          await response.arrayBuffer();
          if (response.headers.get('x-origin') === 'demo') {
            if (response.status >= 500) originErrors += 1;
            else letIn += 1;
            return;
          }
        }
        await new Promise((r) => setTimeout(r, 1_000));
      }
    };
    const values: { s: number; value: number }[] = [];
    const sample = async () => {
      const stats = (await (await fetch(`${stack.url}/__wr/api/stats`, { headers: { authorization: `Bearer ${API_TOKEN}` } })).json()) as { adaptive?: { value: number; moves: { reason: string }[] } };
      if (stats.adaptive !== undefined) values.push({ s: (Date.now() - started) / 1000, value: stats.adaptive.value });
      return stats;
    };
    let n = 0;
    const arrivals = setInterval(() => {
      for (let i = 0; i < ARRIVALS_PER_S / 2; i++) visitors.push(visitor(n++));
    }, 500);
    const sampler = setInterval(() => void sample(), 2_500);
    await new Promise((r) => setTimeout(r, RUN_S * 1000));
    clearInterval(arrivals);
    clearInterval(sampler);
    stop = true;
    const final = (await sample()) as { adaptive?: { value: number; moves: { reason: string; from: number; to: number }[] } };
    await Promise.allSettled(visitors);
    const late = values.filter((v) => v.s >= RUN_S - 35).map((v) => v.value);
    const mean = late.reduce((a, b) => a + b, 0) / late.length;
    console.log(`adaptive e2e: learned values ${values.map((v) => `${Math.round(v.s)}s:${v.value}`).join(' ')}; let in ${letIn}, origin errors ${originErrors}; moves ${final.adaptive?.moves.map((m) => `${m.from}>${m.to} ${m.reason}`).join(', ')}`);
    // It went down from the configured rate because the origin said so (slow or failing answers) ...
    expect(final.adaptive?.moves.some((m) => m.reason === 'errors' || m.reason === 'slow')).toBe(true);
    // ... and over the last 35 s its learned rate stays near what the origin takes.
    expect(late.length).toBeGreaterThan(5);
    expect(mean).toBeGreaterThanOrEqual(CAPACITY * 0.5);
    expect(mean).toBeLessThanOrEqual(CAPACITY * 1.5);
    expect(Math.max(...late)).toBeLessThan(START);
  });
});
