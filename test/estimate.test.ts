import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/core/config';
import { describeEstimate, estimateWait, formatDuration } from '../src/core/estimate';
import type { QueueState } from '../src/core/ports';

const config = parseConfig(() => undefined);
const state: QueueState = { tail: 1000, cursor: 100, paused: false, maxActive: 0, maxNewPerMinute: 0, active: 0, admittedLastMinute: 0, admittedLast5Minutes: 0, eventSize: 0, eventSeed: 0, waiting: 0, epoch: 0, generation: 1 };

describe('estimateWait', () => {
  it('uses the measured rate once enough visitors were let in', () => {
    // 150 in five minutes = 0.5/s; 30 in the last minute = 0.5/s: position 60 → 120 s.
    expect(estimateWait(59, { ...state, admittedLast5Minutes: 150, admittedLastMinute: 30 }, config)).toEqual({ seconds: 120, basis: 'measured' });
    // A faster last minute wins: 120 in the last minute = 2/s → 30 s.
    expect(estimateWait(59, { ...state, admittedLast5Minutes: 150, admittedLastMinute: 120 }, config)).toEqual({ seconds: 30, basis: 'measured' });
  });

  it('falls back to the configured rate, and says so, before there is data', () => {
    expect(estimateWait(59, { ...state, maxActive: 100, maxNewPerMinute: 30, admittedLast5Minutes: 2 }, config)).toEqual({ seconds: 120, basis: 'configured' });
    const rate = parseConfig((k) => ({ admit_per_period: '10', admit_period_seconds: '60' })[k]);
    expect(estimateWait(9, state, rate)).toEqual({ seconds: 60, basis: 'configured' });
  });

  it('does not pretend the planned rate applies while the site is full: slots free as sessions end', () => {
    // The planned 100 a minute would say 2 s; three slots of 300-s sessions free one every 100 s.
    expect(estimateWait(1, { ...state, maxActive: 3, active: 3, maxNewPerMinute: 100 }, config)).toEqual({ seconds: 200, basis: 'configured' });
    expect(estimateWait(1, { ...state, maxActive: 3, active: 2, maxNewPerMinute: 60 }, config)).toEqual({ seconds: 2, basis: 'configured' });
  });

  it('never says "less than a minute" for a site the rush has just filled with 30-minute sessions', () => {
    const long = parseConfig((k) => ({ session_seconds: '1800', max_active: '300' })[k]);
    // 300 let in over the last five minutes (the rush), none in the last one: the site is full.
    const full = { ...state, maxActive: 300, active: 300, admittedLast5Minutes: 300, admittedLastMinute: 0 };
    const estimate = estimateWait(99, full, long);
    expect(estimate).toEqual({ seconds: 600, basis: 'configured' });
    expect(formatDuration(estimate.seconds!)).toBe('about 10 minutes');
    // Turnover measured in the last minute counts once there is some.
    expect(estimateWait(99, { ...full, admittedLastMinute: 20 }, long)).toEqual({ seconds: 300, basis: 'measured' });
    // Paused: no number.
    expect(estimateWait(99, { ...full, paused: true }, long).seconds).toBeNull();
  });

  it('gives no number when there is nothing to go on', () => {
    expect(estimateWait(10, state, config)).toEqual({ seconds: null, basis: 'none' });
    expect(describeEstimate({ seconds: null, basis: 'none' })).toMatch(/cannot estimate/);
  });

  it('says which basis it used', () => {
    expect(describeEstimate({ seconds: 600, basis: 'measured' })).toBe('Estimated wait: about 10 minutes, from the pace visitors are being let in.');
    expect(describeEstimate({ seconds: 600, basis: 'configured' })).toContain('planned pace');
  });
});

describe('formatDuration without Intl', () => {
  it.each([
    [0, 'less than a minute'],
    [59, 'less than a minute'],
    [60, 'about 1 minute'],
    [89, 'about 1 minute'],
    [90, 'about 2 minutes'],
    [3540, 'about 59 minutes'],
    [3600, 'about 1 hour'],
    [4800, 'about 1 hour 20 minutes'],
    [7170, 'about 2 hours'],
    [5 * 3600 + 1700, 'about 5 hours'],
  ])('%d s is %s', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
  });
});
