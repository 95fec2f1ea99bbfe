/**
 * A proof-of-work gate before a ticket (`pow_difficulty` > 0): a visitor without a valid solution
 * gets a challenge instead of a ticket, and only a request that carries a solution to a challenge
 * made for it takes one. Self-contained (no third party) and cheap at the edge: checking a solution
 * is one signature check and one SHA-256; finding one costs the client about 2^difficulty hashes.
 *
 * The challenge is a signed token (kind `h`, its own derived key) carrying a random 128-bit nonce,
 * the difficulty, and the client it was made for (the first 64 bits of SHA-256 of the queue and the
 * client's key, so a solution found on one address is worth nothing on another); it lives
 * POW_LIFETIME_SECONDS. A solution is a counter `c` such that SHA-256(`<nonce>:<c>`) begins with
 * `difficulty` zero bits. The holding page's script finds one and sends it back in the cookie
 * `<cookie_name>_pow` as `<challenge>~<c>`. A solution is spent once: its nonce is then marked in
 * the POP's cache for longer than the challenge lives (per POP on Fastly, which is where the same
 * client comes back), so a replay gets a new challenge, not a second ticket. The mark is the
 * cache's load-once (see spentOnce): of copies sent at the same moment, one spends it.
 */
import { clientKey } from './auth-throttle';
import { hex, randomHex, sha256 } from './bytes';
import type { Config } from './config';
import type { StateCache } from './ports';
import { signToken, verifyToken, type KeyRing } from './tokens';
import type { PowChallenge } from './types';

/** How long a challenge can be answered, seconds. */
export const POW_LIFETIME_SECONDS = 120;

/** How long a spent nonce is remembered, seconds: longer than a challenge lives. */
const SPENT_SECONDS = 180;

/**
 * Spends a nonce: true for the one call that spends it, false for every later one and every one
 * made at the same moment. A check-then-mark in two steps (the ticket limiter's penalty box, as
 * before) let copies of one solution sent at once pass together (3 tickets of 20 copies on the
 * Compute host stand-in); the cache's getOrLoad runs one load for all concurrent callers in a POP
 * (SimpleCache.getOrSet on Fastly, one pending load in the Node host's memory).
 */
export interface SpendOnce {
  spend(nonce: string): Promise<boolean>;
}

export function spentOnce(cache: StateCache, queue: string): SpendOnce {
  return {
    async spend(nonce) {
      const { hit } = await cache.getOrLoad(`pow-spent:${queue}:${nonce}`, SPENT_SECONDS, async () => true);
      return !hit;
    },
  };
}

/** A solution's counter: up to 12 decimal digits (far more than 2^32 tries). */
const COUNTER = /^[0-9]{1,12}$/;

export type PowSettings = Pick<Config, 'queueName' | 'powDifficulty' | 'clientIpv4Prefix' | 'cookieName'>;

export type PowCheck = { readonly ok: true; readonly nonce: string } | { readonly ok: false; readonly reason: string };

/** The name of the cookie a solution is sent in. */
export function powCookieName(settings: Pick<Config, 'cookieName'>): string {
  return `${settings.cookieName}_pow`;
}

/** The client a challenge is made for: 16 hex digits of SHA-256(queue | client key). */
export async function clientTag(settings: PowSettings, address: string | undefined): Promise<string> {
  return hex((await sha256(`${settings.queueName}|${clientKey(address, settings.clientIpv4Prefix)}`)).subarray(0, 8));
}

/** How many zero bits a digest begins with. */
export function leadingZeroBits(bytes: Uint8Array): number {
  let bits = 0;
  for (const byte of bytes) {
    if (byte === 0) {
      bits += 8;
      continue;
    }
    return bits + Math.clz32(byte) - 24;
  }
  return bits;
}

/** A new challenge for this client. */
export async function issueChallenge(ring: KeyRing, settings: PowSettings, address: string | undefined, nowMs: number): Promise<PowChallenge> {
  const iat = Math.floor(nowMs / 1000);
  const n = randomHex(16);
  const challenge = await signToken(ring, {
    q: settings.queueName,
    k: 'h',
    t: 0,
    iat,
    exp: iat + POW_LIFETIME_SECONDS,
    n,
    d: settings.powDifficulty,
    o: await clientTag(settings, address),
  });
  return { challenge, nonce: n, difficulty: settings.powDifficulty, cookie: powCookieName(settings) };
}

/**
 * Checks the solution a request carries (the cookie's value, or undefined): signed by us for this
 * queue, unexpired, made for this client at the difficulty in force or above, the hash right, and
 * not spent before. A good solution is spent here. The reason names what failed, for the log.
 */
export async function checkSolution(
  ring: KeyRing,
  settings: PowSettings,
  spent: SpendOnce | undefined,
  solution: string | undefined,
  address: string | undefined,
  nowMs: number,
): Promise<PowCheck> {
  if (solution === undefined || solution === '') return { ok: false, reason: 'pow_missing' };
  const tilde = solution.lastIndexOf('~');
  const token = solution.slice(0, Math.max(0, tilde));
  const counter = solution.slice(tilde + 1);
  if (tilde < 1 || !COUNTER.test(counter)) return { ok: false, reason: 'pow_malformed' };
  const verified = await verifyToken(ring, token, settings.queueName, nowMs, ['h']);
  if (!verified.ok) return { ok: false, reason: `pow_bad_challenge: ${verified.reason}` };
  const { n, d, o } = verified.claims;
  if (n === undefined || d === undefined || o === undefined) return { ok: false, reason: 'pow_bad_challenge: bad_claims' };
  if (o !== (await clientTag(settings, address))) return { ok: false, reason: 'pow_wrong_client' };
  if (d < settings.powDifficulty) return { ok: false, reason: `pow_too_easy: ${d} bits, ${settings.powDifficulty} asked` };
  const bits = leadingZeroBits(await sha256(`${n}:${counter}`));
  if (bits < d) return { ok: false, reason: `pow_wrong_solution: ${bits} of ${d} zero bits` };
  if (spent !== undefined) {
    let first = true;
    try {
      first = await spent.spend(n);
    } catch {
      // A cache that fails cannot remember spent solutions: the solution counts once more, and the
      // ticket limit (if it answers) still bounds the client.
    }
    if (!first) return { ok: false, reason: 'pow_reused' };
  }
  return { ok: true, nonce: n };
}
