/**
 * A local stand-in for a challenge provider (Turnstile, hCaptcha): its siteverify endpoint and a
 * widget script, over real HTTP on a free port. Its verdicts follow the token, the way the real
 * providers' test keys do, and its faults are switched on by the test:
 * - `pass-…` passes once; the same token again is `timeout-or-duplicate`, as the real ones are
 *   single-use;
 * - `expired-…` is `timeout-or-duplicate` at once; anything else is `invalid-input-response`;
 * - a secret other than `secret` is `invalid-input-secret`;
 * - `mode`: `ok`, `down` (503), `slow` (answers after `slowMs`), `garbage` (200, not JSON),
 *   `internal` (the provider's own `internal-error`), `canned` (whatever `canned` says, for the
 *   answers a provider gives rarely: a 4xx, a mix of error codes);
 * - a passed token is answered with `hostname` when it is set (the host the widget ran on, as the
 *   real providers report it), without one when it is not.
 * `GET /api.js` is a widget script: it finds the elements with a site key and, after a moment,
 * calls each one's `data-callback` with a new `pass-…` token, as a widget does once the person passes.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const FAKE_SECRET = 'secret';

export interface SiteverifyCall {
  readonly fields: Record<string, string>;
  readonly contentType: string | undefined;
}

export interface FakeProvider {
  readonly url: string;
  readonly verifyUrl: string;
  readonly scriptUrl: string;
  readonly calls: SiteverifyCall[];
  mode: 'ok' | 'down' | 'slow' | 'garbage' | 'internal' | 'canned';
  slowMs: number;
  /** The answer in mode `canned`. */
  canned: { status: number; body: string };
  /** The host a passed token was solved on, as the provider reports it; undefined: not reported. */
  hostname: string | undefined;
  /** The widget script's requests. */
  scriptLoads: number;
  close(): Promise<void>;
}

const WIDGET = `(function () {
  var n = 0;
  function render() {
    var nodes = document.querySelectorAll('[data-sitekey]');
    for (var i = 0; i < nodes.length; i++) {
      (function (node) {
        if (node.getAttribute('data-rendered')) return;
        node.setAttribute('data-rendered', '1');
        node.textContent = 'fake check for ' + node.getAttribute('data-sitekey');
        var done = window[node.getAttribute('data-callback')];
        setTimeout(function () { done('pass-' + Date.now().toString(36) + '-' + (n++) + '-' + Math.random().toString(36).slice(2)); }, 50);
      })(nodes[i]);
    }
  }
  render();
})();
`;

export async function startFakeProvider(): Promise<FakeProvider> {
  const seen = new Set<string>();
  const provider = {
    calls: [] as SiteverifyCall[],
    mode: 'ok' as FakeProvider['mode'],
    slowMs: 5_000,
    canned: { status: 200, body: '{"success":false,"error-codes":[]}' },
    hostname: undefined as string | undefined,
    scriptLoads: 0,
  };
  const answer = (res: ServerResponse, status: number, body: string, type = 'application/json') => {
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const verdict = (fields: Record<string, string>): Record<string, unknown> => {
    if (fields['secret'] !== FAKE_SECRET) return { success: false, 'error-codes': ['invalid-input-secret'] };
    const token = fields['response'] ?? '';
    if (token === '') return { success: false, 'error-codes': ['missing-input-response'] };
    if (token.startsWith('expired-')) return { success: false, 'error-codes': ['timeout-or-duplicate'] };
    if (!token.startsWith('pass-')) return { success: false, 'error-codes': ['invalid-input-response'] };
    if (seen.has(token)) return { success: false, 'error-codes': ['timeout-or-duplicate'] };
    seen.add(token);
    return { success: true, challenge_ts: new Date().toISOString(), ...(provider.hostname !== undefined && { hostname: provider.hostname }), 'error-codes': [] };
  };
  const sockets = new Set<import('node:net').Socket>();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url?.startsWith('/api.js')) {
      provider.scriptLoads++;
      return answer(res, 200, WIDGET, 'text/javascript');
    }
    if (req.method !== 'POST' || !req.url?.startsWith('/siteverify')) return answer(res, 404, '{}');
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const fields = Object.fromEntries(new URLSearchParams(body));
      provider.calls.push({ fields, contentType: req.headers['content-type'] });
      switch (provider.mode) {
        case 'down':
          return answer(res, 503, '{"error":"unavailable"}');
        case 'garbage':
          return answer(res, 200, '<html>maintenance</html>', 'text/html');
        case 'internal':
          return answer(res, 200, JSON.stringify({ success: false, 'error-codes': ['internal-error'] }));
        case 'canned':
          return answer(res, provider.canned.status, provider.canned.body);
        case 'slow': {
          const timer = setTimeout(() => answer(res, 200, JSON.stringify(verdict(fields))), provider.slowMs);
          res.on('close', () => clearTimeout(timer));
          return;
        }
        default:
          return answer(res, 200, JSON.stringify(verdict(fields)));
      }
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(provider, {
    url,
    verifyUrl: `${url}/siteverify`,
    scriptUrl: `${url}/api.js`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  });
}

/** Settings that point the hook at a fake provider. */
export function fakeProviderSettings(provider: Pick<FakeProvider, 'verifyUrl' | 'scriptUrl'>, extra: Record<string, string> = {}): Record<string, string> {
  return {
    challenge_provider: 'turnstile',
    challenge_site_key: '1x00000000000000000000AA',
    challenge_verify_url: provider.verifyUrl,
    challenge_script_url: provider.scriptUrl,
    challenge_timeout_ms: '1000',
    ...extra,
  };
}
