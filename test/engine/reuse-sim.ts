/// <reference types="@fastly/js-compute" />
/**
 * What a reused sandbox saves, measured in the engine on a host that cannot reuse one (the Compute
 * host stand-in gives every request a fresh instance). Each GET this wasm receives is run three
 * times in its one instance, each timed from the call until the answer's headers (any other method
 * is served once, untimed):
 *   1. the bare proxy's work: the request sent to the origin as it is;
 *   2. the waiting room's, the first request of the instance: what every request costs today;
 *   3. the waiting room's again, the second request of the instance: what each later request of a
 *      reused sandbox costs (the service, derived keys, verified token and carried admission kept).
 * Each body is read to its end outside the timings, and the first request's after-response work is
 * awaited before the second starts. The answer is the third run's, with the timings in
 * the header `x-wr-reuse-sim` (`bare=…;first=…;second=…`, milliseconds). The bench's latency pass
 * reports them (`node src/node/build.mjs fastly-reuse-sim --out DIR` builds it).
 *
 * Built with the same build-time steps as bin/main.wasm; the sandbox-reuse option itself is not set
 * (the stand-in ignores it, and this wasm shows the effect without it). It also runs a sequence of
 * requests through one instance for the tests (see runSequence).
 */
import { handleFastlyRequest } from '../../src/platform/fastly';
import '../../src/platform/build-time';
import { keepCookies } from '../support/cookie-jar';

const HEADER = 'x-wr-reuse-sim';

/** The same request again, for a run that must not consume the downstream one. */
function copyOf(request: Request): Request {
  return new Request(request.url, { method: request.method, headers: request.headers });
}

/**
 * The event a run of the room sees: the real client, a copy of the request, the real waitUntil; what
 * it hands to waitUntil is also kept in `pending`, so that the next run can wait for it (see settle).
 */
function eventFor(event: FetchEvent, request: Request, pending: Promise<unknown>[]): FetchEvent {
  return {
    request,
    client: event.client,
    waitUntil: (promise: Promise<unknown>) => {
      pending.push(promise);
      event.waitUntil(promise);
    },
    respondWith: () => {
      throw new Error('not used');
    },
  } as unknown as FetchEvent;
}

/**
 * Waits until the after-response work of the runs so far (a timer, then a cache lookup or a store
 * call) is done, as in a sandbox that finishes a request before it takes the next: awaited, not a
 * fixed pause, so a busy machine cannot start the next request early.
 */
async function settle(pending: Promise<unknown>[]): Promise<void> {
  await Promise.allSettled(pending.splice(0));
}

async function timed(run: () => Promise<Response>): Promise<{ ms: number; response: Response }> {
  const started = performance.now();
  const response = await run();
  return { ms: performance.now() - started, response };
}

/** One request of a sequence (see runSequence): cookies come from its jar, and what it sets goes back in. */
interface Step {
  readonly method?: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly jar?: string;
}

/**
 * `POST /__reuse-sim/sequence` with `{"steps": [...]}`: the steps run one after another through
 * the room in this one instance, as a reused sandbox serves its requests, each with the cookies
 * of its jar (a visitor's browser). Answers `{"results": [{status, origin, setCookies, body}]}`.
 * For the tests of reuse (test/sandbox-reuse.test.ts).
 */
async function runSequence(event: FetchEvent): Promise<Response> {
  const { steps } = (await event.request.json()) as { steps: Step[] };
  /** Each jar's Cookie header. */
  const jars = new Map<string, string | undefined>();
  const pending: Promise<unknown>[] = [];
  const results = [];
  for (const step of steps) {
    const headers = new Headers(step.headers ?? {});
    const held = step.jar === undefined ? undefined : jars.get(step.jar);
    if (held !== undefined) headers.set('cookie', held);
    const request = new Request(new URL(step.path, event.request.url).toString(), { method: step.method ?? 'GET', headers });
    const response = await handleFastlyRequest(eventFor(event, request, pending));
    const body = await response.text();
    const setCookies = response.headers.getSetCookie();
    if (step.jar !== undefined) jars.set(step.jar, keepCookies(held, setCookies));
    results.push({ status: response.status, origin: response.headers.get('x-origin'), setCookies, body: body.slice(0, 2000) });
    // The request's after-response work runs before the next, as in a sandbox.
    await settle(pending);
  }
  return new Response(JSON.stringify({ results }), { headers: { 'content-type': 'application/json' } });
}

async function simulate(event: FetchEvent): Promise<Response> {
  if (event.request.method === 'POST' && new URL(event.request.url).pathname === '/__reuse-sim/sequence') return runSequence(event);
  // Anything else (the admit API, a form) is served once, untimed.
  if (event.request.method !== 'GET') return handleFastlyRequest(event);
  const bare = await timed(() => fetch(copyOf(event.request), { backend: 'origin' }));
  await bare.response.arrayBuffer();
  const pending: Promise<unknown>[] = [];
  const first = await timed(() => handleFastlyRequest(eventFor(event, copyOf(event.request), pending)));
  await first.response.arrayBuffer();
  // The first request's after-response work runs before the second.
  await settle(pending);
  const second = await timed(() => handleFastlyRequest(event));
  const headers = new Headers(second.response.headers);
  headers.set(HEADER, `bare=${bare.ms.toFixed(3)};first=${first.ms.toFixed(3)};second=${second.ms.toFixed(3)}`);
  return new Response(second.response.body, { status: second.response.status, statusText: second.response.statusText, headers });
}

addEventListener('fetch', (event) => event.respondWith(simulate(event)));
