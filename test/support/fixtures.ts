/** Settings, secrets and small fakes shared by the tests (fakes inject time and faults only). */
import { createHash, createHmac } from 'node:crypto';
import { parseConfig, parseSecrets, type SettingSource } from '../../src/core/config';
import { createHandler, type Handler, type HandlerDeps } from '../../src/core/handler';
import type { Clock, Logger, Origin, OriginHeaders, QueueStore, RequestLog, VipCode } from '../../src/core/ports';
import { MemoryStateCache } from '../../src/platform/memory-cache';

export const KEY_1 = 'test-key-one-0123456789abcdefghijklmnop';
export const KEY_2 = 'test-key-two-0123456789abcdefghijklmnop';
export const ADMIN_PASSWORD = 'test-admin-password';
export const API_TOKEN = 'test-origin-api-token-0123456789';

/**
 * The HMAC key a token kind is signed with, derived here with node:crypto, independently of the
 * code under test (crypto.subtle): HMAC-SHA256(ring secret, "wr/v1/" + purpose).
 */
export function purposeKey(secret: string, purpose: 'waiting' | 'access' | 'admin-form' | 'bypass' | 'proof' | 'admission' | 'admin-notice'): Buffer {
  return createHmac('sha256', secret).update(`wr/v1/${purpose}`).digest();
}

export function source(values: Record<string, string>): SettingSource {
  return (key) => values[key];
}

/** Most tests look at decisions, so the per-POP cache is off unless a test turns it on. */
export const BASE_SETTINGS: Record<string, string> = {
  queue_name: 'default',
  state_cache_seconds: '0',
  refresh_seconds: '5',
  queue_timeout_seconds: '60',
  session_seconds: '600',
};

/** Test-only admission keys (P-256 private JWKs; see src/core/admission.ts). */
export const ADMISSION_KEY_1 = {"kid": "test-adm-1", "kty": "EC", "x": "YoanHRiPfN5KhR4_wHFYgOWgTVdYY1DE4UCojnkpyL4", "y": "_JS4xWuMkKKfmnvsL-_BywyyWKqVVv5bkS2cOuYTAkI", "crv": "P-256", "d": "tUL89AP5L_oDP6dcATaY7wVnPpYOwf7gnCTX8u4Qmgc"};
export const ADMISSION_KEY_2 = {"kid": "test-adm-2", "kty": "EC", "x": "lXdEepLOARMvUGD7I92GAkwHghsmgtngM82D6sESNIc", "y": "Pzk4axknGfHf-9DtCyreKk3jQGe7SNOvFfUwKyEyh2o", "crv": "P-256", "d": "CQ23msLIJvWm8tDJJwPs3OYH59kGHl5doyUsANc9gOw"};

/** Console accounts' passwords, and the `admin_accounts` secret of their hashes (1,000 iterations, fixed salts). */
export const ACCOUNT_PASSWORDS = { vera: 'vera-views-9f3k2q', otto: 'otto-operates-7h2m', ada: 'ada-administers-4x8p' } as const;
export const ACCOUNTS_SECRET = JSON.stringify({
  vera: { role: 'viewer', hash: 'pbkdf2-sha256$1000$LMaHbZGEiB30olNX80UCGw$m-WZvN3KQXYjwHz3dGVWUGp4PsXEXaQxc48N78Zoysc' },
  otto: { role: 'operator', hash: 'pbkdf2-sha256$1000$cV5jNvPELfbqD0Mqa1j2cA$7-hR_qj_uv4ppl77iH2JFUJv2VkPyOsDsLoDcl7irFo' },
  ada: { role: 'admin', hash: 'pbkdf2-sha256$1000$FTFZFQD6egSyLzPccSsZ5g$MkzJsTtam9qfzeTRL8SokpjFI-RtdVeCKuP8Y4PcTTE' },
});

export const BASE_SECRETS: Record<string, string> = {
  signing_keys: `k1:${KEY_1}`,
  admin_password: ADMIN_PASSWORD,
  admin_api_token: API_TOKEN,
  upstash_token: 'test-upstash-token',
  // The fake challenge provider's secret (test/support/fake-siteverify.ts).
  challenge_secret: 'secret',
  admission_keys: JSON.stringify([ADMISSION_KEY_1]),
};

export class ManualClock implements Clock {
  constructor(public ms = Date.UTC(2026, 10, 22, 12, 0, 0)) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export class MemoryLogger implements Logger {
  readonly records: RequestLog[] = [];
  log(record: RequestLog): void {
    this.records.push(record);
  }
  get last(): RequestLog | undefined {
    return this.records.at(-1);
  }
}

/** An origin that answers from memory and records what reached it. */
export class RecordingOrigin implements Origin {
  readonly requests: Request[] = [];
  /** The headers each request was sent with (the signed admission added, a client's copy removed). */
  readonly sent: Headers[] = [];
  async forward(request: Request, replace?: OriginHeaders): Promise<Response> {
    this.requests.push(request);
    const sent = new Headers(request.headers);
    for (const name of replace?.drop ?? []) sent.delete(name);
    if (replace?.set !== undefined) sent.set(replace.set.name, replace.set.value);
    this.sent.push(sent);
    return new Response(`origin saw ${new URL(request.url).pathname}`, { status: 200, headers: { 'x-origin': 'yes' } });
  }
}

/** Counts store calls and can be switched to fail, wrapping a real store. */
export class FaultyStore implements QueueStore {
  calls = 0;
  mode: 'ok' | 'error' | 'hang' = 'ok';
  constructor(private readonly inner: QueueStore) {}
  private gate<T>(call: () => Promise<T>): Promise<T> {
    this.calls++;
    if (this.mode === 'error') return Promise.reject(new Error('store is down'));
    if (this.mode === 'hang') return new Promise<T>(() => {});
    return call();
  }
  join: QueueStore['join'] = (...a) => this.gate(() => this.inner.join(...a));
  poll: QueueStore['poll'] = (...a) => this.gate(() => this.inner.poll(...a));
  claim: QueueStore['claim'] = (...a) => this.gate(() => this.inner.claim(...a));
  touch: QueueStore['touch'] = (...a) => this.gate(() => this.inner.touch(...a));
  leave: QueueStore['leave'] = (...a) => this.gate(() => this.inner.leave(...a));
  admit: QueueStore['admit'] = (...a) => this.gate(() => this.inner.admit(...a));
  control: QueueStore['control'] = (...a) => this.gate(() => this.inner.control(...a));
  stats: QueueStore['stats'] = (...a) => this.gate(() => this.inner.stats(...a));
  draw: QueueStore['draw'] = (...a) => this.gate(() => this.inner.draw(...a));
  history: QueueStore['history'] = (...a) => this.gate(() => this.inner.history(...a));
  record = (...a: Parameters<NonNullable<QueueStore['record']>>): ReturnType<NonNullable<QueueStore['record']>> => this.gate(() => this.inner.record?.(...a) ?? Promise.resolve([]));
  reset: QueueStore['reset'] = (...a) => this.gate(() => this.inner.reset(...a));
  peek: QueueStore['peek'] = (...a) => this.gate(() => this.inner.peek(...a));
  createVips: QueueStore['createVips'] = (...a) => this.gate(() => this.inner.createVips(...a));
  useVip: QueueStore['useVip'] = (...a) => this.gate(() => this.inner.useVip(...a));
  appendAudit: QueueStore['appendAudit'] = (...a) => this.gate(() => this.inner.appendAudit(...a));
  readAudit: QueueStore['readAudit'] = (...a) => this.gate(() => this.inner.readAudit(...a));
}

/** One VIP code made through the store's batch call (its only way to make codes): its one flag. */
export async function createVip(store: Pick<QueueStore, 'createVips'>, queue: string, codeHash: string, code: VipCode, nowMs: number): Promise<boolean> {
  const flags = await store.createVips(queue, [codeHash], code, nowMs);
  if (flags.length !== 1) throw new Error(`createVips answered ${flags.length} flags for one code`);
  return flags[0]!;
}

/** The value of our cookie in a response's Set-Cookie headers, if any. */
export function cookieFrom(response: Response, name = 'waiting_room'): string | undefined {
  for (const header of response.headers.getSetCookie()) {
    const [pair] = header.split(';');
    if (pair?.startsWith(`${name}=`)) return pair.slice(name.length + 1);
  }
  return undefined;
}

/** Decodes a compact JWS payload without verifying it (for assertions only). */
export function payloadOf(token: string): Record<string, unknown> {
  const part = token.split('.')[1] ?? '';
  return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
}

export function base64url(value: unknown): string {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

/**
 * A handler over BASE_SETTINGS with `settings` on top and BASE_SECRETS, a recording origin, a
 * logger that keeps its lines and a per-POP cache in memory on `deps.clock`, unless `deps` says
 * otherwise.
 */
export function testHandler(settings: Record<string, string>, deps: Pick<HandlerDeps, 'store' | 'clock'> & Partial<HandlerDeps>): Handler {
  return createHandler({
    config: parseConfig(source({ ...BASE_SETTINGS, ...settings })),
    secrets: parseSecrets(source(BASE_SECRETS)),
    origin: new RecordingOrigin(),
    logger: new MemoryLogger(),
    cache: new MemoryStateCache(deps.clock),
    ...deps,
  });
}


/**
 * A proof-of-work solution found here with node:crypto, independently of the code under test: the
 * first counter whose SHA-256 of `<nonce>:<counter>` starts with `bits` zero bits (see proof-of-work.ts).
 */
export function solveProofOfWork(nonce: string, bits: number): number {
  for (let counter = 0; ; counter++) {
    const digest = createHash('sha256').update(`${nonce}:${counter}`).digest();
    let zeros = 0;
    for (const byte of digest) {
      if (byte === 0) zeros += 8;
      else {
        zeros += Math.clz32(byte) - 24;
        break;
      }
    }
    if (zeros >= bits) return counter;
  }
}
