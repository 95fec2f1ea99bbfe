/**
 * Every state a visitor or an operator can be shown, in a real browser (Debian's Chromium), in
 * English, German and Japanese where the page is a visitor's (the console is English only): what
 * the page says, that its heading is shown once, that it fits the screen, that axe-core finds no
 * WCAG 2 A/AA violation, and a screenshot under test/.artifacts/screenshots for a person to look at.
 * The flows (a visitor let in, pause, the proof of work solved, the widget answered) are in
 * browser.test.ts; this file is the pages, one state at a time.
 */
import http from 'node:http';
import { resolve } from 'node:path';
import type { Browser, BrowserContext, Page, Response as PageResponse } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, serve, startHost, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { MemoryQueueStore } from '../src/store/memory-store';
import type { QueueStore } from '../src/core/ports';
import { axeViolations, brokenWords, chromiumAvailable, launchChromium, layoutProblems, SHOTS } from './support/browser';
import { fakeProviderSettings, startFakeProvider, type FakeProvider } from './support/fake-siteverify';
import { ADMIN_PASSWORD, API_TOKEN, BASE_SECRETS, BASE_SETTINGS, FaultyStore, MemoryLogger, source } from './support/fixtures';

type Lang = 'en' | 'de' | 'ja' | 'ar';

/** Each language in its own browser: its locale (so its Accept-Language), a time zone of its own and a screen size. */
const BROWSERS: readonly { lang: Lang; locale: string; timezoneId: string; viewport: { width: number; height: number }; size: string }[] = [
  { lang: 'en', locale: 'en-US', timezoneId: 'America/New_York', viewport: { width: 1280, height: 800 }, size: 'desktop' },
  { lang: 'de', locale: 'de-DE', timezoneId: 'Europe/Berlin', viewport: { width: 390, height: 844 }, size: 'phone' },
  { lang: 'ja', locale: 'ja-JP', timezoneId: 'Asia/Tokyo', viewport: { width: 360, height: 740 }, size: '360px' },
  // Right to left: the page says so (`dir="rtl"`), and the screenshots show it laid out that way.
  { lang: 'ar', locale: 'ar-SA', timezoneId: 'Asia/Riyadh', viewport: { width: 412, height: 900 }, size: 'phone' },
];

/** What each page should say, written out here rather than read from src/core/i18n.ts. */
const TEXT: Record<Lang, Record<string, string>> = {
  en: {
    inLine: 'You are in line',
    message: 'We are letting visitors in a few at a time to keep the site fast for everyone.',
    noAction: 'You don’t need to do anything: keep this page open and it will take you to the site when it’s your turn.',
    placeLabel: 'Your place in line',
    paused: 'Admission is paused for a moment; you keep your place.',
    prequeue: 'The line opens soon',
    over: 'This event has ended',
    overBody: 'Thank you for your interest. The waiting room is closed.',
    unreachable: 'The site is not answering',
    unreachableBody: 'The site did not answer just now. This page will try again by itself in a few seconds.',
    checking: 'Checking your place',
    checkingBody: 'We are checking your place in line. You keep it in the meantime, and this page will try again by itself.',
    powNoScript: 'To give you a place in line, this page does a short calculation in your browser. Please turn on JavaScript and reload the page.',
    challengePrompt: 'Please complete the check below to get your place in line.',
    draw: 'You are in the draw',
    joining: 'Getting you a place in line',
    joiningBody: 'We cannot give you a place in line just yet. This page will try again by itself.',
    prequeueMessage: 'Once the line opens, we will let visitors in a few at a time to keep the site fast for everyone.',
    away: 'You may leave and come back: this browser keeps your place for 60 seconds after the last update.',
    turn: 'It’s your turn!',
    vipRefused: 'This VIP link cannot be used (it may have been used already or have expired), so you have joined the line like everyone else.',
  },
  de: {
    inLine: 'Sie sind in der Warteschlange',
    message: 'Wir lassen Besucher nach und nach ein, damit die Website für alle schnell bleibt.',
    noAction: 'Sie müssen nichts weiter tun: Lassen Sie diese Seite einfach geöffnet, sie bringt Sie zur Website, sobald Sie an der Reihe sind.',
    placeLabel: 'Ihr Platz in der Warteschlange',
    paused: 'Der Einlass ist kurz unterbrochen; Ihr Platz bleibt Ihnen erhalten.',
    prequeue: 'Die Warteschlange öffnet bald',
    over: 'Diese Veranstaltung ist beendet',
    overBody: 'Vielen Dank für Ihr Interesse. Der Warteraum ist geschlossen.',
    unreachable: 'Die Website antwortet nicht',
    unreachableBody: 'Die Website hat gerade nicht geantwortet. Diese Seite versucht es in wenigen Sekunden von selbst erneut.',
    checking: 'Wir prüfen Ihren Platz',
    checkingBody: 'Wir prüfen gerade Ihren Platz in der Warteschlange. Er bleibt Ihnen so lange erhalten, und diese Seite versucht es von selbst erneut.',
    powNoScript:
      'Um Ihnen einen Platz in der Warteschlange zu geben, führt diese Seite eine kurze Berechnung in Ihrem Browser aus. Bitte aktivieren Sie JavaScript und laden Sie die Seite neu.',
    challengePrompt: 'Bitte schließen Sie die Prüfung unten ab, um Ihren Platz in der Warteschlange zu erhalten.',
    draw: 'Sie nehmen an der Auslosung teil',
    joining: 'Wir reihen Sie ein',
    joiningBody: 'Wir können Ihnen gerade noch keinen Platz in der Warteschlange geben. Diese Seite versucht es von selbst erneut.',
    prequeueMessage: 'Sobald die Warteschlange öffnet, lassen wir Besucher nach und nach ein, damit die Website für alle schnell bleibt.',
    away: 'Sie können die Seite auch verlassen und wiederkommen: Dieser Browser hält Ihnen Ihren Platz nach der letzten Aktualisierung noch 60 Sekunden lang frei.',
    turn: 'Sie sind an der Reihe!',
    vipRefused:
      'Dieser VIP-Link lässt sich nicht verwenden (er wurde womöglich schon eingelöst oder ist abgelaufen). Sie haben daher wie alle anderen einen Platz in der Warteschlange erhalten.',
  },
  ja: {
    inLine: '順番待ちの列に並んでいます',
    message: 'サイトを快適にご利用いただけるよう、少しずつご案内しています。',
    noAction: '操作は必要ありません。このページを開いたままにしておけば、順番が来たときに自動でサイトへご案内します。',
    placeLabel: 'あなたの順番',
    paused: '入場を一時的に停止しています。あなたの順番はそのまま保たれます。',
    prequeue: 'まもなく受付を開始します',
    over: 'このイベントは終了しました',
    overBody: 'ご関心をお寄せいただき、ありがとうございました。待合室は閉鎖しました。',
    unreachable: 'サイトが応答していません',
    unreachableBody: 'サイトからただいま応答がありませんでした。このページは数秒後に自動で再試行します。',
    checking: '順番を確認しています',
    checkingBody: 'ただいま、あなたの順番を確認しています。その間も順番は保たれます。このページは自動で再試行します。',
    powNoScript: '列に並んでいただくため、このページはブラウザで短い計算を行います。JavaScriptを有効にして、ページを再読み込みしてください。',
    challengePrompt: '列に並ぶには、下の確認を完了してください。',
    draw: '抽選に参加しています',
    joining: '順番を確保しています',
    joiningBody: 'ただいま順番を確保できません。このページは自動で再試行します。',
    prequeueMessage: '受付開始後は、サイトを快適にご利用いただけるよう、少しずつご案内します。',
    away: 'このページを離れても、最後の更新から60秒以内にこのブラウザで戻れば、順番はそのまま保たれます。',
    turn: 'あなたの番です！',
    vipRefused: 'このVIPリンクはご利用いただけません（使用済みか、有効期限が切れている可能性があります）。ほかの方と同じく、列に並んでいただいています。',
  },
  ar: {
    inLine: 'أنت الآن في قائمة الانتظار',
    message: 'نُدخل الزوار على دفعات صغيرة ليبقى الموقع سريعًا للجميع.',
    noAction: 'لا يلزمك فعل أي شيء: يكفي إبقاء هذه الصفحة مفتوحة، وستنقلك إلى الموقع تلقائيًا عندما يحين دورك.',
    placeLabel: 'ترتيبك في قائمة الانتظار',
    paused: 'الدخول متوقف مؤقتًا، ومكانك محفوظ.',
    prequeue: 'ستُفتح قائمة الانتظار قريبًا',
    over: 'انتهت هذه الفعالية',
    overBody: 'شكرًا لاهتمامك. غرفة الانتظار مغلقة الآن.',
    unreachable: 'الموقع لا يستجيب',
    unreachableBody: 'لم يستجب الموقع قبل قليل. ستعيد هذه الصفحة المحاولة تلقائيًا بعد بضع ثوانٍ.',
    checking: 'جارٍ التحقق من مكانك',
    checkingBody: 'نتحقق الآن من مكانك في قائمة الانتظار. مكانك محفوظ في هذه الأثناء، وستعيد هذه الصفحة المحاولة تلقائيًا.',
    powNoScript: 'لمنحك مكانًا في قائمة الانتظار، تُجري هذه الصفحة عملية حسابية قصيرة في متصفحك. يُرجى تفعيل JavaScript ثم إعادة تحميل الصفحة.',
    challengePrompt: 'يُرجى إكمال التحقق أدناه للحصول على مكانك في قائمة الانتظار.',
    draw: 'أنت مشارك في القرعة',
    joining: 'جارٍ حجز مكان لك',
    joiningBody: 'لا يمكننا منحك مكانًا في قائمة الانتظار في الوقت الحالي. ستعيد هذه الصفحة المحاولة تلقائيًا.',
    prequeueMessage: 'عند فتح قائمة الانتظار، سنُدخل الزوار على دفعات صغيرة ليبقى الموقع سريعًا للجميع.',
    away: 'يمكنك أيضًا المغادرة والعودة: يحتفظ هذا المتصفح بمكانك لمدة ٦٠ ثانية بعد آخر تحديث.',
    turn: 'حان دورك!',
    vipRefused: 'لا يمكن استخدام رابط VIP هذا (ربما استُخدم من قبل أو انتهت صلاحيته)، لذا انضممت إلى قائمة الانتظار مثل الجميع.',
  },
};

/** The tab's title while waiting: the place first (in the language's own digits). */
const TITLE_PLACE: Record<Lang, (place: string) => string> = {
  en: (n) => `#${n} in line`,
  de: (n) => `Platz ${n} in der Warteschlange`,
  ja: (n) => `${n}番目に並んでいます`,
  ar: (n) => `ترتيبك ${n} في قائمة الانتظار`,
};
/** The ticket, shown only as a reference for support. */
const REFERENCE: Record<Lang, RegExp> = {
  en: /^Reference for support: \d+$/,
  de: /^Referenznummer für Rückfragen: \d+$/,
  ja: /^お問い合わせ番号：\d+$/,
  ar: /^الرقم المرجعي للدعم: [٠-٩]+$/,
};
/** A place as the page writes it. */
const PLACE: Record<Lang, RegExp> = { en: /^[1-9]\d*$/, de: /^[1-9]\d*$/, ja: /^[1-9]\d*$/, ar: /^[١-٩][٠-٩]*$/ };
const ARABIC_DIGITS = '٠١٢٣٤٥٦٧٨٩';
const arabicDigits = (text: string): string => text.replace(/[0-9]/g, (d) => ARABIC_DIGITS[Number(d)]!);

/** "n people ahead" in each language, and the page's countdown to its next update (a promise to reload). */
const AHEAD: Record<Lang, RegExp> = {
  en: /^\d+ (person is|people are) ahead of you$|^You are next$/,
  de: /^\d+ Person(en)? (ist|sind) vor Ihnen$|^Sie sind als Nächstes an der Reihe$/,
  ja: /^あなたの前に\d+人が並んでいます$|^次はあなたの番です$/,
  ar: /^أمامك (شخص واحد|شخصان|[٠-٩]+ (أشخاص|شخصًا|شخص))$|^دورك هو التالي$/,
};
const NEXT_UPDATE = /Next update|Nächste Aktualisierung|次の更新|التحديث التالي/;
const REFRESH_PROMISE = /refreshes every|wird alle|自動で更新|تُحدَّث هذه الصفحة/;
/** Text decoded with the wrong charset, or a character the page could not decode. */
const MOJIBAKE = /\uFFFD|Ã[\u0080-\u00BF]|â€|ã[\u0080-\u0083]/;

describe.skipIf(!chromiumAvailable)('every page state in a real browser, in English, German and Japanese', () => {
  let browser: Browser;
  const servers: RunningServer[] = [];
  let provider: FakeProvider;
  /** The site behind the rooms: a page for every path, and the brand's own logo, counted. */
  let site: RunningServer;
  let logoRequests = 0;
  /** Each room's address, by the state it shows. */
  const rooms: Record<string, string> = {};
  const startsAt = Math.ceil((Date.now() + 25 * 60_000) / 60_000) * 60_000;
  /** The console's store, which the test brings back. */
  const consoleStore = new FaultyStore(new MemoryQueueStore());
  /** The waiting room's store, which goes away while a visitor waits, and comes back. */
  const waitingStore = new FaultyStore(new MemoryQueueStore());

  const startRoom = async (settings: Record<string, string>, store: QueueStore = new MemoryQueueStore(), originUrl = site.url): Promise<string> => {
    const built = buildWaitingRoom({
      settings: source({ ...BASE_SETTINGS, ...settings }),
      secrets: source(BASE_SECRETS),
      store,
      originUrl,
      logger: new MemoryLogger(),
    });
    const server = await startHost(built.handler);
    servers.push(server);
    return server.url;
  };

  beforeAll(async () => {
    site = await serve(
      http.createServer((req, res) => {
        req.resume();
        if (req.url === '/brand/logo.svg') {
          logoRequests++;
          res.writeHead(200, { 'content-type': 'image/svg+xml' });
          res.end('<svg xmlns="http://www.w3.org/2000/svg" width="96" height="48" viewBox="0 0 96 48"><rect width="96" height="48" rx="10" fill="#7a2e8e"/><text x="48" y="31" font-size="18" text-anchor="middle" fill="#fff" font-family="sans-serif">BRAND</text></svg>');
          return;
        }
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end('<!doctype html><html lang="en"><title>Shop</title><h1>The shop</h1></html>');
      }),
      0,
      '127.0.0.1',
    );
    provider = await startFakeProvider();
    const down = new FaultyStore(new MemoryQueueStore());
    down.mode = 'error';
    consoleStore.mode = 'error';
    const [waiting, logo, prequeue, over, hold, unreachable, storeDown, pow, challenge, draw, rate, consoleDown, turn] = await Promise.all([
      // No page_title or page_message: the defaults, translated. Its store goes away for a moment.
      startRoom({}, waitingStore),
      // The site's name and message in English (page_language), German and Japanese of their own.
      startRoom({
        page_logo_url: '/brand/logo.svg',
        page_title: 'Demo shop',
        page_message: 'Doors open at nine.',
        page_texts: JSON.stringify({ de: { page_title: 'Demo-Laden', page_message: 'Einlass ab neun Uhr.' }, ja: { page_title: 'デモショップ', page_message: '9時から入場できます。' } }),
      }),
      startRoom({ event_start: new Date(startsAt).toISOString() }),
      startRoom({ event_start: '2026-01-01T09:00:00Z', event_end: '2026-01-01T10:00:00Z', hold_status: '503' }),
      // Room for everyone (capacity mode), so only the switch keeps a newcomer waiting.
      startRoom({ max_active: '100' }),
      startRoom({ max_active: '1000' }, new MemoryQueueStore(), `http://127.0.0.1:${await freePort()}`),
      startRoom({}, down),
      startRoom({ pow_difficulty: '16' }),
      startRoom({ ...fakeProviderSettings(provider) }),
      startRoom({ queue_method: 'random' }),
      startRoom({ admit_per_period: '5', admit_period_seconds: '60' }),
      startRoom({}, consoleStore),
      startRoom({ page_title: 'Demo shop' }),
    ]);
    Object.assign(rooms, { waiting, logo, prequeue, over, hold, unreachable, storeDown, pow, challenge, draw, rate, consoleDown, turn });
    const switched = await fetch(`${hold}/__wr/api/control`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ switch: 'hold' }),
    });
    expect(switched.status).toBe(200);
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await Promise.all(servers.map((s) => s.close()));
    await site?.close();
    await provider?.close();
  });

  interface Opened {
    readonly page: Page;
    readonly context: BrowserContext;
    readonly response: PageResponse;
  }

  /** A visitor's browser in `lang` opening `url`; axe needs the page's CSP bypassed. */
  async function open(url: string, b: (typeof BROWSERS)[number], prepare?: (page: Page) => Promise<unknown>): Promise<Opened> {
    const context = await browser.newContext({ bypassCSP: true, locale: b.locale, timezoneId: b.timezoneId, viewport: b.viewport });
    const page = await context.newPage();
    await prepare?.(page);
    const response = await page.goto(url);
    if (response === null) throw new Error(`no response from ${url}`);
    return { page, context, response };
  }

  /** Once the page's script has taken over from the Refresh header, it shows its countdown. */
  const scriptRan = (page: Page) => page.waitForFunction(() => (document.querySelector('.next')?.textContent ?? '') !== '');

  /**
   * What every visitor page must be, whatever its state: in the visitor's language, its heading
   * `heading` shown once (and first in the tab's title), no mojibake, nothing out of the card or
   * wider than the screen, no axe finding; then its screenshot.
   */
  async function checkVisitorPage(opened: Opened, b: (typeof BROWSERS)[number], state: string, heading: string, title = heading): Promise<void> {
    const { page, response } = opened;
    expect(response.headers()['content-type']).toBe('text/html; charset=utf-8');
    expect(await page.getAttribute('html', 'lang')).toBe(b.lang);
    // Arabic is laid out right to left: the document says so, and the browser lays the card out so.
    expect(await page.getAttribute('html', 'dir')).toBe(b.lang === 'ar' ? 'rtl' : 'ltr');
    expect(await page.evaluate(() => getComputedStyle(document.querySelector('h1')!).direction)).toBe(b.lang === 'ar' ? 'rtl' : 'ltr');
    expect(await page.locator('h1').allTextContents()).toEqual([heading]);
    const shown = await page.evaluate(() => document.body.innerText);
    // Once as a line of its own: not repeated above it as the site's name, nor anywhere else.
    expect(shown.split('\n').filter((line) => line.trim() === heading), `"${heading}" shown once`).toHaveLength(1);
    expect((await page.title()).startsWith(title), `the tab's title starts with "${title}"`).toBe(true);
    expect(shown).not.toMatch(MOJIBAKE);
    expect(await layoutProblems(page)).toEqual([]);
    expect(await brokenWords(page, 'main h1, main p')).toEqual([]);
    await page.screenshot({ path: resolve(SHOTS, `state-${state}-${b.lang}-${b.size}.png`), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
  }

  it('the holding page while waiting: the default title and message in the visitor’s language, the title once, the place and who is ahead', async () => {
    for (const b of BROWSERS) {
      // Two others first, so the visitor has people ahead.
      for (let i = 0; i < 2; i++) await fetch(`${rooms['waiting']}/`).then((r) => r.arrayBuffer());
      const opened = await open(`${rooms['waiting']}/`, b);
      const { page } = opened;
      await scriptRan(page);
      expect(await page.getAttribute('body', 'data-state')).toBe('waiting');
      const place = (await page.textContent('[data-text=place]'))!;
      expect(place).toMatch(PLACE[b.lang]);
      // No site name set: the tab says the place alone (a tab in the background still shows it),
      // and nothing above the heading repeats the heading.
      expect(await page.title()).toBe(TITLE_PLACE[b.lang](place));
      expect(await page.isVisible('.brand')).toBe(false);
      expect(await page.textContent('.message')).toBe(TEXT[b.lang]['message']);
      expect(await page.textContent('[data-text=placeLabel]')).toBe(TEXT[b.lang]['placeLabel']);
      expect(await page.textContent('[data-text=detail]')).toMatch(AHEAD[b.lang]);
      expect(await page.textContent('[data-text=note]')).toBe(TEXT[b.lang]['noAction']);
      // How long the visitor may be away (queue_timeout_seconds, 60 s here), and the ticket only as
      // a reference for support, small, at the foot of the card: one number for the visitor.
      expect(await page.textContent('[data-text=away]')).toBe(TEXT[b.lang]['away']);
      expect(await page.textContent('[data-text=ticket]')).toMatch(REFERENCE[b.lang]);
      expect(await page.locator('.figures').textContent()).not.toMatch(/Reference|Referenz|お問い合わせ|المرجعي/);
      await checkVisitorPage(opened, b, 'waiting', TEXT[b.lang]['inLine']!, TITLE_PLACE[b.lang](place));
      const reference = await page.textContent('[data-text=ticket]');

      // A VIP link already used up: the page says why this visitor queues like everyone (keeping
      // the place it has), and drops the code from its address, with and without JavaScript.
      const code = await usedVipCode(rooms['waiting']!);
      const refused = (await page.goto(`${rooms['waiting']}/sale?item=7&wr_vip=${code}`))!;
      expect(refused.status()).toBe(200);
      expect(refused.headers()['refresh']).toBe('5; url=/sale?item=7');
      expect(await page.textContent('.vip-note')).toBe(TEXT[b.lang]['vipRefused']);
      expect(await page.textContent('[data-text=ticket]')).toBe(reference);
      await scriptRan(page);
      expect(page.url()).toBe(`${rooms['waiting']}/sale?item=7`);
      // (The place may have moved on: calls of tickets nobody holds lapse and pass to the next.)
      const now = (await page.textContent('[data-text=place]'))!;
      await checkVisitorPage({ ...opened, response: refused }, b, 'vip-used', TEXT[b.lang]['inLine']!, TITLE_PLACE[b.lang](now));

      // Away and back within queue_timeout_seconds: the tab closed (the browser keeps its cookie),
      // two more join behind, one is let in; the same place comes back, nearer the front.
      await page.close();
      for (let i = 0; i < 2; i++) await fetch(`${rooms['waiting']}/`).then((r) => r.arrayBuffer());
      await admitOne(rooms['waiting']!);
      const back = await opened.context.newPage();
      await back.goto(`${rooms['waiting']}/`);
      expect(await back.getAttribute('body', 'data-state')).toBe('waiting');
      expect(await back.textContent('[data-text=ticket]')).toBe(reference);
      expect(number(await back.textContent('[data-text=place]'))).toBeLessThanOrEqual(number(now) - 1);

      // The store goes away: the page says the place is kept, and still shows its reference.
      waitingStore.mode = 'error';
      try {
        const down = (await back.reload())!;
        expect(down.status()).toBe(200);
        expect(await back.getAttribute('body', 'data-state')).toBe('checking');
        expect(await back.textContent('[data-text=detail]')).toBe(TEXT[b.lang]['checkingBody']);
        expect(await back.textContent('[data-text=ticket]')).toBe(reference);
        await scriptRan(back);
        await checkVisitorPage({ page: back, context: opened.context, response: down }, b, 'store-down', TEXT[b.lang]['checking']!);
      } finally {
        waitingStore.mode = 'ok';
      }
      await opened.context.close();
    }
  });

  it('a logo on the site itself (page_logo_url = /brand/logo.svg) loads on the holding page: the site serves it, the queue does not hold it', async () => {
    for (const b of BROWSERS) {
      const before = logoRequests;
      const opened = await open(`${rooms['logo']}/`, b);
      const { page } = opened;
      expect(await page.getAttribute('body', 'data-state')).toBe('waiting');
      await page.waitForFunction(() => (document.querySelector('img.logo') as HTMLImageElement | null)?.complete === true);
      expect(await page.getAttribute('img.logo', 'src')).toBe('/brand/logo.svg');
      // Decoded as an image (a holding page in its place would not be): 96×48 scaled to the 48 px high slot.
      expect(await page.evaluate(() => (document.querySelector('img.logo') as HTMLImageElement).naturalWidth)).toBe(96);
      expect(await page.evaluate(() => (document.querySelector('img.logo') as HTMLImageElement).getBoundingClientRect().height)).toBe(48);
      expect(logoRequests).toBe(before + 1);
      // The site's name once, above the heading, and the heading once: in the visitor's language
      // where the operator wrote one (page_texts), else in the default language's (Arabic here).
      const name = { en: 'Demo shop', de: 'Demo-Laden', ja: 'デモショップ', ar: 'Demo shop' }[b.lang];
      const message = { en: 'Doors open at nine.', de: 'Einlass ab neun Uhr.', ja: '9時から入場できます。', ar: 'Doors open at nine.' }[b.lang];
      expect(await page.textContent('.brand')).toBe(name);
      expect(await page.textContent('.message')).toBe(message);
      const place = (await page.textContent('[data-text=place]'))!;
      expect(await page.title()).toBe(`${TITLE_PLACE[b.lang](place)} · ${name}`);
      expect((await page.evaluate(() => document.body.innerText)).split(name).length - 1).toBe(1);
      await checkVisitorPage(opened, b, 'logo', TEXT[b.lang]['inLine']!, TITLE_PLACE[b.lang](place));
      await opened.context.close();
    }
  });

  it('before the event opens: the opening time in the visitor’s own time zone, named as their browser names it', async () => {
    const at = new Date(startsAt);
    for (const b of BROWSERS) {
      const hm = new Intl.DateTimeFormat('en-GB', { timeZone: b.timezoneId, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(at);
      const zone = new Intl.DateTimeFormat(b.lang, { timeZone: b.timezoneId, timeZoneName: 'short' }).formatToParts(at).find((p) => p.type === 'timeZoneName')!.value;
      const expected = {
        en: `The line opens at ${hm}\u00a0${zone}`,
        de: `Die Warteschlange öffnet um ${hm}\u00a0Uhr\u00a0${zone}`,
        ja: `受付開始は${hm}（${zone}）です`,
        ar: `تُفتح قائمة الانتظار الساعة ${arabicDigits(hm)}\u00a0${zone}`,
      }[b.lang];
      const opened = await open(`${rooms['prequeue']}/`, b);
      const { page } = opened;
      expect(await page.getAttribute('body', 'data-state')).toBe('prequeue');
      // The edge wrote UTC; the script puts the visitor's own clock in its place.
      await expect.poll(() => page.textContent('[data-text=placeLabel]')).toBe(expected);
      expect(zone).not.toMatch(/^(UTC|GMT)$/);
      expect(await page.textContent('[data-text=place]')).toMatch(
        { en: /^Opens in about 2[456] minutes$/, de: /^Noch etwa 2[456] Minuten bis zur Öffnung$/, ja: /^開始まで約2[456]分$/, ar: /^تُفتح بعد حوالي ٢[٤٥٦] دقيقة$/ }[b.lang],
      );
      // A lottery (event_order = shuffle): no number that would look like a rank, and no "we are
      // letting visitors in" before anyone is; how long one may be away still holds.
      expect(await page.isVisible('[data-text=ticket]')).toBe(false);
      expect(await page.textContent('.message')).toBe(TEXT[b.lang]['prequeueMessage']);
      expect(await page.textContent('[data-text=away]')).toBe(TEXT[b.lang]['away']);
      await scriptRan(page);
      await checkVisitorPage(opened, b, 'prequeue', TEXT[b.lang]['prequeue']!);
      await opened.context.close();
    }
  });

  it('the event is over: no place in line, no promise to refresh, no Retry-After or Refresh, and the JSON for programs says the same', async () => {
    for (const b of BROWSERS) {
      // The page's timers on a clock the test moves: three refresh intervals pass in no time.
      const opened = await open(`${rooms['over']}/`, b, (page) => page.clock.install());
      const { page, response } = opened;
      const polls: string[] = [];
      page.on('request', (request) => {
        if (new URL(request.url()).pathname.endsWith('/status')) polls.push(request.url());
      });
      // Final, even where held visitors get 503 (hold_status): 410, and nothing asks to come back.
      expect(response.status()).toBe(410);
      expect(response.headers()['retry-after']).toBeUndefined();
      expect(response.headers()['refresh']).toBeUndefined();
      expect(await page.getAttribute('body', 'data-state')).toBe('over');
      expect(await page.textContent('[data-text=detail]')).toBe(TEXT[b.lang]['overBody']);
      // Nothing will change, so the script asks nothing: no poll over three refresh intervals
      // (the default refresh_seconds, 20 s), and no countdown or refresh note is shown.
      await page.clock.runFor(60_000);
      expect(polls).toEqual([]);
      expect(await page.isVisible('.next')).toBe(false);
      const shown = await page.evaluate(() => document.body.innerText);
      for (const said of [TEXT[b.lang]['inLine']!, TEXT[b.lang]['noAction']!, TEXT[b.lang]['message']!, TEXT[b.lang]['placeLabel']!]) expect(shown).not.toContain(said);
      expect(shown).not.toMatch(NEXT_UPDATE);
      // The page without JavaScript promises nothing either (with it, <noscript> is markup as text).
      expect((await page.textContent('noscript'))!.replace(/<[^>]*>/g, '').trim()).toBe('');
      expect(await page.isVisible('.indicator')).toBe(false);
      await checkVisitorPage(opened, b, 'over', TEXT[b.lang]['over']!);

      const json = await fetch(`${rooms['over']}/`, { headers: { accept: 'application/json', 'accept-language': b.locale } });
      expect(json.status).toBe(410);
      expect(json.headers.get('retry-after')).toBeNull();
      const body = (await json.json()) as { status: string; retry_after_seconds: unknown; message: string; place: unknown; texts: Record<string, string> };
      expect(body).toMatchObject({ status: 'over', retry_after_seconds: null, place: null, message: 'This event has ended.' });
      expect(body.texts['heading']).toBe(await page.textContent('h1'));
      expect(body.texts['detail']).toBe(await page.textContent('[data-text=detail]'));
      expect(body.texts['place']).toBe('');
      await opened.context.close();
    }
  });

  it('the emergency switch on hold: a newcomer waits with a place, told admission is paused and their place kept', async () => {
    for (const b of BROWSERS) {
      const opened = await open(`${rooms['hold']}/`, b);
      const { page } = opened;
      await scriptRan(page);
      expect(await page.getAttribute('body', 'data-state')).toBe('waiting');
      // Capacity for a hundred, yet nobody walks in.
      const place = (await page.textContent('[data-text=place]'))!;
      expect(place).toMatch(PLACE[b.lang]);
      expect(await page.textContent('[data-text=detail]')).toMatch(AHEAD[b.lang]);
      expect(await page.textContent('[data-text=estimate]')).toBe(TEXT[b.lang]['paused']);
      expect((await opened.context.cookies()).find((c) => c.name === 'waiting_room')).toBeDefined();
      await checkVisitorPage(opened, b, 'hold', TEXT[b.lang]['inLine']!, TITLE_PLACE[b.lang](place));
      await opened.context.close();
    }
  });

  it('the site does not answer: a 502 page in the visitor’s language that retries by itself; a program gets JSON', async () => {
    for (const b of BROWSERS) {
      const opened = await open(`${rooms['unreachable']}/`, b);
      const { page, response } = opened;
      expect(response.status()).toBe(502);
      expect(response.headers()['retry-after']).toBe('10');
      expect(response.headers()['refresh']).toBe('10');
      expect(await page.getAttribute('body', 'data-state')).toBe('unreachable');
      expect(await page.textContent('[data-text=detail]')).toBe(TEXT[b.lang]['unreachableBody']);
      // No place, no "you are in line", no "we are letting visitors in": the visitor was let in, the site failed.
      expect(await page.isVisible('[data-text=place]')).toBe(false);
      expect(await page.isVisible('.message')).toBe(false);
      const shown = await page.evaluate(() => document.body.innerText);
      for (const said of [TEXT[b.lang]['inLine']!, TEXT[b.lang]['message']!, TEXT[b.lang]['placeLabel']!]) expect(shown).not.toContain(said);
      await scriptRan(page);
      await checkVisitorPage(opened, b, 'unreachable', TEXT[b.lang]['unreachable']!);
      await opened.context.close();

      const json = await fetch(`${rooms['unreachable']}/`, { headers: { accept: 'application/json', 'accept-language': b.locale } });
      expect(json.status).toBe(502);
      expect(json.headers.get('content-type')).toMatch(/^application\/json/);
      expect(json.headers.get('retry-after')).toBe('10');
      expect(((await json.json()) as { error: string }).error).toBe('the site is not answering; please try again shortly');
    }
  });

  it('the store down (store_failure = hold) for a newcomer: no place yet, so none shown or said to be kept; the page retries (a visitor with a place: the waiting test)', async () => {
    for (const b of BROWSERS) {
      const opened = await open(`${rooms['storeDown']}/`, b);
      const { page, response } = opened;
      expect(response.status()).toBe(200);
      expect(response.headers()['refresh']).toBe('5');
      expect(await page.getAttribute('body', 'data-state')).toBe('checking');
      expect(await page.textContent('[data-text=detail]')).toBe(TEXT[b.lang]['joiningBody']);
      expect(await page.isVisible('[data-text=place]')).toBe(false);
      const shown = await page.evaluate(() => document.body.innerText);
      for (const said of [TEXT[b.lang]['checkingBody']!, TEXT[b.lang]['placeLabel']!, TEXT[b.lang]['away']!]) expect(shown).not.toContain(said);
      await scriptRan(page);
      await checkVisitorPage(opened, b, 'store-down-newcomer', TEXT[b.lang]['joining']!);
      await opened.context.close();
    }
  });

  it('the proof-of-work page as the edge renders it (before its script solves, or without JavaScript): it says what it needs', async () => {
    for (const b of BROWSERS) {
      // The script is held back, so the page stays as it arrived; browser.test.ts watches it solve.
      const opened = await open(`${rooms['pow']}/`, b, (page) => page.route('**/__wr/assets/holding.js', (route) => route.abort()));
      const { page } = opened;
      expect(await page.getAttribute('body', 'data-state')).toBe('checking');
      expect(await page.textContent('[data-text=note]')).toBe(TEXT[b.lang]['powNoScript']);
      // No place yet, so none shown and none said to be kept; no promise to try again by itself.
      const shown = await page.evaluate(() => document.body.innerText);
      for (const said of [TEXT[b.lang]['noAction']!, TEXT[b.lang]['placeLabel']!, TEXT[b.lang]['checkingBody']!]) expect(shown).not.toContain(said);
      expect(await page.isVisible('.figures .number')).toBe(false);
      expect(shown).not.toMatch(REFRESH_PROMISE);
      expect((await opened.context.cookies()).find((c) => c.name === 'waiting_room')).toBeUndefined();
      await checkVisitorPage(opened, b, 'pow', TEXT[b.lang]['joining']!);
      await opened.context.close();
    }
  });

  it('the challenge provider’s widget page, in English and Japanese (German: browser.test.ts)', async () => {
    for (const b of BROWSERS.filter((x) => x.lang !== 'de')) {
      // The widget as it shows before the person answers: the provider's script stands still.
      const opened = await open(`${rooms['challenge']}/`, b, (page) =>
        page.route(`${provider.url}/api.js`, (route) => route.fulfill({ contentType: 'text/javascript', body: "document.querySelector('[data-sitekey]').textContent = 'Widget';" })),
      );
      const { page } = opened;
      await page.waitForSelector('.challenge[data-sitekey]');
      await expect.poll(() => page.textContent('.challenge')).toBe('Widget');
      expect(await page.textContent('[data-text=note]')).toBe(TEXT[b.lang]['challengePrompt']);
      expect(await page.isVisible('[data-text=place]')).toBe(false);
      await checkVisitorPage(opened, b, 'challenge', TEXT[b.lang]['joining']!);
      await opened.context.close();
    }
  });

  it('the random draw in German, Japanese and Arabic (English: browser.test.ts)', async () => {
    await fetch(`${rooms['draw']}/`).then((r) => r.arrayBuffer());
    for (const b of BROWSERS.filter((x) => x.lang !== 'en')) {
      const opened = await open(`${rooms['draw']}/`, b);
      const { page } = opened;
      await scriptRan(page);
      expect(await page.textContent('[data-text=detail]')).toMatch(
        {
          de: /^Sie nehmen mit \d+ weiteren Person(en)? an der Auslosung teil$/,
          ja: /^あなたのほかに\d+人が抽選に参加しています$/,
          ar: /^يشارك معك في القرعة (شخص واحد آخر|شخصان آخران|[٠-٩]+ (أشخاص آخرون|شخصًا آخر|شخص آخر))$/,
        }[b.lang as 'de' | 'ja' | 'ar'],
      );
      // A lottery: no number that looks like a rank, and leaving the page leaves the draw, so no promise of a kept place.
      expect(await page.isVisible('[data-text=ticket]')).toBe(false);
      expect(await page.isVisible('[data-text=away]')).toBe(false);
      await checkVisitorPage(opened, b, 'draw', TEXT[b.lang]['draw']!);
      await opened.context.close();
    }
  });

  /** Lets the test say whether the tab is in the background, as a browser does when another tab is shown. */
  const visibilitySwitch = (page: Page) =>
    page.addInitScript(() => {
      let hidden = false;
      Object.defineProperty(document, 'hidden', { get: () => hidden });
      Object.defineProperty(document, 'visibilityState', { get: () => (hidden ? 'hidden' : 'visible') });
      (window as unknown as { wrSetHidden: (h: boolean) => void }).wrSetHidden = (h) => {
        hidden = h;
        document.dispatchEvent(new Event('visibilitychange'));
      };
    });
  const setHidden = (page: Page, hidden: boolean) => page.evaluate((h) => (window as unknown as { wrSetHidden: (h: boolean) => void }).wrSetHidden(h), hidden);
  /** A VIP code of `room` with one use, spent. */
  const usedVipCode = async (room: string): Promise<string> => {
    const made = await fetch(`${room}/__wr/api/vip`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` }, body: JSON.stringify({ count: 1, uses: 1 }) });
    const code = ((await made.json()) as { codes: { code: string }[] }).codes[0]!.code;
    expect((await fetch(`${room}/?wr_vip=${code}`, { redirect: 'manual' })).status).toBe(303);
    return code;
  };
  /** A place as a number, from the page's digits (Arabic ones included). */
  const number = (text: string | null): number => Number((text ?? '').replace(/[٠-٩]/g, (d) => String(ARABIC_DIGITS.indexOf(d))));
  const admitOne = async (room: string): Promise<void> => {
    const admitted = await fetch(`${room}/__wr/api/admit?count=1`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } });
    expect(admitted.status).toBe(200);
  };

  it('the visitor’s turn: the tab’s title and the page say so, and a tab in the background waits to be looked at before it goes to the site', async () => {
    for (const b of BROWSERS) {
      // The page's timers on a clock the test moves: its polls and waits take no time here.
      const opened = await open(`${rooms['turn']}/`, b, async (page) => {
        await page.clock.install();
        await visibilitySwitch(page);
      });
      const { page } = opened;
      await page.clock.runFor(100);
      await scriptRan(page);
      const place = (await page.textContent('[data-text=place]'))!;
      expect(await page.title()).toBe(`${TITLE_PLACE[b.lang](place)} · Demo shop`);
      // The tab goes to the background, and the visitor is let in.
      await setHidden(page, true);
      await admitOne(rooms['turn']!);
      await page.clock.runFor(5_000);
      await expect.poll(() => page.title()).toBe(`${TEXT[b.lang]['turn']} · Demo shop`);
      expect(await page.getAttribute('body', 'data-state')).toBe('turn');
      expect(await page.textContent('h1')).toBe(TEXT[b.lang]['turn']);
      expect(await page.textContent('[data-text=place]')).toBe('✓');
      await page.screenshot({ path: resolve(SHOTS, `state-turn-${b.lang}-${b.size}.png`), fullPage: true });
      expect(await layoutProblems(page)).toEqual([]);
      expect(await axeViolations(page)).toEqual([]);
      // In the background it stays, so its title keeps saying so.
      await page.clock.runFor(20_000);
      expect(await page.textContent('h1')).toBe(TEXT[b.lang]['turn']);
      // Looked at: the signal, then the site.
      await setHidden(page, false);
      await page.clock.runFor(1_500);
      await page.waitForFunction(() => document.querySelector('h1')?.textContent === 'The shop');
      await opened.context.close();
    }
  });

  describe('the console (English only, for any browser)', () => {
    const consoleAt = (width: number, locale = 'en-GB') =>
      browser.newContext({ bypassCSP: true, locale, httpCredentials: { username: 'admin', password: ADMIN_PASSWORD }, viewport: { width, height: 900 } });

    it('with the store down: a 503 page that says so, what still works and what waits; it stays put while the store is down and shows the console once it answers', async () => {
      for (const [width, size] of [[360, '360px'], [1100, 'desktop']] as const) {
        const context = await consoleAt(width, 'ja-JP');
        const page = await context.newPage();
        // The page's own timers on a clock the test moves, so its 10 s waits take no time here.
        await page.clock.install();
        let documents = 0;
        page.on('response', (r) => {
          if (r.request().resourceType() === 'document') documents++;
        });
        const response = (await page.goto(`${rooms['consoleDown']}/__wr/admin`))!;
        expect(response.status()).toBe(503);
        expect(response.headers()['retry-after']).toBe('10');
        // English, and says so to a Japanese browser's screen reader.
        expect(await page.getAttribute('html', 'lang')).toBe('en');
        expect(await page.locator('h1').allTextContents()).toEqual(['The queue store is not answering']);
        expect(await page.textContent('[role=alert]')).toMatch(
          /^Queue default: the queue store is unavailable \(.+\)\. This page asks again every 10 seconds and shows the console as soon as the store answers\.$/,
        );
        expect(await page.textContent('main')).toContain('New and waiting visitors see the "checking your place" page (store_failure = hold)');
        // An alert, and it looks like one (the error colours, not the green of a done notice).
        expect(await page.getAttribute('[role=alert]', 'class')).toBe('notice error');
        expect(await layoutProblems(page)).toEqual([]);
        expect(await brokenWords(page, 'main h1, main p, main li')).toEqual([]);
        await page.screenshot({ path: resolve(SHOTS, `state-console-store-down-${size}.png`), fullPage: true });
        // No reload under the reader's eyes (axe's meta-refresh rule, WCAG 2.2.1).
        expect(await axeViolations(page)).toEqual([]);
        if (size === 'desktop') {
          // Its script asks in the background; while the store is down, the page stays as it is.
          const asked = page.waitForResponse((r) => r.url().endsWith('/__wr/admin/live'));
          await page.clock.runFor(10_000);
          expect((await asked).status()).toBe(503);
          // The next ask answered (503) before the store comes back: one still on its way when the
          // store answers again would reload the page a second time.
          const askedAgain = page.waitForResponse((r) => r.url().endsWith('/__wr/admin/live'));
          await page.clock.runFor(10_000);
          expect((await askedAgain).status()).toBe(503);
          expect(await page.locator('h1').textContent()).toBe('The queue store is not answering');
          expect(documents).toBe(1);
          // The store answers again: the next ask finds it, and the console is back by itself.
          consoleStore.mode = 'ok';
          await page.clock.runFor(10_000);
          await page.waitForSelector('[data-figure=waiting]');
          expect(await page.locator('h1').textContent()).toBe('Waiting room · default');
          expect(documents).toBe(2);
        }
        await context.close();
      }
    });

    it('in rate mode: the active tile says it is not counted, live updates keep it so, and every tile’s text fits it at 360 px', async () => {
      for (const [width, size] of [[1100, 'desktop'], [360, '360px']] as const) {
        const context = await consoleAt(width, 'de-DE');
        const page = await context.newPage();
        await page.goto(`${rooms['rate']}/__wr/admin`);
        expect(await page.textContent('[data-figure=mode]')).toBe('rate: 5 every 60 s');
        expect(await page.textContent('[data-figure=active]')).toBe('not counted in rate mode');
        // After the first live update the tile still says so (the script writes what the server sends).
        await expect.poll(() => page.textContent('#live-state')).toMatch(/^updating every/);
        expect(await page.textContent('[data-figure=active]')).toBe('not counted in rate mode');
        // In the text size of the other worded tiles, not the big figures' size.
        expect(await page.getAttribute('[data-figure=active]', 'class')).toBe('text');
        expect(await layoutProblems(page, '.stats > div')).toEqual([]);
        expect(await brokenWords(page, '.stats dt, .stats dd')).toEqual([]);
        expect(await layoutProblems(page)).toEqual([]);
        await page.locator('.stats').screenshot({ path: resolve(SHOTS, `state-console-rate-tiles-${size}.png`) });
        await page.screenshot({ path: resolve(SHOTS, `state-console-rate-${size}.png`), fullPage: true });
        expect(await axeViolations(page)).toEqual([]);
        await context.close();
      }
    });
  });
});
