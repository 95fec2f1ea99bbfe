/**
 * The metrics endpoint (issue 16, item 7): the on-call figures in the OpenMetrics text format,
 * behind the origin's bearer token or the console's password; store errors counted where they
 * happen; a store that does not answer still gives a 200 that says so.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { takeTally } from '../src/core/edge-tally';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, API_TOKEN, FaultyStore, ManualClock, testHandler } from './support/fixtures';

const SITE = 'https://shop.example';
const CLIENT = { address: '198.51.100.9', pop: 'TEST' };

function rig(settings: Record<string, string> = {}) {
  const clock = new ManualClock();
  const store = new FaultyStore(new MemoryQueueStore());
  const handler = testHandler({ store_timeout_ms: '100', ...settings }, { store, clock, ticketLimiter: new MemoryFailureLimiter(clock) });
  const scrape = async (auth = `Bearer ${API_TOKEN}`, path = '/__wr/api/metrics') => handler(new Request(`${SITE}${path}`, { headers: { authorization: auth } }), CLIENT);
  return { clock, store, handler, scrape };
}

/** Every line is a comment, a sample `name{labels} value`, or the final `# EOF`. */
function samples(text: string): Map<string, number> {
  const lines = text.trimEnd().split('\n');
  expect(lines.at(-1)).toBe('# EOF');
  const found = new Map<string, number>();
  for (const line of lines.slice(0, -1)) {
    if (line.startsWith('# TYPE ') || line.startsWith('# HELP ')) continue;
    const match = /^(wr_[a-z0-9_]+\{[^}]*\}) (-?[0-9.e+-]+|NaN)$/.exec(line);
    expect(match, line).not.toBeNull();
    found.set(match![1]!, Number(match![2]));
  }
  return found;
}

describe('the metrics endpoint', () => {
  it('gives the figures in the OpenMetrics format to the origin\'s token and the console\'s password, and nothing to anyone else', async () => {
    const r = rig({ ticket_limit: '2', ticket_window_seconds: '10' });
    for (let i = 0; i < 3; i++) await r.handler(new Request(`${SITE}/`), CLIENT);
    const response = await r.scrape();
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/openmetrics-text; version=1.0.0; charset=utf-8');
    const m = samples(await response.text());
    expect(m.get('wr_store_up{queue="default"}')).toBe(1);
    expect(m.get('wr_waiting{queue="default"}')).toBe(2);
    expect(m.get('wr_tail{queue="default"}')).toBe(2);
    expect(m.get('wr_switch{queue="default",state="normal"}')).toBe(1);
    expect(m.get('wr_switch{queue="default",state="open"}')).toBe(0);
    expect(m.get('wr_tickets_refused_last_minute{queue="default",reason="ticket_limit"}')).toBe(1);
    expect(m.get('wr_store_errors_last_minute{queue="default"}')).toBe(0);
    expect(m.get('wr_store_probe_seconds{queue="default"}')).toBeGreaterThanOrEqual(0);
    // Rate FIFO holds no slots: no active count is made up.
    expect([...m.keys()].some((k) => k.startsWith('wr_active'))).toBe(false);
    expect((await r.scrape(`Basic ${btoa(`admin:${ADMIN_PASSWORD}`)}`, '/__wr/admin/metrics')).status).toBe(200);
    expect((await r.scrape('Bearer wrong-token-wrong-token-0000')).status).toBe(401);
    expect((await r.scrape('')).status).toBe(401);
  });

  it('counts active visitors in capacity mode', async () => {
    const r = rig({ max_active: '10' });
    await r.handler(new Request(`${SITE}/`), CLIENT);
    expect(samples(await (await r.scrape()).text()).get('wr_active{queue="default"}')).toBe(1);
  });

  it('says the store is down, with the store errors counted where they happened, and still answers 200', async () => {
    const r = rig();
    r.store.mode = 'error';
    for (let i = 0; i < 3; i++) expect((await r.handler(new Request(`${SITE}/`), CLIENT)).status).toBe(200);
    const response = await r.scrape();
    expect(response.status).toBe(200);
    const m = samples(await response.text());
    expect(m.get('wr_store_up{queue="default"}')).toBe(0);
    expect(m.has('wr_waiting{queue="default"}')).toBe(false);
    // The three visitors' joins and this scrape's own stats call.
    expect(m.get('wr_store_errors_last_minute{queue="default"}')).toBe(4);
    // A minute later they have left the window.
    r.store.mode = 'ok';
    r.clock.advance(61_000);
    expect(samples(await (await r.scrape()).text()).get('wr_store_errors_last_minute{queue="default"}')).toBe(0);
  });
});

/**
 * The exposition read by a strict OpenMetrics parser: Debian's prometheus_client (installed by
 * .ci/run), run on the real output; it answers each family's name, type and samples as JSON.
 */
function parseStrictly(text: string): { name: string; type: string; samples: { name: string; labels: Record<string, string>; value: number }[] }[] {
  const script = [
    'import json, sys',
    'from prometheus_client.openmetrics.parser import text_string_to_metric_families',
    'out = [{"name": f.name, "type": f.type, "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]} for f in text_string_to_metric_families(sys.stdin.read())]',
    'print(json.dumps(out))',
  ].join('\n');
  const run = spawnSync('/usr/bin/python3', ['-c', script], { input: text, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`the strict OpenMetrics parser refused the output: ${run.stderr}`);
  return JSON.parse(run.stdout) as ReturnType<typeof parseStrictly>;
}

describe('counters and the wait histogram', () => {
  it('count what the sale did, and the output of both endpoints parses with a strict OpenMetrics parser', async () => {
    const r = rig({ admit_per_period: '0', ticket_limit: '3', ticket_window_seconds: '10', state_cache_seconds: '0' });
    // Drain what earlier tests of this process left for the queue (see edge-tally.ts).
    takeTally('default');
    const jar: string[] = [];
    // Four visitors (the one client's 4th is refused), each keeping its cookie.
    for (let i = 0; i < 4; i++) {
      const response = await r.handler(new Request(`${SITE}/`), CLIENT);
      jar.push(response.headers.getSetCookie().map((c) => c.split(';')[0]).join('; '));
    }
    // The next join carries the refusal into the store.
    await r.handler(new Request(`${SITE}/`), { address: '198.51.100.10', pop: 'TEST' });
    // Two let in by the operator: they claim on their next request, 4 s and 20 s after they joined.
    const basic = `Basic ${btoa(`admin:${ADMIN_PASSWORD}`)}`;
    const admitted = await r.store.admit('default', 2, r.clock.now(), { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 1_800_000, reservationMs: 60_000 });
    expect(admitted.admitted).toBe(2);
    r.clock.advance(4_000);
    await r.handler(new Request(`${SITE}/`, { headers: { cookie: jar[0]! } }), CLIENT);
    r.clock.advance(16_000);
    await r.handler(new Request(`${SITE}/`, { headers: { cookie: jar[1]! } }), CLIENT);
    for (const [path, auth] of [['/__wr/api/metrics', `Bearer ${API_TOKEN}`], ['/__wr/admin/metrics', basic]] as const) {
      const text = await (await r.scrape(auth, path)).text();
      const m = samples(text);
      expect(m.get('wr_tickets_issued_total{queue="default"}'), path).toBe(4);
      expect(m.get('wr_admitted_total{queue="default"}'), path).toBe(2);
      expect(m.get('wr_tickets_refused_total{queue="default",reason="ticket_limit"}'), path).toBe(1);
      expect(m.get('wr_store_errors_total{queue="default"}'), path).toBe(0);
      expect(m.get('wr_switch_changes_total{queue="default"}'), path).toBe(0);
      // 4 s and 20 s: in the 5-s and 30-s buckets; cumulative as a histogram's buckets are.
      expect(m.get('wr_wait_seconds_bucket{queue="default",le="5.0"}'), path).toBe(1);
      expect(m.get('wr_wait_seconds_bucket{queue="default",le="15.0"}'), path).toBe(1);
      expect(m.get('wr_wait_seconds_bucket{queue="default",le="30.0"}'), path).toBe(2);
      expect(m.get('wr_wait_seconds_bucket{queue="default",le="7200.0"}'), path).toBe(2);
      expect(m.get('wr_wait_seconds_bucket{queue="default",le="+Inf"}'), path).toBe(2);
      expect(m.get('wr_wait_seconds_count{queue="default"}'), path).toBe(2);
      expect(m.get('wr_wait_seconds_sum{queue="default"}'), path).toBe(24);
      const families = parseStrictly(text);
      const type = (name: string): string | undefined => families.find((f) => f.name === name)?.type;
      expect(type('wr_admitted'), path).toBe('counter');
      expect(type('wr_tickets_issued'), path).toBe('counter');
      expect(type('wr_tickets_refused'), path).toBe('counter');
      expect(type('wr_store_errors'), path).toBe('counter');
      expect(type('wr_switch_changes'), path).toBe('counter');
      expect(type('wr_wait_seconds'), path).toBe('histogram');
      expect(type('wr_waiting'), path).toBe('gauge');
      expect(families.find((f) => f.name === 'wr_wait_seconds')?.samples.find((s) => s.name === 'wr_wait_seconds_sum')?.value, path).toBe(24);
    }
    // The parser is strict: it refuses what OpenMetrics does not allow (a counter sample without _total).
    expect(() => parseStrictly('# TYPE x counter\nx{a="b"} 1\n# EOF\n')).toThrow(/refused/);
  });

  it('the example alert rules in docs/monitoring.md name only metrics the endpoint gives', async () => {
    const r = rig({ max_active: '5' });
    await r.handler(new Request(`${SITE}/`), CLIENT);
    const families = parseStrictly(await (await r.scrape()).text());
    const names = new Set(families.flatMap((f) => [f.name, ...f.samples.map((s) => s.name)]));
    const doc = readFileSync(join(import.meta.dirname, '..', 'docs', 'monitoring.md'), 'utf8');
    const yaml = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]).join('\n');
    const exprs = [...yaml.matchAll(/expr: (.+)/g)].map((m) => m[1]!);
    expect(exprs.length).toBeGreaterThanOrEqual(3);
    const used = new Set(exprs.flatMap((e) => [...e.matchAll(/\bwr_[a-z0-9_]+/g)].map((m) => m[0])));
    for (const name of used) expect(names.has(name), `${name} in an alert rule`).toBe(true);
    for (const alert of ['WaitingRoomStoreDown', 'WaitingRoomLineStuck', 'WaitingRoomNobodyLetIn']) expect(yaml).toContain(`alert: ${alert}`);
  });
});
