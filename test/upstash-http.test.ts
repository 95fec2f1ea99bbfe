/**
 * The Fastly build sends the store's scripts with @upstash/redis's HTTP client alone
 * (src/store/upstash-http.ts), not through its `Redis` class. Here the two are held side by side
 * against a real redis-server behind the local Upstash bridge, with the project's client options:
 * the same bytes on the wire, the same replies, the same errors, the same retry. The class is the
 * one the Fastly build used before, `@upstash/redis/fastly`'s (it runs under Node as well: its
 * `backend` rides along in fetch's options, which Node ignores).
 */
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { Redis } from '@upstash/redis/fastly';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { createUpstashScriptClient } from '../src/store/upstash-http';
import { createUpstashClientOptions, type UpstashScriptClient } from '../src/store/upstash-store';
import { startRedisServer, type RedisServer } from './support/redis-server';

const TOKEN = `upstash-http-${randomUUID()}`;

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** An HTTP proxy in front of the bridge that records every request it forwards. */
async function recordingProxy(target: string): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(request.headers)) {
        // What the connection decides, not the client: left out of the comparison.
        if (name === 'host' || name === 'connection' || name === 'content-length' || name === 'keep-alive') continue;
        headers[name] = String(value);
      }
      seen.push({ method: request.method ?? '', url: request.url ?? '', headers, body });
      void fetch(target + (request.url ?? '/'), { method: request.method ?? 'POST', headers: request.headers as Record<string, string>, body }).then(async (answer) => {
        response.writeHead(answer.status, Object.fromEntries(answer.headers));
        response.end(Buffer.from(await answer.arrayBuffer()));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A port that accepts connections and drops each at once (a connection reset), counting them. */
async function droppingPort(): Promise<{ url: string; count(): number; close(): Promise<void> }> {
  let count = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    count += 1;
    sockets.add(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    count: () => count,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Both clients over the same URL, the project's options (`retries` as given) and the Fastly backend. */
function clients(url: string, retries = 0): { readonly library: UpstashScriptClient; readonly alone: UpstashScriptClient } {
  const options = { ...createUpstashClientOptions({ url, token: TOKEN, retries }), backend: 'upstash' };
  return { library: new Redis(options), alone: createUpstashScriptClient(options) };
}

/**
 * The Fastly class adds `Upstash-Telemetry-*` headers even with `enableTelemetry: false` (its
 * constructor does not hand that option on); the client alone sends none, as the options ask.
 */
const TELEMETRY = /^upstash-telemetry-/;
const withoutTelemetry = (seen: Seen): Seen => ({ ...seen, headers: Object.fromEntries(Object.entries(seen.headers).filter(([name]) => !TELEMETRY.test(name))) });

/** What a call came to: its reply, or its error's class name and message. */
async function outcome(call: () => Promise<unknown>): Promise<{ reply: unknown } | { error: string; message: string }> {
  try {
    return { reply: await call() };
  } catch (error) {
    return error instanceof Error ? { error: error.name, message: error.message } : { error: typeof error, message: String(error) };
  }
}

const sha1 = (text: string): string => createHash('sha1').update(text, 'utf8').digest('hex');

let server: RedisServer;
let bridge: UpstashBridge;

beforeAll(async () => {
  server = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: server.url, token: TOKEN });
});

afterAll(async () => {
  await bridge?.close();
  await server?.stop();
});

describe("@upstash/redis's HTTP client alone, beside its Redis class", () => {
  const SCRIPTS: readonly { readonly name: string; readonly lua: string; readonly args: readonly unknown[] }[] = [
    { name: 'an integer', lua: 'return 42', args: [] },
    { name: 'an array of integers, keys and arguments echoed', lua: 'return {#KEYS, #ARGV, tonumber(ARGV[1]) + 1}', args: [41, 'x'] },
    { name: 'a nested array', lua: 'return {1, {2, {3}}, {}}', args: [] },
    { name: 'a string, nil and false', lua: "return {'text', nil, false}", args: [] },
    { name: 'a status reply', lua: "return redis.status_reply('OK')", args: [] },
    { name: 'arguments of every kind', lua: 'return ARGV', args: [1.5, true, 'plain', { a: 1 }, ''] },
    { name: 'an error the script raises', lua: "return redis.error_reply('ERR refused by the script')", args: [] },
    { name: 'a runtime error', lua: 'return nil + 1', args: [] },
  ];

  it.each(SCRIPTS)('EVAL of $name: the same request body, headers and outcome', async ({ lua, args }) => {
    const proxy = await recordingProxy(bridge.url);
    try {
      const { library, alone } = clients(proxy.url);
      const keys = [`uh:${randomUUID()}`];
      const fromLibrary = await outcome(() => library.eval(lua, keys, [...args]));
      const fromAlone = await outcome(() => alone.eval(lua, keys, [...args]));
      expect(fromAlone).toEqual(fromLibrary);
      expect(proxy.seen).toHaveLength(2);
      expect(proxy.seen[1]).toEqual(withoutTelemetry(proxy.seen[0]!));
      expect(Object.keys(proxy.seen[1]!.headers).filter((name) => TELEMETRY.test(name))).toEqual([]);
      expect(JSON.parse(proxy.seen[0]!.body)[0]).toBe('eval');
    } finally {
      await proxy.close();
    }
  });

  it('EVALSHA of a cached script and of an unknown one (NOSCRIPT): the same outcomes', async () => {
    // A script no other test loads, so the first EVALSHA cannot find it.
    const n = 1000 + Math.floor(Math.random() * 1000);
    const lua = `return {${n}, #KEYS}`;
    const { library, alone } = clients(bridge.url);
    const unknown = await outcome(() => library.evalsha(sha1(lua), ['k'], []));
    expect(unknown).toMatchObject({ error: 'UpstashError' });
    expect((unknown as { message: string }).message).toContain('NOSCRIPT');
    expect(await outcome(() => alone.evalsha(sha1(lua), ['k'], []))).toEqual(unknown);
    // EVAL puts the script in the cache; from then on EVALSHA answers, alike on both.
    await alone.eval(lua, ['k'], []);
    const cached = await outcome(() => library.evalsha(sha1(lua), ['k', 'l'], []));
    expect(cached).toEqual({ reply: [n, 2] });
    expect(await outcome(() => alone.evalsha(sha1(lua), ['k', 'l'], []))).toEqual(cached);
  });

  it('a wrong token: the same error, and nothing runs', async () => {
    const options = createUpstashClientOptions({ url: bridge.url, token: 'not-the-token', retries: 0 });
    const key = `uh:${randomUUID()}`;
    const lua = "return redis.call('INCR', KEYS[1])";
    const fromLibrary = await outcome(() => new Redis({ ...options, backend: 'upstash' }).eval(lua, [key], []));
    expect(fromLibrary).toMatchObject({ error: 'UpstashError' });
    expect(await outcome(() => createUpstashScriptClient(options).eval(lua, [key], []))).toEqual(fromLibrary);
    const { alone } = clients(bridge.url);
    expect(await alone.eval("return redis.call('GET', KEYS[1])", [key], [])).toBeNull();
  });

  it('a connection reset: each retries as often as its options say, then fails alike', async () => {
    const port = await droppingPort();
    try {
      for (const retries of [0, 1]) {
        const { library, alone } = clients(port.url, retries);
        const before = port.count();
        const fromLibrary = await outcome(() => library.eval('return 1', [], []));
        const libraryAttempts = port.count() - before;
        const fromAlone = await outcome(() => alone.eval('return 1', [], []));
        expect(libraryAttempts).toBe(retries + 1);
        expect(port.count() - before - libraryAttempts).toBe(libraryAttempts);
        expect(fromLibrary).toHaveProperty('error');
        expect(fromAlone).toEqual(fromLibrary);
      }
    } finally {
      await port.close();
    }
  });

  it.each([
    { what: 'not JSON (a proxy in the way)', status: 502, body: '<html>bad gateway</html>', error: 'UpstashJSONParseError' },
    { what: 'a 200 carrying an error', status: 200, body: '{"error":"ERR from a 200"}', error: 'UpstashError' },
    { what: 'a 200 without a result', status: 200, body: '{}', error: 'TypeError' },
    { what: 'a 400 with an error', status: 400, body: '{"error":"ERR bad request"}', error: 'UpstashError' },
  ])('an answer that is $what: the same error from both', async ({ status, body, error }) => {
    const scripted = http.createServer((_request, response) => {
      response.writeHead(status, { 'content-type': status === 502 ? 'text/html' : 'application/json' });
      response.end(body);
    });
    await new Promise<void>((resolve) => scripted.listen(0, '127.0.0.1', resolve));
    try {
      const { library, alone } = clients(`http://127.0.0.1:${(scripted.address() as AddressInfo).port}`);
      const fromLibrary = await outcome(() => library.evalsha(sha1('return 1'), [], []));
      expect(fromLibrary).toMatchObject({ error });
      expect(await outcome(() => alone.evalsha(sha1('return 1'), [], []))).toEqual(fromLibrary);
    } finally {
      await new Promise<void>((resolve) => scripted.close(() => resolve()));
    }
  });

  it('Fastly: every request names the backend, as @upstash/redis/fastly does', async () => {
    const sent: RequestInit[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      sent.push(init ?? {});
      return realFetch(input, init);
    }) as typeof fetch;
    try {
      const { library, alone } = clients(bridge.url);
      expect(await library.eval('return 7', [], [])).toBe(7);
      expect(await alone.eval('return 7', [], [])).toBe(7);
    } finally {
      globalThis.fetch = realFetch;
    }
    expect(sent.map((init) => (init as { backend?: string }).backend)).toEqual(['upstash', 'upstash']);
  });
});
