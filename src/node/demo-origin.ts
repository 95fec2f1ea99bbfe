/**
 * A small origin for `npm start` and the tests: a page that shows the visitor got in, a large
 * streamed download, and an echo that streams a request body back.
 */
import http from 'node:http';
import type { JWTPayload } from 'jose';
import { requireAdmission, type AdmissionCheckOptions } from './admission-check';
import { serve, type RunningServer } from './host';

const MIB = 1024 * 1024;
const MAX_DOWNLOAD_MIB = 1024;

function homePage(path: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Demo shop</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#1d2433}
.ok{background:#e7f6ec;color:#14532d;padding:.75rem 1rem;border-radius:8px}</style></head><body>
<h1>Demo shop</h1><p class="ok">You are through the waiting room and on the origin.</p>
<p>You asked for <code>${path.replace(/[&<>"']/g, '')}</code>. Browse on: <a href="/products">products</a>, <a href="/checkout">checkout</a>.</p>
</body></html>`;
}

function streamZeros(res: http.ServerResponse, bytes: number): void {
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  let left = bytes;
  const pump = (): void => {
    while (left > 0) {
      const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
      left -= piece.length;
      if (!res.write(piece)) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  pump();
}

export interface DemoOriginOptions {
  readonly port?: number;
  readonly host?: string;
  /**
   * Protected: every request must carry the waiting room's signed admission (src/node/admission-check.ts),
   * else 403. `jwksUrl` may be a function, for a waiting room whose address is known only later.
   */
  readonly protect?: Omit<AdmissionCheckOptions, 'jwksUrl'> & {
    readonly jwksUrl: string | (() => string);
    /** Where to note each admission header received (tests). */
    readonly seen?: (string | undefined)[];
  };
  /**
   * An origin that degrades above a load (adaptive admission's demonstration): up to `perSecond`
   * requests a second (over the last two seconds) are answered at once; above it each waits `slowMs` first; above
   * 1.5 × `perSecond` it answers 503 (overloaded). `npm start` sets it from WR_DEMO_CAPACITY.
   */
  readonly degrade?: { readonly perSecond: number; readonly slowMs: number };
}

/**
 * The load gauge of a degrading origin: requests a second, averaged over the last two seconds (a
 * server's queue absorbs a burst within a second; a load that lasts is what slows it down).
 */
function loadGauge(): () => number {
  const arrivals: number[] = [];
  return () => {
    const now = Date.now();
    arrivals.push(now);
    while (arrivals.length > 0 && arrivals[0]! <= now - 2000) arrivals.shift();
    return arrivals.length / 2;
  };
}

export async function startDemoOrigin(options: DemoOriginOptions = {}): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  const held = new Map<string, () => void>();
  const protect = options.protect;
  let gate: ReturnType<typeof requireAdmission> | undefined;
  const guarded = (handle: (req: http.IncomingMessage, res: http.ServerResponse) => void) => (req: http.IncomingMessage & { admission?: JWTPayload }, res: http.ServerResponse) => {
    if (protect === undefined) return handle(req, res);
    const header = req.headers[(protect.header ?? 'waiting-room-admission').toLowerCase()];
    protect.seen?.push(Array.isArray(header) ? header.join(', ') : header);
    gate ??= requireAdmission({ ...protect, jwksUrl: typeof protect.jwksUrl === 'function' ? protect.jwksUrl() : protect.jwksUrl });
    gate(req, res, () => {
      // What the origin read from the admission, for the tests and for a look in the browser's tools.
      res.setHeader('x-admission-via', String(req.admission?.['via'] ?? ''));
      res.setHeader('x-admission-ticket', String(req.admission?.['ticket'] ?? ''));
      handle(req, res);
    });
  };
  const degrade = options.degrade;
  const arrive = loadGauge();
  const handle = guarded((req, res) => {
    let url: URL;
    try {
      // Read as a browser-facing server would: relative to its own origin.
      url = new URL(req.url ?? '/', 'http://origin');
    } catch {
      req.resume();
      res.writeHead(400, { 'content-type': 'text/plain' }).end('bad request target');
      return;
    }
    // The raw request target as it arrived, so tests can see what the waiting room sent.
    res.setHeader('x-origin-target', req.url ?? '');
    if (url.pathname === '/big') {
      const mib = Math.min(MAX_DOWNLOAD_MIB, Math.max(0, Number.parseInt(url.searchParams.get('mib') ?? '1', 10) || 0));
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(mib * MIB), 'x-origin': 'demo' });
      streamZeros(res, mib * MIB);
      return;
    }
    if (url.pathname === '/echo') {
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'x-origin': 'demo',
        'x-echo-method': req.method ?? '',
        'x-echo-cookie': req.headers.cookie ?? '',
      });
      req.pipe(res);
      return;
    }
    if (url.pathname === '/drip') {
      // Sends a first chunk, then holds the response open until /release?id=… is requested, so a
      // test can prove bytes reach the client before the origin has finished.
      const id = url.searchParams.get('id') ?? '';
      res.writeHead(200, { 'content-type': 'text/plain', 'x-origin': 'demo' });
      res.write('first chunk;');
      held.set(id, () => res.end('last chunk'));
      return;
    }
    if (url.pathname === '/release') {
      const release = held.get(url.searchParams.get('id') ?? '');
      held.delete(url.searchParams.get('id') ?? '');
      release?.();
      res.writeHead(release ? 200 : 404, { 'content-type': 'text/plain' });
      res.end(release ? 'released' : 'nothing held');
      return;
    }
    const status = /^\/status\/([1-5][0-9][0-9])$/.exec(url.pathname);
    if (status !== null && Number(status[1]) >= 200) {
      // Answers with the status asked for: an origin in trouble, on demand (tests).
      req.resume();
      res.writeHead(Number(status[1]), { 'content-type': 'text/plain', 'x-origin': 'demo' });
      res.end(`status ${status[1]}`);
      return;
    }
    if (url.pathname === '/checkout/done') {
      // After checkout the origin ends the visitor's session, freeing the slot for the next one.
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain', 'x-origin': 'demo', 'x-waiting-room-end-session': '1' });
      res.end('thank you for your order');
      return;
    }
    if (url.pathname === '/set-cookie') {
      // Two separate Set-Cookie lines (an array value is written as one line each).
      res.setHeader('set-cookie', ['origin_a=1; Path=/', 'origin_b=2; Path=/']);
      res.writeHead(200, { 'x-origin': 'demo', 'content-type': 'text/plain' });
      res.end('two cookies');
      return;
    }
    req.resume();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'x-origin': 'demo' });
    res.end(homePage(url.pathname));
  });
  const server = http.createServer((req, res) => {
    if (degrade === undefined) return handle(req, res);
    const load = arrive();
    if (load > degrade.perSecond * 1.5) {
      req.resume();
      res.writeHead(503, { 'content-type': 'text/plain', 'x-origin': 'demo', 'retry-after': '1' }).end('overloaded');
      return;
    }
    if (load > degrade.perSecond) setTimeout(() => handle(req, res), degrade.slowMs);
    else handle(req, res);
  });
  return serve(server, options.port ?? 0, host);
}
