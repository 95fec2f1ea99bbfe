/**
 * The Node host: runs the same core handler as Fastly behind node:http, turning each incoming
 * message into a web `Request` and streaming the `Response` back with backpressure.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable, type Duplex } from 'node:stream';
import { createGzip } from 'node:zlib';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { Handler } from '../core/handler';
import type { CidrRange } from '../core/ip';
import { errorResponse } from '../core/http';
import { answerFor, HOP_BY_HOP, lazyWebBody, untouchedNodeBody } from '../platform/node';
import { chooseClientAddress } from '../platform/trusted-proxies';
import { requestUrl } from './request-target';

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  /** Stops at once: every connection is closed, requests in flight included. */
  close(): Promise<void>;
  /**
   * Stops gracefully (a SIGTERM from the process manager): no new connection is accepted, idle
   * keep-alive connections close, and the requests in flight finish, their connections closing
   * after them; whatever is still open after `graceMs` is closed. True when everything finished.
   */
  drain?(graceMs: number): Promise<boolean>;
}

type Conversion = { readonly ok: true; readonly request: Request } | { readonly ok: false; readonly status: number; readonly reason: string };

/**
 * The incoming message as a fetch `Request`, or the status and reason it is refused with. Never
 * throws: a bad Host, target, method or header is the client's mistake, answered with a 4xx.
 */
function toRequest(req: http.IncomingMessage): Conversion {
  try {
    const method = req.method ?? 'GET';
    const hosts: string[] = [];
    const headers = new Headers();
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!.toLowerCase();
      const value = req.rawHeaders[i + 1]!;
      if (name === 'host') hosts.push(value);
      if (!HOP_BY_HOP.has(name)) headers.append(name, value);
    }
    const local = req.socket.localAddress ?? '127.0.0.1';
    const fallbackHost = `${local.includes(':') ? `[${local}]` : local}:${req.socket.localPort ?? 80}`;
    const target = requestUrl(method, req.url ?? '/', hosts, fallbackHost);
    if (!target.ok) return target;
    const hasBody = method !== 'GET' && method !== 'HEAD';
    const request = new Request(target.url, {
      method,
      headers,
      body: hasBody ? lazyWebBody(req) : null,
      // Required by Node for a streamed request body.
      duplex: 'half',
    } as RequestInit);
    return { ok: true, request };
  } catch (error) {
    // Whatever else a fetch Request refuses (a header value it will not carry) is the client's too.
    return { ok: false, status: 400, reason: `malformed request: ${error instanceof Error ? error.message : String(error)}`.slice(0, 200) };
  }
}

/** The host's own refusal, in the waiting room's JSON error shape; the connection closes after it. */
function refuse(res: http.ServerResponse, status: number, reason: string): void {
  const body = `${JSON.stringify({ error: reason })}\n`;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'content-length': String(Buffer.byteLength(body)),
    connection: 'close',
  });
  res.end(body);
}

/** The same, for a socket that has no response object (a parse error, CONNECT). */
function refuseOnSocket(socket: Duplex, status: number, reason: string): void {
  const body = `${JSON.stringify({ error: reason })}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `cache-control: no-store\r\nx-content-type-options: nosniff\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

function reportBug(error: unknown): void {
  process.stderr.write(`waiting room: unhandled error: ${error instanceof Error ? error.stack : String(error)}\n`);
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
  const raw = untouchedNodeBody(response.body) ?? Readable.fromWeb(response.body as unknown as NodeReadableStream<Uint8Array>);
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
    drain: (graceMs) =>
      new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          server.closeAllConnections();
          resolve(false);
        }, graceMs);
        // A response written from now on says `Connection: close`, so a keep-alive client (a load
        // balancer's pool) does not send the next request to a server that is going away.
        server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => res.setHeader('connection', 'close'));
        server.close(() => {
          clearTimeout(timer);
          resolve(true);
        });
        server.closeIdleConnections();
      }),
  };
}

export interface HostOptions {
  readonly port?: number;
  readonly host?: string;
  /** Stands in for the platform's POP name in logs. */
  readonly pop?: string;
  /**
   * The request header that carries the client's country (ISO code) for queues chosen by country,
   * set by a proxy in front that overwrites any copy a client sends (`CLIENT_COUNTRY_HEADER`).
   * Without it the Node host knows no country: a client must not pick its queue by a header it
   * writes itself.
   */
  readonly countryHeader?: string | undefined;
  /**
   * The proxies in front (TRUSTED_PROXIES): from a peer in these ranges, the client address is
   * taken from X-Forwarded-For (see chooseClientAddress); from any other peer, and when this is
   * empty, it is the socket's. Everything keyed on the client uses it: the ticket limit, the
   * sign-in throttle, `bypass_ips`, the log.
   * @default [] (none)
   */
  readonly trustedProxies?: readonly CidrRange[];
}

/** A header name as `CLIENT_COUNTRY_HEADER` may give it, lower case, or the problem with it. */
export function parseCountryHeader(text: string | undefined): { readonly ok: true; readonly header: string | undefined } | { readonly ok: false; readonly problem: string } {
  if (text === undefined || text.trim() === '') return { ok: true, header: undefined };
  const name = text.trim().toLowerCase();
  if (!/^[a-z0-9][a-z0-9-]{0,63}$/.test(name)) return { ok: false, problem: `CLIENT_COUNTRY_HEADER must be a header name (letters, digits, -), got ${JSON.stringify(text).slice(0, 80)}` };
  if (HOP_BY_HOP.has(name) || name === 'host' || name === 'cookie') return { ok: false, problem: `CLIENT_COUNTRY_HEADER cannot be ${name}` };
  return { ok: true, header: name };
}

/**
 * Makes `server` answer requests the HTTP parser refuses with a 4xx of ours, as Node would by
 * default, but also when a response is half written (then the socket just closes), and refuses
 * CONNECT (a proxy method, never a waiting room's) instead of dropping the socket silently.
 */
export function answerMalformedRequests(server: http.Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    const inFlight = (socket as Duplex & { _httpMessage?: http.ServerResponse | null })._httpMessage;
    if (error.code === 'ECONNRESET' || !socket.writable || (inFlight != null && inFlight.headersSent)) {
      socket.destroy();
      return;
    }
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    refuseOnSocket(socket, status, status === 431 ? 'request headers too large' : status === 408 ? 'request timed out' : 'malformed HTTP request');
  });
  server.on('connect', (_req: http.IncomingMessage, socket: Duplex) => refuseOnSocket(socket, 405, 'CONNECT is not supported'));
}

export async function startHost(handler: Handler, options: HostOptions = {}): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  const trusted = options.trustedProxies ?? [];
  const server = http.createServer((req, res) => {
    // Nothing may throw out of a request listener: an uncaught error there ends the process.
    try {
      const converted = toRequest(req);
      if (!converted.ok) {
        refuse(res, converted.status, converted.reason);
        return;
      }
      // So that the origin's request ends when this visitor goes away (see createHttpOrigin).
      answerFor(converted.request, res);
      // The Node host has no geolocation: a trusted proxy's header stands in for it, if named.
      const country = options.countryHeader === undefined ? undefined : req.headers[options.countryHeader];
      const address = trusted.length === 0 ? req.socket.remoteAddress : chooseClientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for'], trusted);
      handler(converted.request, { address, pop: options.pop ?? 'local', country: typeof country === 'string' && country !== '' ? country : undefined })
        .catch((error: unknown) => {
          // The core turns store and origin failures into answers; reaching here is a bug.
          reportBug(error);
          return errorResponse(500, 'internal error');
        })
        .then((response) => writeResponse(response, res, req.headers['accept-encoding']))
        .catch(() => res.destroy());
    } catch (error) {
      reportBug(error);
      if (res.headersSent) res.destroy();
      else refuse(res, 500, 'internal error');
    }
  });
  answerMalformedRequests(server);
  return serve(server, options.port ?? 0, host);
}
