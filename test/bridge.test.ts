/**
 * The local Upstash REST bridge, driven by the real `@upstash/redis` client (and by plain fetch
 * where the client would hide what goes over the wire) against a real redis-server.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { adaptScript, startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { startRedisServer, type RedisServer } from './support/redis-server';

const TOKEN = 'bridge-test-token';
const ENDPOINTS = ['/', '/pipeline', '/multi-exec'] as const;

let server: RedisServer;
let bridge: UpstashBridge;
let direct: IORedis;

beforeAll(async () => {
  server = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: server.url, token: TOKEN });
  direct = new IORedis(server.url);
});

afterAll(async () => {
  await direct?.quit();
  await bridge?.close();
  await server?.stop();
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** A key no other test uses. */
const key = (name: string) => `bridge-test:${randomUUID()}:${name}`;

const sha1 = (text: string) => createHash('sha1').update(text, 'utf8').digest('hex');

function client(options: { autoPipelining?: boolean; base64?: boolean } = {}): Redis {
  return new Redis({
    url: bridge.url,
    token: TOKEN,
    enableTelemetry: false,
    retry: false,
    enableAutoPipelining: options.autoPipelining ?? false,
    responseEncoding: options.base64 === false ? false : 'base64',
  });
}

/** One raw request, as the client would send it, with the status, parsed body and sync token. */
async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(bridge.url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: JSON.parse(text) as unknown,
    syncToken: response.headers.get('upstash-sync-token'),
  };
}

async function commandCalls(command: string): Promise<number> {
  const info = await direct.info('commandstats');
  const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
  return Number(match?.[1] ?? 0);
}

const MODES = [
  { autoPipelining: true, base64: true },
  { autoPipelining: true, base64: false },
  { autoPipelining: false, base64: true },
  { autoPipelining: false, base64: false },
];

describe.each(MODES)('client with auto-pipelining $autoPipelining, base64 $base64', (mode) => {
  it('round-trips set/get/incr/mget/hgetall/eval over the endpoint the mode uses', async () => {
    const fetchSpy = vi.spyOn(globalThis, 'fetch');
    const redis = client(mode);
    const [text, counter, unicode, binaryish, hash, missing] = [
      key('text'), key('counter'), key('unicode'), key('binaryish'), key('hash'), key('missing'),
    ];
    const UNICODE = 'héllo wörld ✓ 🎉 日本語';
    // Control characters, a NUL and characters whose UTF-8 spans 2-4 bytes.
    const BINARYISH = 'a\u0000b\u0001\u007f\u00ff\u0100\uffff\u{10ffff}"\\\n';

    expect(await redis.set(text, 'plain value')).toBe('OK');
    expect(await redis.get(text)).toBe('plain value');
    expect(await redis.incr(counter)).toBe(1);
    expect(await redis.incr(counter)).toBe(2);
    await redis.set(unicode, UNICODE);
    expect(await redis.get(unicode)).toBe(UNICODE);
    await redis.set(binaryish, BINARYISH);
    expect(await redis.get(binaryish)).toBe(BINARYISH);
    // Bytes in Redis are the UTF-8 of what the client sent, whatever the response encoding.
    expect(await direct.getBuffer(unicode)).toEqual(Buffer.from(UNICODE, 'utf8'));
    expect(await redis.mget(text, unicode, missing)).toEqual(['plain value', UNICODE, null]);
    await redis.hset(hash, { name: UNICODE, count: 7 });
    expect(await redis.hgetall(hash)).toEqual({ name: UNICODE, count: 7 });
    expect(await redis.get(missing)).toBeNull();
    expect(await redis.eval('return {KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1}', [text], [UNICODE, 41])).toEqual([
      text,
      UNICODE,
      42,
    ]);

    const paths = fetchSpy.mock.calls.map(([url]) => new URL(String(url)).pathname);
    if (mode.autoPipelining) {
      expect(paths).toContain('/pipeline');
      // hgetall is one of the commands the client never auto-pipelines.
      expect(paths).toContain('/');
    } else {
      expect(new Set(paths)).toEqual(new Set(['/']));
    }
  });

  it('reports a Redis error from a single command', async () => {
    const redis = client(mode);
    const text = key('text');
    await redis.set(text, 'not a number');
    await expect(redis.incr(text)).rejects.toThrow(/ERR value is not an integer/);
  });
});

describe('responses on the wire', () => {
  it('base64 encodes every string but the OK status, and keeps integers and nil as JSON', async () => {
    const [k, list] = [key('k'), key('list')];
    const base64 = { 'upstash-encoding': 'base64' };
    expect((await post('/', ['set', k, 'bar'], base64)).body).toEqual({ result: 'OK' });
    expect((await post('/', ['get', k], base64)).body).toEqual({ result: 'YmFy' });
    expect((await post('/', ['ping'], base64)).body).toEqual({ result: 'UE9ORw==' });
    expect((await post('/', ['rpush', list, 'a', 'OK'], base64)).body).toEqual({ result: 2 });
    expect((await post('/', ['lrange', list, 0, -1], base64)).body).toEqual({ result: ['YQ==', 'OK'] });
    expect((await post('/', ['get', key('missing')], base64)).body).toEqual({ result: null });
    expect((await post('/', ['get', k])).body).toEqual({ result: 'bar' });
  });

  it('passes raw bytes through base64, and replaces invalid UTF-8 without it', async () => {
    const k = key('bytes');
    const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x41]);
    await direct.set(k, bytes);
    const encoded = await post('/', ['get', k], { 'upstash-encoding': 'base64' });
    expect(encoded.body).toEqual({ result: bytes.toString('base64') });
    const plain = await post('/', ['get', k]);
    expect(plain.body).toEqual({ result: '\u0000\ufffd\ufffd\ufffdA' });
  });

  it('turns JSON numbers into Redis arguments', async () => {
    const k = key('k');
    expect((await post('/', ['set', k, 42, 'ex', 30])).body).toEqual({ result: 'OK' });
    expect(await direct.get(k)).toBe('42');
    expect(await direct.ttl(k)).toBeGreaterThan(0);
    expect((await post('/', ['incrbyfloat', k, 0.5])).body).toEqual({ result: '42.5' });
  });

  it('answers a Redis error on / with 400 and its message', async () => {
    const k = key('k');
    await direct.set(k, 'text');
    const response = await post('/', ['incr', k]);
    expect(response.status).toBe(400);
    expect(response.body).toEqual({ error: 'ERR value is not an integer or out of range' });
  });

  it('refuses commands that would change the shared connection', async () => {
    for (const command of [['select', 1], ['subscribe', 'channel'], ['multi'], ['blpop', key('l'), 0]]) {
      const response = await post('/', command);
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: expect.stringMatching(/not supported/) });
    }
    // The connection is still usable afterwards.
    expect((await post('/', ['ping'])).body).toEqual({ result: 'PONG' });
  });

  it('changes the sync token after a write, and the client keeps the latest one', async () => {
    const k = key('k');
    const first = await post('/', ['set', k, '1']);
    const second = await post('/', ['set', k, '2']);
    expect(first.syncToken).toBeTruthy();
    expect(second.syncToken).toBeTruthy();
    expect(second.syncToken).not.toBe(first.syncToken);
    const afterPipeline = await post('/pipeline', [['incr', k]]);
    expect(afterPipeline.syncToken).not.toBe(second.syncToken);
    const afterTransaction = await post('/multi-exec', [['incr', k]]);
    expect(afterTransaction.syncToken).not.toBe(afterPipeline.syncToken);
    const afterScript = await post('/', ['eval', 'return redis.call("incr", KEYS[1])', 1, k]);
    expect(afterScript.syncToken).not.toBe(afterTransaction.syncToken);

    const redis = client();
    await redis.set(k, 'x');
    const seen = redis.readYourWritesSyncToken;
    expect(seen).toBeTruthy();
    await redis.set(k, 'y');
    expect(redis.readYourWritesSyncToken).toBeTruthy();
    expect(redis.readYourWritesSyncToken).not.toBe(seen);
  });

  it('sends the sync token on error responses too', async () => {
    const response = await fetch(bridge.url + '/', { method: 'POST', body: '["get","k"]' });
    expect(response.status).toBe(401);
    expect(response.headers.get('upstash-sync-token')).toMatch(/\S/);
  });
});

describe('pipelines and transactions', () => {
  it('runs a pipeline in order, with a failing command answered in place', async () => {
    const [counter, text] = [key('counter'), key('text')];
    const redis = client();
    await redis.set(text, 'text');
    const results = await redis
      .pipeline()
      .incr(counter)
      .incr(text)
      .incr(counter)
      .get(counter)
      .exec({ keepErrors: true });
    expect(results.map((r) => r.result)).toEqual([1, undefined, 2, 2]);
    expect(results[1]?.error).toMatch(/ERR value is not an integer/);
    expect(results.filter((r) => r.error).length).toBe(1);
    // Without keepErrors the client turns the element's error into a rejection.
    await expect(redis.pipeline().incr(text).exec()).rejects.toThrow(/Command 1 \[ incr \] failed: ERR value/);
  });

  it('answers a pipeline with a 200 array of results and errors', async () => {
    const [k, text] = [key('k'), key('text')];
    await direct.set(text, 'text');
    const response = await post('/pipeline', [['incr', k], ['incr', text], ['get', k]]);
    expect(response.status).toBe(200);
    expect(response.body).toEqual([
      { result: 1 },
      { error: 'ERR value is not an integer or out of range' },
      { result: '1' },
    ]);
  });

  it('runs a transaction with multi(), a runtime error failing only its own command', async () => {
    const [counter, text] = [key('counter'), key('text')];
    const redis = client();
    await redis.set(text, 'text');
    const results = await redis.multi().incr(counter).lpush(text, 'x').incr(counter).exec({ keepErrors: true });
    expect(results.map((r) => r.result)).toEqual([1, undefined, 2]);
    expect(results[1]?.error).toMatch(/^WRONGTYPE/);
    await expect(redis.multi().set(counter, 5).lpush(text, 'x').exec()).rejects.toThrow(/Command 2 \[ lpush \] failed: WRONGTYPE/);
    // Redis runs the rest of a transaction after a runtime error, and so does Upstash.
    expect(await direct.get(counter)).toBe('5');
  });

  it('runs /multi-exec as one MULTI/EXEC on Redis', async () => {
    const k = key('k');
    await direct.config('RESETSTAT');
    const results = await client().multi().set(k, 'a').append(k, 'b').get(k).exec();
    expect(results).toEqual(['OK', 2, 'ab']);
    expect(await commandCalls('multi')).toBe(1);
    expect(await commandCalls('exec')).toBe(1);
  });

  it('discards a transaction as a whole, with one 400 error, when a command cannot be queued', async () => {
    const k = key('k');
    const response = await post('/multi-exec', [['set', k, '1'], ['nosuchcommand', k]]);
    expect(response.status).toBe(400);
    expect(response.body).toEqual({ error: expect.stringMatching(/unknown command/i) });
    expect(await direct.exists(k)).toBe(0);

    const refused = await post('/multi-exec', [['set', k, '1'], ['select', 2]]);
    expect(refused.status).toBe(400);
    expect(await direct.exists(k)).toBe(0);
  });
});

describe('authorization', () => {
  const cases: [string, Record<string, string>][] = [
    ['missing', {}],
    ['wrong', { authorization: `Bearer ${TOKEN}x` }],
    ['truncated', { authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
    ['not a bearer', { authorization: `Basic ${Buffer.from(`default:${TOKEN}`).toString('base64')}` }],
    ['empty bearer', { authorization: 'Bearer ' }],
  ];

  it.each(ENDPOINTS)('answers 401 on %s without the right token, and runs nothing', async (path) => {
    for (const [, headers] of cases) {
      const k = key('k');
      const command = ['set', k, '1'];
      const response = await fetch(bridge.url + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(path === '/' ? command : [command]),
      });
      expect(response.status).toBe(401);
      expect(await response.json()).toEqual({ error: 'Unauthorized' });
      expect(await direct.exists(k)).toBe(0);
    }
    const k = key('k');
    const allowed = await post(path, path === '/' ? ['set', k, '1'] : [['set', k, '1']]);
    expect(allowed.status).toBe(200);
    expect(await direct.get(k)).toBe('1');
  });

  it('checks the token before routing, and rejects the client with a wrong token', async () => {
    const response = await fetch(bridge.url + '/nowhere', { method: 'POST', body: '[]' });
    expect(response.status).toBe(401);
    const impostor = new Redis({ url: bridge.url, token: 'wrong', enableTelemetry: false, retry: false });
    await expect(impostor.get(key('k'))).rejects.toThrow(/Unauthorized/);
  });
});

describe('malformed requests', () => {
  it.each([
    ['/', '{not json'],
    ['/', '{"command":"get"}'],
    ['/', '[]'],
    ['/', '[42]'],
    ['/', '["set","k",null]'],
    ['/', '["set","k",{"a":1}]'],
    ['/', '["set","k",["nested"]]'],
    ['/pipeline', '[]'],
    ['/pipeline', '["get","k"]'],
    ['/pipeline', '[["set","k",null]]'],
    ['/multi-exec', '{"a":1}'],
    ['/multi-exec', ''],
  ])('answers 400 with a JSON error on %s for %s', async (path, body) => {
    const k = key('k');
    const response = await post(path, body.replaceAll('"k"', JSON.stringify(k)));
    expect(response.status).toBe(400);
    expect(response.body).toEqual({ error: expect.any(String) });
    expect(await direct.exists(k)).toBe(0);
  });

  it('answers other paths and methods with a 4xx JSON error', async () => {
    const unknown = await post('/get/k', ['get', 'k']);
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: expect.stringMatching(/unknown endpoint/) });
    for (const path of ENDPOINTS) {
      const response = await fetch(bridge.url + path, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(response.status).toBe(405);
      expect(await response.json()).toEqual({ error: expect.stringMatching(/POST/) });
    }
  });
});

describe('lifecycle', () => {
  it('refuses to start when Redis cannot be reached', async () => {
    const gone = await startRedisServer();
    await gone.stop();
    await expect(startUpstashBridge({ redisUrl: gone.url, token: TOKEN })).rejects.toThrow(/cannot reach Redis/);
  });

  it('answers 500 with a JSON error while Redis is down, and still closes', async () => {
    const own = await startRedisServer();
    const ownBridge = await startUpstashBridge({ redisUrl: own.url, token: TOKEN });
    try {
      const headers = { authorization: `Bearer ${TOKEN}` };
      const up = await fetch(ownBridge.url, { method: 'POST', headers, body: '["ping"]' });
      expect(await up.json()).toEqual({ result: 'PONG' });
      await own.stop();
      const down = await fetch(ownBridge.url, { method: 'POST', headers, body: '["ping"]' });
      expect(down.status).toBe(500);
      expect(await down.json()).toEqual({ error: expect.stringMatching(/^bridge failed: /) });
    } finally {
      await ownBridge.close();
      await own.stop();
    }
  });

  it('rejects an empty token when it starts', async () => {
    await expect(startUpstashBridge({ redisUrl: server.url, token: '' })).rejects.toThrow(/token/);
  });
});

describe('scripts with Upstash’s allow-key-locking flag', () => {
  /** A script text no other test has loaded, so each test starts with an empty script cache for it. */
  const keyLockingScript = (body: string) =>
    `#!lua flags=allow-key-locking\n-- ${randomUUID()}\n${body}`;

  it('is what plain Redis 7 rejects', async () => {
    const script = keyLockingScript('return 1');
    await expect(direct.eval(script, 0)).rejects.toThrow(/Unexpected flag in script shebang: allow-key-locking/);
  });

  it('runs with eval', async () => {
    const redis = client();
    const k = key('k');
    const script = keyLockingScript("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    expect(await redis.eval(script, [k], [5])).toBe(5);
    expect(await redis.eval(script, [k], [5])).toBe(10);
  });

  it('answers scriptLoad with the SHA-1 of the text as sent, and runs it by that SHA-1', async () => {
    const redis = client();
    const k = key('k');
    const script = keyLockingScript("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    const sha = await redis.scriptLoad(script);
    expect(sha).toBe(sha1(script));
    expect(await redis.evalsha(sha, [k], [3])).toBe(3);
    expect(await redis.evalsha(sha.toUpperCase(), [k], [3])).toBe(6);
    expect(await redis.scriptExists(sha, sha1('never loaded'))).toEqual([1, 0]);
  });

  it('answers the SHA-1 as sent inside pipelines and transactions too', async () => {
    const script = keyLockingScript('return 7');
    const pipelined = await post('/pipeline', [['script', 'load', script], ['evalsha', sha1(script), 0]]);
    expect(pipelined.body).toEqual([{ result: sha1(script) }, { result: 7 }]);
    const other = keyLockingScript('return 8');
    const transacted = await post('/multi-exec', [['SCRIPT', 'LOAD', other], ['EvalSha', sha1(other), 0]]);
    expect(transacted.body).toEqual([{ result: sha1(other) }, { result: 8 }]);
  });

  it('answers NOSCRIPT for an unknown SHA-1', async () => {
    const redis = client();
    await expect(redis.evalsha(sha1(randomUUID()), [], [])).rejects.toThrow(/NOSCRIPT/);
    const response = await post('/', ['evalsha', sha1(randomUUID()), 0]);
    expect(response.status).toBe(400);
    expect(response.body).toEqual({ error: expect.stringMatching(/^NOSCRIPT/) });
  });

  it('lets createScript fall back to EVAL once, then hit EVALSHA every time', async () => {
    const redis = client();
    const k = key('k');
    const script = redis.createScript<number>(keyLockingScript("return redis.call('INCR', KEYS[1])"));
    await direct.config('RESETSTAT');
    expect(await script.exec([k], [])).toBe(1);
    expect(await script.exec([k], [])).toBe(2);
    expect(await script.exec([k], [])).toBe(3);
    // One NOSCRIPT miss and one EVAL on the first call; EVALSHA alone after that.
    expect(await commandCalls('eval')).toBe(1);
    expect(await commandCalls('evalsha')).toBe(3);
  });

  it('runs read-only scripts with evalRo and evalshaRo, and still refuses writes in them', async () => {
    const redis = client();
    const k = key('k');
    await redis.set(k, 'value');
    const read = keyLockingScript("return redis.call('GET', KEYS[1])");
    expect(await redis.evalRo(read, [k], [])).toBe('value');
    // Loaded, never run: EVALSHA_RO must find it by the SHA-1 scriptLoad answered.
    const loaded = keyLockingScript("return redis.call('GET', KEYS[1])");
    const sha = await redis.scriptLoad(loaded);
    expect(await redis.evalshaRo(sha, [k], [])).toBe('value');
    expect(await redis.evalsha(sha, [k], [])).toBe('value');
    const readOnly = redis.createScript<string, true>(keyLockingScript("return redis.call('GET', KEYS[1])"), {
      readonly: true,
    });
    expect(await readOnly.exec([k], [])).toBe('value');
    expect(await readOnly.exec([k], [])).toBe('value');
    const write = keyLockingScript("return redis.call('SET', KEYS[1], 'changed')");
    await expect(redis.evalRo(write, [k], [])).rejects.toThrow(/Write commands are not allowed/);
    expect(await direct.get(k)).toBe('value');
  });

  it('keeps line numbers, so Redis errors point at the line the author wrote', async () => {
    const redis = client();
    const script = "#!lua flags=allow-key-locking\nlocal x = 1\nreturn redis.call('NOSUCHCOMMAND')";
    await expect(redis.eval(script, [], [])).rejects.toThrow(/user_script:3/);
  });
});

describe('adaptScript', () => {
  it('drops allow-key-locking and keeps everything else', () => {
    expect(adaptScript('#!lua flags=allow-key-locking\nreturn 1')).toBe('#!lua\nreturn 1');
    expect(adaptScript('#!lua flags=no-writes,allow-key-locking\r\nreturn 1')).toBe('#!lua flags=no-writes\r\nreturn 1');
    expect(adaptScript('#!lua name=x flags=allow-key-locking,allow-oom\nreturn 1')).toBe(
      '#!lua name=x flags=allow-oom\nreturn 1',
    );
    expect(adaptScript('#!lua flags=allow-key-locking')).toBe('#!lua');
    expect(adaptScript('#!lua flags=no-writes\nreturn 1')).toBe('#!lua flags=no-writes\nreturn 1');
    expect(adaptScript('return 1 -- flags=allow-key-locking')).toBe('return 1 -- flags=allow-key-locking');
  });

  it('marks a read-only call of a script with a shebang as no-writes', () => {
    expect(adaptScript('#!lua flags=allow-key-locking\nreturn 1', true)).toBe('#!lua flags=no-writes\nreturn 1');
    expect(adaptScript('#!lua\nreturn 1', true)).toBe('#!lua flags=no-writes\nreturn 1');
    expect(adaptScript('#!lua flags=no-writes\nreturn 1', true)).toBe('#!lua flags=no-writes\nreturn 1');
    expect(adaptScript('return 1', true)).toBe('return 1');
  });
});
