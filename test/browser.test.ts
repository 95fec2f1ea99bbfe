/**
 * What a person sees, in a real browser (Debian's Chromium driven by playwright-core): a visitor
 * queues, the operator lets them in from the admin page, and they reach the origin and stay.
 * Screenshots go to test/.artifacts/screenshots (the path is printed).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoOrigin } from '../src/node/demo-origin';
import { startHost, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './support/fixtures';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = resolve(import.meta.dirname, '.artifacts', 'screenshots');
const available = existsSync(CHROMIUM);
if (!available) console.warn(`browser tests skipped: ${CHROMIUM} is missing (apt-get install chromium)`);

describe.skipIf(!available)('in a real browser', () => {
  let browser: Browser;
  let origin: RunningServer;
  let room: RunningServer;

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    console.log(`screenshots: ${SHOTS}`);
    origin = await startDemoOrigin();
    const built = buildWaitingRoom({
      settings: source({ ...BASE_SETTINGS, refresh_seconds: '2', queue_timeout_seconds: '60' }),
      secrets: source(BASE_SECRETS),
      store: new MemoryQueueStore(),
      originUrl: origin.url,
      logger: new MemoryLogger(),
    });
    room = await startHost(built.handler);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await room?.close();
    await origin?.close();
  });

  it('a visitor queues, the operator lets them in from the admin page, and the visitor reaches the site and stays', async () => {
    const visitorContext = await browser.newContext({ viewport: { width: 1000, height: 720 } });
    const visitor = await visitorContext.newPage();
    await visitor.goto(`${room.url}/`);
    await expect.poll(() => visitor.textContent('#place')).toBe('1');
    expect(await visitor.textContent('#ahead')).toBe('You are next.');
    await visitor.screenshot({ path: resolve(SHOTS, 'holding-page.png') });

    const operator = await browser.newContext({ httpCredentials: { username: 'admin', password: ADMIN_PASSWORD } });
    const admin = await operator.newPage();
    await admin.goto(`${room.url}/__wr/admin`);
    expect(await admin.textContent('#waiting')).toBe('1');
    await admin.fill('#count', '1');
    await admin.click('button[type=submit]');
    await admin.waitForURL(/\/__wr\/admin\?done=/);
    expect(await admin.textContent('.notice')).toBe('Let 1 visitor in.');
    expect(await admin.textContent('#waiting')).toBe('0');
    await admin.screenshot({ path: resolve(SHOTS, 'admin-page.png') });

    // The holding page refreshes itself (Refresh header and meta refresh): no click needed.
    await visitor.waitForSelector('text=You are through the waiting room', { timeout: 15_000 });
    await visitor.goto(`${room.url}/products`);
    expect(await visitor.textContent('.ok')).toContain('You are through the waiting room');
    await visitor.screenshot({ path: resolve(SHOTS, 'origin-after-admission.png') });
    const cookies = await visitorContext.cookies();
    expect(cookies.find((c) => c.name === 'waiting_room')).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Lax' });
  });

  it('a form posted from another site is refused and lets nobody in', async () => {
    const evil = await startDemoOrigin();
    try {
      const operator = await browser.newContext({ httpCredentials: { username: 'admin', password: ADMIN_PASSWORD } });
      const page = await operator.newPage();
      await page.goto(`${room.url}/__wr/admin`);
      const before = await page.textContent('#cursor');
      // A page on another origin submits a form to the admin endpoint; the browser adds the credentials.
      await page.goto(`${evil.url}/`);
      await page.setContent(
        `<form method="post" action="${room.url}/__wr/admin/admit"><input name="count" value="50"><button>go</button></form>`,
      );
      await page.click('button');
      await page.waitForLoadState();
      expect(await page.textContent('body')).toContain('cross-site request refused');
      await page.goto(`${room.url}/__wr/admin`);
      expect(await page.textContent('#cursor')).toBe(before);
    } finally {
      await evil.close();
    }
  });
});
