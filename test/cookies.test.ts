import { describe, expect, it } from 'vitest';
import { readCookieValues, serializeCookie } from '../src/core/cookies';

describe('readCookieValues', () => {
  it.each<[string | null | undefined, string[]]>([
    [null, []],
    [undefined, []],
    ['', []],
    ['waiting_room=abc', ['abc']],
    ['a=1; waiting_room=abc; b=2', ['abc']],
    ['a=1;waiting_room=abc;b=2', ['abc']],
    ['  waiting_room =  abc  ; b=2', ['abc']],
    ['waiting_room="abc"', ['abc']],
    ['waiting_room=abc; waiting_room=def', ['abc', 'def']],
    ['waiting_room=', []],
    ['waiting_room', []],
    [';;; ; =; ==; waiting_room=x=y', ['x=y']],
    ['waiting_roomx=1; xwaiting_room=2', []],
    ['WAITING_ROOM=abc', []],
    ['a=%E0%A4%A; waiting_room=ok', ['ok']],
    ['\u00e9=\u00e8; waiting_room=ok; \u0000', ['ok']],
  ])('reads %j', (header, expected) => {
    expect(readCookieValues(header, 'waiting_room')).toEqual(expected);
  });

  it('does not throw on a very long header', () => {
    const header = `${'x=y; '.repeat(20_000)}waiting_room=last`;
    expect(readCookieValues(header, 'waiting_room')).toEqual(['last']);
  });
});

describe('serializeCookie', () => {
  it('sets the attributes the design asks for', () => {
    expect(serializeCookie('waiting_room', 'tok', { maxAge: 600 })).toBe(
      'waiting_room=tok; Max-Age=600; Path=/; HttpOnly; Secure; SameSite=Lax',
    );
  });

  it('never writes a negative or fractional lifetime', () => {
    expect(serializeCookie('c', 'v', { maxAge: -5 })).toContain('Max-Age=0;');
    expect(serializeCookie('c', 'v', { maxAge: 1.9 })).toContain('Max-Age=1;');
  });
});
