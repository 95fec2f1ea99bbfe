/**
 * The sale's report in a real browser (Debian's Chromium driven by playwright-core): reached from
 * the console's link, it shows the figures of a sale scripted over the last three hours (with the
 * switch held for a while), the chart of the whole sale (two panels, a scale each) and the actions;
 * axe-core finds nothing, nothing overflows, and the page is screenshotted.
 */
import { resolve } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdmissionPolicy } from '../src/core/ports';
import { startHost, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { MemoryQueueStore } from '../src/store/memory-store';
import { axeViolations, chromiumAvailable, launchChromium, layoutProblems, SHOTS } from './support/browser';
import { ADMIN_PASSWORD, BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './support/fixtures';

const MINUTE = 60_000;
const BY_HAND: AdmissionPolicy = { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 };

describe.skipIf(!chromiumAvailable)("the sale's report in a real browser", () => {
  let browser: Browser;
  let server: RunningServer;
  const store = new MemoryQueueStore();

  beforeAll(async () => {
    // Three hours of a sale, a minute at a time: a rush that builds a line, the operator letting
    // in 10 a minute (each claiming 3 s later, after waiting as long as the line took), two of
    // each ten never coming back, and the switch on hold for 20 minutes in the middle.
    const start = Math.floor((Date.now() - 3 * 3_600_000) / MINUTE) * MINUTE;
    const joined = new Map<number, number>();
    let cursor = 0;
    for (let m = 0; m < 180; m += 1) {
      const at = start + m * MINUTE;
      const arrivals = m < 60 ? 20 : m < 120 ? 8 : 2;
      for (let i = 0; i < arrivals; i += 1) {
        const { ticket } = await store.join('default', at + 1_000 + i, BY_HAND);
        joined.set(ticket, at + 1_000 + i);
      }
      if (m === 80) await store.control('default', { switch: 'hold' }, at + 2_000, BY_HAND);
      if (m === 100) await store.control('default', { switch: 'normal' }, at + 2_000, BY_HAND);
      const admitted = await store.admit('default', 10, at + 5_000, BY_HAND);
      for (let t = cursor + 1; t <= admitted.cursor; t += 1) {
        if (t % 10 === 3 || t % 10 === 7) continue;
        await store.claim('default', t, at + 8_000, BY_HAND, at + 8_000 - (joined.get(t) ?? at));
      }
      cursor = admitted.cursor;
      await store.poll('default', at + 50_000, BY_HAND);
    }
    const built = buildWaitingRoom({ settings: source({ ...BASE_SETTINGS, admit_per_period: '0' }), secrets: source(BASE_SECRETS), store, originUrl: 'http://127.0.0.1:9', logger: new MemoryLogger() });
    server = await startHost(built.handler);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('shows the whole sale from the console: figures, a chart with a scale per panel, the actions; accessible, nothing overflows', async () => {
    const context = await browser.newContext({ bypassCSP: true, httpCredentials: { username: 'admin', password: ADMIN_PASSWORD }, viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/__wr/admin`);
    await page.click('#report-link');
    await page.waitForSelector('#report-figures');
    expect(await page.title()).toBe('Sale report · default');
    const figures = await page.$$eval('#report-figures > div', (tiles) => Object.fromEntries(tiles.map((t) => [t.querySelector('dt')?.textContent ?? '', t.querySelector('dd')?.textContent ?? ''])));
    // 60 × 20 + 60 × 8 + 60 × 2 arrived; the operator called 10 a minute but not under hold (20 min).
    expect(figures['Arrivals (tickets handed out)']).toBe('1,800');
    const admitted = Number((figures['Let in'] ?? '').replace(/,/g, ''));
    expect(admitted).toBeGreaterThan(1_000);
    expect(figures['Abandoned (called, never came back)']).toMatch(/^[0-9,]+ \(2\d(\.\d)? % of calls\)$/);
    expect(figures['Switch changes']).toBe('2');
    expect(figures['Peak line']).toMatch(/^[0-9,]+ at \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/);
    // Two panels, each with its own scale, over the whole sale (three hours of points).
    const chart = await page.$eval('#chart svg', (svg) => ({ label: svg.getAttribute('aria-label') ?? '', lines: svg.querySelectorAll('polyline').length, scales: [...svg.querySelectorAll('text')].map((t) => t.textContent).filter((t) => t?.includes('scale')) }));
    expect(chart.lines).toBe(2);
    expect(chart.scales).toHaveLength(2);
    expect(chart.scales[0]).toMatch(/^Waiting \(scale 0–\d+\)$/);
    expect(chart.scales[1]).toMatch(/^Let in per minute \(scale 0–\d+\)$/);
    const actions = await page.$$eval('ol.actions li', (items) => items.map((i) => i.textContent ?? ''));
    expect(actions.map((a) => a.replace(/^.* UTC /, ''))).toEqual(['switched to hold', 'switched back to normal (from hold)']);
    expect(await axeViolations(page)).toEqual([]);
    expect(await layoutProblems(page)).toEqual([]);
    await page.screenshot({ path: resolve(SHOTS, 'report.png'), fullPage: true });
    // The exports the page links to.
    const csv = await context.request.get(`${server.url}/__wr/admin/report.csv`);
    expect(csv.status()).toBe(200);
    expect((await csv.text()).split('\r\n').length).toBeGreaterThan(180);
    await context.close();
  }, 60_000);
});
