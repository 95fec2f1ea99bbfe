/**
 * Verified tokens remembered for their lifetime, so that a long-lived host (the Node host, or a
 * reused Fastly instance) checks an admitted visitor's cookie with a map lookup instead of an HMAC
 * on every request (the signature check was the largest part of the time an admitted request adds).
 *
 * The cache never accepts what verifyToken would refuse:
 * - it is keyed by the whole token text, so any other bytes (a forged or altered variant of a
 *   cached token) miss and go through the full verification;
 * - only tokens that verified are kept, with the ring key that checked them: an entry is used only
 *   while the ring passed in still holds that same key under that kid, so removing a kid (the
 *   emergency reset) or giving it another secret (a new ring) refuses its tokens at once;
 * - an entry is dropped when its `exp` is reached (the same second test as jose's, no tolerance);
 * - queue and kind are checked on every use, in verifyToken's order (kind, then queue).
 * Bounded: the least recently used entry goes when it is full.
 */
import { verifyTokenBy, type KeyRing, type SigningKey, type TokenClaims, type TokenKind, type VerifyResult } from './tokens';

export interface TokenVerifier {
  /** verifyToken's answer, from the cache when the token verified before and still would. */
  verify(ring: KeyRing, token: string, queue: string, nowMs: number, kinds: readonly TokenKind[]): Promise<VerifyResult>;
  /** verify's answer when the token is remembered and still valid, else undefined: a lookup, no crypto. */
  lookup(ring: KeyRing, token: string, queue: string, nowMs: number, kinds: readonly TokenKind[]): VerifyResult | undefined;
  /** How many tokens are remembered (for tests and stats). */
  readonly size: number;
}

interface Entry {
  readonly claims: TokenClaims;
  readonly kid: string;
  readonly key: SigningKey;
}

/** Enough for every admitted visitor of a busy event on one host; ~1 KB per entry at most. */
export const DEFAULT_TOKEN_CACHE_ENTRIES = 10_000;

export function createTokenCache(maxEntries: number = DEFAULT_TOKEN_CACHE_ENTRIES): TokenVerifier {
  if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) throw new RangeError('a token cache holds at least one entry');
  // A Map iterates in insertion order: re-inserting on use makes its first key the least recent.
  const entries = new Map<string, Entry>();
  const lookup: TokenVerifier['lookup'] = (ring, token, queue, nowMs, kinds) => {
    const entry = entries.get(token);
    if (entry === undefined) return undefined;
    entries.delete(token);
    // jose refuses a token once `exp` <= now in whole seconds.
    const live = entry.claims.exp > Math.floor(nowMs / 1000) && ring.byKid.get(entry.kid) === entry.key;
    if (!live) return undefined;
    entries.set(token, entry);
    if (!kinds.includes(entry.claims.k)) return { ok: false, reason: 'wrong_kind' };
    if (entry.claims.q !== queue) return { ok: false, reason: 'wrong_queue' };
    return { ok: true, claims: entry.claims };
  };
  return {
    get size() {
      return entries.size;
    },
    lookup,
    async verify(ring, token, queue, nowMs, kinds) {
      const known = lookup(ring, token, queue, nowMs, kinds);
      if (known !== undefined) return known;
      const { result, key } = await verifyTokenBy(ring, token, queue, nowMs, kinds);
      if (result.ok && key !== undefined) {
        entries.set(token, { claims: result.claims, kid: key.kid, key });
        if (entries.size > maxEntries) entries.delete(entries.keys().next().value as string);
      }
      return result;
    },
  };
}

/**
 * The process's cache: an entry is only used with the ring key object that verified it, so
 * handlers with different rings, queues or clocks can share it safely.
 */
export const sharedTokenCache: TokenVerifier = createTokenCache();
