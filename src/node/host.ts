/**
 * The Node host: runs the same core handler as Fastly behind node:http, turning each incoming
 * message into a web `Request` and streaming the `Response` back with backpressure.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { createGzip } from 'node:zlib';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { Handler } from '../core/handler';
import { HOP_BY_HOP } from '../platform/node';

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

function toRequest(req: http.IncomingMessage, base: string): Request {
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!.toLowerCase();
    if (!HOP_BY_HOP.has(name)) headers.append(name, req.rawHeaders[i + 1]!);
  }
  const method = req.method ?? 'GET';
  const hasBody = method !== 'GET' && method !== 'HEAD';
  const host = req.headers.host ?? new URL(base).host;
  return new Request(new URL(req.url ?? '/', `http://${host}`), {
    method,
    headers,
    body: hasBody ? (Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>) : null,
    // Required by Node for a streamed request body.
    duplex: 'half',
  } as RequestInit);
}

/**
 * Fastly's `x-compress-hint`, as the edge applies it: a response that carries it is gzipped on the
 * way out when the client accepts gzip, and the hint never reaches the client either way.
 */
function wantsGzip(response: Response, acceptEncoding: string | undefined): boolean {
  if (!response.headers.has('x-compress-hint') || response.body === null || response.headers.has('content-encoding')) return false;
  return /(?:^|,)\s*gzip\s*(?:;\s*q=(?:1(?:\.0*)?|0?\.\d*[1-9]\d*))?\s*(?:,|$)/i.test(acceptEncoding ?? '');
}

async function writeResponse(response: Response, res: http.ServerResponse, acceptEncoding?: string): Promise<void> {
  const gzip = wantsGzip(response, acceptEncoding);
  const headers: [string, string][] = [];
  response.headers.forEach((value, name) => {
    if (name === 'x-compress-hint' || (gzip && name === 'content-length')) return;
    if (name !== 'set-cookie' && !HOP_BY_HOP.has(name)) headers.push([name, value]);
  });
  for (const cookie of response.headers.getSetCookie()) headers.push(['set-cookie', cookie]);
  if (gzip) headers.push(['content-encoding', 'gzip']);
  res.writeHead(response.status, response.statusText || undefined, headers.flat());
  if (response.body === null) {
    res.end();
    return;
  }
  const raw = Readable.fromWeb(response.body as unknown as NodeReadableStream<Uint8Array>);
  const body = gzip ? raw.pipe(createGzip({ level: 6 })) : raw;
  await new Promise<void>((resolve) => {
    body.on('error', () => res.destroy());
    res.on('close', () => {
      if (!res.writableFinished) body.destroy();
      resolve();
    });
    body.pipe(res);
  });
}

/** A port nothing listens on at the moment (asked of the OS by binding port 0). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = http.createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no free port'))));
    });
  });
}

/** Listens on `host:port` (0 = a free port) and returns how to reach and stop the server. */
export async function serve(server: http.Server, port: number, host: string): Promise<RunningServer> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${bound}`,
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface HostOptions {
  readonly port?: number;
  readonly host?: string;
  /** Stands in for the platform's POP name in logs. */
  readonly pop?: string;
}

export async function startHost(handler: Handler, options: HostOptions = {}): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  const server = http.createServer((req, res) => {
    const request = toRequest(req, `http://${host}`);
    // The Node host has no geolocation: a header stands in for it (local runs and tests only).
    const country = req.headers['x-client-country'];
    handler(request, { address: req.socket.remoteAddress, pop: options.pop ?? 'local', country: typeof country === 'string' ? country : undefined })
      .catch((error: unknown) => {
        // The core turns store and origin failures into answers; reaching here is a bug.
        process.stderr.write(`waiting room: unhandled error: ${error instanceof Error ? error.stack : String(error)}\n`);
        return new Response('internal error', { status: 500 });
      })
      .then((response) => writeResponse(response, res, req.headers['accept-encoding']))
      .catch(() => res.destroy());
  });
  return serve(server, options.port ?? 0, host);
}
