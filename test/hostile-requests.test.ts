/**
 * The Node host under hostile requests, sent as raw bytes on a TCP socket: malformed Host headers
 * and request targets get a 400 (bytes that are not HTTP at all get a 400 or a clean close) and
 * the host keeps serving; no path, however it is spelled, reaches a host other than the configured
 * origin, and the origin reads the path it receives as the path the waiting room decided on.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig, parseSecrets } from '../src/core/config';
import { createHandler } from '../src/core/handler';
import { originTarget } from '../src/core/http';
import { normalizePath } from '../src/core/path-pattern';
import { startHost, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryQueueStore } from '../src/store/memory-store';
import { ADMIN_PASSWORD, API_TOKEN, BASE_SECRETS, BASE_SETTINGS, ManualClock, MemoryLogger, RecordingOrigin, source } from './support/fixtures';
import { rawRequest, sendRaw, startRecordingServer, type RecordingServer } from './support/raw-http';

const ADMIN = `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`;
const VISITOR_COOKIE = 'session=visitor-secret';

let origin: RecordingServer;
let evil: RecordingServer;
let room: RunningServer;
let store: MemoryQueueStore;
const logger = new MemoryLogger();

beforeAll(async () => {
  origin = await startRecordingServer('origin');
  evil = await startRecordingServer('evil');
  store = new MemoryQueueStore();
  // Queued paths narrower than /*: everything else goes to the origin with no token at all, the
  // case where a path that escaped to another host would need nothing from the visitor.
  const built = buildWaitingRoom({
    settings: source({ ...BASE_SETTINGS, queue_paths: '/shop/*' }),
    secrets: source(BASE_SECRETS),
    store,
    originUrl: origin.url,
    logger,
  });
  room = await startHost(built.handler);
});

afterAll(async () => {
  await Promise.allSettled([room?.close(), origin?.close(), evil?.close()]);
});

beforeEach(() => {
  origin.received.length = 0;
  evil.received.length = 0;
  logger.records.length = 0;
});

const roomHost = () => `127.0.0.1:${room.port}`;

/** A request with the given Host header value (undefined: none) and target, as bytes. */
function send(target: string, host: string | undefined = roomHost(), method = 'GET', extra: [string, string][] = [], body = '') {
  const headers: [string, string][] = host === undefined ? [] : [['Host', host]];
  return sendRaw(room.port, rawRequest(method, target, [...headers, ['Cookie', VISITOR_COOKIE], ...extra], body));
}

/** The host still answers an ordinary request: the process did not die and the listener is sound. */
async function expectServing(): Promise<void> {
  const response = await fetch(`${room.url}/still-serving`);
  expect(response.status).toBe(200);
  expect(response.headers.get('x-origin')).toBe('origin');
  await response.text();
}

/** How an origin that resolves its request target against its own URL reads it. */
function readByResolvingOrigin(target: string): URL {
  return new URL(target, `http://${origin.authority}`);
}

describe('malformed Host headers', () => {
  it.each(['a b', '[', 'x:99999', 'a<b', '%', '', 'a:b:c', '[::1', '[::1]x', 'a@b', 'a/b', 'evil.example\\', 'ex\u00e4mple'])(
    'Host %j gets a 400 saying why, reaches nobody, and the host keeps serving',
    async (host) => {
      const response = await send('/', host);
      expect(response.status).toBe(400);
      expect(JSON.parse(response.body)).toEqual({ error: expect.stringMatching(/Host/) });
      expect(response.headers['x-content-type-options']).toBe('nosniff');
      expect(response.closed).toBe(true);
      expect(origin.received).toEqual([]);
      expect(evil.received).toEqual([]);
      await expectServing();
    },
  );

  it('refuses two Host headers', async () => {
    const response = await sendRaw(room.port, rawRequest('GET', '/', [['Host', roomHost()], ['Host', evil.authority]]));
    expect(response.status).toBe(400);
    expect(origin.received).toEqual([]);
    await expectServing();
  });

  it('takes every host[:port] RFC 3986 allows (names, IPv4, [IPv6], ports up to 65535)', async () => {
    for (const host of ['shop.example', 'SHOP.Example:8080', '192.0.2.7', '192.0.2.7:65535', '[::1]', '[2001:db8::1]:443', 'a-b_c~d', 'x:']) {
      const response = await send('/page', host);
      expect(response.status, host).toBe(200);
      expect(response.headers['x-origin'], host).toBe('origin');
    }
  });
});

describe('a request body cut short', () => {
  const ADMIT = (length: number) =>
    ['POST /__wr/api/admit HTTP/1.1', `Host: 127.0.0.1`, `Authorization: Bearer ${API_TOKEN}`, 'Content-Type: application/json', `Content-Length: ${length}`, '', ''].join('\r\n');

  it('an admit whose connection ends mid-body is a logged 400 that admits nobody, on the handler and on the Node host', async () => {
    const before = await store.peek('default');
    // On the handler: a body stream that fails after its first bytes, as a reset connection's does.
    const built = buildWaitingRoom({ settings: source(BASE_SETTINGS), secrets: source(BASE_SECRETS), store, originUrl: origin.url, logger });
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"cou'));
        controller.error(new Error('connection reset by peer'));
      },
    });
    const request = new Request('http://127.0.0.1/__wr/api/admit', { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body, duplex: 'half' } as RequestInit);
    const answer = await built.handler(request, { address: '198.51.100.1', pop: 'TST' });
    expect(answer.status).toBe(400);
    expect(await answer.text()).toContain('cut short');
    // On the host: 100 bytes announced, 5 sent, then the client's side closes.
    const errors: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => (errors.push(String(chunk)), write(chunk, ...rest))) as typeof process.stderr.write;
    try {
      for (let i = 0; i < 3; i += 1) {
        await new Promise<void>((resolve) => {
          const socket = connect(room.port, '127.0.0.1', () => socket.end(`${ADMIT(100)}{"cou`));
          socket.on('close', () => resolve());
          socket.on('error', () => resolve());
          socket.resume();
        });
      }
      const deadline = Date.now() + 3_000;
      while (logger.records.filter((r) => r.path === '/__wr/api/admit').length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    } finally {
      process.stderr.write = write;
    }
    const logged = logger.records.filter((r) => r.path === '/__wr/api/admit');
    expect(logged.map((r) => r.status)).toEqual([400, 400, 400, 400]);
    expect(errors.join('')).not.toContain('unhandled');
    expect(await store.peek('default')).toMatchObject({ cursor: before.cursor, tail: before.tail });
    expect(origin.received).toHaveLength(0);
  });
});

describe('request targets', () => {
  it('reads a target that starts with // as a path: the configured origin gets it, with its leading slashes collapsed', async () => {
    const e = () => evil.authority;
    const cases: [string, string][] = [
      ['//[', '/['],
      ['//x:99999/', '/x:99999/'],
      [`//${e()}/x`, `/${e()}/x`],
      [`/.//${e()}/x`, `/${e()}/x`],
      [`/x/..//${e()}/x`, `/${e()}/x`],
      [`/%2e//${e()}/x`, `/${e()}/x`],
      [`/%2E%2E//${e()}/x?q=1`, `/${e()}/x?q=1`],
      [`/\\${e()}/x`, `/${e()}/x`],
      [`/\\\\${e()}/x`, `/${e()}/x`],
      [`/shop/..//${e()}/x`, `/${e()}/x`],
    ];
    for (const [target, expected] of cases) {
      origin.received.length = 0;
      const response = await send(target);
      expect(response.status, target).toBe(200);
      expect(response.headers['x-origin'], target).toBe('origin');
      expect(origin.received.map((r) => r.target), target).toEqual([expected]);
      expect(origin.received[0]!.host, target).toBe(origin.authority);
    }
    expect(evil.received).toEqual([]);
    await expectServing();
  });

  it('takes only the path and query of an absolute-form target, never its host', async () => {
    for (const [target, expected] of [
      [`http://${evil.authority}/x?q=1`, '/x?q=1'],
      [`HTTP://${evil.authority}`, '/'],
      [`https://${evil.authority}?q`, '/?q'],
      [`http://${evil.authority}//${evil.authority}/y`, `/${evil.authority}/y`],
    ] as const) {
      origin.received.length = 0;
      const response = await send(target);
      expect(response.status, target).toBe(200);
      expect(origin.received.map((r) => r.target), target).toEqual([expected]);
    }
    expect(evil.received).toEqual([]);
  });

  it.each(['http://[/', 'http://x:99999/', 'http://a b/', 'http:///x', 'http://user@x/', 'ftp://x/', 'mailto:x@y', '*', 'javascript:alert(1)'])(
    'refuses the malformed target %j with a 400 and keeps serving',
    async (target) => {
      const response = await send(target);
      expect(response.status).toBe(400);
      // Ours names the target; Node's parser refuses some before we see them.
      expect(JSON.parse(response.body)).toEqual({ error: expect.stringMatching(/target|malformed HTTP/) });
      expect(origin.received).toEqual([]);
      await expectServing();
    },
  );

  it('answers TRACE and CONNECT with 405 (a fetch Request cannot carry them) and keeps serving', async () => {
    expect((await send('/', roomHost(), 'TRACE')).status).toBe(405);
    expect((await send(roomHost(), roomHost(), 'CONNECT')).status).toBe(405);
    expect(origin.received).toEqual([]);
    await expectServing();
  });

  it('answers bytes that are not HTTP with a 400 or a clean close, and keeps serving', async () => {
    const garbage: (string | Buffer)[] = [
      'hello\r\n\r\n',
      Buffer.from('160301002a0100002603035a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a00000200ff0100', 'hex'),
      '\x00\x01\x02\r\n\r\n',
      'GET / HTTP/9.9\r\nHost: x\r\n\r\n',
      'GET /a b HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello',
      `GET / HTTP/1.1\r\nHost: x\r\nX: ${'a'.repeat(70_000)}\r\n\r\n`,
      'POST /__wr/api/admit HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    ];
    for (const bytes of garbage) {
      const response = await sendRaw(room.port, bytes);
      expect(response.closed).toBe(true);
      if (response.status !== undefined) expect(response.status).toBeGreaterThanOrEqual(400);
      if (response.status !== undefined) expect(response.status).toBeLessThan(500);
    }
    expect(origin.received).toEqual([]);
    await expectServing();
  });
});

// ---- generated hosts and targets -------------------------------------------------------------

const letter = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz');
const ldh = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789-');
/** A DNS-style label (not `xn--`, which the URL standard decodes as punycode). */
const label = fc
  .tuple(letter, fc.array(ldh, { maxLength: 10 }))
  .map(([first, rest]) => first + rest.join(''))
  .filter((l) => !l.startsWith('xn--'));
const regName = fc.array(label, { minLength: 1, maxLength: 4 }).map((labels) => labels.join('.'));
const ipv4 = fc.ipV4();
const ipv6 = fc.ipV6().map((a) => `[${a}]`);
const port = fc.integer({ min: 0, max: 65_535 }).map(String);
const validHost = fc.tuple(fc.oneof(regName, ipv4, ipv6), fc.option(port, { nil: undefined })).map(([h, p]) => (p === undefined ? h : `${h}:${p}`));

/** A valid host spoiled by one thing RFC 3986 does not allow in a Host. */
const invalidHost = fc.oneof(
  fc
    .tuple(regName, fc.constantFrom(' ', '<', '>', '@', '/', '\\', '?', '#', '[', ']', '"', '{', '}', '|', '^', '`', '%g', '\u00e9', '\u00ff'), fc.nat())
    // Inside the name: the parser trims spaces at either end of a header value.
    .map(([h, bad, at]) => {
      const name = h.length < 2 ? `${h}x` : h;
      const i = 1 + (at % (name.length - 1));
      return name.slice(0, i) + bad + name.slice(i);
    }),
  fc.tuple(fc.oneof(regName, ipv4, ipv6), fc.integer({ min: 65_536, max: 9_999_999 })).map(([h, p]) => `${h}:${p}`),
  fc.tuple(fc.oneof(regName, ipv4), fc.constantFrom('-1', '1a', '0x10', '+80', '8 0')).map(([h, p]) => `${h}:${p}`),
  fc.constantFrom('', '[', '[]', '[::1', '[v1.x]', '[::1]]', ':80', '[::1]80', '[192.0.2.1]'),
);

/** Host header bytes from anywhere in printable latin1 (CR, LF and NUL would end the header). */
const anyHost = fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 30 });

describe('generated Host headers', () => {
  it('a valid host[:port] is served, a spoiled one gets a 400, anything else one of the two; the host never stops', async () => {
    await fc.assert(
      fc.asyncProperty(validHost, async (host) => {
        const response = await send('/', host);
        expect(response.status).toBe(200);
      }),
      { numRuns: 60 },
    );
    await fc.assert(
      fc.asyncProperty(invalidHost, async (host) => {
        origin.received.length = 0;
        const response = await send('/', host);
        expect(response.status).toBe(400);
        expect(origin.received).toEqual([]);
      }),
      { numRuns: 80 },
    );
    await fc.assert(
      fc.asyncProperty(anyHost, async (host) => {
        const response = await send('/', host);
        expect([200, 400]).toContain(response.status);
      }),
      { numRuns: 80 },
    );
    await expectServing();
  });
});

/**
 * Request targets built from the pieces that confuse parsers: `//`, dot segments plain and
 * percent-encoded, backslashes, the evil host's authority, `@`, `?` and `#`.
 */
function hostileTarget(evilAuthority: string) {
  const piece = fc.constantFrom('/', '//', '\\', '/\\', '.', '..', '%2e', '%2E', '%2e%2e', '.%2e', '%2f', '%5c', 'shop', 'x', evilAuthority, '@', ':', '?', '#', ';', '%', '[', ']', '|');
  const start = fc.constantFrom('/', '//', '/\\', '/./', '/../', '/x/../', '/%2e/', '/shop/../', `http://${evilAuthority}`, `http://${evilAuthority}/`);
  return fc.tuple(start, fc.array(piece, { maxLength: 10 })).map(([head, rest]) => head + rest.join(''));
}

describe('generated request targets', () => {
  it('never reach any host but the configured origin, which reads each as the path the waiting room decided on', async () => {
    await fc.assert(
      fc.asyncProperty(hostileTarget(evil.authority), async (target) => {
        origin.received.length = 0;
        logger.records.length = 0;
        const response = await send(target);
        expect(response.status).toBeDefined();
        expect(response.status!).toBeLessThan(500);
        expect(evil.received).toEqual([]);
        if (response.headers['x-origin'] !== 'origin') return;
        expect(origin.received).toHaveLength(1);
        const received = origin.received[0]!;
        expect(received.host).toBe(origin.authority);
        // Read both ways an origin reads a target: resolved against its own URL, and literally.
        const resolved = readByResolvingOrigin(received.target);
        expect(resolved.host).toBe(origin.authority);
        expect(`${resolved.pathname}${resolved.search}`).toBe(received.target);
        // And it is the path the waiting room matched its rules against.
        const decidedOn = logger.records.at(-1)!.path;
        expect(normalizePath(resolved.pathname)).toBe(normalizePath(decidedOn));
      }),
      { numRuns: 200 },
    );
    await expectServing();
  });

  it('originTarget: for any URL, the string to append is read as the same path by every kind of origin', () => {
    const anyTarget = fc.oneof(
      hostileTarget('evil.example:8080'),
      fc.webPath(),
      fc.string({ unit: fc.constantFrom(...'/\\.%2eE?#@:x'), maxLength: 16 }).map((s) => `/${s}`),
    );
    fc.assert(
      fc.property(anyTarget, (target) => {
        let url: URL;
        try {
          url = new URL(`http://room.example${target.startsWith('/') ? target : `/${target}`}`);
        } catch {
          return;
        }
        const sent = originTarget(url.href);
        expect(sent.startsWith('/') && !sent.startsWith('//')).toBe(true);
        const read = new URL(sent, 'http://origin.example:81');
        expect(read.host).toBe('origin.example:81');
        expect(`${read.pathname}${read.search}`).toBe(sent);
        expect(read.search).toBe(url.search);
        expect(normalizePath(read.pathname)).toBe(normalizePath(url.pathname));
      }),
      { numRuns: 500 },
    );
  });
});

// ---- the admin form's Origin check -----------------------------------------------------------

describe("the admin form's Origin check compares with the Host the browser sent", () => {
  async function csrf(): Promise<string> {
    const page = await fetch(`${room.url}/__wr/admin`, { headers: { authorization: ADMIN } });
    return /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!;
  }
  const form = (token: string) => `csrf=${encodeURIComponent(token)}&count=1`;
  const formHeaders = (from: string): [string, string][] => [
    ['Authorization', ADMIN],
    ['Content-Type', 'application/x-www-form-urlencoded'],
    ['Origin', from],
  ];

  it('a cross-site post to //evil.example/__wr/admin/admit or http://evil.example/__wr/admin/admit admits nobody', async () => {
    for (let i = 0; i < 3; i++) await fetch(`${room.url}/shop/item`);
    const token = await csrf();
    const before = await store.peek('default');
    expect(before.tail).toBeGreaterThan(before.cursor);

    // A form on evil.example posting to https://room//evil.example/…: a path, so not our admin at all.
    const slashed = await send('//evil.example/__wr/admin/admit', roomHost(), 'POST', formHeaders('http://evil.example'), form(token));
    expect(slashed.status).toBeLessThan(500);
    expect(slashed.body).not.toContain('"admitted"');
    // Absolute form: the path is our admin's, the host is the Host header's, so Origin does not match.
    const absolute = await send('http://evil.example/__wr/admin/admit', roomHost(), 'POST', formHeaders('http://evil.example'), form(token));
    expect(absolute.status).toBe(403);
    expect(await store.peek('default')).toEqual(before);

    // The control: the same form from our own page does let one in.
    const ours = await send('/__wr/admin/admit', roomHost(), 'POST', formHeaders(`http://${roomHost()}`), form(token));
    expect(ours.status).toBe(200);
    expect((await store.peek('default')).cursor).toBe(before.cursor + 1);
  });

  it('on the handler: a request URL naming another host does not make that host same-origin', async () => {
    const clock = new ManualClock();
    const inner = new MemoryQueueStore();
    const handler = createHandler({
      config: parseConfig(source(BASE_SETTINGS)),
      secrets: parseSecrets(source(BASE_SECRETS)),
      store: inner,
      origin: new RecordingOrigin(),
      logger: new MemoryLogger(),
      clock,
      cache: new MemoryStateCache(clock),
    });
    const client = { address: '192.0.2.1', pop: 'TST' };
    for (let i = 0; i < 3; i++) await handler(new Request('https://shop.example/'), client);
    const page = await handler(new Request('https://shop.example/__wr/admin', { headers: { authorization: ADMIN } }), client);
    const token = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!;
    // A host adapter that took the authority from the target would build this URL.
    const post = (from: string) =>
      new Request('https://evil.example/__wr/admin/admit', {
        method: 'POST',
        body: form(token),
        headers: { host: 'shop.example', origin: from, authorization: ADMIN, 'content-type': 'application/x-www-form-urlencoded' },
      });
    expect((await handler(post('https://evil.example'), client)).status).toBe(403);
    expect((await inner.peek('default')).cursor).toBe(0);
    expect((await handler(post('https://shop.example'), client)).status).toBe(200);
    expect((await inner.peek('default')).cursor).toBe(1);
  });
});
