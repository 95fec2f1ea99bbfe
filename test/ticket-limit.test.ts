/**
 * Per-client limits on new tickets (issue 14, item 1), through the handler with the in-memory limiter
 * the Node host uses (the same semantics as Fastly's Edge Rate Limiting) and a real in-memory store.
 * Over HTTP on both hosts: test/support/e2e-scenarios.ts, defineTicketLimitScenario.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../src/core/config';
import type { Handler } from '../src/core/handler';
import type { FailureLimiter } from '../src/core/ports';
import { ticketClientKey } from '../src/core/ticket-limit';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, MemoryLogger, payloadOf, source, testHandler } from './support/fixtures';

const LIMITED = { ticket_limit: '5', ticket_window_seconds: '10', ticket_penalty_minutes: '1' };

function rig(settings: Record<string, string> = LIMITED, limiter?: FailureLimiter) {
  const clock = new ManualClock();
  const store = new FaultyStore(new MemoryQueueStore());
  const logger = new MemoryLogger();
  const handler: Handler = testHandler(settings, { store, logger, clock, ticketLimiter: limiter ?? new MemoryFailureLimiter(clock) });
  const visit = (address: string, cookie?: string, headers: Record<string, string> = {}) =>
    handler(new Request('https://shop.example/', { headers: { ...(cookie ? { cookie: `waiting_room=${cookie}` } : {}), ...headers } }), { address, pop: 'TEST' });
  const admin = (path: string) =>
    handler(new Request(`https://shop.example/__wr/${path}`, { headers: { authorization: `Basic ${btoa(`admin:${ADMIN_PASSWORD}`)}` } }), { address: '192.0.2.250', pop: 'TEST' });
  return { clock, store, logger, visit, admin };
}

describe('per-client limit on new tickets', () => {
  it('gives one client its allowance, then no ticket and no store call until the penalty is over; others are not affected', async () => {
    const r = rig();
    const tickets: number[] = [];
    for (let i = 0; i < 5; i++) tickets.push(payloadOf(cookieFrom(await r.visit('198.51.100.7'))!)['t'] as number);
    expect(tickets).toEqual([1, 2, 3, 4, 5]);
    const calls = r.store.calls;
    const refused = await r.visit('198.51.100.7');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(refused.headers.get('content-type')).toMatch(/text\/html/);
    expect(cookieFrom(refused)).toBeUndefined();
    // The page says nothing a bot can use, and comes back when the penalty is over; it promises no
    // place to a client that has none.
    expect(refused.headers.get('refresh')).toBe('60');
    const page = await refused.text();
    expect(page).toContain('data-state="checking"');
    expect(page).toContain('Getting you a place in line');
    expect(r.store.calls).toBe(calls);
    expect(r.logger.last).toMatchObject({
      status: 429,
      decision: 'ticket_limited',
      reason: 'ticket_limited: new ticket 6 in 10 s, over 5; held for 1 min',
      client: '198.51.100.7',
    });
    // Held: refused without being counted again, whatever it sends; a program is told why in JSON.
    const json = await r.visit('198.51.100.7', undefined, { accept: 'application/json' });
    expect(json.status).toBe(429);
    expect(((await json.json()) as { error: string }).error).toMatch(/too many new visitors from your address/);
    expect(r.logger.last?.reason).toMatch(/^ticket_held: over 5 new tickets in 10 s/);
    expect(r.store.calls).toBe(calls);
    // Someone else at the same time takes the next number.
    expect(payloadOf(cookieFrom(await r.visit('198.51.100.8'))!)['t']).toBe(6);
    // Not before the minute is over; then tickets again.
    r.clock.advance(59_999);
    expect((await r.visit('198.51.100.7')).status).toBe(429);
    r.clock.advance(1);
    expect(payloadOf(cookieFrom(await r.visit('198.51.100.7'))!)['t']).toBe(7);
  });

  it('shows the operator how many new tickets were refused in the last minute, without a store call for them', async () => {
    const r = rig();
    const state = async () => ((await (await r.admin('admin/state')).json()) as { tickets_refused_last_minute_here: { ticket_limit: number } }).tickets_refused_last_minute_here.ticket_limit;
    expect(await state()).toBe(0);
    for (let i = 0; i < 5; i++) await r.visit('198.51.100.7');
    for (let i = 0; i < 12; i++) await r.visit('198.51.100.7');
    r.clock.advance(20_000);
    await Promise.all(Array.from({ length: 8 }, () => r.visit('2001:db8::1')));
    // 12 + 3 refused, counted as they happened; the 10 given tickets are not.
    expect(await state()).toBe(15);
    const page = await (await r.admin('admin')).text();
    expect(page).toMatch(/New tickets refused, last minute[^<]*<\/dt><dd data-figure="refused" class="text">15 over the per-client limit</);
    const live = (await (await r.admin('admin/live')).json()) as { figures: Record<string, string>; state: Record<string, unknown> };
    expect(live.figures['refused']).toBe('15 over the per-client limit');
    expect(live.state['tickets_refused_last_minute_here']).toEqual({ ticket_limit: 15, proof_missing: 0, proof_failed: 0, challenge_missing: 0, challenge_failed: 0 });
    // A minute later the first twelve have left the window.
    r.clock.advance(45_000);
    expect(await state()).toBe(3);
    // With no limit set the console says so.
    const off = rig({ ticket_limit: '0' });
    expect(await (await off.admin('admin')).text()).toMatch(/data-figure="refused" class="text">no gate set</);
  });

  it('never counts a visitor who holds a ticket or an access token', async () => {
    const r = rig({ ...LIMITED, admit_per_period: '0' });
    const cookie = cookieFrom(await r.visit('198.51.100.9'))!;
    // A waiting visitor polls far more often than the limit: every poll is answered.
    for (let i = 0; i < 50; i++) expect((await r.visit('198.51.100.9', cookie)).status).toBe(200);
    // Its address still has its whole allowance less the one ticket it took.
    for (let i = 0; i < 4; i++) expect((await r.visit('198.51.100.9')).status).toBe(200);
    expect((await r.visit('198.51.100.9')).status).toBe(429);
    // Still held for new tickets, the visitor with a ticket keeps its place.
    const again = await r.visit('198.51.100.9', cookie);
    expect(again.status).toBe(200);
    expect(r.logger.last).toMatchObject({ decision: 'waiting', ticket: 1 });
  });

  it('a flood of 1,000 new requests from one address moves a real visitor back by the allowance only', async () => {
    const r = rig();
    const flood = await Promise.all(Array.from({ length: 1000 }, () => r.visit('203.0.113.66')));
    expect(flood.filter((response) => response.status === 200)).toHaveLength(5);
    expect(flood.filter((response) => response.status === 429)).toHaveLength(995);
    const real = payloadOf(cookieFrom(await r.visit('192.0.2.10'))!);
    expect(real['t']).toBe(6);
    expect(r.logger.records.filter((l) => l.decision === 'ticket_limited')).toHaveLength(995);
  });

  it('groups an IPv6 client by its /64, and an IPv4 client by its /24 when configured', async () => {
    const v6 = rig({ ...LIMITED, ticket_limit: '2' });
    expect((await v6.visit('2001:db8:1:2::1')).status).toBe(200);
    expect((await v6.visit('2001:db8:1:2:ffff:ffff:ffff:ffff')).status).toBe(200);
    expect((await v6.visit('2001:db8:1:2::abcd')).status).toBe(429);
    expect(v6.logger.last?.client).toBe('2001:db8:1:2::/64');
    expect((await v6.visit('2001:db8:1:3::1')).status).toBe(200);

    const v4 = rig({ ...LIMITED, ticket_limit: '2', client_ipv4_prefix: '24' });
    expect((await v4.visit('192.0.2.1')).status).toBe(200);
    expect((await v4.visit('192.0.2.200')).status).toBe(200);
    expect((await v4.visit('::ffff:192.0.2.77')).status).toBe(429);
    expect(v4.logger.last?.client).toBe('192.0.2.0/24');
    expect((await v4.visit('192.0.3.1')).status).toBe(200);
    // The default counts each IPv4 address on its own.
    const each = rig({ ...LIMITED, ticket_limit: '1' });
    expect((await each.visit('192.0.2.1')).status).toBe(200);
    expect((await each.visit('192.0.2.2')).status).toBe(200);
  });

  it('counts an IPv6 /48 too: a new /64 for each request buys no more than 16 × the allowance', async () => {
    const r = rig({ ...LIMITED, ticket_limit: '2' });
    const statuses: number[] = [];
    // Two from each /64 (within each one's allowance), across 64 /64s of a /56 in one /48.
    for (let n = 0; n < 64; n++) for (const host of [1, 2]) statuses.push((await r.visit(`2001:db8:5:${(0x1200 + n).toString(16)}::${host}`)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(32);
    expect(statuses.slice(32).every((s) => s === 429)).toBe(true);
    expect(r.logger.records.find((l) => l.status === 429)).toMatchObject({ decision: 'ticket_limited', reason: 'ticket_limited: new ticket 33 in 10 s from its /48, over 32; held for 1 min', client: '2001:db8:5::/48' });
    expect(r.logger.last?.reason).toMatch(/^ticket_held: over 32 new tickets in 10 s from its \/48/);
    // The whole /48 is held, even a /64 it never used; another /48 is not.
    expect((await r.visit('2001:db8:5:ffff::1')).status).toBe(429);
    expect((await r.visit('2001:db8:6::1')).status).toBe(200);
    // The store was asked for the given tickets only.
    expect(r.store.calls).toBe(33);
  });

  it('counts a 6to4 client (2002::/16) as the IPv4 address it carries, and an IPv4-mapped one as its IPv4', async () => {
    const r = rig({ ...LIMITED, ticket_limit: '2' });
    expect((await r.visit('2002:c633:6407:1::1')).status).toBe(200);
    expect((await r.visit('2002:c633:6407:2::1')).status).toBe(200);
    expect((await r.visit('2002:c633:6407:3::1')).status).toBe(429);
    expect(r.logger.last?.client).toBe('198.51.100.7');
    expect((await r.visit('198.51.100.7')).status).toBe(429);
    expect((await r.visit('::ffff:198.51.100.7')).status).toBe(429);
    expect((await r.visit('198.51.100.8')).status).toBe(200);
  });

  it('counts per queue: a client over the limit in one queue still gets a ticket in another', () => {
    const base = { ticketLimit: 5, ticketWindowSeconds: 10 as const, ticketPenaltyMinutes: 1, clientIpv4Prefix: 32 as const };
    expect(ticketClientKey({ ...base, queueName: 'sale' }, '198.51.100.7')).toBe('sale|198.51.100.7');
    expect(ticketClientKey({ ...base, queueName: 'default' }, '198.51.100.7')).toBe('default|198.51.100.7');
    expect(ticketClientKey({ ...base, queueName: 'sale' }, undefined)).toBe('sale|unknown');
  });

  it('gives tickets as if there were no limit when the limiter fails, and says so in the log', async () => {
    const broken: FailureLimiter = {
      isHeld: async () => {
        throw new Error('ERL is not enabled on this service');
      },
      countFailure: async () => 0,
      hold: async () => undefined,
      countOf: async () => 0,
    };
    const r = rig({ ...LIMITED, ticket_limit: '1' }, broken);
    for (let i = 1; i <= 3; i++) expect(payloadOf(cookieFrom(await r.visit('198.51.100.7'))!)['t']).toBe(i);
    expect(r.logger.last?.reason).toBe('ticket limit unavailable: ERL is not enabled on this service');
  });

  it('is off with ticket_limit = 0, and on by default', async () => {
    const off = rig({ ticket_limit: '0' });
    for (let i = 0; i < 100; i++) expect((await off.visit('198.51.100.7')).status).toBe(200);
    const config = parseConfig(source(BASE_SETTINGS));
    expect(config).toMatchObject({ ticketLimit: 60, ticketWindowSeconds: 10, ticketPenaltyMinutes: 1, clientIpv4Prefix: 32 });
    const byDefault = rig({});
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await byDefault.visit('198.51.100.7')).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(60);
    expect(statuses.at(-1)).toBe(429);
  });

  it.each([
    ['ticket_limit', '-1'],
    ['ticket_limit', 'lots'],
    ['ticket_window_seconds', '15'],
    ['ticket_penalty_minutes', '0'],
    ['ticket_penalty_minutes', '61'],
    ['client_ipv4_prefix', '16'],
  ])('refuses %s = %j, naming the key', (key, value) => {
    expect(() => parseConfig(source({ ...BASE_SETTINGS, [key]: value }))).toThrow(ConfigError);
    expect(() => parseConfig(source({ ...BASE_SETTINGS, [key]: value }))).toThrow(new RegExp(key));
  });
});
