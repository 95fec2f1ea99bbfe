/**
 * The sale's record and report (issue 33, items 1 and 2): a scripted sale whose answers are known,
 * driven through each store with an injected clock, then read back as the report (figures, the
 * timeline, the actions, JSON and CSV); the record outlives the hour and forgets what is older than
 * seven days; refusals and store errors counted at the edge ride on a join; and over HTTP through
 * the handler, the report behind the console's password and the origin's token.
 */
import { describe, expect, it } from 'vitest';
import { readSaleReport, type ReportContext } from '../src/core/admin-report';
import { returnTally, takeTally, tallyRefusal, tallyStoreError } from '../src/core/edge-tally';
import type { AdmissionPolicy, QueueStore } from '../src/core/ports';
import { addAuditActions, buildSaleReport, saleReportCsv, saleReportJson, type SaleReport } from '../src/core/sale-report';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, API_TOKEN, FaultyStore, ManualClock, testHandler } from './support/fixtures';
import { expectSameOnEveryStore, useEveryStore } from './support/every-store';

/** A minute start. */
const MIN0 = Math.floor(Date.UTC(2026, 10, 28, 9, 0, 0) / 60_000) * 60_000;
const MINUTE = 60_000;
const DAY = 24 * 3_600_000;
/** Let in by hand (no automatic admission), calls held 10 s for their claim. */
const BY_HAND: AdmissionPolicy = { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 10_000 };
const CAPACITY: AdmissionPolicy = { ...BY_HAND, thresholds: { maxActive: 2, maxNewPerMinute: 0 } };

const zeroRefused = { ticket_limit: 0, proof_missing: 0, proof_failed: 0, challenge_missing: 0, challenge_failed: 0 };

function reportContext(store: QueueStore, clock: ManualClock, queue: string, policy: AdmissionPolicy): ReportContext {
  return {
    config: { queueName: queue, pathPrefix: '/__wr/', queueMethod: 'fifo' },
    store,
    clock,
    policy,
    storeCall: async (call) => {
      try {
        return { ok: true, value: await call(), ms: 0 };
      } catch (error) {
        return { ok: false, reason: 'error', message: String(error), ms: 0 };
      }
    },
  };
}

async function report(store: QueueStore, clock: ManualClock, queue: string, policy: AdmissionPolicy, fromMs?: number): Promise<SaleReport> {
  const r = await readSaleReport(reportContext(store, clock, queue, policy), fromMs);
  if (r instanceof Response) throw new Error(`report: ${r.status} ${await r.text()}`);
  return r;
}

/**
 * Rate FIFO by hand: 5 arrive (one join carries an instance's 3 + 1 refusals and 2 store errors),
 * 3 are called: ticket 1 claims after 4 s, 2 after 20 s, 3 never comes back (its call lapses and
 * goes to 4, who claims after 200 s); the switch goes to hold and back.
 */
async function scriptedSale(store: QueueStore, q: string, clock: ManualClock): Promise<void> {
  const at = (ms: number): number => (clock.ms = MIN0 + ms);
  const tally = { refused: { ...zeroRefused, ticket_limit: 3, proof_failed: 1 }, storeErrors: 2 };
  await store.join(q, at(1_000), { ...BY_HAND, tally });
  for (let i = 0; i < 4; i += 1) await store.join(q, at(1_500), BY_HAND);
  await store.poll(q, at(2_000), BY_HAND); // minute 0's point: 5 waiting
  await store.admit(q, 3, at(MINUTE + 1_000), BY_HAND); // minute 1's point
  expect(await store.claim(q, 1, at(MINUTE + 2_000), BY_HAND, 4_000)).toMatchObject({ claimed: true });
  expect(await store.claim(q, 2, at(MINUTE + 3_000), BY_HAND, 20_000)).toMatchObject({ claimed: true });
  // Ticket 3's call lapses (10 s): it goes to 4, who claims.
  await store.poll(q, at(2 * MINUTE + 1_000), BY_HAND);
  expect(await store.claim(q, 4, at(2 * MINUTE + 2_000), BY_HAND, 200_000)).toMatchObject({ claimed: true });
  await store.control(q, { switch: 'hold' }, at(3 * MINUTE + 1_000), BY_HAND);
  await store.control(q, { switch: 'normal' }, at(4 * MINUTE + 1_000), BY_HAND);
  at(4 * MINUTE + 30_000);
}

/** What the scripted sale must report, whatever the store. */
function expectScriptedFigures(r: SaleReport): void {
  expect(r.arrivals).toBe(5);
  expect(r.admitted).toBe(3);
  expect(r.peakLine).toEqual({ waiting: 5, atMs: MIN0 });
  // Waits 4 s, 20 s, 200 s: buckets ≤ 5 s, ≤ 30 s, ≤ 5 min. Median the second: within 30 s; p90 and
  // p99 the third: within 5 min. The longest and the mean exact.
  expect(r.wait).toMatchObject({ count: 3, peakSeconds: 200, meanSeconds: 74.667, p50Seconds: 30, p90Seconds: 300, p99Seconds: 300 });
  expect(r.wait.buckets.map((b) => b.count)).toEqual([1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
  expect(r.wait.buckets.at(-1)).toEqual({ le: '+Inf', count: 0 });
  // One call of four ended unclaimed.
  expect(r.abandonment).toEqual({ lapsed: 1, rate: 0.25 });
  expect(r.refused).toEqual({ ...zeroRefused, ticket_limit: 3, proof_failed: 1 });
  expect(r.storeErrors).toBe(2);
  expect(r.switchChanges).toBe(2);
  expect(r.minutes.map((m) => [(m.atMs - MIN0) / MINUTE, m.arrivals, m.admitted, m.lapsed, m.waiting, m.mode])).toEqual([
    [0, 5, 0, 0, 5, 'normal'],
    [1, 0, 0, 0, 2, 'normal'],
    // Minute 1's claims are in minute 2's point (the totals as they stood at its first run), with the lapse.
    [2, 0, 2, 1, 1, 'normal'],
    [3, 0, 1, 0, 1, 'hold'],
    [4, 0, 0, 0, 1, 'normal'],
  ]);
  expect(r.actions).toEqual([
    { atMs: MIN0 + 3 * MINUTE, action: 'switched to hold', source: 'record' },
    { atMs: MIN0 + 4 * MINUTE, action: 'switched back to normal (from hold)', source: 'record' },
  ]);
}

describe('the sale record, on every store', () => {
  const stores = useEveryStore();

  for (const kind of ['memory', 'upstash', 'redis'] as const) {
    it(`${kind}: a scripted sale's report has exactly its known figures, timeline and actions`, async () => {
      const store = stores[kind]();
      const clock = new ManualClock();
      const q = `sale-${kind}`;
      await scriptedSale(store, q, clock);
      const r = await report(store, clock, q, BY_HAND);
      expectScriptedFigures(r);
      // The same figures as JSON and as CSV.
      const json = saleReportJson(r);
      expect(json).toMatchObject({ arrivals: 5, admitted: 3, wait_seconds: { median: 30, p90: 300, p99: 300, peak: 200 }, abandonment: { lapsed: 1, rate: 0.25 }, store_errors: 2 });
      const csv = saleReportCsv(r).split('\r\n');
      expect(csv[0]).toBe('minute,arrivals,admitted,lapsed,refused,store_errors,waiting,active,mode,actions');
      expect(csv[1]).toBe(`${new Date(MIN0).toISOString()},5,0,0,4,2,5,0,normal,`);
      expect(csv[4]).toBe(`${new Date(MIN0 + 3 * MINUTE).toISOString()},0,1,0,0,0,1,0,hold,switched to hold`);
      expect(csv).toHaveLength(7);
    });

    it(`${kind}: the record survives past the hour, and what is older than seven days is gone`, async () => {
      const store = stores[kind]();
      const clock = new ManualClock();
      const q = `week-${kind}`;
      await scriptedSale(store, q, clock);
      // Two hours on: the hour's history has none of the sale; the record has all of it.
      await store.poll(q, (clock.ms = MIN0 + 2 * 3_600_000 + 5), BY_HAND);
      expect((await store.history(q, clock.ms)).map((p) => p.atMs)).toEqual([MIN0 + 2 * 3_600_000]);
      const later = await report(store, clock, q, BY_HAND);
      expect(later.minutes.map((m) => (m.atMs - MIN0) / MINUTE)).toEqual([0, 1, 2, 3, 4, 120]);
      expect(later).toMatchObject({ arrivals: 5, admitted: 3, switchChanges: 2 });
      // Six days on: still there; seven days and a minute after minute 0: minute 0 is gone, the rest
      // stays until it is seven days old too; the totals (the figures) are kept with the state.
      await store.poll(q, (clock.ms = MIN0 + 6 * DAY), BY_HAND);
      expect((await report(store, clock, q, BY_HAND)).minutes[0]?.atMs).toBe(MIN0);
      await store.poll(q, (clock.ms = MIN0 + 7 * DAY + 1), BY_HAND);
      const week = await report(store, clock, q, BY_HAND);
      expect(week.minutes.map((m) => (m.atMs - MIN0) / MINUTE)).toEqual([1, 2, 3, 4, 120, 6 * 1440, 7 * 1440]);
      expect(week.admitted).toBe(3);
      // Counting from a point: only what came after it.
      const since = await report(store, clock, q, BY_HAND, MIN0 + 2 * MINUTE);
      expect(since).toMatchObject({ fromMs: MIN0 + 2 * MINUTE, arrivals: 0, admitted: 1, switchChanges: 2 });
    });
  }

  it('capacity mode: claims of reservations reach the totals through the next point, and the report reads them at once', async () => {
    for (const kind of ['memory', 'upstash', 'redis'] as const) {
      const store = stores[kind]();
      const clock = new ManualClock();
      const q = `cap-${kind}`;
      // 2 walk in (wait 0); 3 wait; one leaves and 3 is called and claims after 90 s; 4 after 700 s.
      for (let i = 0; i < 5; i += 1) await store.join(q, (clock.ms = MIN0 + 1_000), CAPACITY);
      await store.leave(q, 1, (clock.ms = MIN0 + 2_000), CAPACITY, 0);
      expect(await store.claim(q, 3, (clock.ms = MIN0 + 3_000), CAPACITY, 90_000)).toMatchObject({ claimed: true });
      await store.leave(q, 2, (clock.ms = MIN0 + 4_000), CAPACITY, 0);
      expect(await store.claim(q, 4, (clock.ms = MIN0 + 5_000), CAPACITY, 700_000)).toMatchObject({ claimed: true });
      // Nothing has written a point since the claims: the read adds the arrivals since the last one.
      const now = await report(store, clock, q, CAPACITY);
      expect(now, kind).toMatchObject({ admitted: 4, arrivals: 5, wait: { count: 4, peakSeconds: 700, p50Seconds: 5, p90Seconds: 1200 } });
      expect(now.wait.buckets.map((b) => b.count), kind).toEqual([2, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0]);
      // The next minute's point adds them to the stored totals: the same figures, once.
      await store.poll(q, (clock.ms = MIN0 + MINUTE + 1), CAPACITY);
      expect((await report(store, clock, q, CAPACITY)).wait.buckets.map((b) => b.count), kind).toEqual([2, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0]);
      expect((await store.record!(q, clock.ms, MIN0, 2)).at(-1)?.totals, kind).toMatchObject({ admitted: 4, waitMaxMs: 700_000 });
    }
  });

  it('capacity mode, walk-ins only (no poll, claim or admit for ten minutes): each walk-in counted once, by its own join', async () => {
    const ROOMY: AdmissionPolicy = { ...BY_HAND, thresholds: { maxActive: 100, maxNewPerMinute: 0 } };
    const answers = await expectSameOnEveryStore(stores, async (store) => {
      const q = 'walk-ins';
      for (let i = 0; i < 3; i += 1) await store.join(q, MIN0 + 1_000 + i, ROOMY);
      // Ten minutes on, past the 300 s the arrivals are kept: one more walks in, and the first
      // three's arrivals leave the active set with nothing but joins having run.
      await store.join(q, MIN0 + 10 * MINUTE, ROOMY);
      const first = (await store.stats(q, MIN0 + 10 * MINUTE + 1, ROOMY)).totals;
      // A minute's point after that adds nothing twice.
      await store.poll(q, MIN0 + 11 * MINUTE, ROOMY);
      const then = (await store.stats(q, MIN0 + 11 * MINUTE + 1, ROOMY)).totals;
      return [first, then];
    });
    expect(answers[0]).toMatchObject({ admitted: 4, waitSumMs: 0, waitBuckets: [4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] });
    expect(answers[1]).toEqual(answers[0]);
  });

  it('random method: collected draws reach the totals with their waits, the same on every store', async () => {
    const RANDOM: AdmissionPolicy = { ...BY_HAND, method: 'random', seed: 7, presenceMs: 30_000 };
    const answers = await expectSameOnEveryStore(stores, async (store) => {
      const q = 'draws';
      for (let i = 0; i < 4; i += 1) await store.join(q, MIN0 + 1_000 + i, RANDOM);
      const admitted = await store.admit(q, 2, MIN0 + 2_000, RANDOM);
      // Every holder polls: the two drawn are collected, after waits of 3, 6, 9 or 12 s.
      const outcomes = [];
      for (let t = 1; t <= 4; t += 1) outcomes.push((await store.draw(q, t, MIN0 + 3_000, RANDOM, 3_000 * t)).outcome);
      const before = (await store.stats(q, MIN0 + 4_000, RANDOM)).totals;
      await store.poll(q, MIN0 + MINUTE + 1, RANDOM);
      const after = (await store.stats(q, MIN0 + MINUTE + 2, RANDOM)).totals;
      return [admitted.admitted, outcomes, before, after];
    });
    const [admitted, outcomes, before, after] = answers as [number, string[], { admitted: number; waitSumMs: number }, unknown];
    expect(admitted).toBe(2);
    expect(outcomes.filter((o) => o === 'drawn')).toHaveLength(2);
    // Read before the next point (added by the read) and after it (stored): the same totals.
    expect(before.admitted).toBe(2);
    expect(after).toEqual(before);
    const drawn = outcomes.map((o, i) => (o === 'drawn' ? 3_000 * (i + 1) : 0)).reduce((a, b) => a + b, 0);
    expect(before.waitSumMs).toBe(drawn);
  });

  it('a claimed reservation reaches the totals when the queue leaves capacity mode before the next point, once', async () => {
    const answers = await expectSameOnEveryStore(stores, async (store) => {
      const q = 'switched';
      // Capacity mode: ticket 1 walks in and 2 waits; 1 leaves, 2 is called and claims after 90 s
      // (its claim writes the minute's point, which adds the arrivals before it, not its own).
      const ONE: AdmissionPolicy = { ...BY_HAND, thresholds: { maxActive: 1, maxNewPerMinute: 0 } };
      for (let i = 0; i < 2; i += 1) await store.join(q, MIN0 + 1_000, ONE);
      await store.leave(q, 1, MIN0 + 2_000, ONE, 0);
      const claim = await store.claim(q, 2, MIN0 + 3_000, ONE, 90_000);
      // The site goes back to rate mode: its next point adds the claim, and no later one again.
      await store.poll(q, MIN0 + MINUTE + 1, BY_HAND);
      const next = (await store.record!(q, MIN0 + MINUTE + 2, MIN0 + MINUTE, 1)).at(-1)?.totals;
      await store.poll(q, MIN0 + 2 * MINUTE + 1, BY_HAND);
      const later = (await store.stats(q, MIN0 + 2 * MINUTE + 2, BY_HAND)).totals;
      return [claim.claimed, next, later];
    });
    const [claimed, next, later] = answers as [boolean, unknown, unknown];
    expect(claimed).toBe(true);
    expect(next).toMatchObject({ admitted: 2, waitSumMs: 90_000, waitMaxMs: 90_000 });
    expect(later).toEqual(next);
  });

  it('a store that does not answer: the report says so (503), and asks nothing more', async () => {
    const clock = new ManualClock();
    const store = new FaultyStore(new MemoryQueueStore());
    store.mode = 'error';
    const r = await readSaleReport(reportContext(store, clock, 'down', BY_HAND), undefined);
    expect(r).toBeInstanceOf(Response);
    expect((r as Response).status).toBe(503);
  });
});

describe("an instance's tally of refusals and store errors", () => {
  it('is taken by a join, given back when the join carries it nowhere, and counted once', () => {
    const q = `tally-${Math.random()}`;
    expect(takeTally(q)).toBeUndefined();
    tallyRefusal(q, 'ticket_limit');
    tallyRefusal(q, 'ticket_limit');
    tallyStoreError(q);
    const taken = takeTally(q);
    expect(taken).toEqual({ refused: { ...zeroRefused, ticket_limit: 2 }, storeErrors: 1 });
    // A concurrent join finds nothing to carry: nothing is counted twice.
    expect(takeTally(q)).toBeUndefined();
    // The join failed: the tally comes back, with what was counted meanwhile.
    tallyStoreError(q);
    returnTally(q, taken);
    expect(takeTally(q)).toEqual({ refused: { ...zeroRefused, ticket_limit: 2 }, storeErrors: 2 });
  });

  it('over HTTP: refusals over ticket_limit reach the record with the next join, and the report shows them (JSON, CSV, page)', async () => {
    const clock = new ManualClock(MIN0 + 1_000);
    const store = new MemoryQueueStore();
    const handler = testHandler({ queue_name: 'tallied', ticket_limit: '2', ticket_window_seconds: '10', ticket_penalty_minutes: '1' }, { store, clock, ticketLimiter: new MemoryFailureLimiter(clock) });
    // Drain what earlier tests of this process left for the queue.
    takeTally('tallied');
    const from = (address: string) => ({ address, pop: 'TEST' });
    // 198.51.100.1 takes 2 tickets, its 3rd and 4th are refused; then another client joins, carrying them.
    for (let i = 0; i < 4; i += 1) await handler(new Request('https://shop.example/'), from('198.51.100.1'));
    await handler(new Request('https://shop.example/'), from('198.51.100.2'));
    clock.advance(MINUTE);
    const basic = { authorization: `Basic ${btoa(`admin:${ADMIN_PASSWORD}`)}` };
    const json = await handler(new Request('https://shop.example/__wr/admin/report.json', { headers: basic }), from('192.0.2.1'));
    expect(json.status).toBe(200);
    const body = (await json.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ queue: 'tallied', arrivals: 3, refused: { ticket_limit: 2 } });
    const api = await handler(new Request('https://shop.example/__wr/api/report.csv', { headers: { authorization: `Bearer ${API_TOKEN}` } }), from('192.0.2.1'));
    expect(api.status).toBe(200);
    expect(api.headers.get('content-type')).toBe('text/csv; charset=utf-8; header=present');
    const page = await handler(new Request('https://shop.example/__wr/admin/report', { headers: basic }), from('192.0.2.1'));
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Sale report');
    // Behind the sign-in and the token; a silly `from` is a 400 that names it, and changes nothing.
    expect((await handler(new Request('https://shop.example/__wr/admin/report.json'), from('192.0.2.1'))).status).toBe(401);
    expect((await handler(new Request('https://shop.example/__wr/api/report.json', { headers: { authorization: 'Bearer wrong-wrong-wrong-wrong-0000' } }), from('192.0.2.1'))).status).toBe(401);
    const silly = await handler(new Request('https://shop.example/__wr/admin/report.json?from=yesterday', { headers: basic }), from('192.0.2.1'));
    expect(silly.status).toBe(400);
    expect(await silly.text()).toContain('from must be');
  });
});

describe('the report from points alone', () => {
  it('counts on from zero when the totals start again (a store that lost its state)', () => {
    const totals = (admitted: number) => ({ admitted, lapsed: 0, switchChanges: 0, waitSumMs: 0, waitMaxMs: 0, waitBuckets: [admitted, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], refused: zeroRefused, storeErrors: 0 });
    const point = (minute: number, tail: number, admitted: number) => ({ atMs: MIN0 + minute * MINUTE, tail, cursor: admitted, waiting: tail - admitted, active: 0, admittedLastMinute: 0, epoch: 0, mode: 0, totals: totals(admitted) });
    const r = buildSaleReport({ queue: 'q', nowMs: MIN0 + 3 * MINUTE, points: [point(0, 10, 4), point(1, 12, 8), point(2, 3, 1)], now: { tail: 5, waiting: 2, active: 0, totals: totals(3) } });
    // 12 before the loss, then 5 in the new state; 8 + 3 let in.
    expect(r).toMatchObject({ arrivals: 17, admitted: 11 });
    expect(r.minutes.map((m) => m.arrivals)).toEqual([10, 2, 3]);
  });
});

describe("the report's exports", () => {
  it('quote what a spreadsheet would run as a formula, and the audit trail joins the timeline in time order', () => {
    const totals = { admitted: 0, lapsed: 0, switchChanges: 0, waitSumMs: 0, waitMaxMs: 0, waitBuckets: new Array<number>(12).fill(0), refused: zeroRefused, storeErrors: 0 };
    const point = { atMs: MIN0, tail: 1, cursor: 0, waiting: 1, active: 0, admittedLastMinute: 0, epoch: 0, mode: 0, totals };
    const base = buildSaleReport({ queue: 'q', nowMs: MIN0 + 2 * MINUTE, points: [point, { ...point, atMs: MIN0 + MINUTE, mode: 1 }], now: { tail: 1, waiting: 1, active: 0, totals } });
    const r = addAuditActions(base, [{ atMs: MIN0 + MINUTE + 30_000, action: 'admitted 5', actor: '=HYPERLINK("x")' }, { atMs: MIN0 + 10_000, action: 'reset', actor: 'ops' }]);
    expect(r.actions.map((a) => [a.atMs - MIN0, a.action, a.source])).toEqual([
      [10_000, 'reset', 'audit'],
      [MINUTE, 'paused', 'record'],
      [MINUTE + 30_000, 'admitted 5', 'audit'],
    ]);
    const rows = saleReportCsv(r).split('\r\n');
    expect(rows[2]).toBe(`${new Date(MIN0 + MINUTE).toISOString()},0,0,0,0,0,1,0,paused,"paused; admitted 5 (=HYPERLINK(""x""))"`);
    const evil = addAuditActions(base, [{ atMs: MIN0 + 5_000, action: '=1+1' }]);
    expect(saleReportCsv(evil).split('\r\n')[1]?.endsWith(",'=1+1")).toBe(true);
  });
});
