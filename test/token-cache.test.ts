import { describe, expect, it } from 'vitest';
import { createTokenCache } from '../src/core/token-cache';
import { parseKeyRing, signToken, verifyToken, type KeyRing, type SigningKey, type TokenClaims, type TokenKind } from '../src/core/tokens';
import { KEY_1, KEY_2 } from './support/fixtures';

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);
const IAT = NOW / 1000;
const VISITOR: readonly TokenKind[] = ['w', 'a'];
const access: TokenClaims = { q: 'default', k: 'a', t: 7, iat: IAT, exp: IAT + 60 };

/** A ring of the same keys whose signature checks are counted: a cache hit makes none. */
function countingRing(ring: KeyRing): { ring: KeyRing; checks: () => number } {
  let checks = 0;
  const wrap = (key: SigningKey): SigningKey => ({
    kid: key.kid,
    keyFor: (purpose) => {
      checks++;
      return key.keyFor(purpose);
    },
  });
  const byKid = new Map([...ring.byKid].map(([kid, key]) => [kid, wrap(key)] as const));
  return { ring: { current: byKid.get(ring.current.kid)!, byKid }, checks: () => checks };
}

describe('verified token cache', () => {
  it('answers a token it verified without checking the signature again, as verifyToken would', async () => {
    const { ring, checks } = countingRing(parseKeyRing(`k1:${KEY_1}`));
    const token = await signToken(ring, access);
    const cache = createTokenCache(10);
    const before = checks();
    expect(await cache.verify(ring, token, 'default', NOW, VISITOR)).toEqual({ ok: true, claims: access });
    expect(checks()).toBe(before + 1);
    expect(await cache.verify(ring, token, 'default', NOW + 1000, VISITOR)).toEqual({ ok: true, claims: access });
    expect(checks()).toBe(before + 1);
    // Queue and kind are still checked on a hit, with verifyToken's answers.
    for (const [queue, kinds] of [['other', VISITOR], ['default', ['w']], ['other', ['b']]] as const) {
      expect(await cache.verify(ring, token, queue, NOW, kinds)).toEqual(await verifyToken(ring, token, queue, NOW, kinds));
    }
    expect(await cache.verify(ring, token, 'other', NOW, VISITOR)).toEqual({ ok: false, reason: 'wrong_queue' });
    expect(await cache.verify(ring, token, 'default', NOW, ['w'])).toEqual({ ok: false, reason: 'wrong_kind' });
  });

  it('refuses a cached token from its exp on, to the second, as jose does', async () => {
    const ring = parseKeyRing(`k1:${KEY_1}`);
    const token = await signToken(ring, access);
    const cache = createTokenCache(10);
    expect((await cache.verify(ring, token, 'default', NOW, VISITOR)).ok).toBe(true);
    expect((await cache.verify(ring, token, 'default', access.exp * 1000 - 1, VISITOR)).ok).toBe(true);
    expect(await cache.verify(ring, token, 'default', access.exp * 1000, VISITOR)).toEqual({ ok: false, reason: 'expired' });
    expect(await verifyToken(ring, token, 'default', access.exp * 1000, VISITOR)).toEqual({ ok: false, reason: 'expired' });
    expect(cache.size).toBe(0);
  });

  it('refuses a cached token once its key leaves the ring, or its kid names another secret', async () => {
    const old = parseKeyRing(`k1:${KEY_1}`);
    const token = await signToken(old, access);
    const cache = createTokenCache(10);
    expect((await cache.verify(old, token, 'default', NOW, VISITOR)).ok).toBe(true);
    // Rotation that keeps k1: still valid (verified again against the new ring's key).
    const rotated = parseKeyRing(`k2:${KEY_2},k1:${KEY_1}`);
    expect(await cache.verify(rotated, token, 'default', NOW, VISITOR)).toEqual({ ok: true, claims: access });
    // The emergency reset: k1 removed. Its tokens fail at once, cached or not.
    const reset = parseKeyRing(`k2:${KEY_2}`);
    expect(await cache.verify(reset, token, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'unknown_key' });
    // The same kid given another secret: the cached entry is not the ring's key any more.
    expect((await cache.verify(old, token, 'default', NOW, VISITOR)).ok).toBe(true);
    const reused = parseKeyRing(`k1:${KEY_2}`);
    expect(await cache.verify(reused, token, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('refuses forged variants of a cached token', async () => {
    const ring = parseKeyRing(`k1:${KEY_1}`);
    const token = await signToken(ring, access);
    const cache = createTokenCache(10);
    expect((await cache.verify(ring, token, 'default', NOW, VISITOR)).ok).toBe(true);
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const longer = Buffer.from(JSON.stringify({ ...access, exp: access.exp + 3600 })).toString('base64url');
    const flipped = `${signature.slice(0, -2)}${signature.at(-2) === 'A' ? 'B' : 'A'}${signature.at(-1)}`;
    const variants = [
      `${header}.${longer}.${signature}`,
      `${header}.${payload}.${flipped}`,
      `${header}.${payload}.`,
      `${header}.${payload}`,
      token.slice(0, -1),
    ];
    for (const forged of variants) {
      const result = await cache.verify(ring, forged, 'default', NOW, VISITOR);
      expect(result.ok, forged).toBe(false);
      expect(result).toEqual(await verifyToken(ring, forged, 'default', NOW, VISITOR));
    }
    // Refusals are never remembered: only the genuine token is held.
    expect(cache.size).toBe(1);
  });

  it('holds at most its bound, dropping the least recently used', async () => {
    const { ring, checks } = countingRing(parseKeyRing(`k1:${KEY_1}`));
    const tokens = await Promise.all([1, 2, 3, 4].map((t) => signToken(ring, { ...access, t })));
    const cache = createTokenCache(3);
    for (const token of tokens.slice(0, 3)) await cache.verify(ring, token, 'default', NOW, VISITOR);
    // Token 1 used again: token 2 is now the least recent, and goes when token 4 comes in.
    await cache.verify(ring, tokens[0]!, 'default', NOW, VISITOR);
    await cache.verify(ring, tokens[3]!, 'default', NOW, VISITOR);
    expect(cache.size).toBe(3);
    const before = checks();
    for (const i of [0, 2, 3]) expect((await cache.verify(ring, tokens[i]!, 'default', NOW, VISITOR)).ok).toBe(true);
    expect(checks()).toBe(before);
    expect((await cache.verify(ring, tokens[1]!, 'default', NOW, VISITOR)).ok).toBe(true);
    expect(checks()).toBe(before + 1);
    expect(cache.size).toBe(3);
    expect(() => createTokenCache(0)).toThrow(RangeError);
  });
});
