/**
 * The readings an origin might make of a path, and the conservative decisions on them: the
 * spellings named in issue 11, and generated hostile paths checked against an independent model
 * of what origins do (decode once or fully, drop `;params`, `\` as `/`, resolve dots with or without
 * collapsing `//`, in any order).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bypassApplies, MAX_DECODES, queueApplies, readPath, reservedPrefixMatch, sameSiteLocation, withoutQueryParam } from '../src/core/path-canon';
import { matchesAnyPath, normalizePath, parsePathPatterns } from '../src/core/path-pattern';
import { cpuTimeMs } from './support/cpu-time';
import { originReadings } from './support/origin-readings';

const STATIC = parsePathPatterns('/static/*');
const SHOP = parsePathPatterns('/shop/*');
const PREFIX = '/__wr/';

/** Hostile paths from pieces origins disagree on. Escapes stay ASCII, so decoding stays ASCII. */
const PIECES = [
  'static', 'shop', 'SHOP', 'Static', 'a', 'x.css', '__wr', '__WR', 'admin', '%5F%5Fwr', '%5f_wr',
  '.', '..', '%2e', '%2E%2e', '.%2e', ';x', ';', '..;', '%3b', '%3Bx',
  '%2f', '%2F', '%5c', '%5C', '\\', '%25', '%252f', '%252e%252e', '%2525', '%73hop', '%',
];
const segment = fc.array(fc.constantFrom(...PIECES), { minLength: 0, maxLength: 3 }).map((parts) => parts.join(''));
const hostilePath = fc.array(segment, { minLength: 1, maxLength: 6 }).map((segments) => '/' + segments.join('/'));
const RULES = ['/static/*', '/shop/*', '/shop', '/static/x.css', '/a/*', '/__wr/*', '/*'];
const rule = fc.constantFrom(...RULES).map(parsePathPatterns);

describe('readPath', () => {
  it.each<[string, string[]]>([
    // bypass /static/* dodged (issue 11, item 6)
    ['/static/..;/shop', ['/shop']],
    ['/static/..%2fshop', ['/shop']],
    ['/static/%2e%2e%2fshop', ['/shop']],
    ['/static/..%5cshop', ['/shop']],
    ['/static/..%252fshop', ['/shop', '/static/..%2Fshop']],
    ['/static/%252e%252e%252fshop', ['/shop']],
    // queue /shop/* dodged
    ['/shop;x', ['/shop']],
    ['/shop%2F', ['/shop/']],
    ['/%2Fshop', ['/shop']],
    // RFC dot removal keeps the empty segment that normalizePath collapses
    ['/shop//../static/x', ['/static/x', '/shop/static/x']],
  ])('%j can also be read as %j', (path, expected) => {
    const { readings, ambiguous } = readPath(path);
    expect(ambiguous).toBe(false);
    expect(readings[0]).toBe(normalizePath(path));
    for (const reading of expected) expect(readings).toContain(reading);
  });

  it('gives a clean path exactly one reading, its normalised form', () => {
    for (const path of ['/', '/static/app.css', '/Shop/Item-7', '/a.b/c_d~e']) {
      expect(readPath(path)).toEqual({ readings: [normalizePath(path)], ambiguous: false });
    }
  });

  it(`calls nesting deeper than ${MAX_DECODES} encodings ambiguous, and a shallower one not`, () => {
    let slash = '/';
    for (let i = 0; i < MAX_DECODES; i++) slash = encodeURIComponent(slash);
    expect(readPath(`/static/..${slash}shop`).ambiguous).toBe(false);
    expect(readPath(`/static/..${slash}shop`).readings).toContain('/shop');
    expect(readPath(`/static/..${encodeURIComponent(slash)}shop`).ambiguous).toBe(true);
  });

  it('calls a long hostile path ambiguous rather than spend unbounded time on it', () => {
    for (const unit of ['..;\\%5c%252f/', '%252f..;/\\', '%25%2e;\\/']) {
      const hostile = '/static/' + unit.repeat(Math.ceil(8000 / unit.length));
      const { value: read, ms } = cpuTimeMs(() => readPath(hostile));
      // A sanity bound only, on CPU time so other processes on the machine cannot move it: a few ms
      // each here, the work bound is what holds it.
      expect(ms, unit).toBeLessThan(1000);
      expect(read.ambiguous, unit).toBe(true);
      expect(bypassApplies(read, STATIC)).toBe(false);
    }
  });

  it('still reads an ordinary long path with escapes, without calling it ambiguous', () => {
    const long = '/static/' + 'a%20b/'.repeat(1000) + 'x.css';
    expect(readPath(long).ambiguous).toBe(false);
    expect(bypassApplies(readPath(long), STATIC)).toBe(true);
  });

  it('gives readings that are fixpoints of normalizePath (so path-pattern matches them as they are)', () => {
    fc.assert(
      fc.property(hostilePath, (path) => {
        for (const reading of readPath(path).readings) expect(normalizePath(reading)).toBe(reading);
      }),
      { numRuns: 300 },
    );
  });
});

describe('bypass rules', () => {
  it.each(['/static/..;/shop', '/static/..%2fshop', '/static/%2e%2e%2fshop', '/static/..%5cshop', '/static/..%252fshop', '/static/%252e%252e%252fshop', '/static/..%255cshop'])(
    'do not apply to %j',
    (path) => {
      expect(matchesAnyPath(path, STATIC)).toBe(true); // what the old single reading said
      expect(bypassApplies(readPath(path), STATIC)).toBe(false);
    },
  );

  it.each(['/static/app.css', '/static/', '/static', '/STATIC/img/a.png', '/static/a%20b.css', '/static/a%2Fb.css'])('still apply to %j', (path) => {
    expect(bypassApplies(readPath(path), STATIC)).toBe(true);
  });

  it('never apply to an ambiguous path', () => {
    expect(bypassApplies(readPath('/static/%25252525'), STATIC)).toBe(false);
  });

  it('apply only when every reading an origin could make matches (generated paths and rules)', () => {
    fc.assert(
      fc.property(hostilePath, rule, (path, patterns) => {
        if (!bypassApplies(readPath(path), patterns)) return;
        for (const reading of originReadings(path)) expect(matchesAnyPath(reading, patterns), `${path} read as ${reading}`).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('agree with path-pattern matching on paths with one reading', () => {
    const clean = fc.array(fc.constantFrom('static', 'shop', 'Static', 'a', 'x.css', '*', 'b-c', '~d'), { maxLength: 4 }).map((s) => '/' + s.join('/'));
    fc.assert(
      fc.property(clean, rule, (path, patterns) => {
        expect(bypassApplies(readPath(path), patterns)).toBe(matchesAnyPath(path, patterns));
        expect(queueApplies(readPath(path), patterns)).toBe(matchesAnyPath(path, patterns));
      }),
    );
  });
});

describe('queue rules', () => {
  it.each(['/shop;x', '/shop%2F', '/%2Fshop', '/static/..;/shop', '/static/..%2fshop', '/%73hop/a', '/x/..%5cshop'])('apply to %j', (path) => {
    expect(queueApplies(readPath(path), SHOP)).toBe(true);
  });

  it.each(['/blog', '/shopping', '/static/app.css', '/x/%2Fshop2'])('do not apply to %j', (path) => {
    expect(queueApplies(readPath(path), SHOP)).toBe(false);
  });

  it('apply to an ambiguous path, and never when there are no rules', () => {
    expect(queueApplies(readPath('/blog/%25252525'), SHOP)).toBe(true);
    expect(queueApplies(readPath('/blog/%25252525'), [])).toBe(false);
  });

  it('apply whenever any reading an origin could make matches (generated paths and rules)', () => {
    fc.assert(
      fc.property(hostilePath, rule, (path, patterns) => {
        const anyMatches = [...originReadings(path)].some((reading) => matchesAnyPath(reading, patterns));
        if (anyMatches) expect(queueApplies(readPath(path), patterns), path).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('the reserved prefix', () => {
  it.each(['/__WR/admin', '/%5F%5Fwr/admin', '/__wr;x/admin', '//__wr/admin', '/__Wr/status', '/__wr', '/x/../__WR/admin', '/x/..%2f__wr/api/admit', '/__wr%2fadmin'])(
    '%j is a near miss',
    (path) => {
      expect(reservedPrefixMatch(path, PREFIX)).toBe('near');
    },
  );

  it.each<[string, 'own' | 'none']>([
    ['/__wr/admin', 'own'],
    ['/__wr/assets/style.css', 'own'],
    ['/__wrong', 'none'],
    ['/shop/__wr/admin', 'none'],
    ['/', 'none'],
  ])('%j is %s', (path, expected) => {
    expect(reservedPrefixMatch(path, PREFIX)).toBe(expected);
  });

  it('catches the prefix in an ambiguous path', () => {
    expect(reservedPrefixMatch('/%2525252525255F_wr/admin', PREFIX)).toBe('near');
  });

  it('is matched in any reading an origin could make (generated paths)', () => {
    fc.assert(
      fc.property(hostilePath, (path) => {
        const underPrefix = [...originReadings(path)].some((reading) => {
          const normal = normalizePath(reading);
          return normal.startsWith(PREFIX) || normal === '/__wr';
        });
        if (underPrefix) expect(reservedPrefixMatch(path, PREFIX), path).not.toBe('none');
      }),
      { numRuns: 2000 },
    );
  });
});

describe('sameSiteLocation', () => {
  const SITE = 'https://site.example/';

  it.each<[string, string, string]>([
    ['//evil.example/', '', '/evil.example/'],
    ['/.//evil.example/', '', '/evil.example/'],
    ['/\\evil.example/', '', '/evil.example/'],
    ['\\\\evil.example', '', '/evil.example'],
    ['/\t/evil.example', '', '/%09/evil.example'],
    ['/sale', '?item=7', '/sale?item=7'],
    ['/Sale/Item%2F7/', '?a=b+c', '/Sale/Item%2F7/?a=b+c'],
    ['/a/../b/./c', '', '/b/c'],
    ['/', '', '/'],
    ['', '', '/'],
    ['/café', '?q=é', '/caf%C3%A9?q=%C3%A9'],
  ])('%j with %j becomes %j', (pathname, search, expected) => {
    const location = sameSiteLocation(pathname, search);
    expect(location).toBe(expected);
    expect(new URL(location, SITE).host).toBe('site.example');
  });

  it('always resolves to our own host (generated paths and queries)', () => {
    const wild = fc.array(fc.constantFrom('/', '\\', '.', '..', '%2f', '%5c', '\t', '\n', '\r', ' ', 'evil.example', ':', '@', '?', '#', 'é', 'a'), { maxLength: 12 }).map((s) => s.join(''));
    fc.assert(
      fc.property(fc.oneof(wild, fc.string({ unit: 'grapheme' })), fc.oneof(wild.map((s) => `?${s}`), fc.constant('')), (pathname, search) => {
        const location = sameSiteLocation(pathname, search);
        expect(location).toMatch(/^\/(?![/\\])/);
        expect(new URL(location, SITE).host).toBe('site.example');
        expect(new URL(location, SITE).origin).toBe('https://site.example');
      }),
      { numRuns: 1000 },
    );
  });

  it('keeps the pathname the URL parser gave when it was already clean', () => {
    fc.assert(
      fc.property(fc.webPath(), (path) => {
        const pathname = new URL(`https://site.example${path.startsWith('/') ? '' : '/'}${path}`).pathname;
        if (/\/\/|\/\.\.?(?:\/|$)/.test(pathname)) return;
        expect(new URL(sameSiteLocation(pathname, ''), SITE).pathname).toBe(pathname);
      }),
    );
  });
});

describe('withoutQueryParam', () => {
  it.each<[string, string]>([
    ['?wr_vip=X', ''],
    ['?a=1&wr_vip=X&b', '?a=1&b'],
    ['?wr%5Fvip=X&a=b%20c+d', '?a=b%20c+d'],
    ['?wr_vip=X&wr_vip=Y', ''],
    ['?wr_vipx=1', '?wr_vipx=1'],
    ['', ''],
  ])('%j becomes %j', (search, expected) => {
    expect(withoutQueryParam(search, 'wr_vip')).toBe(expected);
  });
});
