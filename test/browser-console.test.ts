/**
 * The console's script in a real browser (Debian's Chromium driven by playwright-core), where its
 * faults only show: an admit whose answer is lost is not applied twice by pressing again, a live
 * poll does not hide a reset made by someone else from the reset form, a console left open past
 * its form token's hour can still act, a store that stops answering is said at the top of the open
 * page and the saying clears itself, and what an operator sees and sets in each state (the
 * emergency strip, an admit refused under hold, selects showing the state in force, the period
 * quota of rate mode set without a change of mode). Each room here is its own, with a store the
 * test reads; every state is checked with axe-core and screenshotted.
 */
import { resolve } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Clock, QueueStore } from '../src/core/ports';
import { startHost, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { MemoryQueueStore } from '../src/store/memory-store';
import { connectRedis, createRedisQueueStore, waitUntilReady } from '../src/store/redis-store';
import { axeViolations, chromiumAvailable, launchChromium, layoutProblems, SHOTS } from './support/browser';
import { ADMIN_PASSWORD, API_TOKEN, BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './support/fixtures';
import { startRedisServer } from './support/redis-server';

/** The real time, moved on by `offsetMs`: a room where an hour can pass in a moment. */
class OffsetClock implements Clock {
  offsetMs = 0;
  now(): number {
    return Date.now() + this.offsetMs;
  }
}

interface Room<S extends QueueStore = MemoryQueueStore> {
  readonly url: string;
  readonly store: S;
  readonly clock: OffsetClock;
}

/** The operator's API, as the origin or a script would call it. */
async function callApi(url: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}/__wr/api/${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: response.status, ...((await response.json()) as Record<string, unknown>) };
}

/** Tickets taken by visitors without a browser. */
async function queueOthers(url: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await fetch(`${url}/`, { redirect: 'manual' }).then((r) => r.arrayBuffer());
}

describe.skipIf(!chromiumAvailable)("the console's script in a real browser", () => {
  let browser: Browser;
  let operator: BrowserContext;
  const servers: RunningServer[] = [];

  beforeAll(async () => {
    browser = await launchChromium();
    // bypassCSP: axe-core is injected into the page, which the console's policy would rightly refuse.
    operator = await browser.newContext({ bypassCSP: true, httpCredentials: { username: 'admin', password: ADMIN_PASSWORD }, viewport: { width: 1280, height: 900 } });
  });

  afterEach(async () => {
    for (const page of operator.pages()) await page.close();
  });

  afterAll(async () => {
    await browser?.close();
    for (const server of servers) await server.close();
  });

  function startRoom(): Promise<Room>;
  function startRoom<S extends QueueStore>(settings: Record<string, string>, store: S): Promise<Room<S>>;
  async function startRoom(settings: Record<string, string> = {}, store: QueueStore = new MemoryQueueStore()): Promise<Room<QueueStore>> {
    const clock = new OffsetClock();
    const built = buildWaitingRoom({ settings: source({ ...BASE_SETTINGS, ...settings }), secrets: source(BASE_SECRETS), store, originUrl: 'http://127.0.0.1:9', logger: new MemoryLogger(), clock });
    const server = await startHost(built.handler);
    servers.push(server);
    return { url: server.url, store, clock };
  }

  /** What axe-core finds, and a full-page screenshot to look at, of the console as it is now. */
  const check = async (page: Page, name: string): Promise<void> => {
    await page.screenshot({ path: resolve(SHOTS, `console-${name}.png`), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
    expect(await layoutProblems(page)).toEqual([]);
  };

  const openConsole = async (room: Room<QueueStore>): Promise<Page> => {
    const page = await operator.newPage();
    // The reset form asks to confirm; the operator says yes.
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(`${room.url}/__wr/admin`);
    return page;
  };

  /** The next live poll the page makes, from now. */
  const nextPoll = (page: Page) => page.waitForResponse((r) => new URL(r.url()).pathname === '/__wr/admin/live');

  it('keeps the admit key when the answer is lost, so that pressing again replays the admit instead of letting more in', async () => {
    const room = await startRoom();
    await queueOthers(room.url, 30);
    const admin = await openConsole(room);
    // The first admit reaches the room and is applied; its answer is lost on the way back.
    let lose: 'reset' | 'proxy page' | undefined = 'reset';
    await admin.route('**/__wr/admin/admit', async (route) => {
      const how = lose;
      lose = undefined;
      if (how === undefined) return route.continue();
      const response = await route.fetch();
      expect(response.status()).toBe(200);
      if (how === 'reset') return route.abort('connectionreset');
      // A proxy in front of the room that answers its own error page.
      return route.fulfill({ status: 502, contentType: 'text/html', body: '<html><body><h1>502 Bad Gateway</h1></body></html>' });
    });
    const keyField = admin.locator('[data-idempotency-key]');

    await admin.fill('#count', '10');
    await admin.click('form[action$="admit"] button');
    await expect.poll(() => admin.textContent('#notice')).toMatch(/^The answer was lost \(.+\): the request may have been applied\. Pressing the button again is safe/);
    expect((await room.store.peek('default')).cursor).toBe(10);
    const key = await keyField.inputValue();
    expect(key).not.toBe('');

    // Pressed again: the same key, so the room answers what the first press did, and lets nobody more in.
    await admin.click('form[action$="admit"] button');
    await expect.poll(() => admin.textContent('#notice')).toBe('Already done: this request let 10 visitors in.');
    expect((await room.store.peek('default')).cursor).toBe(10);
    // Answered: the next admit is a new one.
    await expect.poll(() => keyField.inputValue()).toBe('');

    // The same when a proxy's error page comes back instead of the room's answer.
    lose = 'proxy page';
    await admin.fill('#count', '5');
    await admin.click('form[action$="admit"] button');
    await expect.poll(() => admin.textContent('#notice')).toMatch(/^The answer was lost \(status 502, not an answer from the waiting room\)/);
    expect(await keyField.inputValue()).not.toBe('');
    await admin.click('form[action$="admit"] button');
    await expect.poll(() => admin.textContent('#notice')).toBe('Already done: this request let 5 visitors in.');
    expect((await room.store.peek('default')).cursor).toBe(15);
  });

  it("refuses a reset from a console that has not seen someone else's reset, and says on that console that the queue was reset", async () => {
    const room = await startRoom();
    await queueOthers(room.url, 5);
    // Two operators have the console open.
    const first = await openConsole(room);
    const second = await openConsole(room);

    await first.fill('#reset-confirm', 'default');
    await first.click('form[action$="reset"] button');
    await expect.poll(() => first.textContent('#notice')).toMatch(/^Reset queue default/);
    const { epoch } = (await (await first.request.get(`${room.url}/__wr/admin/stats`)).json()) as { epoch: number };
    expect(await room.store.peek('default')).toEqual({ tail: 5, cursor: 5 });
    // Ten visitors join the new line.
    await queueOthers(room.url, 10);

    // The second console polls the figures after that reset, then its operator resets too.
    await nextPoll(second);
    await second.fill('#reset-confirm', 'default');
    await second.click('form[action$="reset"] button');
    await expect.poll(() => second.textContent('#notice')).toMatch(/^queue default was reset by someone else since epoch 0; nothing changed/);
    // The newcomers keep their places.
    expect(await room.store.peek('default')).toEqual({ tail: 15, cursor: 5 });
    // The second console says what happened, and when, without being asked.
    const when = new Date(epoch).toISOString().slice(0, 19).replace('T', ' ');
    await expect.poll(() => second.textContent('#reset-elsewhere')).toBe(
      `This queue was reset by someone else at ${when} UTC, after this page was loaded. The figures here are current, but the reset form still names the earlier state: reload the page before resetting again.`,
    );
    expect(await second.isVisible('#reset-elsewhere')).toBe(true);

    // The console that reset says nothing of the kind: the reset was its own.
    await nextPoll(first);
    expect(await first.textContent('#reset-elsewhere')).toBe('');
    expect(await first.isVisible('#reset-elsewhere')).toBe(false);

    // Reloaded, the second console can reset, knowingly.
    await second.reload();
    expect(await second.textContent('#reset-elsewhere')).toBe('');
    await second.fill('#reset-confirm', 'default');
    await second.click('form[action$="reset"] button');
    await expect.poll(() => second.textContent('#notice')).toMatch(/^Reset queue default/);
    expect(await room.store.peek('default')).toEqual({ tail: 15, cursor: 15 });
  });

  it('can still act after an hour open: the live poll renews the form token', async () => {
    const room = await startRoom();
    const admin = await openConsole(room);
    await nextPoll(admin);
    // An hour and a minute later (the form token the page came with lasts an hour).
    room.clock.offsetMs = 61 * 60_000;
    await nextPoll(admin);
    await admin.click('#pause');
    await expect.poll(() => admin.textContent('[data-figure=state]')).toBe('paused');
    expect(await admin.textContent('#notice')).toBe('Admission paused.');
  });

  it('says at the top of the open console, within one poll, that the store stopped answering, in the words of the 503 page, and clears it once the store answers', async () => {
    const redis = await startRedisServer();
    const connection = connectRedis({ urls: [redis.url], cluster: false }, { timeoutMs: 300, retries: 0 });
    try {
      await waitUntilReady(connection, 5_000);
      const room = await startRoom({ store_timeout_ms: '300' }, createRedisQueueStore({ redis: connection, keyPrefix: 'console-outage' }));
      await queueOthers(room.url, 3);
      const admin = await openConsole(room);
      await nextPoll(admin);
      expect(await admin.isVisible('#outage')).toBe(false);

      // The store stops (SIGSTOP): every call times out. The next poll (every 2 s) brings the banner.
      redis.pause();
      const stoppedAt = Date.now();
      await expect.poll(() => admin.isVisible('#outage'), { timeout: 10_000 }).toBe(true);
      // Within one poll (2 s) and its store timeout, with room for a busy machine.
      expect(Date.now() - stoppedAt).toBeLessThan(6_000);
      const banner = { title: await admin.textContent('#outage-title'), reason: await admin.textContent('#outage-reason') };
      expect(banner.reason).toMatch(
        /^Queue default: the queue store is unavailable \(.+\)\. This page asks again every 2 seconds and clears this message as soon as the store answers\. The figures below are from \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.$/,
      );
      // The same words as the page a reload shows while the store is down.
      const reloaded = await operator.newPage();
      expect((await reloaded.goto(`${room.url}/__wr/admin`))!.status()).toBe(503);
      expect(await reloaded.textContent('h1')).toBe(banner.title);
      const alert = (await reloaded.textContent('[role=alert]'))!;
      expect(alert.slice(0, alert.indexOf('. This page'))).toBe(banner.reason!.slice(0, banner.reason!.indexOf('. This page')));
      for (const item of await reloaded.locator('li').allTextContents()) {
        if (!/Bypass|store_error/.test(item)) expect(await admin.locator('#outage li').allTextContents()).toContain(item);
      }
      await reloaded.close();
      // At the top: above the emergency strip and the figures, which are shown as stale.
      const top = async (selector: string) => (await admin.locator(selector).boundingBox())!.y;
      expect(await top('#outage')).toBeLessThan(await top('.emergency'));
      expect(await admin.getAttribute('#figures', 'class')).toContain('stale');
      expect(await admin.textContent('#emergency-heading')).toBe('In force: running (last known)');
      await check(admin, 'outage');

      // The store answers again: the banner goes by itself.
      redis.resume();
      await expect.poll(() => admin.isVisible('#outage'), { timeout: 10_000 }).toBe(false);
      expect(await admin.getAttribute('#figures', 'class')).not.toContain('stale');
      expect(await admin.textContent('#emergency-heading')).toBe('In force: running');

      // Answers that stop coming (a poll that hangs, not refused): said once the last answer is older than two polls.
      await admin.route('**/__wr/admin/live', () => undefined);
      await expect.poll(() => admin.textContent('#outage-reason'), { timeout: 10_000 }).toMatch(/^Queue default: no answer (within 2 seconds|for \d+ seconds)\./);
      await admin.unroute('**/__wr/admin/live');
      await expect.poll(() => admin.isVisible('#outage'), { timeout: 10_000 }).toBe(false);
    } finally {
      redis.resume();
      connection.disconnect();
      await redis.stop();
    }
  });

  it('puts the emergency strip on top with its explanations folded away; its select shows the state in force, and an admit under hold is a warning that says why', async () => {
    const room = await startRoom();
    await queueOthers(room.url, 4);
    const admin = await openConsole(room);
    // One screen, not one column of 2,000 px: the strip at the top, the figures beside the controls.
    expect((await admin.locator('.emergency').boundingBox())!.y).toBeLessThan(160);
    const [figures, controls] = [await admin.locator('.console-figures').boundingBox(), await admin.locator('.console-controls').boundingBox()];
    expect(controls!.x).toBeGreaterThan(figures!.x + figures!.width - 1);
    expect(await admin.evaluate(() => document.documentElement.scrollHeight)).toBeLessThan(1_500);
    // The explanations are folded away.
    for (const details of await admin.locator('details').all()) expect(await details.getAttribute('open')).toBeNull();
    expect(await admin.isVisible('text=Open steps the waiting room aside')).toBe(false);
    // Every select shows the state in force: normal; the controller as configured (off here).
    expect(await admin.inputValue('#switch')).toBe('normal');
    expect(await admin.inputValue('#adaptive-switch')).toBe('config');
    expect(await admin.locator('#adaptive-switch option:checked').textContent()).toBe('as configured (off)');
    expect(await admin.inputValue('#mode')).toBe('manual');
    await check(admin, 'normal-desktop');

    // Someone else switches to hold (the API): this console's select follows at the next poll.
    expect(await callApi(room.url, 'control', { switch: 'hold' })).toMatchObject({ status: 200, switch: 'hold' });
    await expect.poll(() => admin.inputValue('#switch')).toBe('hold');
    await expect.poll(() => admin.textContent('[data-figure=state]')).toBe('switched to hold: nobody new gets in');
    // Hold is not the operator's pause: "Resume admission" would lift nothing, so the button does not offer it.
    expect(await admin.textContent('#pause')).toBe('Pause admission');
    // An admit under hold lets nobody in, and says so as a warning, not a green "Let 0 visitors in.".
    await admin.fill('#count', '2');
    await admin.click('form[action$="admit"] button');
    await expect.poll(() => admin.textContent('#notice')).toBe(
      'Nobody was let in: the emergency switch is on hold, which refuses every admit (from here and from the origin). Switch back to normal to let people in.',
    );
    expect(await admin.getAttribute('#notice', 'class')).toBe('notice warning');
    expect((await room.store.peek('default')).cursor).toBe(0);
    await check(admin, 'hold-admit-refused');
    // The same page without its script (a form post and its redirect) says the same, as a warning.
    const posted = await admin.request.post(`${room.url}/__wr/admin/admit`, {
      form: { csrf: await admin.inputValue('form[action$="admit"] input[name=csrf]'), count: '1' },
      headers: { accept: 'text/html', 'sec-fetch-site': 'same-origin' },
      maxRedirects: 0,
    });
    expect(posted.status()).toBe(303);
    const plain = await operator.newPage();
    await plain.goto(`${room.url}${posted.headers()['location']}`);
    expect(await plain.getAttribute('#notice', 'class')).toBe('notice warning');
    expect(await plain.inputValue('#switch')).toBe('hold');
    await plain.close();

    // The operator picks normal: the select keeps the pick until it is sent, then shows what is in force.
    await admin.selectOption('#switch', 'normal');
    await nextPoll(admin);
    expect(await admin.inputValue('#switch')).toBe('normal');
    await admin.click('form:has(#switch) button');
    await expect.poll(() => admin.textContent('[data-figure=state]')).toBe('running');
    expect(await admin.inputValue('#switch')).toBe('normal');

    // A phone: the same page in one column, nothing sticking out.
    const phone = await browser.newContext({ bypassCSP: true, httpCredentials: { username: 'admin', password: ADMIN_PASSWORD }, viewport: { width: 360, height: 800 } });
    try {
      const small = await phone.newPage();
      await small.goto(`${room.url}/__wr/admin`);
      expect((await small.locator('.emergency').boundingBox())!.y).toBeLessThan(200);
      await small.screenshot({ path: resolve(SHOTS, 'console-normal-360px.png'), fullPage: true });
      expect(await layoutProblems(small)).toEqual([]);
      expect(await axeViolations(small)).toEqual([]);
    } finally {
      await phone.close();
    }
  });

  it('in rate mode sets the period quota at runtime with the mode unchanged, refuses a capacity limit that would switch the mode, and switches only when the mode is chosen', async () => {
    const room = await startRoom({ admit_per_period: '5', admit_period_seconds: '60' }, new MemoryQueueStore());
    // 12 arrive; the first one's period step calls 1..5. A control (any) records the minute's point.
    await queueOthers(room.url, 12);
    await callApi(room.url, 'control', { paused: false });
    // Three minutes on, the next period calls 6..10: ticket 10 waited since before the first point kept.
    room.clock.offsetMs = 3 * 60_000;
    await callApi(room.url, 'control', { paused: false });
    const admin = await openConsole(room);
    expect(await admin.textContent('[data-figure=mode]')).toBe('rate: 5 every 60 s');
    expect(await admin.inputValue('#mode')).toBe('rate');
    // In rate mode the period quota is the limit shown; the capacity limits are not offered.
    expect(await admin.isVisible('#admit_per_period')).toBe(true);
    expect(await admin.isVisible('#max_new_per_minute')).toBe(false);
    expect(await admin.getAttribute('#admit_per_period', 'placeholder')).toBe('5');
    // "Average wait" has a figure in this mode too, where the store records no waits: from the per-minute history.
    expect(await admin.textContent('[data-figure=avg_wait]')).toMatch(/^about \d minutes? or more \(estimated\)$/);

    await admin.fill('#admit_per_period', '8');
    await admin.click('form[data-mode=rate] button');
    await expect.poll(() => admin.textContent('#notice')).toBe('Visitors per period set to 8.');
    await expect.poll(() => admin.textContent('[data-figure=mode]')).toBe('rate: 8 every 60 s');
    expect(await admin.getAttribute('#admit_per_period', 'placeholder')).toBe('8');
    const stats = await callApi(room.url, 'stats');
    expect(stats).toMatchObject({ mode: 'rate', admit_per_period: 8, max_sessions: 0, max_new_per_minute: 0 });
    expect(await admin.inputValue('#mode')).toBe('rate');
    await check(admin, 'rate-quota-set');

    // A capacity limit alone would quietly switch the queue to capacity mode: refused, nothing changed.
    const refused = await callApi(room.url, 'control', { max_new_per_minute: 4 });
    expect(refused).toMatchObject({ status: 409 });
    expect(refused['error']).toBe(
      'this change would switch the queue from rate mode (8 visitors every 60 s) to capacity mode (no limit at once, 4 new a minute); nothing changed. To mean it, send mode=capacity with it.',
    );
    expect(await callApi(room.url, 'stats')).toMatchObject({ mode: 'rate', admit_per_period: 8, max_new_per_minute: 0 });
    // Bad input: a clear error, nothing changed.
    for (const body of [{ admit_per_period: -1 }, { admit_per_period: 'lots' }, { admit_per_period: 2_000_000 }, { mode: 'fast' }, { mode: 'capacity' }]) {
      const answer = await callApi(room.url, 'control', body);
      expect(answer['status'], JSON.stringify(body)).toBe(400);
      expect(answer['error'], JSON.stringify(body)).toMatch(/nothing changed|must be/);
    }
    expect(await callApi(room.url, 'stats')).toMatchObject({ mode: 'rate', admit_per_period: 8 });

    // Chosen explicitly in the console: the mode changes, and the notice says what that changes.
    await admin.click('.mode-change summary');
    await admin.selectOption('#mode', 'capacity');
    await admin.fill('#mode-new', '4');
    await admin.click('.mode-change button');
    await expect.poll(() => admin.textContent('#notice')).toBe(
      'Switched to capacity mode: visitors are let in while there is room (at once, new a minute); the period quota no longer applies. New visitors per minute set to 4.',
    );
    await expect.poll(() => admin.textContent('[data-figure=mode]')).toBe('capacity: no limit at once, 4 new a minute');
    expect(await admin.isVisible('#max_new_per_minute')).toBe(true);
    expect(await admin.isVisible('#admit_per_period')).toBe(false);
    expect(await admin.inputValue('#mode')).toBe('capacity');
    await check(admin, 'mode-changed');
    // And back, by choice: rate with the capacity limits at 0.
    expect(await callApi(room.url, 'control', { mode: 'rate' })).toMatchObject({ status: 200, mode: 'rate', admit_per_period: 8, max_sessions: 0, max_new_per_minute: 0 });
  });
});
