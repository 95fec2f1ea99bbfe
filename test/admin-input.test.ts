import { describe, expect, it } from 'vitest';
import { MAX_ADMIT_COUNT, parseAdmitCount } from '../src/core/admin';
import { readBasicAuth, readBearer, timingSafeEqual } from '../src/core/http';

describe('parseAdmitCount', () => {
  it.each<[unknown, number]>([
    [1, 1],
    ['5', 5],
    [' 12 ', 12],
    [MAX_ADMIT_COUNT, MAX_ADMIT_COUNT],
  ])('accepts %j', (value, count) => {
    expect(parseAdmitCount(value)).toEqual({ ok: true, count });
  });

  it.each<[unknown, RegExp]>([
    [undefined, /missing/],
    ['', /missing/],
    [null, /missing/],
    [0, /at least 1/],
    ['-3', /at least 1/],
    [1.5, /whole number/],
    ['1.5', /whole number/],
    ['1e3', /whole number/],
    ['ten', /whole number/],
    ['0x10', /whole number/],
    [true, /whole number/],
    [[5], /whole number/],
    [{ n: 5 }, /whole number/],
    [MAX_ADMIT_COUNT + 1, /at most/],
    ['99999999999999999999', /at most/],
    [Number.NaN, /whole number/],
    [Number.POSITIVE_INFINITY, /whole number/],
  ])('refuses %j with a reason', (value, reason) => {
    const result = parseAdmitCount(value);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatch(reason);
  });
});

describe('credentials', () => {
  it('reads Basic auth, including a colon in the password and UTF-8', () => {
    const header = `Basic ${Buffer.from('admin:pa:ss wörd').toString('base64')}`;
    expect(readBasicAuth(header)).toEqual({ user: 'admin', password: 'pa:ss wörd' });
  });

  it.each([null, '', 'Basic', 'Basic !!!', 'Bearer abc', `Basic ${Buffer.from('nocolon').toString('base64')}`])(
    'ignores %j',
    (header) => {
      expect(readBasicAuth(header)).toBeUndefined();
    },
  );

  it('reads a bearer token', () => {
    expect(readBearer('Bearer abc.def')).toBe('abc.def');
    expect(readBearer('bearer  xyz ')).toBe('xyz');
    expect(readBearer('Basic abc')).toBeUndefined();
    expect(readBearer(null)).toBeUndefined();
  });

  it('compares strings fully', () => {
    expect(timingSafeEqual('secret', 'secret')).toBe(true);
    expect(timingSafeEqual('secret', 'secreT')).toBe(false);
    expect(timingSafeEqual('secret', 'secret!')).toBe(false);
    expect(timingSafeEqual('', 'x')).toBe(false);
    expect(timingSafeEqual('', '')).toBe(true);
  });
});
