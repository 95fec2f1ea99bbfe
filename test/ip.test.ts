/**
 * IP parsing and CIDR matching: strict text forms, IPv4/IPv4-mapped equivalence, list parsing.
 */
import { describe, it, expect } from 'vitest';
import { CidrError, isAddressInCidrs, matchesAnyCidr, parseCidrList, parseIp } from '../src/core/ip';

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

describe('parseIp', () => {
  const valid: [string, 4 | 6, string][] = [
    ['0.0.0.0', 4, '00000000000000000000ffff00000000'],
    ['1.2.3.4', 4, '00000000000000000000ffff01020304'],
    ['10.0.0.1', 4, '00000000000000000000ffff0a000001'],
    ['255.255.255.255', 4, '00000000000000000000ffffffffffff'],
    ['::', 6, '00000000000000000000000000000000'],
    ['::1', 6, '00000000000000000000000000000001'],
    ['1::', 6, '00010000000000000000000000000000'],
    ['2001:db8::1', 6, '20010db8000000000000000000000001'],
    ['2001:DB8:0:0:0:0:0:1', 6, '20010db8000000000000000000000001'],
    ['2001:0db8:0000:0000:0000:ff00:0042:8329', 6, '20010db8000000000000ff0000428329'],
    ['1:2:3:4:5:6:7:8', 6, '00010002000300040005000600070008'],
    ['1:2:3:4:5:6:7::', 6, '00010002000300040005000600070000'],
    ['::2:3:4:5:6:7:8', 6, '00000002000300040005000600070008'],
    ['1::8', 6, '00010000000000000000000000000008'],
    ['::ffff:10.0.0.1', 6, '00000000000000000000ffff0a000001'],
    ['::FFFF:0a00:0001', 6, '00000000000000000000ffff0a000001'],
    ['::1.2.3.4', 6, '00000000000000000000000001020304'],
    ['64:ff9b::192.0.2.33', 6, '0064ff9b0000000000000000c0000221'],
    ['1:2:3:4:5:6:1.2.3.4', 6, '00010002000300040005000601020304'],
    ['[::1]', 6, '00000000000000000000000000000001'],
    ['[2001:db8::]', 6, '20010db8000000000000000000000000'],
  ];
  it.each(valid)('parses %s', (text, family, bytes) => {
    const ip = parseIp(text);
    expect(ip?.family).toBe(family);
    expect(hex(ip!.bytes)).toBe(bytes);
  });

  const invalid: [string, string][] = [
    ['', 'empty'],
    ['256.0.0.1', 'octet over 255'],
    ['1.2.3.256', 'last octet over 255'],
    ['1.2.3', 'three parts'],
    ['1.2.3.4.5', 'five parts'],
    ['1..3.4', 'empty part'],
    ['1.2.3.', 'trailing dot'],
    ['01.2.3.4', 'leading zero (octal ambiguity)'],
    ['1.2.3.010', 'leading zero in last octet'],
    ['1.2.3.0x1', 'hex octet'],
    ['1.2.3.-1', 'negative'],
    ['+1.2.3.4', 'sign'],
    [' 1.2.3.4', 'leading space'],
    ['1.2.3.4 ', 'trailing space'],
    ['1.2. 3.4', 'inner space'],
    ['1234.1.1.1', 'four digits'],
    ['[1.2.3.4]', 'brackets around IPv4'],
    ['localhost', 'name'],
    [':', 'lone colon'],
    [':::', 'triple colon'],
    ['1:2:3:4:5:6:7:8:9', 'nine groups'],
    ['1:2:3:4:5:6:7', 'seven groups without ::'],
    ['1:2:3:4:5:6:7:8::', 'eight groups plus ::'],
    ['::1:2:3:4:5:6:7:8', ':: plus eight groups'],
    ['1::2::3', 'two ::'],
    ['::1::', 'two :: at the ends'],
    [':1::2', 'leading single colon'],
    ['1::2:', 'trailing single colon'],
    ['12345::', 'five hex digits'],
    ['g::1', 'non-hex'],
    ['fe80::1%eth0', 'zone id'],
    ['[fe80::1%25eth0]', 'bracketed zone id'],
    ['[::1', 'unclosed bracket'],
    ['::1]', 'stray bracket'],
    ['[ ::1]', 'space in brackets'],
    ['1.2.3.4::', 'IPv4 before ::'],
    ['::1.2.3.4:1', 'IPv4 not last'],
    ['::ffff:1.2.3', 'short IPv4 tail'],
    ['::ffff:01.2.3.4', 'leading zero in IPv4 tail'],
    ['1:2:3:4:5:6:7:1.2.3.4', 'IPv4 tail makes nine groups'],
    ['1:2:3:4:5:6:7:8'.repeat(20), 'very long'],
  ];
  it.each(invalid)('rejects %j (%s)', (text) => {
    expect(parseIp(text)).toBeUndefined();
  });
});

describe('parseCidrList', () => {
  const lists: [string, string[]][] = [
    ['', []],
    ['   ', []],
    [',, ,', []],
    ['10.0.0.0/8', ['10.0.0.0/8']],
    ['10.0.0.0/8,192.168.0.0/16', ['10.0.0.0/8', '192.168.0.0/16']],
    [' 10.0.0.0/8 ,, 192.168.0.0/16 , ', ['10.0.0.0/8', '192.168.0.0/16']],
    ['10.0.0.0/8 192.168.0.0/16\n\t::1', ['10.0.0.0/8', '192.168.0.0/16', '::1']],
    ['1.2.3.4, 2001:db8::/32', ['1.2.3.4', '2001:db8::/32']],
    ['[::1]/128', ['[::1]/128']],
  ];
  it.each(lists)('splits %j', (text, sources) => {
    expect(parseCidrList(text).map((range) => range.source)).toEqual(sources);
  });

  const shapes: [string, 4 | 6, number, number][] = [
    ['1.2.3.4', 4, 32, 128],
    ['0.0.0.0/0', 4, 0, 96],
    ['10.0.0.0/8', 4, 8, 104],
    ['::1', 6, 128, 128],
    ['::/0', 6, 0, 0],
    ['2001:db8::/32', 6, 32, 32],
    ['::ffff:10.0.0.0/104', 6, 104, 104],
    ['10.0.0.0/08', 4, 8, 104],
  ];
  it.each(shapes)('reads %s as family %i, prefix %i, %i bits', (text, family, prefix, bits) => {
    const [range] = parseCidrList(text);
    expect(range).toMatchObject({ family, prefix, bits });
  });

  it('masks host bits instead of rejecting them', () => {
    const [range] = parseCidrList('10.1.2.3/8');
    expect(hex(range!.network)).toBe('00000000000000000000ffff0a000000');
    const [v6] = parseCidrList('2001:db8:ffff::1/33');
    expect(hex(v6!.network)).toBe('20010db8800000000000000000000000');
  });

  const bad: [string, string][] = [
    ['10.0.0.0/33', '10.0.0.0/33'],
    ['::/129', '::/129'],
    ['10.0.0.0/', '10.0.0.0/'],
    ['10.0.0.0/x', '10.0.0.0/x'],
    ['10.0.0.0/-1', '10.0.0.0/-1'],
    ['10.0.0.0/+8', '10.0.0.0/+8'],
    ['10.0.0.0/8/8', '10.0.0.0/8/8'],
    ['10.0.0.0/0x8', '10.0.0.0/0x8'],
    ['10.0.0.0/1000', '10.0.0.0/1000'],
    ['/8', '/8'],
    ['256.0.0.0/8', '256.0.0.0/8'],
    ['1.2.3/24', '1.2.3/24'],
    ['01.2.3.4', '01.2.3.4'],
    ['fe80::1%eth0', 'fe80::1%eth0'],
    ['fe80::%eth0/64', 'fe80::%eth0/64'],
    ['1::2::3/64', '1::2::3/64'],
    ['10.0.0.0/8, bogus, ::1', 'bogus'],
    ['10.0.0.0/8;192.168.0.0/16', '10.0.0.0/8;192.168.0.0/16'],
  ];
  it.each(bad)('rejects %j naming %j', (text, entry) => {
    let caught: unknown;
    try {
      parseCidrList(text);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CidrError);
    expect(caught).toMatchObject({ code: 'ERR_CIDR', entry, name: 'CidrError' });
    expect((caught as Error).message).toContain(`"${entry}"`);
  });
});

describe('matching', () => {
  const cases: [string, string, boolean][] = [
    // IPv4
    ['0.0.0.0/0', '1.2.3.4', true],
    ['0.0.0.0/0', '255.255.255.255', true],
    ['0.0.0.0/0', '0.0.0.0', true],
    ['0.0.0.0/0', '::ffff:8.8.8.8', true],
    ['0.0.0.0/0', '::1', false],
    ['0.0.0.0/0', '2001:db8::1', false],
    ['1.2.3.4/32', '1.2.3.4', true],
    ['1.2.3.4/32', '1.2.3.5', false],
    ['1.2.3.4', '1.2.3.4', true],
    ['1.2.3.4', '1.2.3.3', false],
    ['255.255.255.255/32', '255.255.255.255', true],
    ['10.0.0.0/8', '10.255.255.255', true],
    ['10.0.0.0/8', '11.0.0.0', false],
    ['10.0.0.0/8', '9.255.255.255', false],
    ['192.168.0.0/23', '192.168.1.200', true],
    ['192.168.0.0/23', '192.168.2.0', false],
    ['172.16.0.0/12', '172.31.255.255', true],
    ['172.16.0.0/12', '172.32.0.0', false],
    ['10.1.2.3/8', '10.9.9.9', true],
    // IPv4 and IPv4-mapped IPv6, both ways
    ['10.0.0.0/8', '::ffff:10.0.0.1', true],
    ['10.0.0.0/8', '::ffff:a01:203', true],
    ['10.0.0.0/8', '[::ffff:10.1.2.3]', true],
    ['10.0.0.0/8', '::ffff:11.0.0.1', false],
    ['10.0.0.0/8', '::10.0.0.1', false],
    ['::ffff:10.0.0.0/104', '10.1.2.3', true],
    ['::ffff:10.0.0.1', '10.0.0.1', true],
    ['::ffff:10.0.0.1/128', '10.0.0.2', false],
    ['::ffff:0:0/96', '203.0.113.9', true],
    // IPv6
    ['::/0', '::', true],
    ['::/0', '2001:db8::1', true],
    ['::/0', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
    ['::/0', '1.2.3.4', true],
    ['::1/128', '::1', true],
    ['::1/128', '[::1]', true],
    ['::1/128', '::2', false],
    ['::1', '0:0:0:0:0:0:0:1', true],
    ['::/128', '::', true],
    ['::/128', '::1', false],
    ['2001:db8::/32', '2001:db8:ffff:ffff::1', true],
    ['2001:db8::/32', '2001:0DB8:0000:0000:0000:0000:0000:0001', true],
    ['2001:db8::/32', '2001:db9::1', false],
    ['2001:db8::/33', '2001:db8:7fff::1', true],
    ['2001:db8::/33', '2001:db8:8000::1', false],
    ['2001:db8::/32', '32.1.13.184', false],
    // Clients that are not addresses match nothing
    ['::/0', 'fe80::1%eth0', false],
    ['0.0.0.0/0', '', false],
    ['0.0.0.0/0', 'not-an-ip', false],
    ['0.0.0.0/0', '01.2.3.4', false],
    ['0.0.0.0/0', ' 1.2.3.4', false],
  ];
  it.each(cases)('rule %s vs client %s -> %s', (rule, client, expected) => {
    const ranges = parseCidrList(rule);
    expect(isAddressInCidrs(client, ranges)).toBe(expected);
    const ip = parseIp(client);
    if (ip) expect(matchesAnyCidr(ip, ranges)).toBe(expected);
  });

  it('matches any range of a list and nothing for an empty list', () => {
    const ranges = parseCidrList('10.0.0.0/8, 2001:db8::/32 192.168.1.1');
    expect(isAddressInCidrs('192.168.1.1', ranges)).toBe(true);
    expect(isAddressInCidrs('2001:db8::5', ranges)).toBe(true);
    expect(isAddressInCidrs('192.168.1.2', ranges)).toBe(false);
    expect(isAddressInCidrs('1.2.3.4', [])).toBe(false);
    expect(matchesAnyCidr(parseIp('1.2.3.4')!, [])).toBe(false);
  });

  it('treats a missing address as no match', () => {
    expect(isAddressInCidrs(undefined, parseCidrList('0.0.0.0/0 ::/0'))).toBe(false);
  });

  it('rejects hostile address text (exponential work would hit the test timeout)', () => {
    const ranges = parseCidrList('::/0');
    for (let i = 0; i < 1000; i++) {
      expect(isAddressInCidrs(':'.repeat(100_000), ranges)).toBe(false);
      expect(isAddressInCidrs('1.'.repeat(50_000), ranges)).toBe(false);
    }
  });

  it('parses a long list', () => {
    const text = Array.from({ length: 20_000 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.0/24`).join(', ');
    const ranges = parseCidrList(text);
    expect(ranges).toHaveLength(20_000);
    expect(isAddressInCidrs('10.78.31.7', ranges)).toBe(true);
  });
});
