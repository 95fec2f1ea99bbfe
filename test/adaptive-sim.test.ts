/**
 * Issue 17's bar, on the flash-sale model of `npm run simulate -- --adaptive` (test/sim/adaptive.ts,
 * whose header states the model), the very run it reports, on the in-memory store (bound to the
 * Redis scripts by the contract suite; a run takes about 3 s); then the bar again on other crowds:
 * other seeds, and a sale half as long (15 simulated minutes, the capacity halved from minute 5 to
 * minute 10, half the crowd), where the controller's climb from the operator's low guess weighs twice.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { MemoryQueueStore } from '../src/store/memory-store';
import { CAUTIOUS, CAUTIOUS_RUN, errorRate, FULL_SCENARIO, judge, LIVE_VISIT, PERIOD_S, runAll, SHORT_SCENARIO as SHORT, sustainedCount, swingOf, THROUGHPUT_RUN, type AdaptiveScenario, type RunResult } from './sim/adaptive';

const SCENARIO = FULL_SCENARIO;
const slowRate = (r: RunResult): number => r.slow / r.requests;

describe('adaptive admission in a simulated flash sale (shortened)', () => {
  let results: RunResult[];
  const run = (name: string): RunResult => results.find((r) => r.spec.name === name)!;

  beforeAll(async () => {
    results = await runAll(SCENARIO, () => new MemoryQueueStore());
  }, 60_000);

  it('models what it says: more admitted, more errors; each controller admits by the value it learned', () => {
    const [low, right, high] = ['fixed, too low', 'fixed, right', 'fixed, too high'].map(run);
    expect(errorRate(low!)).toBeLessThan(errorRate(right!));
    expect(errorRate(right!)).toBeLessThan(errorRate(high!));
    expect(high!.failed).toBeGreaterThan(right!.failed);
    // A fixed run calls its count each period while people wait.
    expect(new Set(right!.calledPerPeriod.slice(1, -1))).toEqual(new Set([sustainedCount(SCENARIO.capacity)]));
    // A controller's run: each period called what the store says was learned at its step, so the
    // value read is the value in effect (and it moved, both ways).
    for (const c of [run(CAUTIOUS_RUN), run(THROUGHPUT_RUN)]) {
      const learnedAtSteps = c.calledPerPeriod.map((_, k) => c.learned[k * PERIOD_S]);
      expect(c.calledPerPeriod.slice(1)).toEqual(learnedAtSteps.slice(1));
      expect(Math.max(...c.learned)).toBeGreaterThan(sustainedCount(SCENARIO.capacity));
      expect(Math.min(...c.learned.slice(SCENARIO.halvesAtS, SCENARIO.recoversAtS))).toBeLessThan(c.learned[SCENARIO.halvesAtS - 1]!);
    }
  });

  // Issue 30 made the controller settle (moves that shrink near the boundary, a hold before each try
  // above it): it no longer climbs back at once after the capacity returns, so the recovery takes up
  // to two minutes here, where issue 17's bar asked for one; and on the other crowds it serves
  // 84.7-91.4 % of the best fixed count, not 91.6-97.0 % (docs/adaptive-admission.md, "The bar
  // since issue 30", has the figures and why: the 2-minute sessions of this model lag the count).
  const RECOVERY_S = 120;

  it('issue 17 bar, met by the throughput-first controller: within 10 % of the best fixed count\'s served, no more errors, the overload stopped within a minute of the halving', () => {
    const v = judge(results, THROUGHPUT_RUN);
    expect(v.best.spec.name).toBe('fixed, too high');
    expect(v.servedRatio).toBeGreaterThanOrEqual(0.9);
    expect(errorRate(v.controller)).toBeLessThanOrEqual(errorRate(v.best));
    expect(v.controller.halvingSettledS).toBeDefined();
    expect(v.controller.halvingSettledS!).toBeLessThanOrEqual(60);
    expect(v.controller.recoveryReachS).toBeDefined();
    expect(v.controller.recoveryReachS!).toBeLessThanOrEqual(RECOVERY_S);
  });

  it.each([
    ['another crowd (seed 5)', { ...FULL_SCENARIO, seed: 5 }],
    ['a sale half as long', SHORT],
    ['a sale half as long, another crowd (seed 1)', { ...SHORT, seed: 1 }],
  ])('the throughput-first controller on %s: at least four fifths of the best fixed count\'s served with fewer errors, adapted to each change', async (_, scenario) => {
    const v = judge(await runAll(scenario, () => new MemoryQueueStore()), THROUGHPUT_RUN);
    expect(v.servedRatio).toBeGreaterThanOrEqual(0.8);
    expect(v.errorsOk).toBe(true);
    expect(v.controller.halvingSettledS!).toBeLessThanOrEqual(60);
    expect(v.controller.recoveryReachS!).toBeLessThanOrEqual(RECOVERY_S);
  }, 60_000);

  it('the cautious controller trades served for health: errors within its target and fewer than either fixed count that serves more, adapted within a minute, and more served than the fixed count that keeps its targets', () => {
    const c = run(CAUTIOUS_RUN);
    const [low, right] = ['fixed, too low', 'fixed, right'].map(run);
    const v = judge(results, CAUTIOUS_RUN);
    expect(v.controller.halvingSettledS!).toBeLessThanOrEqual(60);
    expect(v.controller.recoveryReachS!).toBeLessThanOrEqual(RECOVERY_S);
    expect(errorRate(c)).toBeLessThan(errorRate(right!));
    expect(errorRate(c)).toBeLessThan(errorRate(run(THROUGHPUT_RUN)));
    // Issue 30: it keeps the origin's errors within its target (the old controller's saw-tooth did
    // not hold the slow share either; in this model, with each second's burst failing requests, no
    // run but the too-low count's holds 10 % slow).
    expect(errorRate(c) * 100).toBeLessThanOrEqual(CAUTIOUS.errorPercent);
    // Of the three fixed counts only the low one keeps the origin within these targets.
    expect(errorRate(low!) * 100).toBeLessThanOrEqual(CAUTIOUS.errorPercent);
    expect(slowRate(low!) * 100).toBeLessThanOrEqual(CAUTIOUS.slowPercent);
    expect(slowRate(right!) * 100).toBeGreaterThan(CAUTIOUS.slowPercent);
    expect(c.served).toBeGreaterThan(1.2 * low!.served);
  });

  it('with the live runs\' short visits and an origin that counts its load over 10 s, the cautious controller settles: its swing after convergence is less than half the flash sale\'s', async () => {
    const live: AdaptiveScenario = { ...SCENARIO, origin: 'window', visit: LIVE_VISIT };
    const ratio = (s: AdaptiveScenario, r: RunResult): number => {
      const w = swingOf(s, r)!;
      return w.most / w.least;
    };
    const sale = ratio(SCENARIO, run(CAUTIOUS_RUN));
    const settled = ratio(live, (await runAll(live, () => new MemoryQueueStore())).find((r) => r.spec.name === CAUTIOUS_RUN)!);
    // Measured: 6.33x in the flash sale (sessions of 2 minutes lag the count), 2.97x with short visits.
    expect(sale).toBeGreaterThan(4);
    expect(settled).toBeLessThan(sale / 2);
  }, 60_000);
});
