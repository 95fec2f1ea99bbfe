/**
 * Path normalisation and pattern matching: spellings that must not dodge a rule, wildcard edges,
 * pattern errors, and linear time on hostile input.
 */
import { describe, it, expect } from 'vitest';
import { PathPatternError, matchesAnyPath, normalizePath, parsePathPatterns } from '../src/core/path-pattern';

describe('normalizePath', () => {
  const cases: [string, string][] = [
    ['/', '/'],
    ['', '/'],
    ['sale', '/sale'],
    ['/sale', '/sale'],
    ['/SALE', '/sale'],
    ['/Sale/Item', '/sale/item'],
    ['//sale', '/sale'],
    ['/sale//item///x', '/sale/item/x'],
    ['/sale/', '/sale/'],
    ['/sale//', '/sale/'],
    // unreserved escapes decode (and fold case)
    ['/%73ale', '/sale'],
    ['/%53ALE', '/sale'],
    ['/%41%5a%30%2d%2e%5f%7e', '/az0-._~'],
    // dot segments, literal and encoded, never above the root
    ['/./sale', '/sale'],
    ['/a/../sale', '/sale'],
    ['/../../sale', '/sale'],
    ['/a/b/../../../sale', '/sale'],
    ['/a/%2e%2e/sale', '/sale'],
    ['/a/%2E/sale', '/a/sale'],
    ['/a/.%2e/sale', '/sale'],
    ['/a/.', '/a/'],
    ['/a/b/..', '/a/'],
    ['/a/..', '/'],
    ['/..', '/'],
    ['/...', '/...'],
    ['/.hidden', '/.hidden'],
    // reserved escapes stay encoded with upper-case hex
    ['/a%2fb', '/a%2Fb'],
    ['/a%2Fb', '/a%2Fb'],
    ['/a%2F..%2Fsale', '/a%2F..%2Fsale'],
    ['/a%2f%2e%2e%2fsale', '/a%2F..%2Fsale'],
    ['/%25', '/%25'],
    ['/%2573ale', '/%2573ale'],
    ['/%3f', '/%3F'],
    ['/caf%c3%a9', '/caf%C3%A9'],
    ['/a%20B', '/a%20b'],
    // malformed escapes are kept (only case is folded)
    ['/%zz', '/%zz'],
    ['/%ZZ', '/%zz'],
    ['/%', '/%'],
    ['/a%', '/a%'],
    ['/a%2', '/a%2'],
    ['/%%73', '/%s'],
    ['/%g1', '/%g1'],
    // characters a URL parser escapes get escaped, so raw and parsed paths agree
    ['/café', '/caf%C3%A9'],
    ['/CAFÉ', '/caf%C3%89'],
    ['/a b', '/a%20b'],
    ['/a{b}', '/a%7Bb%7D'],
    ['/sale?x', '/sale%3Fx'],
    ['/😀', '/%F0%9F%98%80'],
    ['/\ud800x', '/%EF%BF%BDx'],
    // sub-delimiters and the like are left alone
    ["/a!$&'()*+,;=:@b", "/a!$&'()*+,;=:@b"],
  ];
  it.each(cases)('normalises %j to %j', (raw, expected) => {
    expect(normalizePath(raw)).toBe(expected);
  });

  it('agrees with the URL parser on parsed pathnames', () => {
    for (const raw of ['/a/%2e%2e/b', '/café', '/a b', '/a{b}', '/x/./y/../z', '/%2f']) {
      const parsed = new URL(`https://example.com${raw}`).pathname;
      expect(normalizePath(parsed)).toBe(normalizePath(raw));
    }
  });

  it('is idempotent', () => {
    for (const [raw] of cases) {
      const once = normalizePath(raw);
      expect(normalizePath(once)).toBe(once);
    }
  });
});

describe('parsePathPatterns', () => {
  it.each([
    ['', 0],
    ['   ', 0],
    ['/sale', 1],
    ['/sale,/static/*', 2],
    [' /sale , /static/* ,/x ', 3],
  ] as const)('reads %j as %i patterns', (text, count) => {
    expect(parsePathPatterns(text)).toHaveLength(count);
  });

  it('normalises patterns like paths and keeps the source', () => {
    const [pattern] = parsePathPatterns(' //Static/./Img/../* ');
    expect(pattern).toMatchObject({ source: '//Static/./Img/../*', normalized: '/static/*', coversSubtree: true });
  });

  const bad: [string, string][] = [
    ['/a,,/b', ''],
    ['/a,', ''],
    [',/a', ''],
    ['sale', 'sale'],
    ['/a, sale', 'sale'],
    ['*.css', '*.css'],
    ['/a b', '/a b'],
    ['/a\tb', '/a\tb'],
    ['/sale?x=1', '/sale?x=1'],
    ['/sale#top', '/sale#top'],
    ['/a/**/b', '/a/**/b'],
    ['/a**', '/a**'],
    ['/**x', '/**x'],
  ];
  it.each(bad)('rejects %j naming %j', (text, pattern) => {
    let caught: unknown;
    try {
      parsePathPatterns(text);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(PathPatternError);
    expect(caught).toMatchObject({ code: 'ERR_PATH_PATTERN', pattern, name: 'PathPatternError' });
    expect((caught as Error).message).toContain(`"${pattern}"`);
  });
});

describe('matchesAnyPath', () => {
  const cases: [string, string, boolean][] = [
    // exact
    ['/sale', '/sale', true],
    ['/sale', '/SALE', true],
    ['/SALE', '/sale', true],
    ['/sale', '//sale', true],
    ['/sale', '/%73ale', true],
    ['/sale', '/%53%41%4C%45', true],
    ['/sale', '/a/../sale', true],
    ['/sale', '/./sale', true],
    ['/sale', '/../sale', true],
    ['/sale', '/a/%2e%2e/sale', true],
    ['/sale', '/sale/', false],
    ['/sale', '/sales', false],
    ['/sale', '/sale/x', false],
    ['/sale', '/', false],
    ['/sale', '/sale%3Fx', false],
    ['/sale', '/sale?x', false],
    ['/sale/', '/sale/', true],
    ['/sale/', '/sale', false],
    ['/', '/', true],
    ['/', '//', true],
    ['/', '/a', false],
    // subtree
    ['/sale/*', '/sale', true],
    ['/sale/*', '/sale/', true],
    ['/sale/*', '/SALE/Item', true],
    ['/static/*', '/static/x.css', true],
    ['/static/*', '/static/a/b.css', true],
    ['/static/**', '/static/a/b/c', true],
    ['/static/**', '/static', true],
    ['/static/*', '/staticx', false],
    ['/static/*', '/static.css', false],
    ['/static/*', '/stati', false],
    ['/static/*', '/', false],
    ['/static/*', '/static/../sale', false],
    ['/static/*', '/static%2F..%2Fsale', false],
    ['/static/*', '/static%2Fx.css', false],
    ['/*', '/', true],
    ['/*', '/anything/at/all', true],
    ['/**', '/x', true],
    // segment wildcards
    ['/*.css', '/a.css', true],
    ['/*.css', '/.css', true],
    ['/*.css', '/a/b.css', false],
    ['/img/*.png', '/img/logo.PNG', true],
    ['/img/*.png', '/img/a/logo.png', false],
    ['/a*', '/a', true],
    ['/a*', '/abc', true],
    ['/a*', '/a/b', false],
    ['/a*', '/ba', false],
    ['/*/checkout', '/shop/checkout', true],
    ['/*/checkout', '/checkout', false],
    ['/*/checkout', '/a/b/checkout', false],
    ['/a*b*c', '/abc', true],
    ['/a*b*c', '/axxbyyc', true],
    ['/a*b*c', '/acb', false],
    ['/a*b*c', '/abcb', false],
    ['/ab*ba', '/aba', false],
    ['/ab*ba', '/abba', true],
    ['/a/*/b/*', '/a/x/b', true],
    ['/a/*/b/*', '/a/x/b/y/z', true],
    ['/a/*/b/*', '/a/x/c/y', false],
    // encoded slashes
    ['/a%2Fb', '/a%2fb', true],
    ['/a%2fb', '/a%2Fb', true],
    ['/a%2Fb', '/a/b', false],
    ['/a/b', '/a%2Fb', false],
    // literal star and comma via escapes
    ['/a%2Ab', '/a*b', false],
    ['/a%2Ab', '/a%2ab', true],
    ['/a%2Cb', '/a%2cb', true],
    // malformed escapes
    ['/%zz', '/%ZZ', true],
    ['/%zz', '/zz', false],
    ['/x/*', '/x/%zz/%', true],
    // non-ASCII in either spelling
    ['/café', '/caf%C3%A9', true],
    ['/caf%c3%a9', '/café', true],
  ];
  it.each(cases)('pattern %j vs path %j -> %s', (pattern, path, expected) => {
    expect(matchesAnyPath(path, parsePathPatterns(pattern))).toBe(expected);
  });

  it('matches any pattern of a list and nothing for an empty list', () => {
    const patterns = parsePathPatterns('/sale, /static/*, /*.ico');
    expect(matchesAnyPath('/favicon.ico', patterns)).toBe(true);
    expect(matchesAnyPath('/static/app.js', patterns)).toBe(true);
    expect(matchesAnyPath('/checkout', patterns)).toBe(false);
    expect(matchesAnyPath('/sale', [])).toBe(false);
  });

  it('gives the right answer on hostile input (exponential work would hit the test timeout)', () => {
    const patterns = parsePathPatterns('/*a*a*a*a*a*a*a*a*a*b, /x/*a*a*a*a*a*a*c/*, /%2F*%2F*%2Fz');
    const hostile = [
      '/' + 'a'.repeat(200_000),
      '/x/' + 'a'.repeat(200_000),
      '/' + '%2F'.repeat(70_000),
      '/' + '%'.repeat(200_000),
      '/' + '%2'.repeat(100_000),
      '/' + '../'.repeat(70_000) + 'x',
      '/' + '%2e%2e/'.repeat(30_000),
      '/'.repeat(200_000),
      '/' + 'a/'.repeat(100_000),
      '/' + 'é'.repeat(100_000),
    ];
    for (const path of hostile) {
      expect(matchesAnyPath(path, patterns)).toBe(false);
    }
  });
});
