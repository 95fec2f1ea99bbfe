/**
 * The origin-side examples of the signed admission (issue 15), each behind a real waiting room on
 * the Node host: the Express middleware of docs/origin-protection/express.ts and the node:http one
 * of src/node/admission-check.ts. A visitor through the waiting room gets in; a request straight to
 * the origin, with or without a made-up header, gets 403.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createShop } from '../docs/origin-protection/express';
import { requireAdmission } from '../src/node/admission-check';
import { startHost, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { MemoryQueueStore } from '../src/store/memory-store';
import { BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './support/fixtures';

interface Listening {
  readonly url: string;
  close(): Promise<void>;
}

function listen(server: http.Server): Promise<Listening> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({ url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((done) => server.close(() => done())) });
    });
  });
}

/** A waiting room (everyone walks in) in front of `originUrl`. */
async function roomBefore(originUrl: string): Promise<RunningServer> {
  const room = buildWaitingRoom({
    settings: source({ ...BASE_SETTINGS, admit_per_period: '1000' }),
    secrets: source(BASE_SECRETS),
    store: new MemoryQueueStore(),
    originUrl,
    logger: new MemoryLogger(),
  });
  return startHost(room.handler);
}

describe.each([
  [
    'Express (docs/origin-protection/express.ts)',
    (jwksUrl: () => string) => {
      // The app is made on the first request, once the waiting room's address is known.
      let app: http.RequestListener | undefined;
      return http.createServer((req, res) => (app ??= createShop({ jwksUrl: jwksUrl() }) as unknown as http.RequestListener)(req, res));
    },
    /^welcome, ticket 1 \(walk-in\)$/,
  ],
  [
    'node:http (src/node/admission-check.ts)',
    (jwksUrl: () => string) => {
      let gate: ReturnType<typeof requireAdmission> | undefined;
      return http.createServer((req, res) => {
        gate ??= requireAdmission({ jwksUrl: jwksUrl() });
        gate(req, res, () => res.end(`welcome, ticket ${String((req as { admission?: { ticket?: number } }).admission?.ticket)}`));
      });
    },
    /^welcome, ticket 1$/,
  ],
] as const)('origin protection with %s', (_name, makeOrigin, welcome) => {
  let origin: Listening;
  let room: RunningServer;
  beforeAll(async () => {
    let roomUrl = '';
    origin = await listen(makeOrigin(() => `${roomUrl}/__wr/.well-known/jwks.json`));
    room = await roomBefore(origin.url);
    roomUrl = room.url;
  });
  afterAll(async () => {
    await room?.close();
    await origin?.close();
  });

  it('serves a visitor who came through the waiting room', async () => {
    const response = await fetch(`${room.url}/`);
    expect(response.status).toBe(200);
    expect(await response.text()).toMatch(welcome);
  });

  it('refuses a request straight to it, with or without a made-up header', async () => {
    expect((await fetch(`${origin.url}/`)).status).toBe(403);
    expect((await fetch(`${origin.url}/`, { headers: { 'waiting-room-admission': 'eyJhbGciOiJFUzI1NiJ9.e30.AAAA' } })).status).toBe(403);
  });
});
