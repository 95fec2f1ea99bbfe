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
 *   address, and so is a 6to4 address (2002::/16): its /48 belongs to that one IPv4 host. An
 *   unknown or unparseable address shares the one key `unknown`.
 * - A native IPv6 client is also counted under its site, its /48 (see clientSiteKey), allowed
 *   SITE_ALLOWANCE_MULTIPLE × the per-client limit: an ISP hands a subscriber a /56 or a /48, so
 *   a /64 of its own for each guess would otherwise buy 256 or 65,536 allowances. A site over its
 *   allowance is held as a client is; IPv4 clients count once, as before.
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
 * - Per account too (a console account's name, see accounts.ts): guesses at one account from many
 *   addresses are counted under `account:<name>` (the name without case), and the account is held
 *   after ACCOUNT_ALLOWANCE_MULTIPLE × `auth_failure_limit` of them within the window, wherever
 *   they came from; then its right password is refused too, from every client, until the hold
 *   ends. The multiple keeps one guesser from holding an operator's account as easily as its own
 *   address; other accounts sign in as before. A name that no account has is counted the same way,
 *   so the answers do not tell which names exist.
 */
import type { Config } from './config';
import { errorResponse } from './http';
import { embeddedIpv4, parseIp } from './ip';
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
  /** The account name a Basic-Auth sign-in gave (counted and held per account too); none for the API token. */
  readonly account?: string | undefined;
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
 * How many times a client's allowance (`ticket_limit`, `auth_failure_limit`) a site, an IPv6 /48,
 * gets in all. A /48 is what an ISP may give one subscriber, and what one organisation's networks
 * share; a carrier's pool may put many subscribers' /64s in one /48 too, so the site gets the
 * allowance of 16 clients: a /48 or /56 holder rotating its /64s gets 16 × the allowance, not
 * 65,536 ×, and a /48 of real visitors (each joining once) is not held before its 16 × 60th new
 * ticket in 10 s with the defaults.
 */
export const SITE_ALLOWANCE_MULTIPLE = 16;

/** How many times `auth_failure_limit` an account's failures may reach, from all clients, before it is held. */
export const ACCOUNT_ALLOWANCE_MULTIPLE = 3;

/** The key an account's failures are counted and held under. */
export const accountKey = (name: string): string => `account:${name.toLowerCase()}`;

/**
 * A client's key: its IPv4 address (or, with `ipv4Prefix` 24, its /24 as `192.0.2.0/24`), also
 * for an IPv4-mapped or 6to4 address (see embeddedIpv4), or its IPv6 /64 as `2001:db8:1:2::/64`.
 */
export function clientKey(address: string | undefined, ipv4Prefix: 24 | 32 = 32): string {
  if (address === undefined) return UNKNOWN_CLIENT;
  const ip = parseIp(address.trim());
  if (ip === undefined) return UNKNOWN_CLIENT;
  const v4 = embeddedIpv4(ip);
  if (v4 !== undefined) return ipv4Prefix === 24 ? `${v4[0]}.${v4[1]}.${v4[2]}.0/24` : `${v4[0]}.${v4[1]}.${v4[2]}.${v4[3]}`;
  return `${ipv6Words(ip.bytes, 4)}::/64`;
}

/**
 * A native IPv6 client's site, its /48 as `2001:db8:1::/48`, counted beside its client key with
 * SITE_ALLOWANCE_MULTIPLE × the allowance; undefined for a client whose key is an IPv4 address
 * already (IPv4, IPv4-mapped, 6to4) or is not known.
 */
export function clientSiteKey(address: string | undefined): string | undefined {
  if (address === undefined) return undefined;
  const ip = parseIp(address.trim());
  if (ip === undefined || embeddedIpv4(ip) !== undefined) return undefined;
  return `${ipv6Words(ip.bytes, 3)}::/48`;
}

function ipv6Words(b: Uint8Array, count: number): string {
  const words: string[] = [];
  for (let i = 0; i < count * 2; i += 2) words.push((((b[i] ?? 0) << 8) | (b[i + 1] ?? 0)).toString(16));
  return words.join(':');
}

const REASONS: Record<Credential, { readonly missing: string; readonly wrong: string; readonly held: string }> = {
  admin: { missing: 'admin_no_credentials', wrong: 'admin_bad_credentials', held: 'admin_held' },
  api: { missing: 'api_no_token', wrong: 'api_bad_token', held: 'api_held' },
};

/** The 429 a held client gets. */
export function heldResponse(settings: ThrottleSettings, what: 'client' | 'account' = 'client'): Response {
  const minutes = settings.authPenaltyMinutes;
  const span = `${minutes} ${minutes === 1 ? 'minute' : 'minutes'}`;
  return errorResponse(
    429,
    what === 'client'
      ? `too many failed sign-ins from your address: it is held for up to ${span}, and sign-ins from it are refused until then`
      : `too many failed sign-ins for this account: it is held for up to ${span}, and its sign-ins are refused until then (other accounts sign in as before)`,
    { 'retry-after': String(minutes * 60) },
  );
}

/** An error's message for a log line, whatever was thrown. */
export const describeError = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Runs `check` (the constant-time comparison) unless the client is held, and counts a wrong
 * credential. Sets the log's reason and, for a failure or a held client, its client key.
 */
export async function guardSignIn(guard: SignInGuard, credential: Credential, check: () => CredentialCheck | Promise<CredentialCheck>): Promise<SignIn> {
  const { limiter, settings, trace } = guard;
  const reasons = REASONS[credential];
  const key = clientKey(guard.address);
  const site = clientSiteKey(guard.address);
  const account = guard.account === undefined ? undefined : accountKey(guard.account);
  let unavailable: string | undefined;
  if (limiter !== undefined) {
    try {
      const held = (await limiter.isHeld(key)) ? key : site !== undefined && (await limiter.isHeld(site)) ? site : undefined;
      if (held !== undefined) {
        trace.reason = `${reasons.held}: too many failed sign-ins${held === site ? ' from its /48' : ''}; not checked`;
        trace.client = held;
        return { kind: 'held', response: heldResponse(settings) };
      }
      if (account !== undefined && (await limiter.isHeld(account))) {
        trace.reason = `${reasons.held}: too many failed sign-ins for ${account}; not checked`;
        trace.client = key;
        return { kind: 'held', response: heldResponse(settings, 'account') };
      }
    } catch (error) {
      unavailable = `throttle unavailable: ${describeError(error)}`;
    }
  }
  const result = await check();
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
    if (failures >= settings.authFailureLimit) {
      await limiter.hold(key, settings.authPenaltyMinutes);
      trace.reason = `${counted}; held for ${settings.authPenaltyMinutes} min`;
      return { kind: 'held', response: heldResponse(settings) };
    }
    if (site !== undefined) {
      const siteLimit = settings.authFailureLimit * SITE_ALLOWANCE_MULTIPLE;
      const siteFailures = await limiter.countFailure(site, window);
      if (siteFailures >= siteLimit) {
        await limiter.hold(site, settings.authPenaltyMinutes);
        trace.reason = `${reasons.wrong}: failure ${siteFailures} of ${siteLimit} from its /48 in ${window} s; held for ${settings.authPenaltyMinutes} min`;
        trace.client = site;
        return { kind: 'held', response: heldResponse(settings) };
      }
    }
    if (account !== undefined) {
      const accountLimit = settings.authFailureLimit * ACCOUNT_ALLOWANCE_MULTIPLE;
      const accountFailures = await limiter.countFailure(account, window);
      if (accountFailures >= accountLimit) {
        await limiter.hold(account, settings.authPenaltyMinutes);
        trace.reason = `${reasons.wrong}: failure ${accountFailures} of ${accountLimit} for ${account} in ${window} s; held for ${settings.authPenaltyMinutes} min`;
        return { kind: 'held', response: heldResponse(settings, 'account') };
      }
    }
    trace.reason = counted;
    return { kind: 'wrong' };
  } catch (error) {
    trace.reason = `${reasons.wrong}; throttle unavailable: ${describeError(error)}`;
    return { kind: 'wrong' };
  }
}
