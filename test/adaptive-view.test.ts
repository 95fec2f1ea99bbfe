/**
 * The console's words for adaptive admission, from one stats answer: whether it is on and who said
 * so, the value and its bounds, what the last step saw, and the last move with its reason.
 */
import { describe, expect, it } from 'vitest';
import { adaptiveText } from '../src/core/admin-view';
import { parseConfig } from '../src/core/config';
import type { AdaptiveStatus, QueueStats } from '../src/core/ports';
import { source } from './support/fixtures';

const NOW = Date.UTC(2026, 10, 26, 12, 0, 40);
const STATS: QueueStats = {
  tail: 100, cursor: 40, paused: false, maxActive: 0, maxNewPerMinute: 0, active: 0, admittedLastMinute: 20, admittedLast5Minutes: 90,
  reserved: 0, avgWaitSeconds: null, eventSize: 0, eventSeed: 0, waiting: 0, epoch: 0, generation: 1,
};
const STATUS: AdaptiveStatus = {
  enabled: true, source: 'config', knob: 'admit_per_period', value: 42, pinned: false, min: 10, max: 90, errorPercent: 2, slowPercent: 10,
  signals: { atMs: NOW - 3_000, requests: 1_200, errors: 30, slow: 60, pops: 3 },
  moves: [{ atMs: NOW - 20_000, from: 56, to: 42, reason: 'slow' }],
};
const config = (mode: string) => parseConfig(source({ queue_name: 'default', admit_per_period: '40', adaptive_admission: mode }));

describe('the console on adaptive admission', () => {
  it('says what it learned, within which bounds, what it saw and why it last moved', () => {
    const text = adaptiveText({ ...STATS, adaptive: STATUS }, config('on'), NOW);
    expect(text).toBe('learned 42 visitors a period (bounds 10 – 90); 1,200 origin answers from 3 POPs in the 10 s before 2026-11-26 12:00 UTC: 2.5 % errors (target 2 %), 5.0 % slow (target 10 %); last move 56 → 42, down: slow answers over target, 20 s ago');
  });
  it('says when it is pinned, switched here, off, or has heard nothing yet', () => {
    expect(adaptiveText({ ...STATS, adaptive: { ...STATUS, pinned: true, source: 'console', value: 7, signals: null, moves: [] } }, config('on'), NOW)).toBe(
      'pinned at 7 visitors a period (bounds 10 – 90, switched on here); no origin answers counted yet; no move yet',
    );
    expect(adaptiveText({ ...STATS, adaptive: { ...STATUS, enabled: false, source: 'console' } }, config('on'), NOW)).toBe('off (switched off here); bounds 10 – 90');
    expect(adaptiveText(STATS, config('standby'), NOW)).toBe('no report from the edge yet');
    expect(adaptiveText(STATS, config('off'), NOW)).toBe('off in the configuration (adaptive_admission = off)');
    expect(adaptiveText({ ...STATS, maxActive: 300, adaptive: { ...STATUS, knob: 'max_active', value: 300 } }, config('on'), NOW)).toMatch(/^learned 300 at once/);
  });
});
