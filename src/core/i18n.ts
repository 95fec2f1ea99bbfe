/**
 * The visitor-facing texts of the waiting room, and the number, plural, duration and clock
 * formatting they need, written by hand: the Fastly engine has no `Intl`, so nothing here may touch
 * it (or `toLocaleString`, which leans on it). The texts of each built-in language are one JSON
 * string (languages.ts), parsed only for the language a request is answered in; an operator's
 * `page_texts` (parsed once with the configuration, see parseLanguageTexts) adds languages or
 * overrides texts with the same keys. Texts are plain strings; the page escapes them.
 */
import { BUILT_IN_LANGUAGES } from './languages';

/** A language tag we serve: a built-in one, or one an operator added in `page_texts` (lower case). */
export type Locale = string;

/** Every built-in locale, English first (the default fallback). */
export const LOCALES: readonly Locale[] = Object.keys(BUILT_IN_LANGUAGES);

/** A built-in locale. */
export function isLocale(value: unknown): value is Locale {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(BUILT_IN_LANGUAGES, value);
}

/** One language's texts as a table: a text, or a text's forms by count (see languages.ts). */
export type TextForms = string | Readonly<Record<string, string>>;
export type TextTable = Readonly<Record<string, TextForms>>;
/** An operator's languages (`page_texts`): by language tag, the texts that add to or replace the built-in ones. */
export type LanguageTexts = Readonly<Record<string, TextTable>>;

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

/** The language tag we serve for a built-in locale, lower-cased, where it is not the locale itself. */
const SERVED_TAG: Readonly<Record<string, string>> = { zh: 'zh-hans', pt: 'pt-br' };

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

/**
 * RFC 4647 lookup: the range, then the range with its last subtag cut, until one is served
 * (`de-ch` → de, `zh-hant-tw` → zh: every Chinese range gets Simplified Chinese, closer than English).
 */
function lookup(range: string, available: readonly Locale[]): Locale | undefined {
  for (let r = range; r !== ''; r = r.replace(/-?[^-]*$/, '')) {
    if (available.includes(r)) return r;
  }
  return undefined;
}

/**
 * The locale to serve for an `Accept-Language` header (RFC 9110 §12.5.4, RFC 4647 §3.4 lookup):
 * ranges by weight, then by position; `de-CH` → de, `zh-Hant-TW` → zh; `*` → the fallback.
 * `q=0` marks a locale unacceptable only when the range names exactly what we would serve (`de`,
 * `zh`, `zh-Hans`), not a regional variant of it. With nothing acceptable, or a header we cannot
 * read, the fallback is served: a page in some language beats a 406. `available`: the built-in
 * locales and an operator's (`page_texts`). Never throws; reads at most MAX_ACCEPT_LANGUAGE_CHARS
 * characters and MAX_ACCEPT_LANGUAGE_RANGES ranges.
 */
export function negotiateLocale(acceptLanguage: string | null | undefined, fallback: Locale = 'en', available: readonly Locale[] = LOCALES): Locale {
  const safeFallback: Locale = available.includes(fallback) ? fallback : 'en';
  if (typeof acceptLanguage !== 'string' || acceptLanguage === '') return safeFallback;
  const ranges = parseAcceptLanguage(acceptLanguage);
  const rejected = new Set<Locale>();
  for (const { range, q } of ranges) {
    if (q !== 0) continue;
    for (const locale of available) if (range === locale || range === SERVED_TAG[locale]) rejected.add(locale);
  }
  const ordered = ranges.filter((r) => r.q > 0).sort((a, b) => b.q - a.q || a.position - b.position);
  for (const { range } of ordered) {
    if (range === '*') {
      if (!rejected.has(safeFallback)) return safeFallback;
      const other = available.find((l) => !rejected.has(l));
      if (other !== undefined) return other;
      continue;
    }
    const locale = lookup(range, available);
    if (locale !== undefined && !rejected.has(locale)) return locale;
  }
  return safeFallback;
}

// ---------------------------------------------------------------------------------------------
// Plurals

export type PluralCategory = 'zero' | 'one' | 'two' | 'few' | 'many' | 'other';

/**
 * The plural rules a language may name (`plural`), CLDR's cardinal rules for whole numbers, reduced
 * to what our texts use: `en` one for exactly 1 (also de, es, it, nl, pt); `fr` one for 0 and 1; `ja`
 * none (also zh, ko, tr, whose nouns do not change after a number); `ar`; `he`; `pl`; `ru` (also uk).
 * CLDR also gives es and fr a `many` for multiples of a million, which only changes the wording
 * before a spelled-out "million"; we always write digits, where the plural is right, so it is
 * folded into `other`. holding.js carries the same rules for its countdown.
 */
export const PLURAL_RULES: Readonly<Record<string, (n: number) => PluralCategory>> = {
  en: (n) => (n === 1 ? 'one' : 'other'),
  fr: (n) => (n < 2 ? 'one' : 'other'),
  ja: () => 'other',
  ar: (n) => {
    const h = n % 100;
    return n === 0 ? 'zero' : n === 1 ? 'one' : n === 2 ? 'two' : h >= 3 && h <= 10 ? 'few' : h >= 11 ? 'many' : 'other';
  },
  he: (n) => (n === 1 ? 'one' : n === 2 ? 'two' : 'other'),
  pl: (n) => (n === 1 ? 'one' : n % 10 >= 2 && n % 10 <= 4 && (n % 100 < 12 || n % 100 > 14) ? 'few' : 'many'),
  ru: (n) => (n % 10 === 1 && n % 100 !== 11 ? 'one' : n % 10 >= 2 && n % 10 <= 4 && (n % 100 < 12 || n % 100 > 14) ? 'few' : 'many'),
};

function categoryOf(rule: string, n: number): PluralCategory {
  if (!Number.isFinite(n)) return 'other';
  return (PLURAL_RULES[rule] ?? PLURAL_RULES['en']!)(Math.abs(n));
}

// ---------------------------------------------------------------------------------------------
// The texts: keys, what each may contain, and the tables

/**
 * Every key a language's table may hold, and the placeholders its text may use (a `!` marks one
 * its `other` form must use). Keys of the language itself first, then durations, then the texts.
 */
export const TEXT_KEYS: Readonly<Record<string, string>> = {
  lang: '', dir: '', name: '', plural: '', group: '', min_group: '', digits: '',
  clock: 'hm!', zoned: 'clock! zone!',
  less_than_a_minute: '', about: 't!', join: 'h! m!', seconds: 'n!', minutes: 'n!', hours: 'n!',
  page_title: '', page_message: '',
  in_line: '', place_label: '', title_place: 'n!', ahead: 'n!', estimate: 't!', estimate_unknown: '', paused: '', front: '',
  no_action: '', away: 't!', progress_label: '', updated_at: 'clock!', next_update: 'n!', refresh_note: 'n!',
  pow_no_script: '', default_message: '', prequeue_message: '', challenge_no_script: '', challenge_prompt: '',
  reference: 'n!', admitted: '', turn_title: '', checking_title: '', checking_body: '', joining_title: '', joining_body: '',
  unreachable_title: '', unreachable_body: '', prequeue_title: '', prequeue_opens_at: 'clock!', countdown: 't!',
  prequeue_shuffle: '', prequeue_fifo: '', event_over_title: '', event_over_body: '', draw_title: '', draw_waiting: 'n!',
  draw_explain: '', vip_refused: '', last_update_failed: '',
};

/** Keys whose text may have forms by count. */
const COUNTED = new Set(['seconds', 'minutes', 'hours', 'ahead', 'next_update', 'refresh_note', 'draw_waiting']);
const FORM_KEY = /^(?:=\d{1,3}|zero|one|two|few|many|other)$/;

/** The one built-in table last parsed (a request asks for one language, several times). */
let lastParsed: { readonly locale: string; readonly table: TextTable } | undefined;

function builtIn(locale: string): TextTable | undefined {
  if (lastParsed?.locale === locale) return lastParsed.table;
  const json = BUILT_IN_LANGUAGES[locale];
  if (json === undefined) return undefined;
  const table = JSON.parse(json) as TextTable;
  lastParsed = { locale, table };
  return table;
}

/** A language's texts: the built-in ones with the operator's on top; English under a language of the operator's own. */
function tableOf(locale: Locale, extra?: LanguageTexts): TextTable {
  const own = extra !== undefined && Object.prototype.hasOwnProperty.call(extra, locale) ? extra[locale] : undefined;
  const base = builtIn(locale);
  if (own === undefined) return base ?? builtIn('en')!;
  return { ...(base ?? builtIn('en')!), ...own };
}

// ---------------------------------------------------------------------------------------------
// Formatting with a table

/** Fills `{name}` placeholders; one without a value stays as it is. */
function fill(text: string, values: Readonly<Record<string, string>>): string {
  return text.replace(/\{([a-z]+)\}/g, (whole, name: string) => values[name] ?? whole);
}

/** A count for a sentence: a whole, non-negative number (a caller's NaN or -1 reads as 0). */
function toCount(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.round(n) : 0;
}

/** Waits are capped here (41 days and a bit): beyond it, a number means nothing to a visitor. */
const MAX_DURATION_SECONDS = 999 * 3600;

export interface ClockOptions {
  /**
   * A zone name to show after the time, such as "UTC", for a time the visitor must read against
   * their own clock. Attached as the language's `zoned` says (a no-break space; full-width brackets in ja/zh).
   * @default undefined (no zone shown)
   */
  readonly zoneLabel?: string;
}

/** How a language writes numbers, counts, durations and times, from its table. */
export interface LanguageFormat {
  /** The language's plural rule (a key of PLURAL_RULES), and its digits when they are not 0–9. */
  readonly rule: string;
  readonly digits: string | undefined;
  plural(n: number): PluralCategory;
  number(n: number): string;
  duration(seconds: number): string;
  span(seconds: number): string;
  clock(date: Date, utcOffsetMinutes?: number, options?: ClockOptions): string;
  /** The clock with `{hm}` for the hours and minutes and, with `zoned`, `{zone}` for the zone, for the page's script. */
  clockPattern(zoned: boolean): string;
  /** A counted text's forms with `{n}` left in, for the page's script (its countdown). */
  forms(key: string): Readonly<Record<string, string>>;
}

function formatWith(t: TextTable): LanguageFormat {
  const text = (key: string): string => {
    const v = t[key];
    return typeof v === 'string' ? v : '';
  };
  const rule = text('plural') || 'en';
  const digits = /^\S{10}$/u.test(text('digits')) && [...text('digits')].length === 10 ? text('digits') : undefined;
  const localDigits = (s: string): string => (digits === undefined ? s : s.replace(/[0-9]/g, (d) => [...digits][Number(d)] ?? d));
  const plural = (n: number): PluralCategory => categoryOf(rule, n);
  const number = (n: number): string => {
    if (!Number.isFinite(n)) return '–';
    const rounded = Math.round(n);
    // BigInt writes every digit, where String(1e21) would switch to exponent notation.
    const all = BigInt(Math.abs(rounded)).toString();
    const minimum = text('min_group') === '2' ? 2 : 1;
    const grouped = all.length < 3 + minimum ? all : all.replace(/\B(?=(\d{3})+$)/g, text('group'));
    return localDigits(rounded < 0 ? `-${grouped}` : grouped);
  };
  const pick = (key: string, n: number): string => {
    const v = t[key];
    if (v === undefined) return '';
    if (typeof v === 'string') return v;
    return v[`=${n}`] ?? v[plural(n)] ?? v['other'] ?? '';
  };
  const counted = (key: string, n: number): string => {
    const c = toCount(n);
    return fill(pick(key, c), { n: number(c) });
  };
  const unit = (key: 'seconds' | 'minutes' | 'hours', n: number): string => counted(key, n);
  const zonedClock = (clock: string, zone: string | undefined): string => (zone === undefined || zone === '' ? clock : fill(text('zoned'), { clock, zone }));
  return {
    rule,
    digits,
    plural,
    number,
    duration(seconds) {
      const s = Number.isNaN(seconds) || seconds < 0 ? 0 : Math.min(seconds, MAX_DURATION_SECONDS);
      if (s < 60) return text('less_than_a_minute');
      const about = (d: string): string => fill(text('about'), { t: d });
      const minutes = Math.round(s / 60);
      if (minutes < 60) return about(unit('minutes', minutes));
      const hours = Math.floor(minutes / 60);
      // Past a few hours, minutes are noise.
      const rest = hours >= 3 ? 0 : Math.round((minutes % 60) / 5) * 5;
      if (rest === 0) return about(unit('hours', hours));
      if (rest === 60) return about(unit('hours', hours + 1));
      return about(fill(text('join'), { h: unit('hours', hours), m: unit('minutes', rest) }));
    },
    span(seconds) {
      // Never more than it is: whole units, rounded down.
      const s = Number.isFinite(seconds) && seconds > 0 ? Math.floor(Math.min(seconds, MAX_DURATION_SECONDS)) : 0;
      if (s < 120) return unit('seconds', s);
      if (s < 7200) return unit('minutes', Math.floor(s / 60));
      const rest = Math.floor((s % 3600) / 60);
      const hours = unit('hours', Math.floor(s / 3600));
      return rest === 0 ? hours : fill(text('join'), { h: hours, m: unit('minutes', rest) });
    },
    clock(date, utcOffsetMinutes = 0, options = {}) {
      const offset = Number.isFinite(utcOffsetMinutes) ? utcOffsetMinutes : 0;
      // Not `instanceof`: a Date from another realm (a worker, a vm context) is still a Date.
      const time = Object.prototype.toString.call(date) === '[object Date]' ? date.getTime() : Number.NaN;
      let hm = '--:--';
      if (Number.isFinite(time)) {
        const shifted = new Date(time + Math.round(offset) * 60_000);
        if (Number.isFinite(shifted.getTime())) {
          hm = localDigits(`${String(shifted.getUTCHours()).padStart(2, '0')}:${String(shifted.getUTCMinutes()).padStart(2, '0')}`);
        }
      }
      return zonedClock(fill(text('clock'), { hm }), options.zoneLabel?.trim());
    },
    clockPattern(zoned) {
      return zonedClock(fill(text('clock'), { hm: '{hm}' }), zoned ? '{zone}' : undefined);
    },
    forms(key) {
      const v = t[key];
      return v === undefined ? {} : typeof v === 'string' ? { other: v } : v;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Messages

/**
 * Every text a visitor may see, in one language. Count arguments are formatted with the locale's
 * digits and plural; `durationText` comes from `format.duration` or `format.span` and `clockText`
 * from `format.clock` of the same language, and each sentence is worded so that text fits in it as
 * it is (German keeps it in the nominative).
 */
export interface Messages {
  readonly locale: Locale;
  /** For `<html lang>`. */
  readonly htmlLang: string;
  readonly dir: 'ltr' | 'rtl';
  /** The language's name in itself, for a language menu. */
  readonly languageName: string;
  /** The operator's site name and message in this language (`page_texts`), else ''. */
  readonly pageTitle: string;
  readonly pageMessage: string;
  readonly inLine: string;
  readonly placeLabel: string;
  /** The tab's title while waiting: the place `n` first. */
  titlePlace(n: number): string;
  /** `n` visitors ahead; 0 says the visitor is next. */
  ahead(n: number): string;
  estimate(durationText: string): string;
  /** The line has not moved yet, so there is no estimate. */
  readonly estimateUnknown: string;
  readonly paused: string;
  readonly front: string;
  readonly noAction: string;
  /** How long the visitor may be away and keep their place (`durationText` from `format.span`). */
  away(durationText: string): string;
  readonly progressLabel: string;
  updatedAt(clockText: string): string;
  nextUpdate(seconds: number): string;
  /** For the page without JavaScript, which reloads itself. */
  refreshNote(seconds: number): string;
  /** The proof-of-work page without JavaScript: a place in line needs it. */
  readonly powNoScript: string;
  /** The holding page's message when `page_message` is not set. */
  readonly defaultMessage: string;
  /** The same before the line opens: nobody is let in yet. */
  readonly prequeueMessage: string;
  /** The challenge hook's page without JavaScript: the check needs it (see challenge.ts). */
  readonly challengeNoScript: string;
  /** The challenge hook's page above the provider's widget. */
  readonly challengePrompt: string;
  /** The ticket, as a reference to give support (the visitor's number is the place). */
  ticket(n: number): string;
  /** Under the heading `turnTitle`, while the page goes to the site. */
  readonly admitted: string;
  /** The tab's title and the page's heading when the visitor's turn has come. */
  readonly turnTitle: string;
  /** The store cannot be reached: the visitor keeps their place while the page retries. */
  readonly checkingTitle: string;
  readonly checkingBody: string;
  /** The same for a newcomer, who has no place yet to keep. */
  readonly joiningTitle: string;
  readonly joiningBody: string;
  /** The site (the origin) did not answer: the page says so and tries again. */
  readonly unreachableTitle: string;
  readonly unreachableBody: string;
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
  /** A VIP link that could not be used: the visitor queues as everyone does. */
  readonly vipRefused: string;
  readonly lastUpdateFailed: string;
  /** Numbers, durations and times in this language. */
  readonly format: LanguageFormat;
}

/**
 * The texts of `locale`, with the operator's (`extra`, from `page_texts`) over the built-in ones.
 * A locale we do not know gets English, so a bad cookie cannot throw. Made per call from the
 * language's table, and dropped with the request.
 */
export function messages(locale: Locale, extra?: LanguageTexts): Messages {
  const known = isLocale(locale) || (extra !== undefined && Object.prototype.hasOwnProperty.call(extra, locale));
  const served = known ? locale : 'en';
  const t = tableOf(served, extra);
  const format = formatWith(t);
  const text = (key: string): string => {
    const v = t[key];
    return typeof v === 'string' ? v : '';
  };
  const counted = (key: string) => (n: number): string => {
    const c = toCount(n);
    const v = t[key];
    const form = v === undefined ? '' : typeof v === 'string' ? v : (v[`=${c}`] ?? v[format.plural(c)] ?? v['other'] ?? '');
    return fill(form, { n: format.number(c) });
  };
  const with1 = (key: string, name: string) => (value: string): string => fill(text(key), { [name]: value });
  return {
    locale: served,
    htmlLang: text('lang') || served,
    dir: text('dir') === 'rtl' ? 'rtl' : 'ltr',
    languageName: text('name'),
    pageTitle: text('page_title'),
    pageMessage: text('page_message'),
    inLine: text('in_line'),
    placeLabel: text('place_label'),
    titlePlace: counted('title_place'),
    ahead: counted('ahead'),
    estimate: with1('estimate', 't'),
    estimateUnknown: text('estimate_unknown'),
    paused: text('paused'),
    front: text('front'),
    noAction: text('no_action'),
    away: with1('away', 't'),
    progressLabel: text('progress_label'),
    updatedAt: with1('updated_at', 'clock'),
    nextUpdate: counted('next_update'),
    refreshNote: counted('refresh_note'),
    powNoScript: text('pow_no_script'),
    defaultMessage: text('default_message'),
    prequeueMessage: text('prequeue_message'),
    challengeNoScript: text('challenge_no_script'),
    challengePrompt: text('challenge_prompt'),
    ticket: counted('reference'),
    admitted: text('admitted'),
    turnTitle: text('turn_title'),
    checkingTitle: text('checking_title'),
    checkingBody: text('checking_body'),
    joiningTitle: text('joining_title'),
    joiningBody: text('joining_body'),
    unreachableTitle: text('unreachable_title'),
    unreachableBody: text('unreachable_body'),
    prequeueTitle: text('prequeue_title'),
    prequeueOpensAt: with1('prequeue_opens_at', 'clock'),
    countdown: with1('countdown', 't'),
    prequeueShuffle: text('prequeue_shuffle'),
    prequeueFifo: text('prequeue_fifo'),
    eventOverTitle: text('event_over_title'),
    eventOverBody: text('event_over_body'),
    drawTitle: text('draw_title'),
    drawWaiting: counted('draw_waiting'),
    drawExplain: text('draw_explain'),
    vipRefused: text('vip_refused'),
    lastUpdateFailed: text('last_update_failed'),
    format,
  };
}

/** CLDR cardinal category of `n` in `locale` (see PLURAL_RULES). Non-finite input is `other`. */
export function pluralCategory(locale: Locale, n: number, extra?: LanguageTexts): PluralCategory {
  return messages(locale, extra).format.plural(n);
}

/**
 * An integer with the locale's digit grouping: en/ja/zh "1,234,567", de "1.234.567", es "1234" and
 * "12.345", fr "1 234 567" (narrow no-break spaces), ar "١٬٢٣٤٬٥٦٧". Fractions are rounded to the
 * nearest integer, a negative number gets a leading "-", and NaN or an infinity gives "–".
 */
export function formatNumber(locale: Locale, n: number, extra?: LanguageTexts): string {
  return messages(locale, extra).format.number(n);
}

/**
 * A wait in words, as `estimate.ts` does in English: under a minute → "less than a minute";
 * whole minutes below an hour ("about 4 minutes"); hours with minutes to the nearest five below
 * three hours ("about 1 hour 20 minutes"), whole hours beyond. NaN and negative read as 0.
 * Japanese and Chinese run together without spaces (約1時間20分, 约5分钟).
 */
export function formatDuration(locale: Locale, seconds: number, extra?: LanguageTexts): string {
  return messages(locale, extra).format.duration(seconds);
}

/**
 * A length of time said exactly, never more than it is ("10 minutes", "90 seconds", "1 hour 59
 * minutes"): seconds below two minutes, whole minutes below two hours, then hours and minutes.
 */
export function formatSpan(locale: Locale, seconds: number, extra?: LanguageTexts): string {
  return messages(locale, extra).format.span(seconds);
}

/**
 * The 24-hour time of `date` shifted by `utcOffsetMinutes`, as "09:05" in every locale; German
 * adds "Uhr" ("09:05 Uhr"), as German sentences want it. With `zoneLabel`: "09:05 UTC",
 * "09:05 Uhr UTC", "09:05（UTC）". An invalid date gives "--:--".
 */
export function formatClock(locale: Locale, date: Date, utcOffsetMinutes = 0, options: ClockOptions = {}): string {
  return messages(locale).format.clock(date, utcOffsetMinutes, options);
}

// ---------------------------------------------------------------------------------------------
// An operator's languages

/** The longest `page_texts` accepted, characters (a Config Store value holds 8,000). */
export const MAX_PAGE_TEXTS_CHARS = 8000;
const TAG = /^[a-z]{2,3}(?:-[a-z0-9]{2,8})*$/;

/** Nearest key by edit distance, for "did you mean". */
function nearest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const c of candidates) {
    const d = editDistance(word, c);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = row;
  }
  return previous[b.length]!;
}

/**
 * `page_texts`: a JSON object of languages (a tag such as `de`, `sv` or `pt-pt`), each an object of
 * the keys of TEXT_KEYS with their texts (a text with a count may be an object of forms). The
 * result, or every problem found, each naming its place (`page_texts.de.in_lin: unknown text; did
 * you mean in_line?`). Placeholders are checked: none but the text's own, and the ones it needs.
 */
export function parseLanguageTexts(json: string): { readonly ok: true; readonly texts: LanguageTexts } | { readonly ok: false; readonly errors: readonly string[] } {
  const errors: string[] = [];
  if (json.length > MAX_PAGE_TEXTS_CHARS) return { ok: false, errors: [`must be at most ${MAX_PAGE_TEXTS_CHARS} characters (it has ${json.length})`] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    return { ok: false, errors: [`is not valid JSON (${error instanceof Error ? error.message : String(error)})`] };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { ok: false, errors: ['must be a JSON object of languages, such as {"de": {"page_message": "…"}}'] };
  const keys = Object.keys(TEXT_KEYS);
  const texts: Record<string, TextTable> = {};
  for (const [tag, table] of Object.entries(parsed as Record<string, unknown>)) {
    const where = `page_texts.${tag}`;
    if (!TAG.test(tag)) {
      errors.push(`${where}: not a language tag in lower case (such as "de", "sv" or "pt-pt")`);
      continue;
    }
    if (typeof table !== 'object' || table === null || Array.isArray(table)) {
      errors.push(`${where}: must be an object of texts`);
      continue;
    }
    const out: Record<string, TextForms> = {};
    for (const [key, value] of Object.entries(table as Record<string, unknown>)) {
      const at = `${where}.${key}`;
      const spec = TEXT_KEYS[key];
      if (spec === undefined || !Object.prototype.hasOwnProperty.call(TEXT_KEYS, key)) {
        const near = nearest(key, keys);
        errors.push(`${at}: unknown text${near === undefined ? '' : `; did you mean ${near}?`}`);
        continue;
      }
      const checked = checkText(at, key, spec, value, errors);
      if (checked !== undefined) out[key] = checked;
    }
    texts[tag] = out;
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, texts };
}

const META_VALUES: Readonly<Record<string, RegExp>> = {
  dir: /^(?:ltr|rtl)$/,
  plural: new RegExp(`^(?:${Object.keys(PLURAL_RULES).join('|')})$`),
  min_group: /^[12]$/,
  lang: /^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$/,
};

function checkText(at: string, key: string, spec: string, value: unknown, errors: string[]): TextForms | undefined {
  const allowed = spec.split(' ').filter((s) => s !== '').map((s) => s.replace('!', ''));
  const required = spec.split(' ').filter((s) => s.endsWith('!')).map((s) => s.slice(0, -1));
  const checkOne = (where: string, text: unknown, needs: readonly string[]): text is string => {
    if (typeof text !== 'string') {
      errors.push(`${where}: must be a string`);
      return false;
    }
    if (text.length > 500) {
      errors.push(`${where}: must be at most 500 characters`);
      return false;
    }
    for (const [, name] of text.matchAll(/\{([^}]*)\}/g)) {
      if (!allowed.includes(name ?? '')) errors.push(`${where}: {${name}} is not a placeholder of this text${allowed.length === 0 ? ' (it takes none)' : ` (it takes ${allowed.map((a) => `{${a}}`).join(', ')})`}`);
    }
    for (const name of needs) if (!text.includes(`{${name}}`)) errors.push(`${where}: must contain {${name}}`);
    return true;
  };
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && COUNTED.has(key)) {
    const forms: Record<string, string> = {};
    for (const [form, text] of Object.entries(value as Record<string, unknown>)) {
      if (!FORM_KEY.test(form)) {
        errors.push(`${at}.${form}: not a form (=0, =1, …, zero, one, two, few, many or other)`);
        continue;
      }
      if (checkOne(`${at}.${form}`, text, form === 'other' ? required : [])) forms[form] = text as string;
    }
    if (!('other' in (value as object))) errors.push(`${at}: needs an "other" form`);
    return forms;
  }
  if (!checkOne(at, value, required)) return undefined;
  const pattern = META_VALUES[key];
  if (pattern !== undefined && !pattern.test(value as string)) {
    errors.push(`${at}: ${JSON.stringify(value)} is not allowed here${key === 'plural' ? ` (one of ${Object.keys(PLURAL_RULES).join(', ')})` : key === 'dir' ? ' (ltr or rtl)' : ''}`);
    return undefined;
  }
  if (key === 'digits' && [...(value as string)].length !== 10) {
    errors.push(`${at}: must be the ten digits from 0 to 9`);
    return undefined;
  }
  return value as string;
}
