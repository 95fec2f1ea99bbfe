/**
 * What the console says when the queue store does not answer, in one place: the 503 page a reload
 * shows and the banner at the top of a console left open say it in the same words.
 */
import type { Config } from './config';

/** How often the console's store-down page asks whether the store answers again, seconds. */
export const STORE_DOWN_RETRY_SECONDS = 10;

export interface StoreDownText {
  readonly title: string;
  /** What still works without the store, and what waits for it. */
  readonly kept: string;
  readonly visitors: string;
  readonly waits: string;
}

export function storeDownText(config: Readonly<Pick<Config, 'storeFailure'>>): StoreDownText {
  return {
    title: 'The queue store is not answering',
    kept: 'Visitors already let in keep their access: their signed cookies are checked at the edge, without the store.',
    visitors:
      config.storeFailure === 'hold'
        ? 'New and waiting visitors see the "checking your place" page (store_failure = hold): nobody loses a place, nobody new gets in.'
        : 'New and waiting visitors are let through to the site (store_failure = pass).',
    waits: 'Figures, admits, pause, thresholds, the emergency switches and reset: they are store writes. Try again once it answers.',
  };
}

/** The alert's sentence: the queue, what the store answered, and what the page does about it. */
export function storeDownAlert(queue: string, reason: string, everySeconds: number, then: string): string {
  return `Queue ${queue}: ${reason}. This page asks again every ${everySeconds} seconds and ${then} as soon as the store answers.`;
}
