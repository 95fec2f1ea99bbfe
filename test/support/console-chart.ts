/**
 * What the admin console shows as its latest figures, read from the page in a real browser: the
 * tiles for waiting and let in last minute, and the chart's latest point (each series' dot, its
 * value and its tooltip), at the same moment.
 */
import type { Page } from 'playwright-core';

export interface TilesAndChart {
  /** The waiting and let-in-last-minute tiles, as shown. */
  readonly tiles: readonly [string, string];
  /** The chart's waiting and let-in dots as `<value> / <tooltip>`, null when missing. */
  readonly chart: readonly [string | null, string | null];
}

export function readTilesAndChart(admin: Page): Promise<TilesAndChart> {
  return admin.evaluate(() => {
    const text = (selector: string): string => document.querySelector(selector)?.textContent ?? '';
    const dot = (series: string): string | null => {
      const circle = document.querySelector(`#chart circle.${series}`);
      return circle === null ? null : `${circle.getAttribute('data-value')} / ${circle.querySelector('title')?.textContent}`;
    };
    return { tiles: [text('[data-figure=waiting]'), text('[data-figure=admitted_last_minute]')], chart: [dot('waiting'), dot('admitted')] } as TilesAndChart;
  });
}

/** What the chart's latest point must say beside these tiles. */
export function chartFor([waiting, admitted]: readonly [string, string]): readonly [string, string] {
  return [`${waiting.replace(/,/g, '')} / ${waiting} waiting now`, `${admitted.replace(/,/g, '')} / ${admitted} let in during the last minute`];
}
