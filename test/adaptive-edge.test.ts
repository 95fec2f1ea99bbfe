/**
 * Adaptive admission at the edge: the origin's answers counted where they pass (no store call),
 * carried to the store by the calls that load the state, acted on by the controller, shown and
 * steered through the admin API; and the settings refused when they make no sense.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../src/core/config';
import type { Origin, OriginHeaders, QueueStore } from '../src/core/ports';
import { MemoryOriginMeter } from '../src/platform/memory-meter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { AC_WINDOW_MS } from '../src/store/adaptive';
import { API_TOKEN, BASE_SETTINGS, ManualClock, cookieFrom, source, testHandler } from './support/fixtures';

const SITE = 'https://shop.example';
const CLIENT = { address: '192.0.2.10', pop: 'test-pop' };
const api = (path: string, init: RequestInit = {}) => new Request(`${SITE}/__wr/api/${path}`, { ...init, headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' } });

/** An origin whose answers take `delayMs` of the manual clock and carry `status`. */
class SlowOrigin implements Origin {
  status = 200;
  delayMs = 10;
  fail = false;
  calls = 0;
  constructor(private readonly clock: ManualClock) {}
  async forward(_request: Request, _replace?: OriginHeaders): Promise<Response> {
    this.calls += 1;
    this.clock.advance(this.delayMs);
    if (this.fail) throw new Error('connection refused');
    return new Response('page', { status: this.status });
  }
}

/** Counts the store calls by method, passing them on. */
function counting(store: QueueStore): { store: QueueStore; calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const wrapped = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.set(String(name), (calls.get(String(name)) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: wrapped, calls };
}

function setup(settings: Record<string, string>) {
  const clock = new ManualClock();
  const memory = new MemoryQueueStore();
  const { store, calls } = counting(memory);
  const origin = new SlowOrigin(clock);
  const meter = new MemoryOriginMeter(clock);
  const handler = testHandler({ admit_per_period: '20', admit_period_seconds: '10', ...settings }, { store, clock, origin, originMeter: meter, meterName: 'pop:one!' });
  return { clock, memory, calls, origin, meter, handler };
}

async function admittedCookie(handler: ReturnType<typeof setup>['handler']): Promise<string> {
  const first = await handler(new Request(`${SITE}/`), CLIENT);
  const cookie = cookieFrom(first);
  expect(first.status).toBe(200);
  expect(cookie).toBeDefined();
  return `waiting_room=${cookie!}`;
}

describe('the origin meter (Node host)', () => {
  it('counts answers per queue over the last 10 whole seconds', () => {
    const clock = new ManualClock();
    const meter = new MemoryOriginMeter(clock);
    meter.count('a', 'ok');
    meter.count('a', 'error');
    meter.count('b', 'slow');
    clock.advance(9_000);
    meter.count('a', 'slow');
    expect(meter.recent('a')).toEqual({ requests: 3, errors: 1, slow: 1 });
    expect(meter.recent('b')).toEqual({ requests: 1, errors: 0, slow: 1 });
    clock.advance(1_000);
    // The first second is out of the window now.
    expect(meter.recent('a')).toEqual({ requests: 1, errors: 0, slow: 1 });
    expect(meter.recent('c')).toEqual({ requests: 0, errors: 0, slow: 0 });
    clock.advance(60_000);
    expect(meter.recent('a')).toEqual({ requests: 0, errors: 0, slow: 0 });
  });
});

describe('adaptive admission through the handler', () => {
  it('counts each answer of the origin as ok, slow or error, with no store call for it', async () => {
    const s = setup({ adaptive_admission: 'on', adaptive_slow_ms: '500' });
    const cookie = await admittedCookie(s.handler);
    const before = [...s.calls.values()].reduce((a, b) => a + b, 0);
    const visit = () => s.handler(new Request(`${SITE}/page`, { headers: { cookie } }), CLIENT);
    expect((await visit()).status).toBe(200);
    s.origin.delayMs = 600;
    expect((await visit()).status).toBe(200);
    s.origin.delayMs = 10;
    s.origin.status = 503;
    expect((await visit()).status).toBe(503);
    s.origin.status = 429;
    await visit();
    s.origin.status = 404;
    await visit();
    s.origin.fail = true;
    expect((await visit()).status).toBe(502);
    // The first request (the walk-in's own) went to the origin too.
    expect(s.meter.recent('default')).toEqual({ requests: 7, errors: 3, slow: 1 });
    // An admitted visitor's requests cost the store nothing, counted or not.
    expect([...s.calls.values()].reduce((a, b) => a + b, 0)).toBe(before);
  });

  it('carries the counts with the next join, and the controller acts on them', async () => {
    const s = setup({ adaptive_admission: 'on', adaptive_min: '4', adaptive_max: '40' });
    // Twenty waiting and one admitted.
    for (let i = 0; i < 30; i++) await s.handler(new Request(`${SITE}/`), { ...CLIENT, address: `192.0.2.${i + 20}` });
    // 30 answers from the origin, 10 of them errors.
    for (let i = 0; i < 10; i++) s.meter.count('default', 'error');
    for (let i = 0; i < 20; i++) s.meter.count('default', 'ok');
    s.clock.advance(AC_WINDOW_MS);
    for (let i = 0; i < 10; i++) s.meter.count('default', 'error');
    for (let i = 0; i < 20; i++) s.meter.count('default', 'ok');
    const joins = s.calls.get('join') ?? 0;
    await s.handler(new Request(`${SITE}/`), { ...CLIENT, address: '198.51.100.1' });
    expect(s.calls.get('join')).toBe(joins + 1);
    const stats = await (await s.handler(api('stats'), CLIENT)).json();
    expect(stats.adaptive).toMatchObject({ enabled: true, source: 'config', knob: 'admit_per_period', min: 4, max: 40 });
    // The POP's name as the store keeps it: cut to the allowed characters.
    expect(stats.adaptive.signals).toMatchObject({ requests: 30, errors: 10, slow: 0, pops: 1 });
    // A third failed, far over the target: the deepest cut, to half.
    expect(stats.adaptive.moves.at(-1)).toMatchObject({ reason: 'errors', to: Math.floor(stats.adaptive.moves.at(-1).from / 2) });
    expect(stats.adaptive.value).toBe(stats.adaptive.moves.at(-1).to);
  });

  it('a counter that throws (Edge Rate Limiting not enabled) costs visitors nothing: answers pass, joins carry the settings without a report', async () => {
    const clock = new ManualClock();
    const { store, calls } = counting(new MemoryQueueStore());
    const broken = { count: () => { throw new Error('ERL not enabled'); }, recent: () => { throw new Error('ERL not enabled'); } };
    const handler = testHandler({ admit_per_period: '20', admit_period_seconds: '10', adaptive_admission: 'on' }, { store, clock, origin: new SlowOrigin(clock), originMeter: broken });
    const cookie = await admittedCookie(handler);
    expect((await handler(new Request(`${SITE}/page`, { headers: { cookie } }), CLIENT)).status).toBe(200);
    expect((await handler(new Request(`${SITE}/`), { ...CLIENT, address: '198.51.100.7' })).status).toBe(200);
    expect(calls.get('join')).toBe(2);
    const stats = await (await handler(api('stats'), CLIENT)).json();
    expect(stats.adaptive).toMatchObject({ enabled: true, signals: null, moves: [] });
  });

  it('off in the configuration: nothing counted, nothing carried, nothing reported', async () => {
    const s = setup({});
    const cookie = await admittedCookie(s.handler);
    await s.handler(new Request(`${SITE}/page`, { headers: { cookie } }), CLIENT);
    expect(s.meter.recent('default')).toEqual({ requests: 0, errors: 0, slow: 0 });
    const stats = await (await s.handler(api('stats'), CLIENT)).json();
    expect(stats.adaptive).toBeUndefined();
  });

  it('standby: counted and carried, the controller off until the API switches it on; a pin holds; nonsense is refused and changes nothing', async () => {
    const s = setup({ adaptive_admission: 'standby' });
    for (let i = 0; i < 30; i++) await s.handler(new Request(`${SITE}/`), { ...CLIENT, address: `192.0.2.${i + 20}` });
    let stats = await (await s.handler(api('stats'), CLIENT)).json();
    expect(stats.adaptive).toMatchObject({ enabled: false, source: 'config', min: 1, max: 40 });
    const on = await s.handler(api('control', { method: 'POST', body: JSON.stringify({ adaptive: 'on' }) }), CLIENT);
    expect(on.status).toBe(200);
    expect((await on.json()).changed).toBe('Adaptive admission switched on.');
    const pin = await s.handler(api('control', { method: 'POST', body: JSON.stringify({ adaptive_pin: 7 }) }), CLIENT);
    expect(pin.status).toBe(200);
    stats = await (await s.handler(api('stats'), CLIENT)).json();
    expect(stats.adaptive).toMatchObject({ enabled: true, source: 'console', value: 7, pinned: true });
    for (const body of [{ adaptive: 'maybe' }, { adaptive_pin: 0 }, { adaptive_pin: 'seven' }, { adaptive_pin: 10_000_001 }]) {
      const refused = await s.handler(api('control', { method: 'POST', body: JSON.stringify(body) }), CLIENT);
      expect(refused.status).toBe(400);
    }
    expect((await (await s.handler(api('stats'), CLIENT)).json()).adaptive).toEqual(stats.adaptive);
    const release = await s.handler(api('control', { method: 'POST', body: JSON.stringify({ adaptive_pin: 'release' }) }), CLIENT);
    expect((await release.json()).changed).toBe('Adaptive admission released: it learns again.');
    expect((await (await s.handler(api('stats'), CLIENT)).json()).adaptive).toMatchObject({ pinned: false, value: 7 });
  });
});

describe('adaptive admission settings', () => {
  const parse = (settings: Record<string, string>) => parseConfig(source({ ...BASE_SETTINGS, ...settings }));
  it('needs a knob to tune and sane bounds, and says so', () => {
    expect(() => parse({ adaptive_admission: 'on' })).toThrow(/adaptive_admission: needs a knob to tune/);
    expect(() => parse({ adaptive_admission: 'on', admit_per_period: '10', adaptive_min: '30', adaptive_max: '20' })).toThrow(/adaptive_max: must be 0/);
    expect(() => parse({ adaptive_admission: 'sometimes', admit_per_period: '10' })).toThrow(ConfigError);
    expect(() => parse({ adaptive_error_percent: '101' })).toThrow(/adaptive_error_percent/);
    // adaptive_max 0: twice the knob's configured value.
    const config = parse({ adaptive_admission: 'on', max_active: '300' });
    expect(config.adaptiveAdmission).toBe('on');
  });
});
