/**
 * The metrics endpoint (issue 16, item 7): the on-call figures in the OpenMetrics text format,
 * behind the origin's bearer token or the console's password; store errors counted where they
 * happen; a store that does not answer still gives a 200 that says so.
 */
import { describe, expect, it } from 'vitest';
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
