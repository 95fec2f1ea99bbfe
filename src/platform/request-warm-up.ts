/**
 * One admitted visitor's request, run through the core when the wasm is built, so that no request
 * pays for what the engine does the first time code runs. js-compute-runtime keeps the memory its
 * build-time run leaves as the initial state of every instance; each request then starts with the
 * settings parser, the service builder, jose's signing and verifying and the visit path already
 * run once, and what the engine does the first time code runs is done (a request's first check of
 * its settings took 0.56 ms with the warm-up, 0.90 ms without). Measured on the Compute host stand-in, the two builds side by side in four runs of 200-300
 * admitted requests each: the wasm's run after instantiation 0.5-1.5 ms shorter (11.0 → 9.6 ms in
 * the last), for 0.1 MB more initial memory (docs/benchmarks.md).
 *
 * Nothing it makes is kept: the service, key and token are thrown away, and the service's ports
 * are local fakes that make no hostcall (none exist at build time). The engine refuses `Request`
 * and `Response` until a request runs, so the request is a plain object with what an admitted
 * visitor's path reads (URL, method, engine `Headers`) and the origin's answer one with what the
 * path reads of it; an access token in the cookie means no `Response` is made. A warm-up that
 * fails costs requests their time, nothing else: `requestWarmUp` says how far it got, and the
 * engine checks (test/engine/checks.ts) fail the build of their wasm when it does not finish.
 */
import { parseSecretsOnDemand, parseSettingsDocument } from '../core/config';
import { buildWithLastValid } from '../core/last-valid';
import type { FailureLimiter, QueueStore, StateCache } from '../core/ports';
import { signToken } from '../core/tokens';

/** A throwaway key ring entry, used for nothing but this run (it is not in any configuration). */
const WARM_UP_KEY = 'warm-up:build-time only; signs nothing that is kept 5f1c';
const WARM_UP_QUEUE = 'default';

const unlimited: FailureLimiter = {
  isHeld: async () => false,
  countFailure: async () => 0,
  hold: async () => undefined,
  countOf: async () => 0,
};
const noCache: StateCache = {
  getOrLoad: async (_key, _ttl, load) => ({ value: await load(), hit: false }),
  put: async () => undefined,
  peek: async () => undefined,
};
/** An admitted visitor's request never calls the store; any call is refused. */
const noStore = new Proxy({} as QueueStore, {
  // Not `then`: the store must not look like a promise to anything that awaits it.
  get: (_target, name) => (name === 'then' ? undefined : () => Promise.reject(new Error('the build-time warm-up has no store'))),
});

export interface WarmUpReport {
  /** The steps finished, in order: `service`, `token`, `admitted visitor`. */
  readonly steps: readonly string[];
  /** Why it stopped short, when it did. */
  readonly error: string | undefined;
}

async function warmUp(steps: string[]): Promise<void> {
  const document = parseSettingsDocument(JSON.stringify({ queue_name: WARM_UP_QUEUE, admit_per_period: '10' }));
  const secrets = new Map([['signing_keys', WARM_UP_KEY]]);
  const built = await buildWithLastValid(
    document.source,
    (key) => secrets.get(key),
    {
      store: noStore,
      origin: {
        forward: async () => ({ status: 200, statusText: 'OK', headers: new Headers({ 'content-type': 'text/html' }), body: null }) as unknown as Response,
      },
      logger: { log: (record) => void JSON.stringify(record) },
      clock: { now: () => Date.now() },
      cache: noCache,
      authLimiter: unlimited,
      ticketLimiter: unlimited,
      meterName: 'WARM',
      readSecrets: (source) => parseSecretsOnDemand(source),
    },
    { recall: async () => undefined, remember: async () => undefined, holds: async () => true },
    document.problems,
    () => undefined,
  );
  const { service } = built;
  steps.push('service');
  const iat = Math.floor(Date.now() / 1000);
  const token = await signToken(service.secrets.keyRing, { q: WARM_UP_QUEUE, k: 'a', t: 1, iat, exp: iat + 600, j: iat, s: iat, gen: 1 });
  steps.push('token');
  const request = {
    url: 'https://warm-up.invalid/products',
    method: 'GET',
    headers: new Headers({ cookie: `${service.config.cookieName}=${token}`, accept: 'text/html', 'user-agent': 'Mozilla/5.0 (warm-up)' }),
    body: null,
  } as unknown as Request;
  const response = await service.handler(request, { address: '192.0.2.1', pop: 'WARM' });
  if (response.status !== 200) throw new Error(`the admitted visitor got ${response.status}`);
  steps.push('admitted visitor');
}

const steps: string[] = [];
export const requestWarmUp: Promise<WarmUpReport> = warmUp(steps).then(
  () => ({ steps, error: undefined }),
  (error: unknown) => ({ steps, error: error instanceof Error ? error.message : String(error) }),
);
