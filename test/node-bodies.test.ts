/**
 * The Node host's bodies: piped Node to Node when the core passes them on unread, read through the
 * web stream (same bytes) when it does read them, and never both; and an origin that stops
 * answering ends the request at its timeouts, or when the visitor goes away.
 */
import http from 'node:http';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, serve, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { createHttpOrigin, DEFAULT_ORIGIN_TIMEOUTS, lazyWebBody, parseOriginTimeouts, untouchedNodeBody } from '../src/platform/node';
import { MemoryQueueStore } from '../src/store/memory-store';
import { BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './support/fixtures';

let origin: RunningServer;
beforeAll(async () => {
  // Echoes the request: method, a header and the body, reversed-case so that a copy is visible.
  origin = await serve(
    http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        res.writeHead(200, { 'content-type': 'text/plain', 'x-method': req.method ?? '' });
        res.end(`${req.method} ${body.length} ${body}`);
      });
    }),
    0,
    '127.0.0.1',
  );
});
afterAll(async () => {
  await origin?.close();
});

describe('lazy web bodies', () => {
  it('stays the Node stream until read, and reads the same bytes when read', async () => {
    const body = lazyWebBody(Readable.from([Buffer.from('hello '), Buffer.from('world')]));
    const wrapped = new Response(body, { status: 201 });
    expect(untouchedNodeBody(wrapped.body)).toBeInstanceOf(Readable);
    expect(await wrapped.text()).toBe('hello world');
    // Read once: the Node stream is no longer the body's to pipe.
    expect(untouchedNodeBody(body)).toBeUndefined();
    expect(untouchedNodeBody(new Response('plain').body)).toBeUndefined();
    expect(untouchedNodeBody(null)).toBeUndefined();
  });

  it('carries a request body and the answer through a pass-through host, unread or read', async () => {
    const forward = createHttpOrigin(origin.url);
    const piped = await startHost((request) => forward.forward(request));
    // A handler that reads both bodies (as the admin API reads forms) and changes the answer.
    const reading = await startHost(async (request) => {
      const text = await request.text();
      const answer = await forward.forward(new Request(request.url, { method: 'POST', headers: request.headers, body: text.toUpperCase() }));
      return new Response(`${await answer.text()}!`, { status: answer.status, headers: { 'x-method': answer.headers.get('x-method') ?? '' } });
    });
    try {
      const payload = 'a'.repeat(100_000) + 'z';
      const direct = await fetch(`${piped.url}/echo`, { method: 'POST', body: payload });
      expect(direct.status).toBe(200);
      expect(await direct.text()).toBe(`POST ${payload.length} ${payload}`);
      const read = await fetch(`${reading.url}/echo`, { method: 'POST', body: payload });
      expect(await read.text()).toBe(`POST ${payload.length} ${payload.toUpperCase()}!`);
      const get = await fetch(`${piped.url}/echo`);
      expect(await get.text()).toBe('GET 0 ');
    } finally {
      await piped.close();
      await reading.close();
    }
  });
});

describe('an origin that stops answering, on the Node host', () => {
  /** An origin whose handler does `behave`, counting the sockets it holds open. */
  async function slowOrigin(behave: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
    const server = http.createServer(behave);
    const open = new Set<import('node:net').Socket>();
    server.on('connection', (socket) => {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
    });
    const running = await serve(server, 0, '127.0.0.1');
    return { running, open };
  }
  const room = (originUrl: string, timeouts: { firstByteMs: number; betweenBytesMs: number }, logger: MemoryLogger) =>
    startHost(
      buildWaitingRoom({
        settings: source({ ...BASE_SETTINGS, admit_per_period: '1000', ticket_limit: '0' }),
        secrets: source(BASE_SECRETS),
        store: new MemoryQueueStore(),
        originUrl,
        originTimeouts: timeouts,
        logger,
      }).handler,
    );

  it('no headers within the first-byte timeout: the "not answering" page, logged; a stalled body ends at the between-bytes timeout', async () => {
    const silent = await slowOrigin(() => {});
    const stalled = await slowOrigin((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.write('<p>first part');
    });
    const logger = new MemoryLogger();
    const hosts = [await room(silent.running.url, { firstByteMs: 300, betweenBytesMs: 300 }, logger), await room(stalled.running.url, { firstByteMs: 300, betweenBytesMs: 300 }, logger)];
    try {
      // The origin never answers: any answer at all is the host giving up, and its log line says it
      // gave up at the first-byte timeout (a stopwatch here would measure the machine instead).
      const answer = await fetch(`${hosts[0]!.url}/products`, { signal: AbortSignal.timeout(20_000) });
      expect(answer.status).toBe(502);
      expect(answer.headers.get('retry-after')).not.toBeNull();
      expect(logger.last?.reason).toBe('origin: no answer from the origin within 300 ms');
      // Headers, then nothing: the visitor has the first part, and the transfer ends instead of hanging.
      const partial = await fetch(`${hosts[1]!.url}/products`, { signal: AbortSignal.timeout(20_000) });
      expect(partial.status).toBe(200);
      const read = await partial.text().then(
        (text) => ({ ended: 'cleanly', text }),
        (error: unknown) => ({ ended: error instanceof Error && error.name === 'TimeoutError' ? 'by the test' : 'cut', text: '' }),
      );
      expect(read.ended).not.toBe('by the test');
      expect(read.ended === 'cut' || !read.text.endsWith('</html>')).toBe(true);
    } finally {
      await Promise.all([...hosts.map((h) => h.close()), silent.running.close(), stalled.running.close()]);
    }
  });

  it('visitors who give up before the origin answers leave no socket open at the origin', async () => {
    const silent = await slowOrigin(() => {});
    const host = await room(silent.running.url, { firstByteMs: 60_000, betweenBytesMs: 60_000 }, new MemoryLogger());
    try {
      await Promise.all(
        Array.from({ length: 20 }, () => fetch(`${host.url}/products`, { signal: AbortSignal.timeout(200) }).catch(() => undefined)),
      );
      const deadline = Date.now() + 3_000;
      while (silent.open.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      expect(silent.open.size).toBe(0);
      // And the host still serves.
      expect((await fetch(`${host.url}/__wr/status`)).status).toBeLessThan(500);
    } finally {
      await Promise.all([host.close(), silent.running.close()]);
    }
  });

  it('reads ORIGIN_FIRST_BYTE_TIMEOUT_MS and ORIGIN_BETWEEN_BYTES_TIMEOUT_MS, refusing what is not a duration', () => {
    expect(parseOriginTimeouts({})).toEqual({ ok: true, timeouts: DEFAULT_ORIGIN_TIMEOUTS });
    expect(parseOriginTimeouts({ ORIGIN_FIRST_BYTE_TIMEOUT_MS: ' 60000 ', ORIGIN_BETWEEN_BYTES_TIMEOUT_MS: '' })).toEqual({ ok: true, timeouts: { firstByteMs: 60_000, betweenBytesMs: 10_000 } });
    for (const bad of ['0', '-1', '1.5', '600001', 'ten', '1e4']) {
      const parsed = parseOriginTimeouts({ ORIGIN_BETWEEN_BYTES_TIMEOUT_MS: bad });
      expect(parsed.ok, bad).toBe(false);
      if (!parsed.ok) expect(parsed.problems[0]).toContain('ORIGIN_BETWEEN_BYTES_TIMEOUT_MS must be a whole number of milliseconds');
    }
  });
});
