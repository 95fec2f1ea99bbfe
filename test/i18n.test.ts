import { readFileSync } from 'node:fs';
import vm from 'node:vm';
import { buildSync } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { formatDuration as formatDurationEnglish } from '../src/core/estimate';
import {
  formatClock,
  formatDuration,
  formatNumber,
  formatSpan,
  isLocale,
  LOCALES,
  messages,
  negotiateLocale,
  parseLanguageTexts,
  pluralCategory,
  TEXT_KEYS,
  type Locale,
  type Messages,
} from '../src/core/i18n';
import { BUILT_IN_LANGUAGES } from '../src/core/languages';
import { cpuTimeMs } from './support/cpu-time';

const NNBSP = '\u202f';
const NBSP = '\u00a0';
const SOURCE_PATH = new URL('../src/core/i18n.ts', import.meta.url);

describe('negotiateLocale', () => {
  it.each<[string | null | undefined, Locale]>([
    // absent or empty
    [null, 'en'],
    [undefined, 'en'],
    ['', 'en'],
    // plain, case, regions
    ['de', 'de'],
    ['DE-ch', 'de'],
    ['de-CH,de;q=0.9,en;q=0.8', 'de'],
    ['es-419,es;q=0.9', 'es'],
    ['ja-JP', 'ja'],
    ['ja_JP', 'ja'],
    ['fr-CA, fr;q=0.9', 'fr'],
    // q-values beat position; equal q keeps position
    ['en;q=0.5, fr;q=0.9', 'fr'],
    ['fr;q=0.8, de;q=0.8', 'fr'],
    ['de;q=0.8, fr;q=0.8', 'de'],
    ['sv, fi;q=0.9, es;q=0.001, ja;q=0.002', 'ja'],
    ['it, pt;q=0.9', 'it'],
    ['pt-PT', 'pt'],
    ['ar-EG, en;q=0.5', 'ar'],
    ['ko-KR', 'ko'],
    ['ja;q=1.000, zh;q=1', 'ja'],
    // q=0 is "not acceptable"
    ['ja;q=0, zh', 'zh'],
    ['de;q=0, fr;q=0.1', 'fr'],
    ['fr;q=0.0', 'en'],
    ['de;q=0, de-AT', 'en'], // German itself refused: a regional range does not bring it back
    ['de-AT;q=0, de', 'de'], // a refused region does not refuse German
    ['zh-Hans;q=0, zh-CN, ja;q=0.5', 'ja'],
    // Chinese scripts and regions all get Simplified Chinese
    ['zh-Hans-CN', 'zh'],
    ['zh-CN,zh;q=0.9', 'zh'],
    ['zh-TW', 'zh'],
    ['zh-HK', 'zh'],
    ['zh-Hant;q=0.9, en;q=0.5', 'zh'],
    // unsupported languages fall through to the next range, then the fallback
    ['sv, fi-FI', 'en'],
    ['sv, fi-FI, es;q=0.1', 'es'],
    // wildcard
    ['*', 'en'],
    ['sv, *;q=0.5', 'en'],
    ['en;q=0, *', 'de'],
    ['*;q=0, fr', 'fr'],
    // whitespace and case of the weight
    ['  fr-CA ;  q=0.7 ,  es ; q=0.9 ', 'es'],
    ['fr;Q=0.5, ja;q=0.4', 'fr'],
    ['de;q=0.5;level=1, fr;q=0.4', 'de'],
    // garbage
    [';;;,,,', 'en'],
    ['q=1', 'en'],
    ['de;q=abc, fr', 'fr'],
    ['de;q=1.5, fr', 'fr'],
    ['de;q=-1, es', 'es'],
    ['de;q=0.0001, es;q=0.5', 'es'],
    ['x-klingon, fr', 'fr'],
    ['12-de, de-, fr', 'fr'],
    ['<script>alert(1)</script>, ja', 'ja'],
    ['\u0000\uffff\ud800, es', 'es'],
    ['deutsch-verylongsubtag, ja', 'ja'],
  ])('%j → %s', (header, expected) => {
    expect(negotiateLocale(header)).toBe(expected);
  });

  it('uses the given fallback, also for a wildcard', () => {
    expect(negotiateLocale(null, 'fr')).toBe('fr');
    expect(negotiateLocale('sv', 'ja')).toBe('ja');
    expect(negotiateLocale('sv, *', 'zh')).toBe('zh');
    expect(negotiateLocale('de;q=0, *', 'de')).toBe('en');
    expect(negotiateLocale('garbage;;q=', 'es')).toBe('es');
  });

  it('never throws on input of the wrong type', () => {
    expect(negotiateLocale(42 as unknown as string)).toBe('en');
    expect(negotiateLocale({} as unknown as string, 'de')).toBe('de');
    expect(negotiateLocale('fr', 'xx' as Locale)).toBe('fr');
    expect(negotiateLocale('sv', 'xx' as Locale)).toBe('en');
  });

  it('reads at most 50 ranges', () => {
    expect(negotiateLocale('sv,'.repeat(49) + 'ja')).toBe('ja');
    expect(negotiateLocale('sv,'.repeat(50) + 'ja')).toBe('en');
  });

  it('reads at most 1000 characters, cut at an entry boundary', () => {
    expect(negotiateLocale('x'.repeat(2000) + ', de')).toBe('en');
    // Cut blindly at 1000 characters, the last entry would read "de;q=0" and refuse German.
    const header = 'de;q=0.5, ' + 'x'.repeat(982) + ', de;q=0.9';
    expect(header.slice(0, 1000).endsWith('de;q=0')).toBe(true);
    expect(negotiateLocale(header)).toBe('de');
  });

  it('stays fast on a huge header', () => {
    // CPU time, not wall time: a sanity bound (about 10 ms here) that other processes cannot move.
    const { ms } = cpuTimeMs(() => {
      expect(negotiateLocale('en;q=0.1,'.repeat(200_000))).toBe('en');
      expect(negotiateLocale('zz-ZZ;q=0.5 ; q=0.3 ,'.repeat(100_000), 'de')).toBe('de');
    });
    expect(ms).toBeLessThan(1000);
  });
});

describe('pluralCategory', () => {
  const samples = [0, 1, 2, 5, 21, 1_000_000];
  it.each<[Locale, string[]]>([
    ['en', ['other', 'one', 'other', 'other', 'other', 'other']],
    ['de', ['other', 'one', 'other', 'other', 'other', 'other']],
    // CLDR's es/fr "many" (multiples of a million) is folded into "other": see pluralCategory.
    ['es', ['other', 'one', 'other', 'other', 'other', 'other']],
    ['fr', ['one', 'one', 'other', 'other', 'other', 'other']],
    ['ja', ['other', 'other', 'other', 'other', 'other', 'other']],
    ['zh', ['other', 'other', 'other', 'other', 'other', 'other']],
  ])('%s for 0, 1, 2, 5, 21, 1000000', (locale, expected) => {
    expect(samples.map((n) => pluralCategory(locale, n))).toEqual(expected);
  });

  it('takes the absolute value and treats non-numbers as other', () => {
    expect(pluralCategory('en', -1)).toBe('one');
    expect(pluralCategory('en', 1.5)).toBe('other');
    expect(pluralCategory('fr', 1.5)).toBe('one');
    expect(pluralCategory('en', Number.NaN)).toBe('other');
    expect(pluralCategory('fr', Number.POSITIVE_INFINITY)).toBe('other');
  });
});

describe('formatNumber', () => {
  const samples = [0, 7, 999, 1000, 9999, 12_345, 123_456, 1_234_567];
  it.each<[Locale, string[]]>([
    ['en', ['0', '7', '999', '1,000', '9,999', '12,345', '123,456', '1,234,567']],
    ['de', ['0', '7', '999', '1.000', '9.999', '12.345', '123.456', '1.234.567']],
    ['fr', ['0', '7', '999', `1${NNBSP}000`, `9${NNBSP}999`, `12${NNBSP}345`, `123${NNBSP}456`, `1${NNBSP}234${NNBSP}567`]],
    // minimumGroupingDigits 2: four digits stay together.
    ['es', ['0', '7', '999', '1000', '9999', '12.345', '123.456', '1.234.567']],
    ['ja', ['0', '7', '999', '1,000', '9,999', '12,345', '123,456', '1,234,567']],
    ['zh', ['0', '7', '999', '1,000', '9,999', '12,345', '123,456', '1,234,567']],
  ])('%s', (locale, expected) => {
    expect(samples.map((n) => formatNumber(locale, n))).toEqual(expected);
  });

  it('handles negative, fractional, huge and non-finite input', () => {
    expect(formatNumber('en', -1234)).toBe('-1,234');
    expect(formatNumber('es', -1234)).toBe('-1234');
    expect(formatNumber('de', -12_345)).toBe('-12.345');
    expect(formatNumber('en', -0)).toBe('0');
    expect(formatNumber('en', -0.4)).toBe('0');
    expect(formatNumber('en', 1234.6)).toBe('1,235');
    expect(formatNumber('en', 1e21)).toBe('1,000,000,000,000,000,000,000');
    expect(formatNumber('en', Number.NaN)).toBe('–');
    expect(formatNumber('fr', Number.POSITIVE_INFINITY)).toBe('–');
    expect(formatNumber('de', Number.NEGATIVE_INFINITY)).toBe('–');
  });
});

describe('formatDuration', () => {
  const seconds = [0, 59, 60, 61, 119, 300, 3600, 4800, 9000, 86_400];
  it.each<[Locale, string[]]>([
    [
      'en',
      ['less than a minute', 'less than a minute', 'about 1 minute', 'about 1 minute', 'about 2 minutes', 'about 5 minutes', 'about 1 hour', 'about 1 hour 20 minutes', 'about 2 hours 30 minutes', 'about 24 hours'],
    ],
    [
      'de',
      ['weniger als eine Minute', 'weniger als eine Minute', 'etwa 1 Minute', 'etwa 1 Minute', 'etwa 2 Minuten', 'etwa 5 Minuten', 'etwa 1 Stunde', 'etwa 1 Stunde und 20 Minuten', 'etwa 2 Stunden und 30 Minuten', 'etwa 24 Stunden'],
    ],
    [
      'fr',
      ['moins d’une minute', 'moins d’une minute', 'environ 1 minute', 'environ 1 minute', 'environ 2 minutes', 'environ 5 minutes', 'environ 1 heure', 'environ 1 heure et 20 minutes', 'environ 2 heures et 30 minutes', 'environ 24 heures'],
    ],
    [
      'es',
      ['menos de un minuto', 'menos de un minuto', 'aproximadamente 1 minuto', 'aproximadamente 1 minuto', 'aproximadamente 2 minutos', 'aproximadamente 5 minutos', 'aproximadamente 1 hora', 'aproximadamente 1 hora y 20 minutos', 'aproximadamente 2 horas y 30 minutos', 'aproximadamente 24 horas'],
    ],
    ['ja', ['1分未満', '1分未満', '約1分', '約1分', '約2分', '約5分', '約1時間', '約1時間20分', '約2時間30分', '約24時間']],
    ['zh', ['不到一分钟', '不到一分钟', '约1分钟', '约1分钟', '约2分钟', '约5分钟', '约1小时', '约1小时20分钟', '约2小时30分钟', '约24小时']],
  ])('%s for 0, 59, 60, 61, 119, 300, 3600, 4800, 9000, 86400 s', (locale, expected) => {
    expect(seconds.map((s) => formatDuration(locale, s))).toEqual(expected);
  });

  it('agrees in English with the formatter the pages use today', () => {
    for (let s = 0; s < 4 * 86_400; s += 37) expect(formatDuration('en', s)).toBe(formatDurationEnglish(s));
  });

  it('rounds to whole hours when the minutes would round up to the hour', () => {
    expect(formatDuration('en', 7170)).toBe('about 2 hours');
    expect(formatDuration('de', 7050)).toBe('etwa 2 Stunden');
    expect(formatDuration('fr', 3570)).toBe('environ 1 heure');
  });

  it('handles nonsense input without nonsense output', () => {
    expect(formatDuration('en', -5)).toBe('less than a minute');
    expect(formatDuration('de', Number.NaN)).toBe('weniger als eine Minute');
    expect(formatDuration('en', Number.POSITIVE_INFINITY)).toBe('about 999 hours');
    expect(formatDuration('fr', 10_000 * 3600)).toBe('environ 999 heures');
  });
});

describe('formatClock', () => {
  const at = new Date(Date.UTC(2025, 0, 1, 9, 5, 59));
  it('gives the 24-hour time in every locale, with "Uhr" in German', () => {
    for (const locale of LOCALES) expect(formatClock(locale, at)).toBe(locale === 'de' ? `09:05${NBSP}Uhr` : locale === 'ar' ? '٠٩:٠٥' : '09:05');
    expect(formatClock('en', new Date(Date.UTC(2025, 0, 1, 23, 59)))).toBe('23:59');
    expect(formatClock('en', new Date(Date.UTC(2025, 0, 1, 0, 0)))).toBe('00:00');
  });

  it('applies the UTC offset across midnight', () => {
    expect(formatClock('en', at, 60)).toBe('10:05');
    expect(formatClock('en', at, -600)).toBe('23:05');
    expect(formatClock('ja', at, 9 * 60)).toBe('18:05');
    expect(formatClock('en', at, 15 * 60)).toBe('00:05');
    expect(formatClock('en', at, Number.NaN)).toBe('09:05');
  });

  it('adds a zone label only when asked', () => {
    expect(formatClock('en', at, 0, { zoneLabel: 'UTC' })).toBe(`09:05${NBSP}UTC`);
    expect(formatClock('de', at, 0, { zoneLabel: 'UTC' })).toBe(`09:05${NBSP}Uhr${NBSP}UTC`);
    expect(formatClock('fr', at, 0, { zoneLabel: 'UTC' })).toBe(`09:05${NBSP}UTC`);
    expect(formatClock('ja', at, 0, { zoneLabel: 'UTC' })).toBe('09:05（UTC）');
    expect(formatClock('zh', at, 0, { zoneLabel: 'UTC' })).toBe('09:05（UTC）');
    expect(formatClock('en', at, 0, { zoneLabel: '  ' })).toBe('09:05');
  });

  it('does not throw on an invalid date', () => {
    expect(formatClock('en', new Date(Number.NaN))).toBe('--:--');
    expect(formatClock('en', 'yesterday' as unknown as Date)).toBe('--:--');
    expect(formatClock('en', new Date(8.64e15), 60)).toBe('--:--');
  });
});

type MessageKey = keyof Messages;
/** The built-in texts (the operator's page_title and page_message are empty unless set, and `format` is not a text). */
const NOT_TEXTS = new Set(['format', 'pageTitle', 'pageMessage']);
const KEYS = Object.keys(messages('en')).filter((k) => !NOT_TEXTS.has(k)) as MessageKey[];
/** The messages that take a formatted duration or clock time; the other functions take a count. */
const TEXT_ARGUMENT: ReadonlySet<MessageKey> = new Set<MessageKey>(['estimate', 'updatedAt', 'prequeueOpensAt', 'countdown']);

/** Every message of `m` as text: functions are called with `input` for each argument. */
function render(m: Messages, input: { readonly n: number; readonly text: string }): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of KEYS) {
    const value: unknown = m[key];
    if (typeof value === 'function') {
      out[key] = (value as (arg: number | string) => string)(TEXT_ARGUMENT.has(key) ? input.text : input.n);
    } else {
      out[key] = String(value);
    }
  }
  return out;
}

describe('messages', () => {
  it('has the same texts in every locale, none empty', () => {
    for (const locale of LOCALES) {
      const m = messages(locale);
      expect(m.locale).toBe(locale);
      expect(Object.keys(m).filter((k) => !NOT_TEXTS.has(k)).sort()).toEqual([...KEYS].sort());
      const clock = formatClock(locale, new Date(Date.UTC(2025, 5, 1, 9, 0)), 0, { zoneLabel: 'UTC' });
      for (const n of [0, 1, 2, 5, 21, 12_345, 1_000_000]) {
        for (const [key, text] of Object.entries(render(m, { n, text: formatDuration(locale, 240) }))) {
          expect(text.trim(), `${locale}.${key}(${n})`).not.toBe('');
        }
      }
      expect(m.updatedAt(clock)).toContain(clock);
      expect(m.prequeueOpensAt(clock)).toContain(clock);
      expect(m.estimate(formatDuration(locale, 240))).toContain(formatDuration(locale, 240));
      expect(m.countdown(formatDuration(locale, 240))).toContain(formatDuration(locale, 240));
    }
  });

  it('formats counts with the locale’s digits', () => {
    for (const locale of LOCALES) {
      const m = messages(locale);
      const big = formatNumber(locale, 12_345);
      for (const text of [m.ahead(12_345), m.ticket(12_345), m.drawWaiting(12_345), m.nextUpdate(12_345), m.refreshNote(12_345)]) {
        expect(text, locale).toContain(big);
      }
      expect(m.ticket(1234)).toContain(formatNumber(locale, 1234));
    }
    expect(messages('es').ticket(1234)).toContain('1234');
    expect(messages('de').ahead(1234)).toBe('1.234 Personen sind vor Ihnen');
    expect(messages('fr').ahead(1234)).toBe(`1${NNBSP}234 personnes sont devant vous`);
    expect(messages('en').drawWaiting(1234)).toBe('You are in the draw with 1,234 others');
  });

  it.each<[Locale, string, string, string]>([
    ['en', 'You are next', '1 person is ahead of you', '2 people are ahead of you'],
    ['de', 'Sie sind als Nächstes an der Reihe', '1 Person ist vor Ihnen', '2 Personen sind vor Ihnen'],
    ['fr', 'Il n’y a plus personne devant vous', '1 personne est devant vous', '2 personnes sont devant vous'],
    ['es', 'No hay nadie delante de usted', 'Hay 1 persona delante de usted', 'Hay 2 personas delante de usted'],
    ['ja', '次はあなたの番です', 'あなたの前に1人が並んでいます', 'あなたの前に2人が並んでいます'],
    ['zh', '下一位就是您', '您前面还有1人', '您前面还有2人'],
  ])('%s ahead(0), ahead(1), ahead(2)', (locale, zero, one, two) => {
    const m = messages(locale);
    expect([m.ahead(0), m.ahead(1), m.ahead(2)]).toEqual([zero, one, two]);
  });

  it('picks the plural form by the locale’s rules', () => {
    expect(messages('en').nextUpdate(1)).toBe('Next update in 1 second');
    expect(messages('en').nextUpdate(12)).toBe('Next update in 12 seconds');
    expect(messages('en').nextUpdate(0)).toBe('Next update in 0 seconds');
    // French counts 0 as singular.
    expect(messages('fr').nextUpdate(0)).toBe('Prochaine mise à jour dans 0 seconde');
    expect(messages('fr').nextUpdate(12)).toBe('Prochaine mise à jour dans 12 secondes');
    expect(messages('de').nextUpdate(1)).toBe('Nächste Aktualisierung in 1 Sekunde');
    expect(messages('de').nextUpdate(2)).toBe('Nächste Aktualisierung in 2 Sekunden');
    expect(messages('es').nextUpdate(1)).toBe('Próxima actualización en 1 segundo');
    expect(messages('es').nextUpdate(20)).toBe('Próxima actualización en 20 segundos');
    expect(messages('ja').nextUpdate(12)).toBe('次の更新まで12秒');
    expect(messages('zh').nextUpdate(12)).toBe('12秒后更新');
    expect(messages('en').refreshNote(20)).toBe('This page refreshes every 20 seconds.');
    expect(messages('en').refreshNote(1)).toBe('This page refreshes every second.');
    expect(messages('de').refreshNote(1)).toBe('Diese Seite wird jede Sekunde aktualisiert.');
    expect(messages('de').refreshNote(20)).toBe('Diese Seite wird alle 20 Sekunden aktualisiert.');
    expect(messages('fr').refreshNote(20)).toBe('Cette page s’actualise toutes les 20 secondes.');
    expect(messages('es').refreshNote(20)).toBe('Esta página se actualiza cada 20 segundos.');
    expect(messages('en').drawWaiting(1)).toBe('You are in the draw with 1 other person');
    expect(messages('de').drawWaiting(1)).toBe('Sie nehmen mit 1 weiteren Person an der Auslosung teil');
    expect(messages('de').drawWaiting(2)).toBe('Sie nehmen mit 2 weiteren Personen an der Auslosung teil');
    expect(messages('es').drawWaiting(1)).toBe('Participa en el sorteo con 1 persona más');
    expect(messages('fr').drawWaiting(3)).toBe('Vous participez au tirage avec 3 autres personnes');
  });

  it('reads a nonsense count as zero instead of printing it', () => {
    expect(messages('en').ahead(Number.NaN)).toBe('You are next');
    expect(messages('de').ahead(-3)).toBe('Sie sind als Nächstes an der Reihe');
    expect(messages('en').ahead(2.6)).toBe('3 people are ahead of you');
    expect(messages('en').ticket(Number.POSITIVE_INFINITY)).toBe('Reference for support: 0');
  });

  // Identical on purpose: the writing direction. Everything else must be translated.
  const IDENTICAL_TO_ENGLISH: readonly MessageKey[] = ['dir'];

  it('has no text of another locale left in English', () => {
    const input = { n: 5, text: '⟨X⟩' };
    const english = render(messages('en'), input);
    for (const locale of LOCALES.filter((l) => l !== 'en')) {
      const rendered = render(messages(locale), input);
      for (const key of KEYS) {
        if (IDENTICAL_TO_ENGLISH.includes(key)) continue;
        expect(rendered[key], `${locale}.${key}`).not.toBe(english[key]);
      }
      // Sentences with a count: also with 0 and 1, where a forgotten branch would fall back.
      for (const n of [0, 1]) {
        const en0 = render(messages('en'), { n, text: '⟨X⟩' });
        const other = render(messages(locale), { n, text: '⟨X⟩' });
        for (const key of ['ahead', 'nextUpdate', 'refreshNote', 'ticket', 'drawWaiting'] as const) {
          expect(other[key], `${locale}.${key}(${n})`).not.toBe(en0[key]);
        }
      }
    }
  });

  it('names each language in itself and sets the document language', () => {
    expect(LOCALES.map((l) => messages(l).htmlLang)).toEqual(['en', 'de', 'fr', 'es', 'it', 'pt-BR', 'nl', 'tr', 'ja', 'zh-Hans', 'ko', 'ar']);
    expect(LOCALES.map((l) => messages(l).languageName)).toEqual(['English', 'Deutsch', 'Français', 'Español', 'Italiano', 'Português', 'Nederlands', 'Türkçe', '日本語', '简体中文', '한국어', 'العربية']);
    expect(LOCALES.filter((l) => messages(l).dir === 'rtl')).toEqual(['ar']);
    expect(messages('xx' as Locale).locale).toBe('en');
    expect(isLocale('de')).toBe(true);
    expect(isLocale('de-CH')).toBe(false);
    expect(isLocale(undefined)).toBe(false);
  });

  it('uses typographic punctuation, plain text only', () => {
    for (const locale of LOCALES) {
      for (const n of [0, 1, 5]) {
        const texts = Object.entries(render(messages(locale), { n, text: formatDuration(locale, 4800) }));
        for (const [key, text] of texts) {
          expect(text, `${locale}.${key}`).not.toMatch(/['"<>&]/);
          expect(text, `${locale}.${key}`).not.toMatch(/\.\.\./);
          if (locale === 'fr') expect(text, `fr.${key}`).not.toMatch(/(?:^|[^\u202f])[:;!?]/);
          if (locale === 'ja' || locale === 'zh') expect(text, `${locale}.${key}`).not.toMatch(/ /);
        }
      }
    }
    expect(messages('fr').estimate('x')).toBe(`Temps d’attente estimé${NNBSP}: x`);
    expect(messages('fr').turnTitle).toBe(`C’est votre tour${NNBSP}!`);
  });
});

describe('without Intl', () => {
  it('has no call to Intl or the locale-dependent built-ins in its source', () => {
    const source = readFileSync(SOURCE_PATH, 'utf8');
    expect(source).not.toMatch(/\bIntl\s*[.[(]|\bnew\s+Intl\b|\.toLocale\w*\s*\(|\.localeCompare\s*\(/);
  });

  it('runs every function in a context with no Intl and throwing locale built-ins', () => {
    // With the language tables it imports, as the bundles hold them.
    const built = buildSync({ entryPoints: [SOURCE_PATH.pathname], bundle: true, write: false, format: 'cjs', target: 'es2022', platform: 'neutral' });
    const code = built.outputFiles[0]!.text;
    const context = vm.createContext({});
    // As on Fastly: no Intl; and the built-ins that would lean on it fail loudly instead of quietly working.
    vm.runInContext(
      `delete globalThis.Intl;
      for (const [proto, names] of [
        [Number.prototype, ['toLocaleString']],
        [BigInt.prototype, ['toLocaleString']],
        [Array.prototype, ['toLocaleString']],
        [Date.prototype, ['toLocaleString', 'toLocaleDateString', 'toLocaleTimeString']],
        [String.prototype, ['localeCompare', 'toLocaleLowerCase', 'toLocaleUpperCase']],
      ]) {
        for (const name of names) Object.defineProperty(proto, name, { value() { throw new Error(name + ' needs Intl'); } });
      }`,
      context,
    );
    expect(vm.runInContext('typeof Intl', context)).toBe('undefined');
    vm.runInContext(`var module = { exports: {} }; var exports = module.exports;\n${code}`, context);

    // Exercise everything inside the context and return the results as JSON, to compare with the
    // same calls made here, where Intl exists: the output must not depend on it.
    const driver = `(${exercise.toString()})(module.exports)`;
    const withoutIntl = JSON.parse(vm.runInContext(driver, context) as string) as unknown;
    const withIntl = JSON.parse(exercise({ formatClock, formatDuration, formatNumber, isLocale, LOCALES, messages, negotiateLocale, pluralCategory })) as unknown;
    expect(withoutIntl).toEqual(withIntl);
    expect(JSON.stringify(withoutIntl)).toContain('1.234.567');
  });
});

/** Calls every export with a spread of inputs; self-contained, as it also runs inside a vm context. */
function exercise(lib: {
  formatClock: typeof formatClock;
  formatDuration: typeof formatDuration;
  formatNumber: typeof formatNumber;
  isLocale: typeof isLocale;
  LOCALES: typeof LOCALES;
  messages: typeof messages;
  negotiateLocale: typeof negotiateLocale;
  pluralCategory: typeof pluralCategory;
}): string {
  const out: unknown[] = [];
  const headers = [null, undefined, '', '*', 'de-CH, fr;q=0.5', 'zh-Hant-TW', 'ja;q=0, es', 'x'.repeat(5000), ';;;'];
  for (const h of headers) out.push(lib.negotiateLocale(h), lib.negotiateLocale(h, 'ja'));
  const numbers = [0, 1, 2, 5, 21, 999, 1000, 12_345, 1_234_567, 1_000_000, -7, 2.5, Number.NaN, Number.POSITIVE_INFINITY];
  const at = new Date(Date.UTC(2025, 0, 1, 9, 5));
  for (const locale of lib.LOCALES) {
    out.push(lib.isLocale(locale));
    for (const n of numbers) out.push(lib.pluralCategory(locale, n), lib.formatNumber(locale, n));
    for (const s of [0, 59, 60, 61, 119, 3600, 4800, 86_400, -1, Number.NaN, Number.POSITIVE_INFINITY]) out.push(lib.formatDuration(locale, s));
    out.push(lib.formatClock(locale, at), lib.formatClock(locale, at, 540, { zoneLabel: 'UTC' }), lib.formatClock(locale, new Date(Number.NaN)));
    const m = lib.messages(locale);
    for (const [key, value] of Object.entries(m)) {
      if (typeof value !== 'function') {
        out.push(key, value);
        continue;
      }
      for (const n of numbers) out.push(key, (value as (a: unknown) => string)(n));
      out.push(key, (value as (a: unknown) => string)(lib.formatDuration(locale, 300)));
      out.push(key, (value as (a: unknown) => string)(lib.formatClock(locale, at)));
    }
  }
  return JSON.stringify(out);
}

describe('the languages added for issue 32', () => {
  it.each<[Locale, string, string, string]>([
    ['it', 'Non c’è nessuno davanti a lei', 'C’è 1 persona davanti a lei', 'Ci sono 2 persone davanti a lei'],
    ['pt', 'Não há ninguém à sua frente', 'Há 1 pessoa à sua frente', 'Há 2 pessoas à sua frente'],
    ['nl', 'U bent de volgende', 'Er is 1 persoon vóór u', 'Er zijn 2 mensen vóór u'],
    ['tr', 'Sıradaki kişi sizsiniz', 'Önünüzde 1 kişi var', 'Önünüzde 2 kişi var'],
    ['ko', '바로 다음 순서입니다', '앞에 1명이 기다리고 있습니다', '앞에 2명이 기다리고 있습니다'],
    ['ar', 'دورك هو التالي', 'أمامك شخص واحد', 'أمامك شخصان'],
  ])('%s ahead(0), ahead(1), ahead(2)', (locale, zero, one, two) => {
    const m = messages(locale);
    expect([m.ahead(0), m.ahead(1), m.ahead(2)]).toEqual([zero, one, two]);
  });

  it('writes Arabic with its own digits and all six plural forms, right to left', () => {
    const m = messages('ar');
    expect(m.dir).toBe('rtl');
    expect(formatNumber('ar', 1_234_567)).toBe('١٬٢٣٤٬٥٦٧');
    expect([3, 10, 11, 99, 100, 103, 111].map((n) => m.ahead(n))).toEqual([
      'أمامك ٣ أشخاص',
      'أمامك ١٠ أشخاص',
      'أمامك ١١ شخصًا',
      'أمامك ٩٩ شخصًا',
      'أمامك ١٠٠ شخص',
      'أمامك ١٠٣ أشخاص',
      'أمامك ١١١ شخصًا',
    ]);
    expect([0, 1, 2, 3, 11, 100, 102].map((n) => pluralCategory('ar', n))).toEqual(['zero', 'one', 'two', 'few', 'many', 'other', 'other']);
    expect(formatDuration('ar', 120)).toBe('حوالي دقيقتين');
    expect(formatDuration('ar', 300)).toBe('حوالي ٥ دقائق');
    expect(formatClock('ar', new Date(Date.UTC(2025, 0, 1, 9, 5)), 0, { zoneLabel: 'UTC' })).toBe(`٠٩:٠٥${NBSP}UTC`);
    expect(m.nextUpdate(2)).toBe('التحديث التالي بعد ثانيتين');
    expect(m.nextUpdate(15)).toBe('التحديث التالي بعد ١٥ ثانية');
  });

  it('says a length of time exactly and never longer than it is', () => {
    expect(formatSpan('en', 600)).toBe('10 minutes');
    expect(formatSpan('en', 90)).toBe('90 seconds');
    expect(formatSpan('en', 119.9)).toBe('119 seconds');
    expect(formatSpan('en', 7199)).toBe('119 minutes');
    expect(formatSpan('en', 7200)).toBe('2 hours');
    expect(formatSpan('en', 86_399)).toBe('23 hours 59 minutes');
    expect(formatSpan('de', 600)).toBe('10 Minuten');
    expect(formatSpan('ja', 600)).toBe('10分');
    expect(formatSpan('ar', 600)).toBe('١٠ دقائق');
    expect(formatSpan('en', Number.NaN)).toBe('0 seconds');
  });
});

describe('an operator’s texts (page_texts)', () => {
  it('adds a language and overrides texts, falling back to English for what it leaves out', () => {
    const parsed = parseLanguageTexts(
      JSON.stringify({
        sv: { lang: 'sv', name: 'Svenska', group: '\u00a0', in_line: 'Du står i kö', ahead: { '=0': 'Du är näst på tur', one: '{n} person före dig', other: '{n} personer före dig' } },
        de: { page_title: 'Mein Laden', page_message: 'Heute ab 9 Uhr.' },
      }),
    );
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const sv = messages('sv', parsed.texts);
    expect([sv.locale, sv.htmlLang, sv.inLine, sv.ahead(0), sv.ahead(1), sv.ahead(12_345)]).toEqual(['sv', 'sv', 'Du står i kö', 'Du är näst på tur', '1 person före dig', `12${NBSP}345 personer före dig`]);
    expect(sv.placeLabel).toBe(messages('en').placeLabel);
    expect(negotiateLocale('sv-SE, de;q=0.5', 'en', [...LOCALES, 'sv'])).toBe('sv');
    const de = messages('de', parsed.texts);
    expect([de.pageTitle, de.pageMessage, de.inLine]).toEqual(['Mein Laden', 'Heute ab 9 Uhr.', 'Sie sind in der Warteschlange']);
    expect(messages('sv').locale).toBe('en');
  });

  it.each<[string, RegExp]>([
    ['{"de": {"in_lin": "x"}}', /^page_texts\.de\.in_lin: unknown text; did you mean in_line\?$/],
    ['{"de": {"ahead": {"one": "{n} Person"}}}', /^page_texts\.de\.ahead: needs an "other" form$/],
    ['{"de": {"ahead": {"other": "Personen vor Ihnen"}}}', /^page_texts\.de\.ahead\.other: must contain \{n\}$/],
    ['{"de": {"estimate": "Wartezeit {n}"}}', /^page_texts\.de\.estimate: \{n\} is not a placeholder of this text \(it takes \{t\}\)$/],
    ['{"de": {"in_line": 5}}', /^page_texts\.de\.in_line: must be a string$/],
    ['{"de": {"dir": "up"}}', /^page_texts\.de\.dir: "up" is not allowed here \(ltr or rtl\)$/],
    ['{"xx": {"plural": "klingon"}}', /^page_texts\.xx\.plural: "klingon" is not allowed here \(one of en, fr, ja, ar, he, pl, ru\)$/],
    ['{"Deutsch": {}}', /^page_texts\.Deutsch: not a language tag in lower case/],
    ['{"de": []}', /^page_texts\.de: must be an object of texts$/],
    ['[1]', /^must be a JSON object of languages/],
    ['{de: 1}', /^is not valid JSON/],
  ])('refuses %s, naming the place', (json, message) => {
    const parsed = parseLanguageTexts(json);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.errors[0]).toMatch(message);
  });

  it('holds the built-in languages to the same rules: every text there, every placeholder right', () => {
    for (const locale of LOCALES) {
      const table = JSON.parse(BUILT_IN_LANGUAGES[locale]!) as Record<string, unknown>;
      const parsed = parseLanguageTexts(JSON.stringify({ [locale]: table }));
      expect(parsed.ok ? [] : parsed.errors, locale).toEqual([]);
      const missing = Object.keys(TEXT_KEYS).filter((k) => !(k in table) && !['page_title', 'page_message', 'digits'].includes(k));
      expect(missing, locale).toEqual([]);
    }
  });

  it('refuses more than fits a Config Store value', () => {
    const parsed = parseLanguageTexts(JSON.stringify({ de: { page_message: 'x'.repeat(8000) } }));
    expect(parsed.ok).toBe(false);
  });
});
