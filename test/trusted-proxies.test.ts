/**
 * TRUSTED_PROXIES: which peers' X-Forwarded-For the Node host believes, and the client address it
 * takes from it (right-most address not a trusted proxy), through the real host over HTTP too.
 */
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { ClientInfo } from '../src/core/ports';
import { startHost, type RunningServer } from '../src/node/host';
import { readLocalConfig } from '../src/platform/node';
import { chooseClientAddress, parseTrustedProxies } from '../src/platform/trusted-proxies';

const ranges = (text: string) => {
  const parsed = parseTrustedProxies(text);
  if (!parsed.ok) throw new Error(parsed.problem);
  return parsed.ranges;
};

describe('parseTrustedProxies', () => {
  it('takes addresses and CIDRs of both families, separated by commas or spaces; unset or blank is none', () => {
    expect(parseTrustedProxies(undefined)).toEqual({ ok: true, ranges: [] });
    expect(parseTrustedProxies('  ')).toEqual({ ok: true, ranges: [] });
    expect(ranges('10.0.0.0/8, 192.0.2.7 ,2001:db8::/32 ::1').map((r) => r.source)).toEqual(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::1']);
  });

  it('refuses an entry that is not an address or CIDR, naming it', () => {
    for (const [text, entry] of [['10.0.0.1, proxy.internal', 'proxy.internal'], ['10.0.0.0/33', '10.0.0.0/33'], ['10.0.0.01', '10.0.0.01'], ['fe80::1%eth0', 'fe80::1%eth0']] as const) {
      const parsed = parseTrustedProxies(text);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.problem).toContain(JSON.stringify(entry));
    }
  });

  it('refuses a range of every address: any client could then choose its own', () => {
    for (const text of ['0.0.0.0/0', '10.0.0.1, ::/0']) {
      const parsed = parseTrustedProxies(text);
      expect(parsed).toMatchObject({ ok: false, problem: expect.stringContaining('trusts every address') });
    }
  });

  it('is read by readLocalConfig, and a bad entry is a problem naming the variable', () => {
    const shipped = fileURLToPath(new URL('../devconfig.json', import.meta.url));
    expect(readLocalConfig(shipped, {}).host.trustedProxies).toEqual([]);
    expect(readLocalConfig(shipped, { TRUSTED_PROXIES: '127.0.0.1,10.1.0.0/16' }).host.trustedProxies.map((r) => r.source)).toEqual(['127.0.0.1', '10.1.0.0/16']);
    const bad = readLocalConfig(shipped, { TRUSTED_PROXIES: '127.0.0.1,haproxy' });
    expect(bad.problems).toEqual([{ key: 'environment variable TRUSTED_PROXIES', message: expect.stringContaining('"haproxy" is not one') }]);
    expect(bad.host.trustedProxies).toEqual([]);
  });
});

describe('chooseClientAddress', () => {
  const lb = ranges('10.0.0.5, 10.9.0.0/16');

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy (a client spoofing it)', () => {
    expect(chooseClientAddress('198.51.100.9', '203.0.113.1', lb)).toBe('198.51.100.9');
    expect(chooseClientAddress('198.51.100.9', '10.0.0.5', lb)).toBe('198.51.100.9');
    expect(chooseClientAddress('198.51.100.9', undefined, [])).toBe('198.51.100.9');
    expect(chooseClientAddress('198.51.100.9', '203.0.113.1', [])).toBe('198.51.100.9');
  });

  it('takes the address a trusted proxy appended, never what the client wrote to its left', () => {
    expect(chooseClientAddress('10.0.0.5', '198.51.100.9', lb)).toBe('198.51.100.9');
    expect(chooseClientAddress('10.0.0.5', '203.0.113.1, 192.0.2.2, 198.51.100.9', lb)).toBe('198.51.100.9');
    // Several header lines, as node:http gives them when not joined.
    expect(chooseClientAddress('10.0.0.5', ['203.0.113.1', '198.51.100.9'], lb)).toBe('198.51.100.9');
  });

  it('walks a chain through two trusted proxies to the first address that is not one', () => {
    // client → 10.9.3.4 (trusted, appends the client) → 10.0.0.5 (trusted, appends 10.9.3.4) → host
    expect(chooseClientAddress('10.0.0.5', '198.51.100.9, 10.9.3.4', lb)).toBe('198.51.100.9');
    expect(chooseClientAddress('10.0.0.5', '203.0.113.66, 198.51.100.9, 10.9.3.4', lb)).toBe('198.51.100.9');
    // Everyone trusted (a client inside the proxies' network): the furthest hop.
    expect(chooseClientAddress('10.0.0.5', '10.9.0.1, 10.9.3.4', lb)).toBe('10.9.0.1');
  });

  it('stops at garbage: the client is the last hop a trusted proxy vouched for, never what lies left of it', () => {
    expect(chooseClientAddress('10.0.0.5', 'unknown', lb)).toBe('10.0.0.5');
    expect(chooseClientAddress('10.0.0.5', '198.51.100.9, not-an-ip', lb)).toBe('10.0.0.5');
    expect(chooseClientAddress('10.0.0.5', '198.51.100.9, <script>, 10.9.3.4', lb)).toBe('10.9.3.4');
    expect(chooseClientAddress('10.0.0.5', `${'9'.repeat(5000)}`, lb)).toBe('10.0.0.5');
    expect(chooseClientAddress('10.0.0.5', '', lb)).toBe('10.0.0.5');
    expect(chooseClientAddress('10.0.0.5', ' , ,', lb)).toBe('10.0.0.5');
    expect(chooseClientAddress('10.0.0.5', '300.1.1.1', lb)).toBe('10.0.0.5');
    expect(chooseClientAddress('10.0.0.5', 'fe80::1%eth0', lb)).toBe('10.0.0.5');
  });

  it('reads entries with a port, brackets, IPv6 and empty list elements; drops the port', () => {
    expect(chooseClientAddress('10.0.0.5', '198.51.100.9:51234', lb)).toBe('198.51.100.9');
    expect(chooseClientAddress('10.0.0.5', '[2001:db8::7]:443', lb)).toBe('2001:db8::7');
    expect(chooseClientAddress('10.0.0.5', '[2001:db8::7]', lb)).toBe('2001:db8::7');
    expect(chooseClientAddress('10.0.0.5', '2001:db8::7,,', lb)).toBe('2001:db8::7');
    // A peer on an IPv4-mapped socket address is the same proxy.
    expect(chooseClientAddress('::ffff:10.0.0.5', '198.51.100.9', lb)).toBe('198.51.100.9');
  });

  it('reads a bounded number of hops: a header of thousands of trusted entries stops at the bound', () => {
    const long = ['198.51.100.9', ...Array.from({ length: 5000 }, () => '10.9.0.1')].join(',');
    expect(chooseClientAddress('10.0.0.5', long, lb)).toBe('10.9.0.1');
  });
});

describe('the Node host with trusted proxies', () => {
  const servers: RunningServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
  });

  /** A host whose handler answers with the client address it was given. */
  async function echoHost(trustedProxies: string): Promise<RunningServer> {
    const server = await startHost(async (_request, client: ClientInfo) => new Response(client.address ?? 'none'), { trustedProxies: ranges(trustedProxies) });
    servers.push(server);
    return server;
  }

  const from = (url: string, localAddress: string, xff?: string) =>
    new Promise<string>((resolve, reject) => {
      const request = http.get(url, { localAddress, agent: false, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } }, (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        res.on('end', () => resolve(body));
      });
      request.on('error', reject);
    });

  it('believes the header from a trusted peer only', async () => {
    const host = await echoHost('127.0.0.1');
    expect(await from(host.url, '127.0.0.1', '203.0.113.1, 198.51.100.9')).toBe('198.51.100.9');
    expect(await from(host.url, '127.0.0.1')).toBe('127.0.0.1');
    // The same request from another peer: its header is its own text.
    expect(await from(host.url, '127.0.0.2', '198.51.100.9')).toBe('127.0.0.2');
  });

  it('takes the socket address when no proxy is trusted', async () => {
    const host = await echoHost('');
    expect(await from(host.url, '127.0.0.1', '198.51.100.9')).toBe('127.0.0.1');
  });
});
