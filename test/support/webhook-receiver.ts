/**
 * A real HTTP receiver of webhook deliveries for the end-to-end tests: it records every request
 * (headers, body, when the connection was let go) and answers as told: `accept` (204), `fail-first`
 * (500 to the first attempt of each event id, then 204), or `hang` (never answers; the request is
 * held until the sender gives up or the receiver closes).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  readonly headers: Record<string, string>;
  readonly body: string;
  /** What the receiver answered; undefined while it holds the request. */
  status: number | undefined;
  /** The sender closed the connection before an answer (its timeout). */
  abandoned: boolean;
}

export interface WebhookReceiver {
  readonly url: string;
  readonly received: Received[];
  mode: 'accept' | 'fail-first' | 'hang';
  /** Requests held without an answer whose connection is still open. */
  pending(): number;
  close(): Promise<void>;
}

export async function startWebhookReceiver(mode: WebhookReceiver['mode'] = 'accept'): Promise<WebhookReceiver> {
  const received: Received[] = [];
  const failed = new Set<string>();
  const held = new Set<ServerResponse>();
  const receiver: WebhookReceiver = {
    url: '',
    received,
    mode,
    pending: () => held.size,
    async close() {
      for (const response of held) response.destroy();
      held.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(request.headers)) if (typeof value === 'string') headers[name] = value;
      const entry: Received = { headers, body: Buffer.concat(chunks).toString('utf8'), status: undefined, abandoned: false };
      received.push(entry);
      const id = headers['x-wr-event-id'] ?? '';
      if (receiver.mode === 'hang') {
        held.add(response);
        response.on('close', () => {
          if (held.delete(response)) entry.abandoned = true;
        });
        return;
      }
      const status = receiver.mode === 'fail-first' && !failed.has(id) ? 500 : 204;
      if (status === 500) failed.add(id);
      entry.status = status;
      response.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  (receiver as { url: string }).url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return receiver;
}
