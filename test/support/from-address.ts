/**
 * HTTP requests sent from a chosen local address (any of 127.0.0.0/8 on Linux), so end-to-end tests
 * can be several clients at once: both hosts take the client address from the connection
 * (the Node host from its socket, the compute host likewise for `event.client.address`).
 * `fetch` cannot choose its source address; node:http can.
 */
import http from 'node:http';

export interface FromInit {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

/** `url` requested from `localAddress`; the answer as a web Response (body read in full). */
export function fetchFrom(localAddress: string, url: string, init: FromInit = {}): Promise<Response> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: init.method ?? 'GET', headers: init.headers, localAddress, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const headers = new Headers();
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
        const status = res.statusCode ?? 0;
        const empty = [101, 103, 204, 205, 304].includes(status);
        resolve(new Response(empty ? null : Buffer.concat(chunks), { status, headers }));
      });
    });
    request.on('error', reject);
    request.end(init.body);
  });
}
