/**
 * Throttling of password and token guessing, for the admin's Basic Auth and the origin's bearer
 * token. Before a credential is compared, the client is looked up in the penalty box: a held client
 * gets a 429 and its attempt is not compared at all, so guessing while held learns nothing. Each
 * wrong credential is counted for its client and logged (reason, client key, path; never what was
 * sent); the failure that reaches `auth_failure_limit` within `auth_failure_window_seconds` holds
 * the client for `auth_penalty_minutes`. The limit is per client: everyone else signs in as before.
 *
 * Choices:
 * - A held client's right password is refused too (429, not compared): it is held, not signed in.
 *   Accepting it would mean comparing while held, which is what holding is meant to stop.
 * - A client is its address; an IPv6 client is its /64, since one subscriber usually holds a whole
 *   /64 and could otherwise rotate through 2^64 addresses. An IPv4-mapped IPv6 address is its IPv4
 *   address. An unknown or unparseable address shares the one key `unknown`.
 * - One count and one hold per client for both credentials: guessing the token is the same threat
 *   as guessing the password, and a client held for one is held for the other.
 * - Only a credential that was sent and is wrong counts. A request without one (a browser's first
 *   request, which draws the 401 challenge) guesses nothing.
 * - A right credential does not clear the count: Fastly's rate counter cannot be decremented, and
 *   the window is at most a minute.
 * - Concurrent attempts that were all looked up before the first of their failures was counted are
 *   all compared: a burst sent at once gets at most its own size of guesses, then the client is held.
 * - When the limiter fails, the credential is compared as if there were no throttle, and the log
 *   line says so: an outage of a protection must not lock the operator out.
 * - `Retry-After` is the whole penalty: Fastly's penalty box says whether a client is held, not
 *   until when, so it is an upper bound.
 */
import type { Config } from './config';
import { errorResponse } from './http';
import { parseIp } from './ip';
import type { FailureLimiter } from './ports';

/** Which credential was tried: the admin's Basic-Auth password or the origin's bearer token. */
export type Credential = 'admin' | 'api';

/** What comparing the credential found. */
export type CredentialCheck = 'ok' | 'missing' | 'wrong';

export type ThrottleSettings = Pick<Config, 'authFailureLimit' | 'authFailureWindowSeconds' | 'authPenaltyMinutes'>;

/** The request's log fields the throttle fills in. */
export interface ThrottleTrace {
  reason?: string;
  client?: string;
}

export interface SignInGuard {
  /** None: failures are logged but nobody is held (unit tests of other parts). */
  readonly limiter: FailureLimiter | undefined;
  readonly settings: ThrottleSettings;
  /** The client's address as the platform reports it. */
  readonly address: string | undefined;
  readonly trace: ThrottleTrace;
}

/** The outcome of one sign-in: `held` carries the 429 to answer. */
export type SignIn =
  | { readonly kind: 'ok' }
  | { readonly kind: 'missing' }
  | { readonly kind: 'wrong' }
  | { readonly kind: 'held'; readonly response: Response };

/** The key a client is counted and held under, for the log too. */
export const UNKNOWN_CLIENT = 'unknown';

/**
 * A client's key: its IPv4 address (or, with `ipv4Prefix` 24, its /24 as `192.0.2.0/24`), or its
 * IPv6 /64 as `2001:db8:1:2::/64`.
 */
export function clientKey(address: string | undefined, ipv4Prefix: 24 | 32 = 32): string {
  if (address === undefined) return UNKNOWN_CLIENT;
  const ip = parseIp(address.trim());
  if (ip === undefined) return UNKNOWN_CLIENT;
  const b = ip.bytes;
  // Mapped IPv4 (`::ffff:a.b.c.d`) is how a dual-stack socket reports an IPv4 client.
  if (b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) {
    return ipv4Prefix === 24 ? `${b[12]}.${b[13]}.${b[14]}.0/24` : `${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  }
  const words: string[] = [];
  for (let i = 0; i < 8; i += 2) words.push((((b[i] ?? 0) << 8) | (b[i + 1] ?? 0)).toString(16));
  return `${words.join(':')}::/64`;
}

const REASONS: Record<Credential, { readonly missing: string; readonly wrong: string; readonly held: string }> = {
  admin: { missing: 'admin_no_credentials', wrong: 'admin_bad_credentials', held: 'admin_held' },
  api: { missing: 'api_no_token', wrong: 'api_bad_token', held: 'api_held' },
};

/** The 429 a held client gets. */
export function heldResponse(settings: ThrottleSettings): Response {
  const minutes = settings.authPenaltyMinutes;
  return errorResponse(
    429,
    `too many failed sign-ins from your address: it is held for up to ${minutes} ${minutes === 1 ? 'minute' : 'minutes'}, and sign-ins from it are refused until then`,
    { 'retry-after': String(minutes * 60) },
  );
}

/** An error's message for a log line, whatever was thrown. */
export const describeError = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Runs `check` (the constant-time comparison) unless the client is held, and counts a wrong
 * credential. Sets the log's reason and, for a failure or a held client, its client key.
 */
export async function guardSignIn(guard: SignInGuard, credential: Credential, check: () => CredentialCheck): Promise<SignIn> {
  const { limiter, settings, trace } = guard;
  const reasons = REASONS[credential];
  const key = clientKey(guard.address);
  let unavailable: string | undefined;
  if (limiter !== undefined) {
    try {
      if (await limiter.isHeld(key)) {
        trace.reason = `${reasons.held}: too many failed sign-ins; not checked`;
        trace.client = key;
        return { kind: 'held', response: heldResponse(settings) };
      }
    } catch (error) {
      unavailable = `throttle unavailable: ${describeError(error)}`;
    }
  }
  const result = check();
  if (result === 'ok') {
    if (unavailable !== undefined) trace.reason = unavailable;
    return { kind: 'ok' };
  }
  if (result === 'missing') {
    trace.reason = unavailable === undefined ? reasons.missing : `${reasons.missing}; ${unavailable}`;
    return { kind: 'missing' };
  }
  trace.client = key;
  if (limiter === undefined || unavailable !== undefined) {
    trace.reason = unavailable === undefined ? reasons.wrong : `${reasons.wrong}; ${unavailable}`;
    return { kind: 'wrong' };
  }
  const window = settings.authFailureWindowSeconds;
  try {
    const failures = await limiter.countFailure(key, window);
    const counted = `${reasons.wrong}: failure ${failures} of ${settings.authFailureLimit} in ${window} s`;
    if (failures < settings.authFailureLimit) {
      trace.reason = counted;
      return { kind: 'wrong' };
    }
    await limiter.hold(key, settings.authPenaltyMinutes);
    trace.reason = `${counted}; held for ${settings.authPenaltyMinutes} min`;
    return { kind: 'held', response: heldResponse(settings) };
  } catch (error) {
    trace.reason = `${reasons.wrong}; throttle unavailable: ${describeError(error)}`;
    return { kind: 'wrong' };
  }
}
