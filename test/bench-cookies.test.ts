/**
 * The bench's visitors keep their cookies as a browser does (test/bench/util.ts keepCookies): a
 * latency figure measured with a cookie jar that loses the signed admission, or resends a cookie
 * past its renewal age, measures work no visitor causes.
 */
import { describe, expect, it } from 'vitest';
import { keepCookies } from './bench/util';

describe('the bench keeps cookies as a browser does', () => {
  it('replaces a renewed cookie and keeps the others, in their order', () => {
    expect(keepCookies('waiting_room=old; waiting_room_adm=carried', ['waiting_room=new; Max-Age=300; Path=/; HttpOnly'])).toBe(
      'waiting_room=new; waiting_room_adm=carried',
    );
  });

  it('adds a cookie it did not hold', () => {
    expect(keepCookies('waiting_room=a', ['waiting_room_adm=signed; Path=/'])).toBe('waiting_room=a; waiting_room_adm=signed');
    expect(keepCookies(undefined, ['waiting_room=w; Path=/'])).toBe('waiting_room=w');
  });

  it('drops a cookie cleared with Max-Age=0 or an empty value', () => {
    expect(keepCookies('waiting_room=a; wr_pow=s', ['wr_pow=; Max-Age=0; Path=/'])).toBe('waiting_room=a');
    expect(keepCookies('waiting_room=a; wr_pow=s', ['wr_pow=gone; max-age = 0'])).toBe('waiting_room=a');
    expect(keepCookies('waiting_room=a', ['waiting_room=; Path=/'])).toBeUndefined();
  });

  it('leaves the header as it was when nothing is set', () => {
    expect(keepCookies('waiting_room=a; b=c', undefined)).toBe('waiting_room=a; b=c');
    expect(keepCookies('waiting_room=a; b=c', [])).toBe('waiting_room=a; b=c');
  });

  it('keeps a value that holds "=" (base64 padding) whole', () => {
    expect(keepCookies('x=a==', ['y=b==; Path=/'])).toBe('x=a==; y=b==');
  });
});
