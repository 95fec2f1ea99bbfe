/**
 * How long a waiting visitor will likely wait, from the admission rate the store measured (not
 * only the configured one), and a duration in words without `Intl` (the Fastly engine has none).
 */
import type { Config } from './config';
import type { QueueState } from './ports';

export interface WaitEstimate {
  /** Seconds until this visitor is likely let in; null when there is nothing to go on. */
  readonly seconds: number | null;
  /** `measured`: from recent admissions; `configured`: from the configured rate (no data yet); `none`. */
  readonly basis: 'measured' | 'configured' | 'none';
}

/** Admissions needed in the last five minutes before the measured rate is trusted. */
export const MIN_MEASURED_ADMISSIONS = 5;

export function estimateWait(ahead: number, state: QueueState, config: Readonly<Config>): WaitEstimate {
  const position = ahead + 1;
  // While the site is full, visitors wait for others to leave: the pace of the last five minutes
  // (the rush that filled it) says nothing then. Measured from the last minute's turnover when
  // there is some, else from how long sessions last: each slot frees at least once per session.
  const full = state.maxActive > 0 && state.active >= state.maxActive;
  if (full) {
    // Paused on top of it, nobody is called when a slot frees: there is nothing to go on.
    if (state.paused) return { seconds: null, basis: 'none' };
    if (state.admittedLastMinute >= MIN_MEASURED_ADMISSIONS) return { seconds: Math.ceil(position / (state.admittedLastMinute / 60)), basis: 'measured' };
    return { seconds: Math.ceil(position / (state.maxActive / config.sessionSeconds)), basis: 'configured' };
  }
  if (state.admittedLast5Minutes >= MIN_MEASURED_ADMISSIONS) {
    // The last minute reacts to a change of pace; five minutes smooths bursts. Take the faster.
    const perSecond = Math.max(state.admittedLast5Minutes / 300, state.admittedLastMinute / 60);
    return { seconds: Math.ceil(position / perSecond), basis: 'measured' };
  }
  const configured =
    state.maxNewPerMinute > 0
      ? state.maxNewPerMinute / 60
      : state.maxActive === 0 && config.admitPerPeriod > 0
        ? config.admitPerPeriod / config.admitPeriodSeconds
        : 0;
  if (configured > 0 && !state.paused) return { seconds: Math.ceil(position / configured), basis: 'configured' };
  return { seconds: null, basis: 'none' };
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** "less than a minute", "about 7 minutes", "about 1 hour 20 minutes". */
export function formatDuration(seconds: number): string {
  if (seconds < 60) return 'less than a minute';
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `about ${plural(minutes, 'minute', 'minutes')}`;
  const hours = Math.floor(minutes / 60);
  // Past a few hours, minutes are noise.
  const rest = hours >= 3 ? 0 : Math.round((minutes % 60) / 5) * 5;
  return rest === 0 || rest === 60 ? `about ${plural(rest === 60 ? hours + 1 : hours, 'hour', 'hours')}` : `about ${plural(hours, 'hour', 'hours')} ${plural(rest, 'minute', 'minutes')}`;
}

/** The sentence the holding page shows. */
export function describeEstimate(estimate: WaitEstimate): string {
  if (estimate.seconds === null) return 'We cannot estimate your wait yet: nobody has been let in recently.';
  const text = formatDuration(estimate.seconds);
  return estimate.basis === 'measured'
    ? `Estimated wait: ${text}, from the pace visitors are being let in.`
    : `Estimated wait: ${text}, from the planned pace (too few visitors let in yet to measure it).`;
}
