/**
 * Console accounts in a real browser (Debian's Chromium driven by playwright-core): a viewer's
 * console has no control that can be used, and keeps it so across live polls while the "Recent
 * changes" list follows what others do; and signing out of Basic Auth works in Chromium: after the
 * sign-out, the browser no longer sends the credentials it held, so the console asks again.
 * Screenshotted and checked with axe-core.
 */
import { resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { MemoryQueueStore } from '../src/store/memory-store';
import { axeViolations, chromiumAvailable, launchChromium, layoutProblems, SHOTS } from './support/browser';
import { ACCOUNT_PASSWORDS, ACCOUNTS_SECRET, API_TOKEN, BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './support/fixtures';

describe.skipIf(!chromiumAvailable)('console accounts in a real browser', () => {
  let browser: Browser;
  let server: RunningServer;
  let url: string;
  /** Each request the room got: its path, and whether it carried credentials. */
  const seen: { path: string; credentials: boolean }[] = [];

  beforeAll(async () => {
    browser = await launchChromium();
    const built = buildWaitingRoom({
      settings: source({ ...BASE_SETTINGS, state_cache_seconds: '2' }),
      secrets: source({ ...BASE_SECRETS, admin_accounts: ACCOUNTS_SECRET }),
      store: new MemoryQueueStore(),
      originUrl: 'http://127.0.0.1:9',
      logger: new MemoryLogger(),
    });
    server = await startHost((request, client) => {
      const path = new URL(request.url).pathname;
      if (path.startsWith('/__wr/admin')) seen.push({ path, credentials: request.headers.has('authorization') });
      return built.handler(request, client);
    });
    url = server.url;
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  const api = (path: string, body: unknown) =>
    fetch(`${url}/__wr/api/${path}`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  /** The page's controls that a person could use: buttons, selects and visible inputs not disabled. */
  const usableControls = (page: Page) =>
    page.evaluate(() =>
      [...document.querySelectorAll<HTMLButtonElement | HTMLInputElement | HTMLSelectElement>('button, select, input:not([type=hidden]), textarea')]
        .filter((el) => !el.disabled)
        .map((el) => el.outerHTML.slice(0, 80)),
    );

  it("a viewer's console has every control off, also after live polls, and its list of changes follows what others do", async () => {
    for (let i = 0; i < 3; i++) await fetch(`${url}/`).then((r) => r.arrayBuffer());
    expect((await api('admit', { count: 1 })).status).toBe(200);
    const context = await browser.newContext({ bypassCSP: true, httpCredentials: { username: 'vera', password: ACCOUNT_PASSWORDS.vera }, viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${url}/__wr/admin`);
    await expect.poll(() => page.textContent('#account')).toMatch(/^Signed in as vera \(viewer\)/);
    expect(await page.isVisible('#read-only')).toBe(true);
    expect(await usableControls(page)).toEqual([]);
    const listed = () => page.$$eval('#audit li', (items) => items.map((li) => li.textContent?.replace(/^.*? UTC · /, '') ?? ''));
    const admitted = /^api \(api\) from 127\.0\.0\.1: Origin admits in the minute from \d\d:\d\d UTC: let in 1, calls 1\.$/;
    expect(await listed()).toEqual([expect.stringMatching(admitted)]);
    // Another's change shows in the list within a poll; the controls stay off.
    expect((await api('control', { paused: true })).status).toBe(200);
    await expect.poll(listed, { timeout: 10_000 }).toEqual(['api (api) from 127.0.0.1: Admission paused.', expect.stringMatching(admitted)]);
    expect(await usableControls(page)).toEqual([]);
    await page.screenshot({ path: resolve(SHOTS, 'console-viewer.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
    expect(await layoutProblems(page)).toEqual([]);
    await context.close();
  });

  it('an operator has the controls on', async () => {
    const context = await browser.newContext({ bypassCSP: true, httpCredentials: { username: 'otto', password: ACCOUNT_PASSWORDS.otto } });
    const page = await context.newPage();
    await page.goto(`${url}/__wr/admin`);
    await expect.poll(() => page.textContent('#account')).toMatch(/^Signed in as otto \(operator\)/);
    expect(await page.isVisible('#read-only')).toBe(false);
    expect((await usableControls(page)).length).toBeGreaterThan(10);
    await context.close();
  });

  it('signs out: Chromium stops sending the credentials it held, and the console asks again', async () => {
    // No httpCredentials: the browser holds only what it was given in the address, as a person's would after the prompt.
    const context = await browser.newContext({ bypassCSP: true });
    const page = await context.newPage();
    const { host } = new URL(url);
    await page.goto(`http://otto:${ACCOUNT_PASSWORDS.otto}@${host}/__wr/admin`);
    await expect.poll(() => page.textContent('#account')).toMatch(/^Signed in as otto/);
    // The browser holds the credentials: the console opens again without them in the address.
    const again = await page.goto(`${url}/__wr/admin`);
    expect(again?.status()).toBe(200);
    expect(seen.filter((s) => s.path === '/__wr/admin').at(-1)).toEqual({ path: '/__wr/admin', credentials: true });
    // Sign out. The 401 makes Chromium drop the credentials and ask again; headless, it cannot ask,
    // so the navigation ends in ERR_INVALID_AUTH_CREDENTIALS rather than the page (see below).
    await page.click('#sign-out').catch(() => undefined);
    await expect.poll(() => seen.some((s) => s.path === '/__wr/admin/sign-out' && s.credentials)).toBe(true);
    // The credentials are gone: the next visit of the console is sent without them, and refused.
    seen.length = 0;
    await page.goto(`${url}/__wr/admin`).catch(() => undefined);
    await expect.poll(() => seen.find((s) => s.path === '/__wr/admin')).toEqual({ path: '/__wr/admin', credentials: false });
    expect(seen.some((s) => s.credentials)).toBe(false);
    await context.close();
  });

  it('the signed-out page, as a person sees it once the prompt is dismissed', async () => {
    const context = await browser.newContext({ bypassCSP: true });
    const page = await context.newPage();
    // The room's own answer, without the challenge header (which a person's browser answers with the prompt).
    await page.route('**/__wr/admin/sign-out', async (route) => {
      const response = await route.fetch();
      const headers = { ...response.headers() };
      delete headers['www-authenticate'];
      await route.fulfill({ response, headers });
    });
    const answer = await page.goto(`${url}/__wr/admin/sign-out`);
    expect(answer?.status()).toBe(401);
    expect(await page.textContent('h1')).toBe('Signed out');
    expect(await page.getAttribute('a', 'href')).toBe('/__wr/admin');
    await page.screenshot({ path: resolve(SHOTS, 'console-signed-out.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
    expect(await layoutProblems(page)).toEqual([]);
    await context.close();
  });
});
