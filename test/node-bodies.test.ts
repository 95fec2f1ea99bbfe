/**
 * The Node host's bodies: piped Node to Node when the core passes them on unread, read through the
 * web stream (same bytes) when it does read them, and never both.
 */
import http from 'node:http';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, serve, type RunningServer } from '../src/node/host';
import { createHttpOrigin, lazyWebBody, untouchedNodeBody } from '../src/platform/node';

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
