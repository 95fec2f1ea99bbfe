import { describe, expect, it } from 'vitest';
import { adminFigures, renderChart } from '../src/core/admin-view';
import { parseConfig } from '../src/core/config';
import type { HoldView } from '../src/core/types';
import { holdTexts } from '../src/core/holding';
import { messages, type Locale } from '../src/core/i18n';
import { source } from './support/fixtures';
import { renderConsolePage } from '../src/core/admin-page';
import { escapeHtml, formatCount, renderHoldingPage, renderTemplate, scriptJson, type HoldingPage } from '../src/core/pages';

function hold(overrides: Partial<HoldView> = {}): HoldView {
  return {
    state: 'waiting',
    ticket: 1234,
    place: 1234,
    ahead: 1233,
    first: 1234,
    front: false,
    paused: false,
    inDraw: null,
    estimate: { seconds: 240, basis: 'measured' },
    startsAtMs: null,
    order: null,
    refreshSeconds: 7,
    nowMs: Date.UTC(2026, 10, 22, 9, 5, 0),
    ...overrides,
  };
}

function page(view: HoldView, locale: Locale = 'en', extra: Partial<HoldingPage> = {}): string {
  return renderHoldingPage({
    view,
    texts: holdTexts(view, locale),
    locale: messages(locale),
    title: 'Sale',
    message: 'Wait',
    branding: { logoUrl: '/__wr/assets/logo.svg', accent: '#2456c7', background: '#eef2f8' },
    assetPrefix: '/__wr/assets/',
    statusUrl: '/__wr/status?queue=default',
    nonce: 'n0nce',
    ...extra,
  });
}

describe('rendering', () => {
  it('escapes every interpolated value, also inside the page script\'s data', () => {
    const html = page(hold(), 'en', { title: '<script>alert(1)</script>', message: `"'&<>` });
    expect(html).not.toContain('<script>alert');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).toContain('&quot;&#39;&amp;&lt;&gt;');
    expect(escapeHtml(`<a href="x" onclick='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
    expect(scriptJson({ a: '</script><script>x()</script>' }).html).not.toContain('</script>');
  });

  it('shows the place in line, the number ahead, the estimate and the progress from the first place', () => {
    const html = page(hold({ place: 500, ahead: 499, first: 1000 }));
    expect(html).toContain('data-text="place">500</strong>');
    expect(html).toContain('499 people are ahead of you');
    expect(html).toContain('Estimated wait: about 4 minutes');
    // (1000 - 500) / (1000 - 1) of the way to the front.
    expect(html).toContain('<progress id="progress" max="100" value="50"');
    expect(html).toContain('href="/__wr/assets/style.css"');
    expect(html).toContain('<html lang="en" dir="ltr">');
    expect(page(hold({ place: 1, ahead: 0 }))).toContain('You are next');
    expect(page(hold({ place: 2, ahead: 1 }))).toContain('1 person is ahead of you');
  });

  it('speaks the visitor\'s language, with its plural rules and digits', () => {
    const de = page(hold({ place: 1235, ahead: 1234, first: 1235 }), 'de');
    expect(de).toContain('<html lang="de"');
    expect(de).toContain('1.234 Personen sind vor Ihnen');
    expect(page(hold({ place: 2, ahead: 1 }), 'de')).toContain('1 Person ist vor Ihnen');
    const ja = page(hold({ place: 1235, ahead: 1234 }), 'ja');
    expect(ja).toContain('<html lang="ja"');
    expect(ja).toContain('あなたの前に1,234人が並んでいます');
  });

  it('says so honestly when the place is not known', () => {
    const html = page(hold({ state: 'checking', ticket: null, place: null, ahead: null, first: null, estimate: null }));
    expect(html).toContain('Checking your place');
    expect(html).toContain('data-state="checking"');
    expect(html).toMatch(/<div class="progress-wrap" hidden>/);
  });

  it('has a pre-queue page with the opening time and how places are given, and an "event over" page', () => {
    const view = hold({ state: 'prequeue', place: null, ahead: null, first: null, estimate: null, startsAtMs: Date.UTC(2026, 10, 22, 9, 30), order: 'shuffle' });
    const html = page(view);
    expect(html).toMatch(/The line opens at 09:30\u00a0UTC/);
    expect(html).toContain('Opens in about 25 minutes');
    expect(html).toContain('at random');
    expect(page({ ...view, order: 'arrival' })).toContain('order of arrival');
    expect(page(hold({ state: 'over', place: null, ahead: null, estimate: null }))).toContain('This event has ended');
  });

  it('leaves no slot unfilled, and refuses a slot without a value', () => {
    expect(page(hold())).not.toMatch(/\{\{/);
    expect(() => renderTemplate('{{missing}}', {})).toThrow(/missing/);
  });

  it('renders the admin page with the figures, the chart and an anti-forgery token', () => {
    const stats = {
      tail: 1500,
      cursor: 200,
      paused: true,
      maxActive: 500,
      maxNewPerMinute: 0,
      active: 120,
      admittedLastMinute: 42,
      admittedLast5Minutes: 150,
      reserved: 3,
      avgWaitSeconds: 185,
      eventSize: 0,
      eventSeed: 0,
      waiting: 0,
      epoch: 0,
      generation: 1,
    };
    const nowMs = Date.UTC(2026, 10, 22, 12, 0);
    const config = parseConfig(source({ max_active: '500' }));
    const points = [
      { atMs: nowMs - 120_000, tail: 1000, cursor: 100, waiting: 900, active: 100, admittedLastMinute: 30 },
      { atMs: nowMs - 60_000, tail: 1500, cursor: 200, waiting: 1300, active: 120, admittedLastMinute: 42 },
    ];
    const html = renderConsolePage({
      queue: 'default',
      stats,
      figures: adminFigures(stats, config, nowMs),
      chart: renderChart(points, nowMs, { waiting: 1300, admittedLastMinute: 42 }),
      csrf: 'tok"en',
      admitKey: 'key-1',
      actionPrefix: '/__wr/admin/',
      actionQuery: '',
      liveUrl: '/__wr/admin/live',
      liveSeconds: 2,
      queues: undefined,
      assetPrefix: '/__wr/assets/',
      maxAdmit: 100000,
      notice: '<b>',
      asOf: 'now',
      propagationSeconds: 1,
    });
    expect(html).toContain('<dd data-figure="waiting">1,300</dd>');
    expect(html).toContain('<dd data-figure="active">120 of 500</dd>');
    expect(html).toContain('<dd data-figure="admitted_last_minute">42</dd>');
    expect(html).toContain('<dd data-figure="avg_wait" class="text">about 3 minutes</dd>');
    expect(html).toContain('In force: <span data-figure="state">paused</span>');
    expect(html).toContain('Resume admission');
    expect(html).toContain('name="csrf" value="tok&quot;en"');
    expect(html).toContain('&lt;b&gt;');
    expect(html).toContain('within 1 second (the per-POP cache lifetime)');
    expect(html).toContain('data-live="/__wr/admin/live"');
    // The chart: both series drawn from the two points, and a text summary for screen readers.
    expect(html).toMatch(/<polyline class="waiting" points="[\d., ]+"\/>/);
    expect(html).toMatch(/<polyline class="admitted" points="[\d., ]+"\/>/);
    expect(html).toContain('1,300 waiting now (most 1,300)');
    expect(html).not.toMatch(/\{\{/);
    expect(renderChart([], nowMs, { waiting: 0, admittedLastMinute: 0 })).toContain('No figures recorded in the last hour yet.');
  });

  it.each([
    [0, '0'],
    [999, '999'],
    [1000, '1,000'],
    [1234567, '1,234,567'],
  ])('formats %d as %s without Intl', (n, text) => {
    expect(formatCount(n)).toBe(text);
  });
});
