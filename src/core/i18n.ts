/**
 * The visitor-facing texts of the waiting room in six languages, and the number, plural, duration
 * and clock formatting they need, written by hand: the Fastly engine has no `Intl`, so nothing here
 * may touch it (or `toLocaleString`, which leans on it). Every locale is one `Messages` object, so
 * the compiler refuses a locale that lacks a text. Texts are plain strings; the page escapes them.
 */

export type Locale = 'en' | 'de' | 'fr' | 'es' | 'ja' | 'zh';

/** Every supported locale, English first (the default fallback). */
export const LOCALES: readonly Locale[] = ['en', 'de', 'fr', 'es', 'ja', 'zh'];

export function isLocale(value: unknown): value is Locale {
  return typeof value === 'string' && (LOCALES as readonly string[]).includes(value);
}

// ---------------------------------------------------------------------------------------------
// Negotiation

/** Header characters read at most; the rest is ignored (cut at an entry boundary). */
export const MAX_ACCEPT_LANGUAGE_CHARS = 1000;
/** Language ranges read at most from one header. */
export const MAX_ACCEPT_LANGUAGE_RANGES = 50;

const RANGE = /^(?:\*|[a-z]{1,8}(?:-[a-z0-9]{1,8})*)$/;
const QVALUE = /^q\s*=\s*(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

interface WeightedRange {
  readonly range: string;
  readonly q: number;
  readonly position: number;
}

/** The language tag we serve for each locale, lower-cased, as a range would name it. */
const SERVED_TAG: Readonly<Record<Locale, string>> = { en: 'en', de: 'de', fr: 'fr', es: 'es', ja: 'ja', zh: 'zh-hans' };

function parseAcceptLanguage(header: string): WeightedRange[] {
  let text = header;
  if (text.length > MAX_ACCEPT_LANGUAGE_CHARS) {
    // Cut at the last whole entry: a cut "q=0.9" must not become "q=0".
    const cut = text.lastIndexOf(',', MAX_ACCEPT_LANGUAGE_CHARS);
    text = cut < 0 ? '' : text.slice(0, cut);
  }
  const ranges: WeightedRange[] = [];
  for (const entry of text.split(',')) {
    if (ranges.length >= MAX_ACCEPT_LANGUAGE_RANGES) break;
    const [rawRange = '', ...params] = entry.split(';');
    const range = rawRange.trim().toLowerCase().replace(/_/g, '-');
    if (range === '') continue;
    if (!RANGE.test(range)) continue;
    let q = 1;
    let valid = true;
    for (const param of params) {
      const p = param.trim().toLowerCase();
      if (!p.startsWith('q')) continue; // other parameters carry no meaning for us
      const m = QVALUE.exec(p);
      if (m === null || m[1] === undefined) {
        valid = false; // a weight we cannot read: we cannot know what the visitor meant
        break;
      }
      q = Number(m[1]);
    }
    if (valid) ranges.push({ range, q, position: ranges.length });
  }
  return ranges;
}

/** RFC 4647 lookup, reduced to our tags: truncate the range until its primary subtag is left. */
function lookup(range: string): Locale | undefined {
  const primary = range.split('-')[0];
  // Every Chinese range, Traditional ones included, gets Simplified Chinese: closer than English.
  return isLocale(primary) ? primary : undefined;
}

/**
 * The locale to serve for an `Accept-Language` header (RFC 9110 §12.5.4, RFC 4647 §3.4 lookup):
 * ranges by weight, then by position; `de-CH` → de, `zh-Hant-TW` → zh; `*` → the fallback.
 * `q=0` marks a locale unacceptable only when the range names exactly what we would serve (`de`,
 * `zh`, `zh-Hans`), not a regional variant of it. With nothing acceptable, or a header we cannot
 * read, the fallback is served: a page in some language beats a 406. Never throws; reads at most
 * MAX_ACCEPT_LANGUAGE_CHARS characters and MAX_ACCEPT_LANGUAGE_RANGES ranges.
 */
export function negotiateLocale(acceptLanguage: string | null | undefined, fallback: Locale = 'en'): Locale {
  const safeFallback: Locale = isLocale(fallback) ? fallback : 'en';
  if (typeof acceptLanguage !== 'string' || acceptLanguage === '') return safeFallback;
  const ranges = parseAcceptLanguage(acceptLanguage);
  const rejected = new Set<Locale>();
  for (const { range, q } of ranges) {
    if (q !== 0) continue;
    for (const locale of LOCALES) if (range === locale || range === SERVED_TAG[locale]) rejected.add(locale);
  }
  const ordered = ranges.filter((r) => r.q > 0).sort((a, b) => b.q - a.q || a.position - b.position);
  for (const { range } of ordered) {
    if (range === '*') {
      if (!rejected.has(safeFallback)) return safeFallback;
      const other = LOCALES.find((l) => !rejected.has(l));
      if (other !== undefined) return other;
      continue;
    }
    const locale = lookup(range);
    if (locale !== undefined && !rejected.has(locale)) return locale;
  }
  return safeFallback;
}

// ---------------------------------------------------------------------------------------------
// Plurals and numbers

export type PluralCategory = 'one' | 'other';

/**
 * CLDR cardinal category, reduced to what our texts use. en/de: one for exactly 1; es: one for 1;
 * fr: one for 0 and 1 (and any 0 ≤ |n| < 2); ja/zh: always other. CLDR also gives es and fr a
 * `many` category for multiples of a million, which only changes the wording before a spelled-out
 * "million" ("un million de personnes"); we always write digits ("1 000 000 personnes"), where the
 * plural is right, so `many` is folded into `other`. Non-finite input is `other`.
 */
export function pluralCategory(locale: Locale, n: number): PluralCategory {
  if (!Number.isFinite(n)) return 'other';
  const abs = Math.abs(n);
  switch (locale) {
    case 'fr':
      return abs < 2 ? 'one' : 'other';
    case 'ja':
    case 'zh':
      return 'other';
    default:
      return abs === 1 ? 'one' : 'other';
  }
}

const NNBSP = '\u202f'; // narrow no-break space: French digit groups and space before : ; ! ?
const NBSP = '\u00a0';

interface NumberStyle {
  readonly group: string;
  /** CLDR minimumGroupingDigits: Spanish leaves four-digit numbers ungrouped ("1234", "12.345"). */
  readonly minimumGroupingDigits: number;
}

const NUMBER_STYLE: Readonly<Record<Locale, NumberStyle>> = {
  en: { group: ',', minimumGroupingDigits: 1 },
  de: { group: '.', minimumGroupingDigits: 1 },
  fr: { group: NNBSP, minimumGroupingDigits: 1 },
  es: { group: '.', minimumGroupingDigits: 2 },
  ja: { group: ',', minimumGroupingDigits: 1 },
  zh: { group: ',', minimumGroupingDigits: 1 },
};

/**
 * An integer with the locale's digit grouping: en/ja/zh "1,234,567", de "1.234.567", es "1234" and
 * "12.345", fr "1 234 567" (narrow no-break spaces). Fractions are rounded to the nearest integer,
 * a negative number gets a leading "-", and NaN or an infinity gives "–" (nothing sensible to show).
 */
export function formatNumber(locale: Locale, n: number): string {
  if (!Number.isFinite(n)) return '–';
  const rounded = Math.round(n);
  // BigInt writes every digit, where String(1e21) would switch to exponent notation.
  const digits = BigInt(Math.abs(rounded)).toString();
  const style = NUMBER_STYLE[locale] ?? NUMBER_STYLE.en;
  const grouped = digits.length < 3 + style.minimumGroupingDigits ? digits : digits.replace(/\B(?=(\d{3})+$)/g, style.group);
  return rounded < 0 ? `-${grouped}` : grouped;
}

/** A count for a sentence: a whole, non-negative number (a caller's NaN or -1 reads as 0). */
function toCount(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.round(n) : 0;
}

// ---------------------------------------------------------------------------------------------
// Durations and clock times

interface DurationWords {
  readonly lessThanAMinute: string;
  about(text: string): string;
  minutes(n: string, category: PluralCategory): string;
  hours(n: string, category: PluralCategory): string;
  join(hours: string, minutes: string): string;
}

const DURATION_WORDS: Readonly<Record<Locale, DurationWords>> = {
  en: {
    lessThanAMinute: 'less than a minute',
    about: (t) => `about ${t}`,
    minutes: (n, c) => `${n} ${c === 'one' ? 'minute' : 'minutes'}`,
    hours: (n, c) => `${n} ${c === 'one' ? 'hour' : 'hours'}`,
    join: (h, m) => `${h} ${m}`,
  },
  de: {
    lessThanAMinute: 'weniger als eine Minute',
    about: (t) => `etwa ${t}`,
    minutes: (n, c) => `${n} ${c === 'one' ? 'Minute' : 'Minuten'}`,
    hours: (n, c) => `${n} ${c === 'one' ? 'Stunde' : 'Stunden'}`,
    join: (h, m) => `${h} und ${m}`,
  },
  fr: {
    lessThanAMinute: 'moins d’une minute',
    about: (t) => `environ ${t}`,
    minutes: (n, c) => `${n} ${c === 'one' ? 'minute' : 'minutes'}`,
    hours: (n, c) => `${n} ${c === 'one' ? 'heure' : 'heures'}`,
    join: (h, m) => `${h} et ${m}`,
  },
  es: {
    lessThanAMinute: 'menos de un minuto',
    about: (t) => `aproximadamente ${t}`,
    minutes: (n, c) => `${n} ${c === 'one' ? 'minuto' : 'minutos'}`,
    hours: (n, c) => `${n} ${c === 'one' ? 'hora' : 'horas'}`,
    join: (h, m) => `${h} y ${m}`,
  },
  ja: {
    lessThanAMinute: '1分未満',
    about: (t) => `約${t}`,
    minutes: (n) => `${n}分`,
    hours: (n) => `${n}時間`,
    join: (h, m) => `${h}${m}`,
  },
  zh: {
    lessThanAMinute: '不到一分钟',
    about: (t) => `约${t}`,
    minutes: (n) => `${n}分钟`,
    hours: (n) => `${n}小时`,
    join: (h, m) => `${h}${m}`,
  },
};

/** Waits are capped here (41 days and a bit): beyond it, a number means nothing to a visitor. */
const MAX_DURATION_SECONDS = 999 * 3600;

/**
 * A wait in words, as `estimate.ts` does in English: under a minute → "less than a minute";
 * whole minutes below an hour ("about 4 minutes"); hours with minutes to the nearest five below
 * three hours ("about 1 hour 20 minutes"), whole hours beyond. NaN and negative read as 0.
 * Japanese and Chinese run together without spaces (約1時間20分, 约5分钟).
 */
export function formatDuration(locale: Locale, seconds: number): string {
  const words = DURATION_WORDS[locale] ?? DURATION_WORDS.en;
  const s = Number.isNaN(seconds) || seconds < 0 ? 0 : Math.min(seconds, MAX_DURATION_SECONDS);
  if (s < 60) return words.lessThanAMinute;
  const count = (n: number, unit: 'minutes' | 'hours'): string => words[unit](formatNumber(locale, n), pluralCategory(locale, n));
  const minutes = Math.round(s / 60);
  if (minutes < 60) return words.about(count(minutes, 'minutes'));
  const hours = Math.floor(minutes / 60);
  // Past a few hours, minutes are noise.
  const rest = hours >= 3 ? 0 : Math.round((minutes % 60) / 5) * 5;
  if (rest === 0) return words.about(count(hours, 'hours'));
  if (rest === 60) return words.about(count(hours + 1, 'hours'));
  return words.about(words.join(count(hours, 'hours'), count(rest, 'minutes')));
}

export interface ClockOptions {
  /**
   * A zone name to show after the time, such as "UTC", for a time the visitor must read against
   * their own clock. Attached with a no-break space (full-width brackets in ja/zh).
   * @default undefined (no zone shown)
   */
  readonly zoneLabel?: string;
}

/**
 * The 24-hour time of `date` shifted by `utcOffsetMinutes`, as "09:05" in every locale; German
 * adds "Uhr" ("09:05 Uhr"), as German sentences want it. With `zoneLabel`: "09:05 UTC",
 * "09:05 Uhr UTC", "09:05（UTC）". An invalid date gives "--:--".
 */
export function formatClock(locale: Locale, date: Date, utcOffsetMinutes = 0, options: ClockOptions = {}): string {
  const offset = Number.isFinite(utcOffsetMinutes) ? utcOffsetMinutes : 0;
  // Not `instanceof`: a Date from another realm (a worker, a vm context) is still a Date.
  const time = Object.prototype.toString.call(date) === '[object Date]' ? date.getTime() : Number.NaN;
  let clock = '--:--';
  if (Number.isFinite(time)) {
    const shifted = new Date(time + Math.round(offset) * 60_000);
    if (Number.isFinite(shifted.getTime())) {
      clock = `${String(shifted.getUTCHours()).padStart(2, '0')}:${String(shifted.getUTCMinutes()).padStart(2, '0')}`;
    }
  }
  if (locale === 'de') clock = `${clock}${NBSP}Uhr`;
  const zone = options.zoneLabel?.trim();
  if (zone === undefined || zone === '') return clock;
  return locale === 'ja' || locale === 'zh' ? `${clock}（${zone}）` : `${clock}${NBSP}${zone}`;
}

// ---------------------------------------------------------------------------------------------
// Messages

/**
 * Every text a visitor may see. Count arguments are formatted with the locale's digits and plural;
 * `durationText` comes from formatDuration and `clockText` from formatClock of the same locale, and
 * each sentence is worded so that text fits in it as it is (German keeps it in the nominative).
 */
export interface Messages {
  readonly locale: Locale;
  /** For `<html lang>`. */
  readonly htmlLang: string;
  readonly dir: 'ltr';
  /** The language's name in itself, for a language menu. */
  readonly languageName: string;
  readonly inLine: string;
  readonly placeLabel: string;
  /** `n` visitors ahead; 0 says the visitor is next. */
  ahead(n: number): string;
  estimate(durationText: string): string;
  /** The line has not moved yet, so there is no estimate. */
  readonly estimateUnknown: string;
  readonly paused: string;
  readonly front: string;
  readonly noAction: string;
  readonly progressLabel: string;
  updatedAt(clockText: string): string;
  nextUpdate(seconds: number): string;
  /** For the page without JavaScript, which reloads itself. */
  refreshNote(seconds: number): string;
  /** The proof-of-work page without JavaScript: a place in line needs it. */
  readonly powNoScript: string;
  /** The holding page's message when `page_message` is not set. */
  readonly defaultMessage: string;
  /** The challenge hook's page without JavaScript: the check needs it (see challenge.ts). */
  readonly challengeNoScript: string;
  /** The challenge hook's page above the provider's widget. */
  readonly challengePrompt: string;
  ticket(n: number): string;
  readonly admitted: string;
  readonly continueLink: string;
  /** The store cannot be reached: the visitor keeps their place while the page retries. */
  readonly checkingTitle: string;
  /** The site (the origin) did not answer: the page says so and tries again. */
  readonly unreachableTitle: string;
  readonly unreachableBody: string;
  readonly checkingBody: string;
  readonly prequeueTitle: string;
  prequeueOpensAt(clockText: string): string;
  countdown(durationText: string): string;
  readonly prequeueShuffle: string;
  readonly prequeueFifo: string;
  readonly eventOverTitle: string;
  readonly eventOverBody: string;
  readonly drawTitle: string;
  /** `n` other visitors in the draw besides this one. */
  drawWaiting(n: number): string;
  readonly drawExplain: string;
  readonly lastUpdateFailed: string;
}

/** A count and its plural category, ready for a sentence. */
function counted(locale: Locale, n: number): { readonly text: string; readonly one: boolean; readonly n: number } {
  const c = toCount(n);
  return { text: formatNumber(locale, c), one: pluralCategory(locale, c) === 'one', n: c };
}

const EN: Messages = {
  locale: 'en',
  htmlLang: 'en',
  dir: 'ltr',
  languageName: 'English',
  inLine: 'You are in line',
  placeLabel: 'Your place in line',
  ahead: (n) => {
    const c = counted('en', n);
    if (c.n === 0) return 'You are next';
    return c.one ? `${c.text} person is ahead of you` : `${c.text} people are ahead of you`;
  },
  estimate: (t) => `Estimated wait: ${t}`,
  estimateUnknown: 'The line has not moved yet, so we cannot estimate your wait.',
  paused: 'Admission is paused for a moment; you keep your place.',
  front: 'You are at the front: you go in as soon as someone leaves.',
  noAction: 'You don’t need to do anything: keep this page open and it will take you to the site when it’s your turn.',
  progressLabel: 'Progress to the front',
  updatedAt: (clock) => `Updated at ${clock}`,
  nextUpdate: (s) => {
    const c = counted('en', s);
    return `Next update in ${c.text} ${c.one ? 'second' : 'seconds'}`;
  },
  powNoScript: 'To give you a place in line, this page does a short calculation in your browser. Please turn on JavaScript and reload the page.',
  defaultMessage: 'We are letting visitors in a few at a time to keep the site fast for everyone.',
  challengeNoScript: 'Before you get a place in line, this site checks that you are a person. The check needs JavaScript: please turn it on and reload the page.',
  challengePrompt: 'Please complete the check below to get your place in line.',
  refreshNote: (s) => {
    const c = counted('en', s);
    return c.one ? 'This page refreshes every second.' : `This page refreshes every ${c.text} seconds.`;
  },
  ticket: (n) => `Ticket ${formatNumber('en', toCount(n))}`,
  admitted: 'It’s your turn! Taking you to the site…',
  continueLink: 'Continue to the site',
  checkingTitle: 'Checking your place',
  unreachableTitle: 'The site is not answering',
  unreachableBody: 'The site did not answer just now. This page will try again by itself in a few seconds.',
  checkingBody: 'We are checking your place in line. You keep it in the meantime, and this page will try again by itself.',
  prequeueTitle: 'The line opens soon',
  prequeueOpensAt: (clock) => `The line opens at ${clock}`,
  countdown: (t) => `Opens in ${t}`,
  prequeueShuffle:
    'When it opens, everyone who is here gets a place in line at random, so there is no need to rush: arriving earlier does not help.',
  prequeueFifo: 'When it opens, places follow the order of arrival.',
  eventOverTitle: 'This event has ended',
  eventOverBody: 'Thank you for your interest. The waiting room is closed.',
  drawTitle: 'You are in the draw',
  drawWaiting: (n) => {
    const c = counted('en', n);
    if (c.n === 0) return 'You are the only one in the draw right now';
    return c.one ? `You are in the draw with ${c.text} other person` : `You are in the draw with ${c.text} others`;
  },
  drawExplain:
    'Each time there is room, visitors are drawn at random from everyone waiting on this page. Keep it open to stay in the draw.',
  lastUpdateFailed: 'Could not update just now; trying again.',
};

const DE: Messages = {
  locale: 'de',
  htmlLang: 'de',
  dir: 'ltr',
  languageName: 'Deutsch',
  inLine: 'Sie sind in der Warteschlange',
  placeLabel: 'Ihr Platz in der Warteschlange',
  ahead: (n) => {
    const c = counted('de', n);
    if (c.n === 0) return 'Sie sind als Nächstes an der Reihe';
    return c.one ? `${c.text} Person ist vor Ihnen` : `${c.text} Personen sind vor Ihnen`;
  },
  estimate: (t) => `Geschätzte Wartezeit: ${t}`,
  estimateUnknown: 'Die Warteschlange hat sich noch nicht bewegt, daher können wir Ihre Wartezeit noch nicht schätzen.',
  paused: 'Der Einlass ist kurz unterbrochen; Ihr Platz bleibt Ihnen erhalten.',
  front: 'Sie sind ganz vorne: Sie kommen hinein, sobald ein Platz frei wird.',
  noAction:
    'Sie müssen nichts weiter tun: Lassen Sie diese Seite einfach geöffnet, sie bringt Sie zur Website, sobald Sie an der Reihe sind.',
  progressLabel: 'Fortschritt in der Warteschlange',
  updatedAt: (clock) => `Aktualisiert um ${clock}`,
  nextUpdate: (s) => {
    const c = counted('de', s);
    return `Nächste Aktualisierung in ${c.text} ${c.one ? 'Sekunde' : 'Sekunden'}`;
  },
  powNoScript: 'Um Ihnen einen Platz in der Warteschlange zu geben, führt diese Seite eine kurze Berechnung in Ihrem Browser aus. Bitte aktivieren Sie JavaScript und laden Sie die Seite neu.',
  defaultMessage: 'Wir lassen Besucher nach und nach ein, damit die Website für alle schnell bleibt.',
  challengeNoScript: 'Bevor Sie einen Platz in der Warteschlange erhalten, prüft diese Website, ob Sie ein Mensch sind. Die Prüfung braucht JavaScript: Bitte aktivieren Sie es und laden Sie die Seite neu.',
  challengePrompt: 'Bitte schließen Sie die Prüfung unten ab, um Ihren Platz in der Warteschlange zu erhalten.',
  refreshNote: (s) => {
    const c = counted('de', s);
    return c.one ? 'Diese Seite wird jede Sekunde aktualisiert.' : `Diese Seite wird alle ${c.text} Sekunden aktualisiert.`;
  },
  ticket: (n) => `Wartenummer ${formatNumber('de', toCount(n))}`,
  admitted: `Sie sind an der Reihe! Wir leiten Sie zur Website weiter${NBSP}…`,
  continueLink: 'Weiter zur Website',
  checkingTitle: 'Wir prüfen Ihren Platz',
  unreachableTitle: 'Die Website antwortet nicht',
  unreachableBody: 'Die Website hat gerade nicht geantwortet. Diese Seite versucht es in wenigen Sekunden von selbst erneut.',
  checkingBody:
    'Wir prüfen gerade Ihren Platz in der Warteschlange. Er bleibt Ihnen so lange erhalten, und diese Seite versucht es von selbst erneut.',
  prequeueTitle: 'Die Warteschlange öffnet bald',
  prequeueOpensAt: (clock) => `Die Warteschlange öffnet um ${clock}`,
  // "Noch … bis zur Öffnung" keeps the duration in the nominative ("in weniger als einer Minute" would not).
  countdown: (t) => `Noch ${t} bis zur Öffnung`,
  prequeueShuffle:
    'Sobald sie öffnet, erhalten alle, die dann hier sind, per Zufall einen Platz in der Warteschlange. Sie müssen sich also nicht beeilen: Wer früher kommt, hat keinen Vorteil.',
  prequeueFifo: 'Sobald sie öffnet, werden die Plätze in der Reihenfolge der Ankunft vergeben.',
  eventOverTitle: 'Diese Veranstaltung ist beendet',
  eventOverBody: 'Vielen Dank für Ihr Interesse. Der Warteraum ist geschlossen.',
  drawTitle: 'Sie nehmen an der Auslosung teil',
  drawWaiting: (n) => {
    const c = counted('de', n);
    if (c.n === 0) return 'Außer Ihnen nimmt gerade niemand an der Auslosung teil';
    return c.one
      ? `Sie nehmen mit ${c.text} weiteren Person an der Auslosung teil`
      : `Sie nehmen mit ${c.text} weiteren Personen an der Auslosung teil`;
  },
  drawExplain:
    'Immer wenn Platz frei wird, wird unter allen, die auf dieser Seite warten, zufällig ausgelost, wer hineinkommt. Lassen Sie die Seite geöffnet, um in der Auslosung zu bleiben.',
  lastUpdateFailed: 'Die Aktualisierung hat gerade nicht geklappt; wir versuchen es erneut.',
};

// French typography: a narrow no-break space before : ; ! ?
const FR: Messages = {
  locale: 'fr',
  htmlLang: 'fr',
  dir: 'ltr',
  languageName: 'Français',
  inLine: 'Vous êtes dans la file d’attente',
  placeLabel: 'Votre place dans la file',
  ahead: (n) => {
    const c = counted('fr', n);
    if (c.n === 0) return 'Il n’y a plus personne devant vous';
    return c.one ? `${c.text} personne est devant vous` : `${c.text} personnes sont devant vous`;
  },
  estimate: (t) => `Temps d’attente estimé${NNBSP}: ${t}`,
  estimateUnknown: `La file n’a pas encore avancé${NNBSP}: nous ne pouvons pas encore estimer votre temps d’attente.`,
  paused: `Les entrées sont suspendues un instant${NNBSP}; vous gardez votre place.`,
  front: `Vous êtes en tête de file${NNBSP}: vous entrerez dès qu’une place se libérera.`,
  noAction: `Vous n’avez rien à faire${NNBSP}: gardez simplement cette page ouverte, elle vous mènera sur le site dès que ce sera votre tour.`,
  progressLabel: 'Progression vers la tête de file',
  updatedAt: (clock) => `Mis à jour à ${clock}`,
  nextUpdate: (s) => {
    const c = counted('fr', s);
    return `Prochaine mise à jour dans ${c.text} ${c.one ? 'seconde' : 'secondes'}`;
  },
  powNoScript: 'Pour vous donner une place dans la file, cette page effectue un court calcul dans votre navigateur. Veuillez activer JavaScript et recharger la page.',
  defaultMessage: 'Nous laissons entrer les visiteurs petit à petit pour que le site reste rapide pour tout le monde.',
  challengeNoScript: 'Avant de vous donner une place dans la file, ce site vérifie que vous êtes une personne. Cette vérification nécessite JavaScript : veuillez l’activer et recharger la page.',
  challengePrompt: 'Veuillez effectuer la vérification ci-dessous pour obtenir votre place dans la file.',
  refreshNote: (s) => {
    const c = counted('fr', s);
    return c.n === 1 ? 'Cette page s’actualise chaque seconde.' : `Cette page s’actualise toutes les ${c.text} ${c.one ? 'seconde' : 'secondes'}.`;
  },
  ticket: (n) => `Ticket n°${NBSP}${formatNumber('fr', toCount(n))}`,
  admitted: `C’est votre tour${NNBSP}! Nous vous emmenons sur le site…`,
  continueLink: 'Continuer vers le site',
  checkingTitle: 'Vérification de votre place',
  unreachableTitle: 'Le site ne répond pas',
  unreachableBody: 'Le site n’a pas répondu à l’instant. Cette page réessaiera d’elle-même dans quelques secondes.',
  checkingBody:
    'Nous vérifions votre place dans la file. Vous la conservez pendant ce temps, et cette page réessaiera d’elle-même.',
  prequeueTitle: 'La file d’attente ouvre bientôt',
  prequeueOpensAt: (clock) => `La file d’attente ouvre à ${clock}`,
  countdown: (t) => `Ouverture dans ${t}`,
  prequeueShuffle: `À l’ouverture, chaque personne présente reçoit une place dans la file, tirée au hasard${NNBSP}: inutile de vous presser, arriver plus tôt ne donne aucun avantage.`,
  prequeueFifo: 'À l’ouverture, les places sont attribuées par ordre d’arrivée.',
  eventOverTitle: 'Cet événement est terminé',
  eventOverBody: 'Merci de votre intérêt. La salle d’attente est fermée.',
  drawTitle: 'Vous participez au tirage au sort',
  drawWaiting: (n) => {
    const c = counted('fr', n);
    if (c.n === 0) return 'Personne d’autre ne participe au tirage pour l’instant';
    return c.one
      ? `Vous participez au tirage avec ${c.text} autre personne`
      : `Vous participez au tirage avec ${c.text} autres personnes`;
  },
  drawExplain:
    'Chaque fois qu’une place se libère, des visiteurs sont tirés au sort parmi toutes les personnes qui attendent sur cette page. Gardez-la ouverte pour rester dans le tirage.',
  lastUpdateFailed: `Mise à jour impossible pour le moment${NNBSP}; nouvelle tentative en cours.`,
};

const ES: Messages = {
  locale: 'es',
  htmlLang: 'es',
  dir: 'ltr',
  languageName: 'Español',
  inLine: 'Está en la fila',
  placeLabel: 'Su lugar en la fila',
  ahead: (n) => {
    const c = counted('es', n);
    if (c.n === 0) return 'No hay nadie delante de usted';
    return c.one ? `Hay ${c.text} persona delante de usted` : `Hay ${c.text} personas delante de usted`;
  },
  estimate: (t) => `Tiempo de espera estimado: ${t}`,
  estimateUnknown: 'La fila aún no ha avanzado, así que todavía no podemos estimar su tiempo de espera.',
  paused: 'El acceso está en pausa por un momento; conserva su lugar.',
  front: 'Está al principio de la fila: entrará en cuanto alguien salga.',
  noAction: 'No necesita hacer nada: mantenga esta página abierta y le llevará al sitio cuando sea su turno.',
  progressLabel: 'Avance hacia el principio de la fila',
  // "a las 09:05" would need "a la" at one o'clock: a label avoids the article.
  updatedAt: (clock) => `Última actualización: ${clock}`,
  nextUpdate: (s) => {
    const c = counted('es', s);
    return `Próxima actualización en ${c.text} ${c.one ? 'segundo' : 'segundos'}`;
  },
  powNoScript: 'Para darle un lugar en la fila, esta página hace un breve cálculo en su navegador. Active JavaScript y vuelva a cargar la página.',
  defaultMessage: 'Dejamos pasar a los visitantes poco a poco para que el sitio siga siendo rápido para todos.',
  challengeNoScript: 'Antes de darle un lugar en la fila, este sitio comprueba que usted es una persona. La comprobación necesita JavaScript: actívelo y vuelva a cargar la página.',
  challengePrompt: 'Complete la comprobación de abajo para obtener su lugar en la fila.',
  refreshNote: (s) => {
    const c = counted('es', s);
    return c.one ? 'Esta página se actualiza cada segundo.' : `Esta página se actualiza cada ${c.text} segundos.`;
  },
  ticket: (n) => `Turno n.º ${formatNumber('es', toCount(n))}`,
  admitted: '¡Es su turno! Le estamos llevando al sitio…',
  continueLink: 'Continuar al sitio',
  checkingTitle: 'Comprobando su lugar',
  unreachableTitle: 'El sitio no responde',
  unreachableBody: 'El sitio no ha respondido hace un momento. Esta página volverá a intentarlo sola en unos segundos.',
  checkingBody:
    'Estamos comprobando su lugar en la fila. Lo conserva mientras tanto, y esta página volverá a intentarlo automáticamente.',
  prequeueTitle: 'La fila abre pronto',
  prequeueOpensAt: (clock) => `Apertura de la fila: ${clock}`,
  countdown: (t) => `Abre en ${t}`,
  prequeueShuffle:
    'Cuando abra, cada persona que esté aquí recibirá un lugar en la fila al azar, así que no hace falta darse prisa: llegar antes no supone ninguna ventaja.',
  prequeueFifo: 'Cuando abra, los lugares se asignarán por orden de llegada.',
  eventOverTitle: 'Este evento ha terminado',
  eventOverBody: 'Gracias por su interés. La sala de espera está cerrada.',
  drawTitle: 'Participa en el sorteo',
  drawWaiting: (n) => {
    const c = counted('es', n);
    if (c.n === 0) return 'Por ahora nadie más participa en el sorteo';
    return c.one ? `Participa en el sorteo con ${c.text} persona más` : `Participa en el sorteo con ${c.text} personas más`;
  },
  drawExplain:
    'Cada vez que queda un lugar libre, se elige al azar entre todas las personas que esperan en esta página. Mantenga la página abierta para seguir en el sorteo.',
  lastUpdateFailed: 'No se pudo actualizar ahora mismo; lo intentamos de nuevo.',
};

// Japanese and Chinese have no grammatical plural; counts take a counter word (人, 秒) instead.
const JA: Messages = {
  locale: 'ja',
  htmlLang: 'ja',
  dir: 'ltr',
  languageName: '日本語',
  inLine: '順番待ちの列に並んでいます',
  placeLabel: 'あなたの順番',
  ahead: (n) => {
    const c = counted('ja', n);
    return c.n === 0 ? '次はあなたの番です' : `あなたの前に${c.text}人が並んでいます`;
  },
  estimate: (t) => `予想待ち時間：${t}`,
  estimateUnknown: '列がまだ動いていないため、待ち時間はまだお知らせできません。',
  paused: '入場を一時的に停止しています。あなたの順番はそのまま保たれます。',
  front: '列の先頭です。空きが出しだい、すぐにご案内します。',
  noAction: '操作は必要ありません。このページを開いたままにしておけば、順番が来たときに自動でサイトへご案内します。',
  progressLabel: '先頭までの進み具合',
  updatedAt: (clock) => `最終更新：${clock}`,
  nextUpdate: (s) => `次の更新まで${counted('ja', s).text}秒`,
  powNoScript: '列に並んでいただくため、このページはブラウザで短い計算を行います。JavaScriptを有効にして、ページを再読み込みしてください。',
  defaultMessage: 'サイトを快適にご利用いただけるよう、少しずつご案内しています。',
  challengeNoScript: '列に並んでいただく前に、このサイトはお客様が人間であることを確認します。確認にはJavaScriptが必要です。有効にして、ページを再読み込みしてください。',
  challengePrompt: '列に並ぶには、下の確認を完了してください。',
  refreshNote: (s) => `このページは${counted('ja', s).text}秒ごとに自動で更新されます。`,
  ticket: (n) => `整理番号：${formatNumber('ja', toCount(n))}`,
  admitted: 'お待たせしました！サイトへご案内しています…',
  continueLink: 'サイトへ進む',
  checkingTitle: '順番を確認しています',
  unreachableTitle: 'サイトが応答していません',
  unreachableBody: 'サイトからただいま応答がありませんでした。このページは数秒後に自動で再試行します。',
  checkingBody: 'ただいま、あなたの順番を確認しています。その間も順番は保たれます。このページは自動で再試行します。',
  prequeueTitle: 'まもなく受付を開始します',
  prequeueOpensAt: (clock) => `受付開始は${clock}です`,
  countdown: (t) => `開始まで${t}`,
  prequeueShuffle:
    '受付開始時にこのページにいる方全員に、順番がランダムに割り当てられます。早く来ても有利にはならないので、急ぐ必要はありません。',
  prequeueFifo: '受付開始後は、到着順にご案内します。',
  eventOverTitle: 'このイベントは終了しました',
  eventOverBody: 'ご関心をお寄せいただき、ありがとうございました。待合室は閉鎖しました。',
  drawTitle: '抽選に参加しています',
  drawWaiting: (n) => {
    const c = counted('ja', n);
    return c.n === 0 ? '現在、抽選に参加しているのはあなただけです' : `あなたのほかに${c.text}人が抽選に参加しています`;
  },
  drawExplain:
    '空きが出るたびに、このページで待っている方の中から抽選でご案内します。抽選に参加し続けるには、このページを開いたままにしてください。',
  lastUpdateFailed: '更新できませんでした。再試行しています。',
};

const ZH: Messages = {
  locale: 'zh',
  htmlLang: 'zh-Hans',
  dir: 'ltr',
  languageName: '简体中文',
  inLine: '您正在排队',
  placeLabel: '您的排队位置',
  ahead: (n) => {
    const c = counted('zh', n);
    return c.n === 0 ? '下一位就是您' : `您前面还有${c.text}人`;
  },
  estimate: (t) => `预计等待时间：${t}`,
  estimateUnknown: '队伍尚未开始移动，暂时无法估算等待时间。',
  paused: '入场暂停片刻，您的位置会一直为您保留。',
  front: '您已排在最前面：一有空位，您就可以进入。',
  noAction: '您无需进行任何操作：请保持此页面打开，轮到您时会自动带您进入网站。',
  progressLabel: '排队进度',
  updatedAt: (clock) => `更新于${clock}`,
  nextUpdate: (s) => `${counted('zh', s).text}秒后更新`,
  powNoScript: '为了给您排队的位置，本页面会在您的浏览器中进行一次简短的计算。请启用JavaScript并重新加载页面。',
  defaultMessage: '为了让网站对每个人都保持快速，我们正在分批让访客进入。',
  challengeNoScript: '在为您安排排队位置之前，本网站会确认您是真人。此确认需要JavaScript：请启用它并重新加载页面。',
  challengePrompt: '请完成下方的验证以获得您的排队位置。',
  refreshNote: (s) => `本页面每${counted('zh', s).text}秒自动刷新一次。`,
  ticket: (n) => `排队号码：${formatNumber('zh', toCount(n))}`,
  admitted: '轮到您了！正在为您跳转到网站……',
  continueLink: '继续前往网站',
  checkingTitle: '正在确认您的位置',
  unreachableTitle: '网站没有响应',
  unreachableBody: '网站刚才没有响应。本页面将在几秒钟后自动重试。',
  checkingBody: '我们正在确认您的排队位置。在此期间，您的位置会保留，本页面也会自动重试。',
  prequeueTitle: '排队即将开始',
  prequeueOpensAt: (clock) => `排队将于${clock}开始`,
  countdown: (t) => `距离开始还有${t}`,
  prequeueShuffle: '开始时，所有在此页面等候的人都会随机获得一个排队位置，因此无需着急：早到并不会排得更靠前。',
  prequeueFifo: '开始后，将按到达的先后顺序排队。',
  eventOverTitle: '本次活动已结束',
  eventOverBody: '感谢您的关注。等候室已关闭。',
  drawTitle: '您已参加抽签',
  drawWaiting: (n) => {
    const c = counted('zh', n);
    return c.n === 0 ? '目前只有您在参加抽签' : `另有${c.text}人与您一同参加抽签`;
  },
  drawExplain: '每当有空位时，系统会从所有在此页面等候的人中随机抽取入场者。请保持此页面打开，以继续参加抽签。',
  lastUpdateFailed: '暂时无法更新，正在重试。',
};

const MESSAGES: Readonly<Record<Locale, Messages>> = { en: EN, de: DE, fr: FR, es: ES, ja: JA, zh: ZH };

/** The texts of `locale` (English for a value that is not a locale, so a bad cookie cannot throw). */
export function messages(locale: Locale): Messages {
  return MESSAGES[locale] ?? EN;
}
