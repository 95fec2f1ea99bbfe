/**
 * The console's script in a real browser (Debian's Chromium driven by playwright-core), where its
 * faults only show: an admit whose answer is lost is not applied twice by pressing again, a live
 * poll does not hide a reset made by someone else from the reset form, and a console left open past
 * its form token's hour can still act. Each room here is its own, with a store the test reads.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../src/core/ports';
import { startHost, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { MemoryQueueStore } from '../src/store/memory-store';
import { chromiumAvailable, launchChromium } from './support/browser';
import { ADMIN_PASSWORD, BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './support/fixtures';

/** The real time, moved on by `offsetMs`: a room where an hour can pass in a moment. */
class OffsetClock implements Clock {
  offsetMs = 0;
  now(): number {
    return Date.now() + this.offsetMs;
  }
}

interface Room {
  readonly url: string;
  readonly store: MemoryQueueStore;
  readonly clock: OffsetClock;
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
    operator = await browser.newContext({ httpCredentials: { username: 'admin', password: ADMIN_PASSWORD }, viewport: { width: 1100, height: 1400 } });
  });

  afterEach(async () => {
    for (const page of operator.pages()) await page.close();
  });

  afterAll(async () => {
    await browser?.close();
    for (const server of servers) await server.close();
  });

  const startRoom = async (): Promise<Room> => {
    const store = new MemoryQueueStore();
    const clock = new OffsetClock();
    const built = buildWaitingRoom({ settings: source(BASE_SETTINGS), secrets: source(BASE_SECRETS), store, originUrl: 'http://127.0.0.1:9', logger: new MemoryLogger(), clock });
    const server = await startHost(built.handler);
    servers.push(server);
    return { url: server.url, store, clock };
  };

  const openConsole = async (room: Room): Promise<Page> => {
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
});
