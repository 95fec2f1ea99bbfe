/**
 * HTTP as bytes on a TCP socket, for requests no HTTP client would send (a bad Host, a target that
 * starts with `//`, garbage), and a server that records what reaches it.
 */
import http from 'node:http';
import { connect } from 'node:net';
import { serve, type RunningServer } from '../../src/node/host';

export interface RawResponse {
  /** The status code, or undefined when the server closed without an HTTP answer. */
  readonly status: number | undefined;
  /** Header names lower-cased; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** True when the server closed the connection (as opposed to our timeout). */
  readonly closed: boolean;
}

function decodeChunked(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd < 0) break;
    const size = Number.parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/** Parses the first response in `data` (enough for one request on a connection we close). */
export function parseRawResponse(data: Buffer, closed: boolean): RawResponse {
  const headEnd = data.indexOf('\r\n\r\n');
  const head = data.subarray(0, headEnd < 0 ? data.length : headEnd).toString('latin1');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  let body = headEnd < 0 ? Buffer.alloc(0) : data.subarray(headEnd + 4);
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) body = decodeChunked(body);
  else if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']));
  return { status: match?.[1] === undefined ? undefined : Number(match[1]), headers, body: body.toString('utf8'), closed };
}

/**
 * Sends `bytes` (a string is sent as latin1, byte for byte) and reads until the server closes the
 * connection or `timeoutMs` passes. Well-formed requests should carry `Connection: close`.
 * `localAddress`: the loopback address it comes from (a client of its own to the server).
 */
export function sendRaw(port: number, bytes: string | Buffer, timeoutMs = 3000, localAddress?: string): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', ...(localAddress !== undefined && { localAddress }) });
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseRawResponse(Buffer.concat(chunks), closed));
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('close', () => finish(true));
    // A reset after the server answered and closed is still a close.
    socket.on('error', () => finish(true));
    socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
  });
}

/** A request line, headers and optional body as the bytes a client would send, with `Connection: close`. */
export function rawRequest(method: string, target: string, headers: readonly (readonly [string, string])[], body = ''): string {
  const lines = [`${method} ${target} HTTP/1.1`, ...headers.map(([name, value]) => `${name}: ${value}`), 'Connection: close'];
  if (body !== '') lines.push(`Content-Length: ${Buffer.byteLength(body, 'latin1')}`);
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

export interface Received {
  readonly method: string;
  /** The request target exactly as it arrived. */
  readonly target: string;
  readonly host: string | undefined;
  readonly cookie: string | undefined;
  readonly body: string;
}

export interface RecordingServer extends RunningServer {
  readonly received: Received[];
  /** The host:port this server is reached at. */
  readonly authority: string;
}

/** An HTTP server that records every request and answers 200 with `x-origin: <name>`. */
export async function startRecordingServer(name: string): Promise<RecordingServer> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        target: req.url ?? '',
        host: req.headers.host,
        cookie: req.headers.cookie,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      res.writeHead(200, { 'content-type': 'text/plain', 'x-origin': name }).end(`${name} saw ${req.url ?? ''}`);
    });
  });
  const running = await serve(server, 0, '127.0.0.1');
  return { ...running, received, authority: `127.0.0.1:${running.port}` };
}
