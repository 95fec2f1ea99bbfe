/**
 * Adaptive admission in the store (src/store/adaptive.ts, src/store/lua/lib/controller.lua): the
 * same promises on the in-memory store, on the Upstash store through the bridge on a real
 * redis-server, and on the Redis store (ioredis) — and, for a seeded random run of calls, the same
 * answers from all three, call by call.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AdaptivePolicy, AdmissionPolicy, OriginReport, QueueStore } from '../src/core/ports';
import { AC_PLATEAU_MS, AC_STEP_MS, AC_WINDOW_MS, ADAPTIVE_LOG, reportSlot, AC_SLOTS } from '../src/store/adaptive';
import { StoreArgumentError } from '../src/store/scripts';
import { expectSameOnEveryStore, useEveryStore } from './support/every-store';
import { seededRandom } from './support/seeded-random';

const T0 = 1_700_000_000_000;
const PERIOD_MS = 1_000;
const SETTINGS: AdaptivePolicy = { enabled: true, min: 10, max: 90, errorPercent: 5, slowPercent: 20 };
/** (90 - 10) / AC_STEPS (20) */
const STEP = 4;

/** Healthy, with one slow answer (under the target): a raise is one step. */
const healthy = (pop = 'pop-a', requests = 100): OriginReport => ({ pop, requests, errors: 0, slow: 1 });
/** Nothing failed and nothing slow: a raise is two steps. */
const clean = (pop = 'pop-a', requests = 100): OriginReport => ({ pop, requests, errors: 0, slow: 0 });
/** Rate mode, `count` per 1-s period, with the controller's settings and a report. */
function rate(count: number, adaptive: Partial<AdaptivePolicy> | null = {}, report?: OriginReport): AdmissionPolicy {
  return {
    auto: { count, periodMs: PERIOD_MS },
    thresholds: { maxActive: 0, maxNewPerMinute: 0 },
    sessionMs: 600_000,
    reservationMs: 30_000,
    ...(adaptive !== null && { adaptive: { ...SETTINGS, ...adaptive, ...(report !== undefined && { report }) } }),
  };
}
/** Capacity mode: max active `maxActive`. */
function capacity(maxActive: number, report?: OriginReport, adaptive: Partial<AdaptivePolicy> = {}): AdmissionPolicy {
  return { ...rate(0, adaptive, report), thresholds: { maxActive, maxNewPerMinute: 0 }, sessionMs: 120_000, reservationMs: 20_000 };
}
const q = (): string => `ac-${randomUUID().slice(0, 10)}`;

async function joinMany(store: QueueStore, queue: string, n: number, policy: AdmissionPolicy, nowMs = T0): Promise<void> {
  for (let i = 0; i < n; i++) await store.join(queue, nowMs, policy);
}

function describeAdaptive(name: string, create: () => QueueStore): void {
  describe(`${name}: adaptive admission`, () => {
    it('is off unless asked for: no settings, nothing reported, the configured count admits', async () => {
      const store = create();
      const queue = q();
      await joinMany(store, queue, 30, rate(5, null));
      const state = await store.poll(queue, T0 + PERIOD_MS, rate(5, null));
      expect(state.cursor).toBe(10);
      expect((await store.stats(queue, T0 + PERIOD_MS, rate(5, null))).adaptive).toBeUndefined();
      // Settings that say off are kept, and change nothing.
      await store.poll(queue, T0 + 2 * PERIOD_MS, rate(5, { enabled: false }, healthy()));
      const stats = await store.stats(queue, T0 + 2 * PERIOD_MS, rate(5, null));
      expect(stats.cursor).toBe(15);
      expect(stats.adaptive).toMatchObject({ enabled: false, source: 'config', min: 10, max: 90, moves: [] });
    });

    it('rate mode: a healthy origin with people waiting raises the count by a step, and the period step admits with it', async () => {
      const store = create();
      const queue = q();
      // The joins' own period (the one before T0) calls 20.
      await joinMany(store, queue, 200, rate(20, null), T0 - PERIOD_MS);
      // The first step starts from the configured count (within the bounds) and moves up at once.
      const first = await store.poll(queue, T0, rate(20, {}, healthy()));
      expect(first.cursor).toBe(20 + 20 + STEP);
      const stats = await store.stats(queue, T0, rate(20));
      expect(stats.adaptive).toMatchObject({ enabled: true, knob: 'admit_per_period', value: 20 + STEP, pinned: false });
      expect(stats.adaptive?.moves).toEqual([{ atMs: T0, from: 20, to: 20 + STEP, reason: 'healthy' }]);
      expect(stats.adaptive?.signals).toEqual({ atMs: T0, requests: 100, errors: 0, slow: 1, pops: 1 });
      // A report made before the move's effect could show (within AC_WINDOW_MS of it) is no evidence.
      await store.poll(queue, T0 + AC_STEP_MS, rate(20, {}, healthy()));
      expect((await store.stats(queue, T0 + AC_STEP_MS, rate(20))).adaptive?.value).toBe(20 + STEP);
      await store.poll(queue, T0 + AC_WINDOW_MS, rate(20, {}, healthy()));
      const later = await store.stats(queue, T0 + AC_WINDOW_MS, rate(20));
      expect(later.adaptive?.value).toBe(20 + 2 * STEP);
      // Each poll opened a period of its own, whose step let in the count in effect then.
      expect(later.cursor).toBe(20 + (20 + STEP) + (20 + STEP) + (20 + 2 * STEP));
      // Nothing failed and nothing was slow: two steps.
      await store.poll(queue, T0 + 2 * AC_WINDOW_MS, rate(20, {}, clean()));
      const clear = await store.stats(queue, T0 + 2 * AC_WINDOW_MS, rate(20));
      expect(clear.adaptive?.moves.at(-1)).toEqual({ atMs: T0 + 2 * AC_WINDOW_MS, from: 20 + 2 * STEP, to: 20 + 4 * STEP, reason: 'healthy' });
    });

    it('goes down as far as errors or slow answers are over target (5 % off just over it, a quarter at twice, half at three times), once a boundary is known by 30 % at most, never below the floor, and needs evidence to go down', async () => {
      // A first cut, on a queue of its own each (no boundary known yet): as far as the signal says.
      const firstCut = async (report: Omit<OriginReport, 'pop'>) => {
        const store = create();
        const queue = q();
        await joinMany(store, queue, 100, rate(40, null));
        await store.poll(queue, T0, rate(40, {}, { pop: 'a', ...report }));
        return (await store.stats(queue, T0, rate(40))).adaptive?.moves.at(-1);
      };
      // 6 errors in 100 is over 5 % (1.2 times): 5 % off, 40 -> 38.
      expect(await firstCut({ requests: 100, errors: 6, slow: 0 })).toEqual({ atMs: T0, from: 40, to: 38, reason: 'errors' });
      // 21 slow in 100 is over 20 %: 40 -> 38.
      expect(await firstCut({ requests: 100, errors: 0, slow: 21 })).toEqual({ atMs: T0, from: 40, to: 38, reason: 'slow' });
      // Twice the error target: a quarter off; the worse signal decides (slow is 1.5 times its target).
      expect(await firstCut({ requests: 100, errors: 10, slow: 30 })).toEqual({ atMs: T0, from: 40, to: 30, reason: 'errors' });
      // Three times or more: half.
      expect(await firstCut({ requests: 100, errors: 15, slow: 0 })).toEqual({ atMs: T0, from: 40, to: 20, reason: 'errors' });
      expect(await firstCut({ requests: 100, errors: 90, slow: 0 })).toEqual({ atMs: T0, from: 40, to: 20, reason: 'errors' });

      const store = create();
      const queue = q();
      await joinMany(store, queue, 500, rate(40, null));
      let now = T0;
      const last = async () => (await store.stats(queue, now, rate(40))).adaptive?.moves.at(-1);
      await store.poll(queue, now, rate(40, {}, { pop: 'a', requests: 100, errors: 15, slow: 0 }));
      expect(await last()).toEqual({ atMs: now, from: 40, to: 20, reason: 'errors' });
      // The boundary is known (40): even three times the target now keeps 70 %, 20 -> 14.
      now += AC_WINDOW_MS;
      await store.poll(queue, now, rate(40, {}, { pop: 'a', requests: 100, errors: 15, slow: 0 }));
      expect(await last()).toEqual({ atMs: now, from: 20, to: 14, reason: 'errors' });
      // Fewer than 20 answers since the last move: all failed, yet no move down (and no move up either).
      now += AC_WINDOW_MS;
      await store.poll(queue, now, rate(40, {}, { pop: 'a', requests: 19, errors: 19, slow: 0 }));
      expect((await store.stats(queue, now, rate(40))).adaptive?.value).toBe(14);
      // Down to the floor and no further.
      for (let i = 0; i < 6; i++) {
        now += AC_WINDOW_MS;
        await store.poll(queue, now, rate(40, {}, { pop: 'a', requests: 50, errors: 50, slow: 0 }));
      }
      const floor = await store.stats(queue, now, rate(40));
      expect(floor.adaptive?.value).toBe(10);
      expect(floor.adaptive?.moves.at(-1)?.to).toBe(10);
      // Exactly on target is within it: no cut, but under a known boundary no climb either, since it
      // uses more than half of a target (AC_PROBE_HEADROOM), however long it holds.
      for (let i = 0; i < 3; i++) {
        now += AC_WINDOW_MS;
        await store.poll(queue, now, rate(40, {}, { pop: 'a', requests: 50, errors: 2, slow: 10 }));
        expect((await store.stats(queue, now, rate(40))).adaptive?.value).toBe(10);
      }
      // With half of each target to spare: up, half the way to just under the value last cut from (14).
      now += AC_WINDOW_MS;
      await store.poll(queue, now, rate(40, {}, { pop: 'a', requests: 50, errors: 1, slow: 5 }));
      expect(await last()).toEqual({ atMs: now, from: 10, to: 12, reason: 'healthy' });
    });

    it('steps up only on as many answers since its last move as it needs to step down, however many windows they take (issue 30)', async () => {
      const store = create();
      const queue = q();
      // Enough tickets that people still wait at the last step (calls nobody claims are handed on).
      await joinMany(store, queue, 3_000, rate(20, null), T0 - PERIOD_MS);
      const value = async (now: number) => (await store.stats(queue, now, rate(20))).adaptive?.value;
      // An origin all but idle (the room's first visitors not there yet): healthy, but no evidence.
      for (let i = 0; i < 12; i++) await store.poll(queue, T0 + i * AC_STEP_MS, rate(20, {}, clean('pop-a', i % 3)));
      expect(await value(T0 + 12 * AC_STEP_MS)).toBe(20);
      const t1 = T0 + 20 * AC_WINDOW_MS;
      // 12 answers in a window: not enough; a report 5 s later counts the same answers again: still not.
      await store.poll(queue, t1, rate(20, {}, clean('pop-a', 12)));
      await store.poll(queue, t1 + AC_STEP_MS, rate(20, {}, clean('pop-a', 12)));
      expect(await value(t1 + AC_STEP_MS)).toBe(20);
      // The next window of its own brings 8 more: 20 answers since the last move, all fine: up.
      await store.poll(queue, t1 + AC_WINDOW_MS, rate(20, {}, clean('pop-a', 8)));
      expect(await value(t1 + AC_WINDOW_MS)).toBe(20 + 2 * STEP);
      // The move starts the count over.
      await store.poll(queue, t1 + 3 * AC_WINDOW_MS, rate(20, {}, clean('pop-a', 19)));
      expect(await value(t1 + 3 * AC_WINDOW_MS)).toBe(20 + 2 * STEP);
      // Errors over target in the answers gathered so (19 + 19, 4 failed: 10.5 %) take it down.
      await store.poll(queue, t1 + 4 * AC_WINDOW_MS, rate(20, {}, { pop: 'pop-a', requests: 19, errors: 4, slow: 0 }));
      expect((await store.stats(queue, t1 + 4 * AC_WINDOW_MS, rate(20))).adaptive?.moves.at(-1)).toMatchObject({ from: 20 + 2 * STEP, reason: 'errors' });
    });

    it('its moves shrink as it finds the boundary: half the way back to just under the value cut from, then probes to it and 1, 3, 7 above it, each after a hold and only with half of each target to spare; a probe without that steps back at once; once a boundary is known a cut keeps 70 % whatever the signal (issue 30)', async () => {
      const store = create();
      const queue = q();
      await joinMany(store, queue, 3_000, rate(40, null), T0 - PERIOD_MS);
      let now = T0;
      const at = async (report: OriginReport) => {
        await store.poll(queue, now, rate(40, {}, report));
        return (await store.stats(queue, now, rate(40))).adaptive?.value;
      };
      const failing = (errors: number): OriginReport => ({ pop: 'pop-a', requests: 100, errors, slow: 0 });
      // Three times the error target at 40: half (no boundary known yet), 40 -> 20; 40 is the boundary.
      expect(await at(failing(15))).toBe(20);
      // Healthy: half the way to the boundary each time, at most a step (4), and no further than just
      // under it; each climb only once the last move has been held for AC_PLATEAU_MS (the load has
      // shown it), so a window after a move it holds.
      const climb: number[] = [];
      for (let i = 0; i < 6; i++) {
        now += AC_WINDOW_MS;
        expect(await at(healthy())).toBe(climb.at(-1) ?? 20);
        now += AC_PLATEAU_MS - AC_WINDOW_MS;
        climb.push((await at(healthy()))!);
      }
      expect(climb).toEqual([24, 28, 32, 36, 38, 39]);
      // More people join, so that some still wait through the probes below (the calls nobody claims
      // are handed on, and the holds take long).
      await joinMany(store, queue, 2_000, rate(40, null), now);
      // Just under the boundary it holds for AC_PLATEAU_MS, healthy as the origin is ...
      const reached = now;
      while (now + AC_STEP_MS < reached + AC_PLATEAU_MS) {
        now += AC_STEP_MS;
        expect(await at(healthy())).toBe(39);
      }
      // ... and holds on past it while the origin uses more than half of a target (AC_PROBE_HEADROOM):
      // 4 % errors against 5 %, 15 % slow against 20 % are within target, and the controller stays ...
      now = reached + AC_PLATEAU_MS;
      expect(await at({ pop: 'pop-a', requests: 100, errors: 4, slow: 0 })).toBe(39);
      now += AC_STEP_MS;
      expect(await at({ pop: 'pop-a', requests: 100, errors: 0, slow: 15 })).toBe(39);
      // ... then, with headroom under both (2 % errors, 10 % slow: half of each), probes the boundary,
      // and above it twice as far each window: 41, 43, 47 (a step at most).
      now += AC_STEP_MS;
      expect(await at({ pop: 'pop-a', requests: 100, errors: 2, slow: 10 })).toBe(40);
      for (const expected of [41, 43, 47, 51]) {
        // Each probe only when the last has been held long enough for the load to show it.
        now += AC_WINDOW_MS;
        expect(await at(healthy())).toBe(expected - Math.min(4, Math.max(1, expected - 41)));
        now += AC_PLATEAU_MS - AC_WINDOW_MS;
        expect(await at(healthy())).toBe(expected);
      }
      // A try that uses more than half of a target is undone by one at once, within target as it is
      // (3 % errors against 5 %): 51 -> 50, and 51 is the boundary now.
      now += AC_WINDOW_MS;
      expect(await at({ pop: 'pop-a', requests: 100, errors: 3, slow: 0 })).toBe(50);
      expect((await store.stats(queue, now, rate(40))).adaptive?.moves.at(-1)).toEqual({ atMs: now, from: 51, to: 50, reason: 'errors' });
      // Over target, even three times: a cut to 70 %, 50 -> 35 ...
      now += AC_WINDOW_MS;
      expect(await at(failing(15))).toBe(35);
      // ... and if that was not enough (the site lost capacity), the next ones follow a window apart.
      now += AC_WINDOW_MS;
      expect(await at(failing(15))).toBe(25);
    });

    it('where one more is over a tenth of the value, a retry of the boundary after climbs and tries there failed twice waits two holds, then four; a try that held starts over (issue 30)', async () => {
      const store = create();
      const queue = q();
      // Bounds 2-40: a step is 2. 10-s periods, so that fewer calls go to people who never claim them.
      const small = (count: number, report?: OriginReport): AdmissionPolicy => ({ ...rate(count, report === undefined ? null : { min: 2, max: 40 }, report), auto: { count, periodMs: 10_000 } });
      await joinMany(store, queue, 1_000, small(8), T0 - 10_000);
      let now = T0;
      const at = async (report: OriginReport) => {
        await store.poll(queue, now, small(8, report));
        return (await store.stats(queue, now, small(8))).adaptive?.value;
      };
      const failing: OriginReport = { pop: 'pop-a', requests: 100, errors: 15, slow: 0 };
      /** Healthy windows AC_STEP_MS apart from the last move on: the value after each, until it moves. */
      const holdFor = async (expected: number, holdMs: number, to: number): Promise<void> => {
        const moved = now - AC_WINDOW_MS;
        while (now - moved + AC_STEP_MS < holdMs) {
          expect(await at(healthy())).toBe(expected);
          now += AC_STEP_MS;
        }
        now = moved + holdMs;
        expect(await at(healthy())).toBe(to);
        now += AC_WINDOW_MS;
      };
      // Three times the target at 8, no boundary known: half, 8 -> 4, and 8 is the boundary.
      expect(await at(failing)).toBe(4);
      now += AC_WINDOW_MS;
      // Half the way back to just under it, each after a hold: 6, 7; then the try of 8 itself.
      await holdFor(4, AC_PLATEAU_MS, 6);
      await holdFor(6, AC_PLATEAU_MS, 7);
      await holdFor(7, AC_PLATEAU_MS, 8);
      // The try fails (the first): a cut to 70 %, 6; back to 7, and 8 tried again after one hold.
      expect(await at(failing)).toBe(6);
      now += AC_WINDOW_MS;
      await holdFor(6, AC_PLATEAU_MS, 7);
      await holdFor(7, AC_PLATEAU_MS, 8);
      // The second: back to 7 after one hold, but 8, one more than 7 (over a tenth of it), after two.
      expect(await at(failing)).toBe(6);
      now += AC_WINDOW_MS;
      await holdFor(6, AC_PLATEAU_MS, 7);
      await holdFor(7, 2 * AC_PLATEAU_MS, 8);
      // The third: four holds, the longest.
      expect(await at(failing)).toBe(6);
      now += AC_WINDOW_MS;
      await holdFor(6, AC_PLATEAU_MS, 7);
      await holdFor(7, 4 * AC_PLATEAU_MS, 8);
      // This try holds (more people joined: the calls nobody claimed went through the first ones):
      // on above the boundary (8 -> 9), and the count starts over: 9 fails, and its retry, from
      // just under it, comes after one hold.
      await joinMany(store, queue, 1_000, small(8), now);
      await holdFor(8, AC_PLATEAU_MS, 9);
      expect(await at(failing)).toBe(6);
      now += AC_WINDOW_MS;
      await holdFor(6, AC_PLATEAU_MS, 7);
      await holdFor(7, AC_PLATEAU_MS, 8);
      await holdFor(8, AC_PLATEAU_MS, 9);
    });

    it('does not raise the count while nobody waits, nor move at all while paused or held', async () => {
      const store = create();
      const queue = q();
      await joinMany(store, queue, 3, rate(40, null));
      // 3 tickets, 40 a period: nobody waits after the first step.
      await store.poll(queue, T0, rate(40, {}, healthy()));
      const before = (await store.stats(queue, T0, rate(40))).adaptive?.value;
      await store.poll(queue, T0 + AC_WINDOW_MS, rate(40, {}, healthy()));
      expect((await store.stats(queue, T0 + AC_WINDOW_MS, rate(40))).adaptive?.value).toBe(before);
      await joinMany(store, queue, 100, rate(40, null), T0 + AC_WINDOW_MS);
      await store.control(queue, { paused: true }, T0 + 2 * AC_WINDOW_MS, rate(40));
      await store.poll(queue, T0 + 3 * AC_WINDOW_MS, rate(40, {}, { pop: 'a', requests: 100, errors: 100, slow: 0 }));
      await store.control(queue, { paused: false, switch: 'hold' }, T0 + 4 * AC_WINDOW_MS, rate(40));
      await store.poll(queue, T0 + 5 * AC_WINDOW_MS, rate(40, {}, { pop: 'a', requests: 100, errors: 100, slow: 0 }));
      expect((await store.stats(queue, T0 + 5 * AC_WINDOW_MS, rate(40))).adaptive?.value).toBe(before);
      await store.control(queue, { switch: 'normal' }, T0 + 6 * AC_WINDOW_MS, rate(40));
      await store.poll(queue, T0 + 7 * AC_WINDOW_MS, rate(40, {}, { pop: 'a', requests: 100, errors: 100, slow: 0 }));
      // Every answer failed: the deepest cut, half.
      expect((await store.stats(queue, T0 + 7 * AC_WINDOW_MS, rate(40))).adaptive?.value).toBe(Math.floor((before ?? 0) / 2));
    });

    it('sums the fresh reports of every POP; a POP\'s new report replaces its old one; old reports do not count', async () => {
      const store = create();
      const queue = q();
      await joinMany(store, queue, 100, rate(20, null), T0 - PERIOD_MS);
      // Two POPs in different slots.
      const [a, b] = ['pop-a', 'pop-b'];
      expect(reportSlot(a)).not.toBe(reportSlot(b));
      // The step at the first join sees a's report alone: too few requests to go down, too many
      // errors to go up.
      await store.join(queue, T0, rate(20, {}, { pop: a, requests: 10, errors: 1, slow: 0 }));
      await store.join(queue, T0, rate(20, {}, { pop: b, requests: 30, errors: 0, slow: 3 }));
      let stats = await store.stats(queue, T0, rate(20));
      expect(stats.adaptive?.signals).toEqual({ atMs: T0, requests: 10, errors: 1, slow: 0, pops: 1 });
      expect(stats.adaptive?.moves).toEqual([]);
      // The next step sums a's new report (which replaced its first) and b's.
      const t1 = T0 + AC_STEP_MS;
      await store.poll(queue, t1, rate(20, {}, { pop: a, requests: 10, errors: 1, slow: 0 }));
      stats = await store.stats(queue, t1, rate(20));
      expect(stats.adaptive?.signals).toEqual({ atMs: t1, requests: 40, errors: 1, slow: 3, pops: 2 });
      // Healthy, but the load rose by more than a tenth since the last step (10 to 40): no move up
      // while it is still rising.
      expect(stats.adaptive?.moves).toEqual([]);
      // After the window, b's report is too old to count, and a's alone says: errors.
      const t3 = t1 + AC_WINDOW_MS + 1;
      await store.poll(queue, t3, rate(20, {}, { pop: a, requests: 25, errors: 25, slow: 0 }));
      stats = await store.stats(queue, t3, rate(20));
      expect(stats.adaptive?.signals).toEqual({ atMs: t3, requests: 25, errors: 25, slow: 0, pops: 1 });
      // Not falling against t1's 40 by a tenth? 25 is: so the step waits, and the next one cuts.
      expect(stats.adaptive?.moves).toEqual([]);
      const t4 = t3 + AC_STEP_MS;
      await store.poll(queue, t4, rate(20, {}, { pop: a, requests: 25, errors: 25, slow: 0 }));
      stats = await store.stats(queue, t4, rate(20));
      expect(stats.adaptive?.moves.at(-1)).toEqual({ atMs: t4, from: 20, to: 10, reason: 'errors' });
    });

    it('capacity mode moves max active: the learned value is the threshold a walk-in meets', async () => {
      const store = create();
      const queue = q();
      // Configured 50, bounds 1..40: the controller starts at 40, then an error report (twice the
      // 5 % target) takes a quarter of the room away.
      const p = (report?: OriginReport) => capacity(50, report, { min: 1, max: 40 });
      const first = await store.join(queue, T0, p({ pop: 'a', requests: 100, errors: 10, slow: 0 }));
      expect(first.maxActive).toBe(30);
      expect((await store.stats(queue, T0, p())).adaptive).toMatchObject({ knob: 'max_active', value: 30 });
      let walkedIn = first.claimed ? 1 : 0;
      for (let i = 0; i < 40; i++) if ((await store.join(queue, T0 + 1, p())).claimed) walkedIn += 1;
      expect(walkedIn).toBe(30);
    });

    it('the console switches it either way and hands it back; a pin holds until released, and both are in the moves', async () => {
      const store = create();
      const queue = q();
      await joinMany(store, queue, 100, rate(20, null));
      await store.poll(queue, T0, rate(20, { enabled: false }, healthy()));
      expect((await store.stats(queue, T0, rate(20))).adaptive).toMatchObject({ enabled: false, source: 'config' });
      await store.control(queue, { adaptive: 'on' }, T0 + 1, rate(20));
      await store.poll(queue, T0 + 2, rate(20, { enabled: false }, healthy()));
      let stats = await store.stats(queue, T0 + 2, rate(20));
      expect(stats.adaptive).toMatchObject({ enabled: true, source: 'console', value: 20 + STEP });
      // Pinned: no step moves it, whatever the reports say.
      await store.control(queue, { adaptivePin: 15 }, T0 + 3, rate(20));
      await store.poll(queue, T0 + AC_WINDOW_MS + 3, rate(20, { enabled: false }, { pop: 'pop-a', requests: 100, errors: 100, slow: 0 }));
      stats = await store.stats(queue, T0 + AC_WINDOW_MS + 3, rate(20));
      expect(stats.adaptive).toMatchObject({ value: 15, pinned: true });
      // Released: learning resumes from the pinned value.
      await store.control(queue, { adaptivePin: null }, T0 + AC_WINDOW_MS + 4, rate(20));
      await store.poll(queue, T0 + 3 * AC_WINDOW_MS, rate(20, { enabled: false }, { pop: 'pop-a', requests: 100, errors: 100, slow: 0 }));
      stats = await store.stats(queue, T0 + 3 * AC_WINDOW_MS, rate(20));
      // Every answer failed: half of 15, held at the floor of 10.
      expect(stats.adaptive).toMatchObject({ value: 10, pinned: false });
      expect(stats.adaptive?.moves.map((m) => [m.from, m.to, m.reason])).toEqual([
        [20, 20 + STEP, 'healthy'],
        [20 + STEP, 15, 'pinned'],
        [15, 15, 'released'],
        [15, 10, 'errors'],
      ]);
      // Off from the console: the configured count again; null hands it back to the configuration.
      await store.control(queue, { adaptive: 'off' }, T0 + 3 * AC_WINDOW_MS + 1, rate(20));
      expect((await store.stats(queue, T0 + 3 * AC_WINDOW_MS + 1, rate(20))).adaptive).toMatchObject({ enabled: false, source: 'console' });
      await store.control(queue, { adaptive: null }, T0 + 3 * AC_WINDOW_MS + 2, rate(20));
      expect((await store.stats(queue, T0 + 3 * AC_WINDOW_MS + 2, rate(20))).adaptive).toMatchObject({ enabled: false, source: 'config' });
    });

    it('capacity mode: a threshold set by hand while the controller is on pins it, and back to the configured value releases it', async () => {
      const store = create();
      const queue = q();
      const p = (report?: OriginReport) => capacity(50, report, { min: 1, max: 40 });
      await store.join(queue, T0, p(healthy()));
      await store.control(queue, { maxActive: 12 }, T0 + 1, p());
      let stats = await store.stats(queue, T0 + 1, p());
      expect(stats.maxActive).toBe(12);
      expect(stats.adaptive).toMatchObject({ value: 12, pinned: true });
      // Reports do not move a pinned value.
      await store.join(queue, T0 + AC_WINDOW_MS + 2, p({ pop: 'pop-a', requests: 100, errors: 100, slow: 0 }));
      expect((await store.stats(queue, T0 + AC_WINDOW_MS + 2, p())).maxActive).toBe(12);
      await store.control(queue, { maxActive: null }, T0 + AC_WINDOW_MS + 3, p());
      stats = await store.stats(queue, T0 + AC_WINDOW_MS + 3, p());
      expect(stats.adaptive).toMatchObject({ value: 12, pinned: false });
      expect(stats.adaptive?.moves.map((m) => m.reason).slice(-2)).toEqual(['pinned', 'released']);
      // Switched off, a threshold by hand is only that.
      await store.control(queue, { adaptive: 'off' }, T0 + AC_WINDOW_MS + 4, p());
      await store.control(queue, { maxActive: 7 }, T0 + AC_WINDOW_MS + 5, p());
      stats = await store.stats(queue, T0 + AC_WINDOW_MS + 5, p());
      expect(stats.maxActive).toBe(7);
      expect(stats.adaptive).toMatchObject({ enabled: false, pinned: false });
    });

    it('waits for the load to settle: no move up while it still rises, no move down while it already falls', async () => {
      const store = create();
      const queue = q();
      await joinMany(store, queue, 3_000, rate(40, null), T0 - PERIOD_MS);
      const step = async (i: number, requests: number, slow: number) => {
        await store.poll(queue, T0 + i * AC_WINDOW_MS, rate(40, {}, { pop: 'pop-a', requests, errors: 0, slow }));
        return (await store.stats(queue, T0 + i * AC_WINDOW_MS, rate(40))).adaptive?.value;
      };
      expect(await step(0, 1000, 10)).toBe(40 + STEP);
      // Up by more than a tenth (and more than chance moves a count of 1000 by): still rising from the raise.
      expect(await step(1, 1110, 10)).toBe(40 + STEP);
      // Up by a tenth or less: settled, healthy: up again.
      expect(await step(2, 1220, 10)).toBe(40 + 2 * STEP);
      // 400 slow of 1300 is 1.54 times the 20 % target: 13.5 % off, 48 -> 42 (41.5, rounded).
      expect(await step(3, 1300, 400)).toBe(42);
      // Still slow, but the load fell by more than a tenth: the cut is showing, let it.
      expect(await step(4, 1160, 300)).toBe(42);
      // Still slow (1.36 times the target) and no longer falling: down again, 42 -> 38.
      expect(await step(5, 1100, 300)).toBe(38);
      // Healthy, but the cut is a window old: it holds until the load has shown it (AC_PLATEAU_MS) ...
      expect(await step(6, 24, 0)).toBe(38);
      // ... then up, half the way to just under the value last cut from (42). Small counts jump by
      // more than a tenth on their own: 30 answers after 24 is no rise (less than twice the square
      // root of 24 more), and the healthy window moves up.
      expect(await step(7, 30, 0)).toBe(40);
      expect(await step(8, 30, 0)).toBe(40);
      expect(await step(9, 30, 0)).toBe(41);
    });

    it('keeps the last moves only', async () => {
      const store = create();
      const queue = q();
      // Enough tickets that people still wait at the last step (calls nobody claims are handed on).
      await joinMany(store, queue, 3_000, rate(20, null));
      for (let i = 0; i < ADAPTIVE_LOG + 5; i++) await store.poll(queue, T0 + i * AC_WINDOW_MS, rate(20, {}, healthy()));
      const moves = (await store.stats(queue, T0 + 100 * AC_WINDOW_MS, rate(20))).adaptive?.moves ?? [];
      expect(moves).toHaveLength(ADAPTIVE_LOG);
      expect(moves.at(-1)).toMatchObject({ atMs: T0 + (ADAPTIVE_LOG + 4) * AC_WINDOW_MS, to: 20 + (ADAPTIVE_LOG + 5) * STEP });
    });

    it('refuses nonsense settings, reports and controls, changing nothing', async () => {
      const store = create();
      const queue = q();
      await joinMany(store, queue, 10, rate(2, null));
      const before = await store.stats(queue, T0, rate(2));
      const bad: Partial<AdaptivePolicy>[] = [{ min: 0 }, { min: 20, max: 10 }, { errorPercent: 101 }, { slowPercent: -1 }, { max: 1.5 }, { enabled: 'yes' as unknown as boolean }];
      for (const b of bad) await expect(store.poll(queue, T0, rate(2, b, healthy()))).rejects.toBeInstanceOf(StoreArgumentError);
      for (const r of [{ pop: '', requests: 1, errors: 0, slow: 0 }, { pop: 'a:b', requests: 1, errors: 0, slow: 0 }, { pop: 'x'.repeat(33), requests: 1, errors: 0, slow: 0 }, { pop: 'a', requests: -1, errors: 0, slow: 0 }]) {
        await expect(store.join(queue, T0, rate(2, {}, r))).rejects.toBeInstanceOf(StoreArgumentError);
      }
      for (const change of [{ adaptive: 'maybe' }, { adaptivePin: 0 }, { adaptivePin: 2.5 }]) {
        await expect(store.control(queue, change as never, T0, rate(2))).rejects.toBeInstanceOf(StoreArgumentError);
      }
      const stats = await store.stats(queue, T0, rate(2));
      expect(stats).toEqual(before);
      expect(stats.adaptive).toBeUndefined();
    });
  });
}

/** A seeded run of joins, polls, controls and stats with reports from several POPs. */
async function randomRun(store: QueueStore, queue: string, seed: number): Promise<unknown[]> {
  const next = seededRandom(seed);
  const out: unknown[] = [];
  let now = T0;
  const pops = ['ams', 'fra', 'lhr', 'nrt', 'sjc'];
  const capacityMode = next() < 0.5;
  const policy = (report?: OriginReport): AdmissionPolicy => (capacityMode ? capacity(30, report, { min: 2, max: 60 }) : rate(8, { min: 2, max: 60 }, report));
  for (let i = 0; i < 160; i++) {
    now += Math.floor(next() * 3_000);
    const u = next();
    const requests = Math.floor(next() * 60);
    const report = { pop: pops[Math.floor(next() * pops.length)]!, requests, errors: Math.floor(next() * next() * requests * 0.3), slow: Math.floor(next() * next() * requests * 0.5) };
    if (u < 0.45) out.push(await store.join(queue, now, policy(report)));
    else if (u < 0.8) out.push(await store.poll(queue, now, policy(report)));
    else if (u < 0.85) out.push(await store.control(queue, next() < 0.5 ? { adaptivePin: 1 + Math.floor(next() * 30) } : { adaptivePin: null }, now, policy()));
    else if (u < 0.88) out.push(await store.control(queue, { paused: next() < 0.3 }, now, policy()));
    else if (u < 0.9) out.push(await store.control(queue, next() < 0.5 ? { maxActive: next() < 0.5 ? null : 1 + Math.floor(next() * 40) } : { adaptive: next() < 0.5 ? 'off' : next() < 0.5 ? 'on' : null }, now, policy()));
    else out.push(await store.stats(queue, now, policy()));
  }
  return out;
}

describe('adaptive admission on every store', () => {
  const stores = useEveryStore();

  describeAdaptive('MemoryQueueStore', stores.memory);
  describeAdaptive('UpstashQueueStore', stores.upstash);
  describeAdaptive('Redis store', () => stores.redis());

  it('answers a seeded random run of calls the same, call by call, on all three stores', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const queue = q();
      const memory = await expectSameOnEveryStore(stores, (store) => randomRun(store, queue, seed));
      // The run moved the value, so the comparison covered the controller.
      const moves = memory.flatMap((r) => ((r as { adaptive?: { moves: unknown[] } }).adaptive?.moves ?? []));
      expect(moves.length).toBeGreaterThan(0);
    }
  });

  it('a store that forgets its state mid-sale: the next poll carries the settings again and the controller starts over from the configured value', async () => {
    const prefix = `wrf-${randomUUID().slice(0, 8)}`;
    const store = stores.redis(prefix);
    const direct = stores.connection();
    const queue = q();
    await joinMany(store, queue, 200, rate(20, null), T0 - PERIOD_MS);
    await store.poll(queue, T0, rate(20, {}, healthy()));
    await store.poll(queue, T0 + AC_WINDOW_MS, rate(20, {}, healthy()));
    expect((await store.stats(queue, T0 + AC_WINDOW_MS, rate(20))).adaptive?.value).toBe(20 + 2 * STEP);
    // Everything under the prefix goes, as in a restart without persistence.
    const keys = await direct.keys(`${prefix}:*`);
    expect(keys.length).toBeGreaterThan(0);
    await direct.del(...keys);
    expect((await store.stats(queue, T0 + AC_WINDOW_MS + 1, rate(20))).adaptive).toBeUndefined();
    await store.poll(queue, T0 + 2 * AC_WINDOW_MS, rate(20, {}, healthy()));
    const stats = await store.stats(queue, T0 + 2 * AC_WINDOW_MS, rate(20));
    expect(stats.adaptive).toMatchObject({ enabled: true, value: 20, min: 10, max: 90, moves: [] });
    // Nobody waits in the new life of the queue: the healthy report raises nothing.
    expect(stats.adaptive?.signals).toMatchObject({ requests: 100, pops: 1 });
  });

  it('spreads POP names over the report slots', () => {
    const slots = new Set(Array.from({ length: 200 }, (_, i) => reportSlot(`pop-${i}`)));
    expect(slots.size).toBe(AC_SLOTS);
  });
});
