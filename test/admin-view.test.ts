/**
 * The console's tiles and its chart come from one stats answer and agree: the chart's latest point
 * is the figures the tiles show, not the last recorded minute (which can be a minute old or more).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { adminPanel } from '../src/core/admin-view';
import { parseConfig } from '../src/core/config';
import type { HistoryPoint, QueueStats } from '../src/core/ports';
import { source } from './support/fixtures';

const NOW = Date.UTC(2026, 10, 22, 12, 0, 40);
const MINUTE = Math.floor(NOW / 60_000) * 60_000;

function stats(overrides: Partial<QueueStats>): QueueStats {
  return {
    tail: 0,
    cursor: 0,
    paused: false,
    maxActive: 0,
    maxNewPerMinute: 0,
    active: 0,
    admittedLastMinute: 0,
    admittedLast5Minutes: 0,
    reserved: 0,
    avgWaitSeconds: null,
    eventSize: 0,
    eventSeed: 0,
    waiting: 0,
    epoch: 0,
    generation: 1,
    ...overrides,
  };
}

const point = (atMs: number, waiting: number, admittedLastMinute: number): HistoryPoint => ({ atMs, tail: waiting, cursor: 0, waiting, active: 0, admittedLastMinute });

/** What the chart says its latest point is: each series' dot (value, centre, tooltip) and its line's last vertex. */
function latestOf(chart: string, series: 'waiting' | 'admitted'): { value: number; cx: string; cy: string; title: string; lineEnd: string | undefined } {
  const dot = new RegExp(`<circle class="${series}" data-value="(\\d+)" cx="([\\d.]+)" cy="([\\d.]+)" r="[\\d.]+"><title>([^<]*)</title></circle>`).exec(chart);
  expect(dot, `the ${series} dot`).not.toBeNull();
  const line = new RegExp(`<polyline class="${series}" points="([^"]+)"`).exec(chart)?.[1]?.split(' ').at(-1);
  return { value: Number(dot![1]), cx: dot![2]!, cy: dot![3]!, title: dot![4]!, lineEnd: line };
}

const count = (figure: string): number => Number(figure.replace(/,/g, ''));

describe('the console chart and its tiles', () => {
  it('ends the chart at the figures the tiles show, not at the minute recorded before a rush', () => {
    const config = parseConfig(source({ max_active: '500' }));
    // This minute's point was recorded at its first writing run: 1,200 waiting, 30 let in. Since
    // then 4,200 more joined and 45 more went in.
    const history = [point(MINUTE - 120_000, 800, 20), point(MINUTE - 60_000, 1000, 25), point(MINUTE, 1200, 30)];
    const now = stats({ tail: 6000, cursor: 600, maxActive: 500, active: 480, admittedLastMinute: 75, history });
    const { figures, chart } = adminPanel(now, config, NOW);
    expect(figures.waiting).toBe('5,400');
    expect(figures.admitted_last_minute).toBe('75');

    const waiting = latestOf(chart, 'waiting');
    expect(waiting.value).toBe(count(figures.waiting));
    expect(waiting.title).toBe(`${figures.waiting} waiting now`);
    const admitted = latestOf(chart, 'admitted');
    expect(admitted.value).toBe(count(figures.admitted_last_minute));
    expect(admitted.title).toBe(`${figures.admitted_last_minute} let in during the last minute`);
    // Both lines run on to that dot at "now" (the right end of the plot), after the recorded minutes.
    expect(waiting.lineEnd).toBe(`${waiting.cx},${waiting.cy}`);
    expect(admitted.lineEnd).toBe(`${admitted.cx},${admitted.cy}`);
    expect(/<polyline class="waiting" points="([^"]+)"/.exec(chart)![1]!.split(' ')).toHaveLength(history.length + 1);
    // The scale takes the figures now: the dot is at the top of a 0–10,000 scale, not off the chart.
    expect(chart).toContain('waiting (scale 0–10,000, left axis)');
    expect(chart).toContain('let in per minute (scale 0–100, right axis)');
    // The screen-reader summary says the same as the tiles.
    expect(chart).toContain('5,400 waiting now (most 5,400); 75 let in during the last minute (most 75).');
    expect(chart).not.toContain('1,200 waiting now');
  });

  it('counts waiting as the tiles do in a random draw: the visitors present, not tail minus cursor', () => {
    const config = parseConfig(source({ queue_method: 'random' }));
    const { figures, chart } = adminPanel(stats({ tail: 900, cursor: 100, waiting: 312, history: [point(MINUTE, 250, 0)] }), config, NOW);
    expect(figures.waiting).toBe('312');
    expect(latestOf(chart, 'waiting').value).toBe(312);
  });

  it('shows the figures now when the store has recorded no minute yet', () => {
    const config = parseConfig(source({}));
    const { figures, chart } = adminPanel(stats({ tail: 7, cursor: 2, admittedLastMinute: 2 }), config, NOW);
    expect(latestOf(chart, 'waiting')).toMatchObject({ value: 5, title: `${figures.waiting} waiting now` });
    expect(latestOf(chart, 'admitted')).toMatchObject({ value: 2, title: `${figures.admitted_last_minute} let in during the last minute` });
    expect(chart).toContain('No figures recorded in the last hour yet. Now: 5 waiting now; 2 let in during the last minute.');
  });

  it('agrees for any history and any figures now', () => {
    const history = fc.array(
      fc.record({ minutesAgo: fc.integer({ min: -2, max: 70 }), waiting: fc.nat(2_000_000), admitted: fc.nat(100_000) }),
      { maxLength: 70 },
    );
    const figuresNow = fc.record({ tail: fc.nat(2_000_000), called: fc.nat(2_000_000), present: fc.nat(2_000_000), admitted: fc.nat(100_000), random: fc.boolean() });
    fc.assert(
      fc.property(history, figuresNow, (minutes, n) => {
        const config = parseConfig(source(n.random ? { queue_method: 'random' } : {}));
        const points = minutes
          .map((m) => point(MINUTE - m.minutesAgo * 60_000, m.waiting, m.admitted))
          .sort((a, b) => a.atMs - b.atMs);
        const now = stats({ tail: n.tail, cursor: Math.min(n.tail, n.called), waiting: n.present, admittedLastMinute: n.admitted, history: points });
        const { figures, chart } = adminPanel(now, config, NOW);
        const waiting = latestOf(chart, 'waiting');
        const admitted = latestOf(chart, 'admitted');
        expect(waiting.value).toBe(count(figures.waiting));
        expect(waiting.title).toBe(`${figures.waiting} waiting now`);
        expect(admitted.value).toBe(count(figures.admitted_last_minute));
        expect(admitted.title).toBe(`${figures.admitted_last_minute} let in during the last minute`);
        // Drawn inside the plot (the scale reaches it) and at the end of its line when there is one.
        for (const dot of [waiting, admitted]) {
          expect(Number(dot.cy)).toBeGreaterThanOrEqual(14);
          expect(Number(dot.cy)).toBeLessThanOrEqual(154);
          if (dot.lineEnd !== undefined) expect(dot.lineEnd).toBe(`${dot.cx},${dot.cy}`);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('the console chart over a whole sale, and the wait where the store records none', () => {
  it('covers the sale from its reset when that is over an hour ago: the span not kept per minute is shaded, each axis has its own scale', () => {
    const config = parseConfig(source({ admit_per_period: '5' }));
    const history = [point(MINUTE - 120_000, 40, 5), point(MINUTE - 60_000, 45, 5)];
    const { chart } = adminPanel(stats({ tail: 60, cursor: 10, admittedLastMinute: 5, epoch: NOW - 3 * 3_600_000, history }), config, NOW);
    expect(chart).toContain('<title id="chart-title">Queue length and admissions, since 09:00 UTC</title>');
    expect(chart).toContain('Since the sale began at 09:00 UTC (minutes before the first recorded point are shaded)');
    expect(chart).toContain('<rect class="unrecorded"');
    expect(chart).toContain('not recorded');
    // One scale per axis: the waiting scale on the left, the let-in scale on the right.
    expect(chart).toMatch(/<text x="38" y="14.0" class="axis axis-waiting"[^>]*>50<\/text>/);
    expect(chart).toMatch(/<text x="602" y="14.0" class="axis axis-admitted"[^>]*>5<\/text>/);
    expect(chart).toMatch(/class="axis axis-admitted"[^>]*>2.5<\/text>/);
    // Within the last hour it is the last hour, as before.
    expect(adminPanel(stats({ tail: 60, cursor: 10, epoch: NOW - 600_000, history }), config, NOW).chart).toContain('Queue length and admissions, last hour');
  });

  it('estimates the average wait of rate mode from when the tickets called were handed out', () => {
    // Ticket 30 was handed out a quarter of the way from minute −4 (tail 20) to minute −3 (tail 60).
    const at = (minutesAgo: number, tail: number, cursor: number): HistoryPoint => ({ atMs: MINUTE - minutesAgo * 60_000, tail, cursor, waiting: tail - cursor, active: 0, admittedLastMinute: 0 });
    const history = [at(6, 0, 0), at(4, 20, 0), at(3, 60, 0), at(0, 80, 30)];
    const now = stats({ tail: 80, cursor: 30, history });
    // At minute 0 (40 s before now) ticket 30 had waited 3 min 45 s; now 4 min 25 s: about 4 minutes.
    const config = parseConfig(source({ admit_per_period: '10' }));
    expect(adminPanel(now, config, NOW).figures.avg_wait).toBe('about 4 minutes (estimated)');
    // Called ahead of the tail: walk-ins waited nothing.
    expect(adminPanel(stats({ tail: 80, cursor: 90, history: [at(1, 70, 75)] }), config, NOW).figures.avg_wait).toBe('less than a minute (estimated)');
    // A measured average wins; without any point kept there is nothing to say.
    expect(adminPanel({ ...now, avgWaitSeconds: 30 }, config, NOW).figures.avg_wait).toBe('less than a minute');
    expect(adminPanel(stats({ tail: 80, cursor: 30 }), config, NOW).figures.avg_wait).toBe('–');
  });
});
