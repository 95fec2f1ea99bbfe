import { describe, expect, it } from 'vitest';
import { guardMode, MAX_ADMIT_COUNT, MAX_PERIOD_QUOTA, MAX_THRESHOLD, parseAdmitCount, parseControl } from '../src/core/admin';
import { parseConfig } from '../src/core/config';
import { source } from './support/fixtures';
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

describe('parseControl', () => {
  it.each<[Record<string, unknown>, unknown]>([
    [{ paused: true }, { paused: true }],
    [{ max_active: 500 }, { maxActive: 500 }],
    [{ max_new_per_minute: null }, { maxNewPerMinute: null }],
    [{ adaptive_pin: 7 }, { adaptivePin: 7 }],
    [{ adaptive_pin: 'release' }, { adaptivePin: null }],
    [{ adaptive: 'config' }, { adaptive: null }],
    [{ paused: false, max_active: 10, max_new_per_minute: 20 }, { paused: false, maxActive: 10, maxNewPerMinute: 20 }],
  ])('accepts %j', (input, change) => {
    expect(parseControl(input, 'json')).toEqual({ ok: true, change });
  });

  // A form has only strings; the console posts them and must keep working.
  it.each<[Record<string, unknown>, unknown]>([
    [{ paused: 'true' }, { paused: true }],
    [{ paused: 'false' }, { paused: false }],
    [{ max_active: ' 0 ' }, { maxActive: 0 }],
    [{ max_active: '500' }, { maxActive: 500 }],
    [{ max_new_per_minute: 'default' }, { maxNewPerMinute: null }],
    [{ adaptive_pin: '7' }, { adaptivePin: 7 }],
  ])('accepts %j from the console\'s form', (input, change) => {
    expect(parseControl(input, 'form')).toEqual({ ok: true, change });
  });

  // JSON has types: a string where a boolean or a number is meant is a client that built its body
  // wrong (a quoted template value), and guessing what it meant could apply the opposite.
  it.each<[Record<string, unknown>, string]>([
    [{ paused: 'true' }, 'paused must be a JSON boolean, true or false, not the string "true"; nothing changed'],
    [{ paused: 'false' }, 'paused must be a JSON boolean, true or false, not the string "false"; nothing changed'],
    [{ max_active: '5' }, 'max_active must be a JSON number (a whole number), or null for the configured value, not the string "5"; nothing changed'],
    [{ max_new_per_minute: 'default' }, 'max_new_per_minute must be a JSON number (a whole number), or null for the configured value, not the string "default"; nothing changed'],
    [{ adaptive_pin: '7' }, 'adaptive_pin must be a JSON number (a whole number), or "release", not the string "7"; nothing changed'],
    [{ paused: true, max_active: '5' }, 'max_active must be a JSON number (a whole number), or null for the configured value, not the string "5"; nothing changed'],
  ])('from JSON, refuses %j, naming the field and the type it must be', (input, error) => {
    expect(parseControl(input, 'json')).toEqual({ ok: false, error });
  });

  it.each<[Record<string, unknown>, RegExp]>([
    [{}, /at least one/],
    [{ paused: 'yes' }, /paused must be a JSON boolean, true or false/],
    [{ paused: 1 }, /paused must be true or false/],
    [{ max_active: -1 }, /between 0/],
    [{ max_active: 1.5 }, /whole number/],
    [{ max_active: '1e3' }, /whole number/],
    [{ max_active: MAX_THRESHOLD + 1 }, /between 0/],
    [{ max_active: [] }, /whole number/],
    [{ capacity: 5 }, /unknown control/],
    [{ paused: true, speed: 2 }, /unknown control/],
  ])('refuses %j with a reason', (input, reason) => {
    const result = parseControl(input, 'json');
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatch(reason);
  });
});

describe('guardMode: a change of limits never changes the mode unless it says so', () => {
  const config = parseConfig(source({ admit_per_period: '5' }));
  const rate = { maxActive: 0, maxNewPerMinute: 0, admitPerPeriod: 5 };
  const capacity = { maxActive: 100, maxNewPerMinute: 0, admitPerPeriod: 5 };

  it('keeps a change inside the mode as it is', () => {
    expect(guardMode({ admitPerPeriod: 8 }, undefined, rate, config)).toEqual({ ok: true, change: { admitPerPeriod: 8 }, from: 'rate', to: 'rate' });
    expect(guardMode({ maxNewPerMinute: 30 }, undefined, capacity, config)).toMatchObject({ ok: true, from: 'capacity', to: 'capacity' });
  });

  it('refuses a change that would leave rate or capacity mode unasked, naming both modes', () => {
    expect(guardMode({ maxNewPerMinute: 4 }, undefined, rate, config)).toEqual({
      ok: false,
      status: 409,
      error: 'this change would switch the queue from rate mode (5 visitors every 60 s) to capacity mode (no limit at once, 4 new a minute); nothing changed. To mean it, send mode=capacity with it.',
    });
    expect(guardMode({ maxActive: 0 }, undefined, capacity, config)).toMatchObject({ ok: false, status: 409, error: expect.stringMatching(/from capacity mode \(100 at once, no limit a minute\) to rate mode \(5 visitors every 60 s\)/) });
  });

  it('applies a chosen mode with what it implies, and refuses one the change does not make', () => {
    expect(guardMode({ maxNewPerMinute: 4 }, 'capacity', rate, config)).toMatchObject({ ok: true, change: { maxNewPerMinute: 4 }, from: 'rate', to: 'capacity' });
    expect(guardMode({}, 'rate', capacity, config)).toEqual({ ok: true, change: { maxActive: 0, maxNewPerMinute: 0 }, from: 'capacity', to: 'rate' });
    expect(guardMode({}, 'manual', rate, config)).toEqual({ ok: true, change: { maxActive: 0, maxNewPerMinute: 0, admitPerPeriod: 0 }, from: 'rate', to: 'manual' });
    expect(guardMode({ maxActive: 5 }, 'rate', capacity, config)).toMatchObject({ ok: false, status: 400, error: 'rate mode has max_active at 0, got 5; nothing changed' });
    expect(guardMode({}, 'capacity', rate, config)).toMatchObject({ ok: false, status: 400, error: expect.stringMatching(/give max_active or max_new_per_minute above 0; nothing changed$/) });
  });

  it('lets a limit start automatic admission from admission by hand, saying so', () => {
    expect(guardMode({ maxActive: 5 }, undefined, { maxActive: 0, maxNewPerMinute: 0, admitPerPeriod: 0 }, config)).toMatchObject({ ok: true, from: 'manual', to: 'capacity' });
  });

  it('reads admit_per_period and mode from a form or JSON, and refuses bad values', () => {
    expect(parseControl({ admit_per_period: '8', mode: 'rate' }, 'form')).toEqual({ ok: true, change: { admitPerPeriod: 8 }, mode: 'rate' });
    expect(parseControl({ admit_per_period: null }, 'json')).toEqual({ ok: true, change: { admitPerPeriod: null }, mode: undefined });
    for (const input of [{ admit_per_period: -1 }, { admit_per_period: 1.5 }, { admit_per_period: MAX_PERIOD_QUOTA + 1 }, { admit_per_period: '8' }, { mode: 'fast' }]) {
      expect(parseControl(input, 'json').ok, JSON.stringify(input)).toBe(false);
    }
  });
});
