import jws from 'jws';
import { describe, expect, it } from 'vitest';
import { parseKeyRing, signToken, verifyToken, type TokenClaims, type TokenKind } from '../src/core/tokens';
import { base64url, KEY_1, KEY_2, purposeKey } from './support/fixtures';

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);
const IAT = NOW / 1000;
const claims: TokenClaims = { q: 'default', k: 'w', t: 42, iat: IAT, exp: IAT + 60 };
const ring = parseKeyRing(`k1:${KEY_1}`);
const VISITOR: readonly TokenKind[] = ['w', 'a'];
/** The keys that sign waiting tickets and access tokens, derived independently (node:crypto). */
const WAITING_1 = purposeKey(KEY_1, 'waiting');
const ACCESS_1 = purposeKey(KEY_1, 'access');

describe('key ring', () => {
  it('signs with the first key and verifies with any key it holds', async () => {
    const rotated = parseKeyRing(`k2:${KEY_2},k1:${KEY_1}`);
    const oldToken = await signToken(ring, claims);
    const newToken = await signToken(rotated, claims);
    expect(jws.decode(newToken)?.header.kid).toBe('k2');
    expect(await verifyToken(rotated, oldToken, 'default', NOW, VISITOR)).toEqual({ ok: true, claims });
    // Removing k1 is the emergency reset: its tokens stop working.
    expect(await verifyToken(parseKeyRing(`k2:${KEY_2}`), oldToken, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'unknown_key' });
  });

  it.each([
    ['', /at least one/],
    ['k1', /key id/],
    ['k1:short', /at least 32/],
    [`k1:${'a'.repeat(40)}`, /only 1 different characters/],
    [`k1:${KEY_1},k2:${'x1'.repeat(20)}`, /entry 2 \(k2\).*different characters/],
    [`k1:${'0123456789abcdef'.repeat(2)}`, /is a repeated pattern/],
    [`k1:${KEY_1.slice(0, 30)}${'9'.repeat(7)}`, /more than 6 times in a row/],
    // Counted in UTF-8 bytes, the key's real length: 27 characters, 31 bytes.
    [`k1:${'é'.repeat(4)}abcdefghijklmnopqrstuvw`, /at least 32 bytes/],
    [`bad kid!:${KEY_1}`, /key id/],
    [`k1:${KEY_1},k1:${KEY_2}`, /appears twice/],
  ])('refuses %j', (text, message) => {
    expect(() => parseKeyRing(text)).toThrow(message);
  });

  it('never puts a secret in an error message', () => {
    expect(() => parseKeyRing(`k1:${KEY_1},k2:tooshort-secret`)).toThrow(/entry 2 \(k2\)/);
    try {
      parseKeyRing(`k1:${KEY_1},k2:tooshort-secret`);
    } catch (error) {
      expect(String(error)).not.toContain('tooshort-secret');
      expect(String(error)).not.toContain(KEY_1);
    }
  });
});

describe('verifyToken', () => {
  it('accepts a valid token and returns its claims', async () => {
    const token = await signToken(ring, claims);
    expect(await verifyToken(ring, token, 'default', NOW, VISITOR)).toEqual({ ok: true, claims });
  });

  it('takes a signature in its one spelling only: no padding, no other value of the unused bits', async () => {
    const token = await signToken(ring, claims);
    const [h, p, s] = token.split('.') as [string, string, string];
    expect(s).toHaveLength(43);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(s[42]!);
    // The same 32 bytes to a lenient decoder: the last character's two low bits are not part of them.
    const variants = [1, 2, 3].map((bits) => `${h}.${p}.${s.slice(0, 42)}${alphabet[last | bits]}`);
    expect(variants.every((v) => Buffer.from(v.split('.')[2]!, 'base64url').equals(Buffer.from(s, 'base64url')))).toBe(true);
    for (const spelt of [...variants, `${token}=`, `${token}==`, `${h}.${p}.${s.slice(0, 42)}`]) {
      expect(await verifyToken(ring, spelt, 'default', NOW, VISITOR), spelt.slice(-4)).toEqual({ ok: false, reason: 'malformed' });
    }
    expect(await verifyToken(ring, token, 'default', NOW, VISITOR)).toEqual({ ok: true, claims });
  });

  it('rejects a tampered payload', async () => {
    const [h, , s] = (await signToken(ring, claims)).split('.');
    const forged = `${h}.${base64url({ ...claims, t: 1 })}.${s}`;
    expect(await verifyToken(ring, forged, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('rejects a token re-signed with another key under our key id', async () => {
    const forged = jws.sign({ header: { alg: 'HS256', kid: 'k1', typ: 'JWT' }, payload: claims, secret: KEY_2 });
    expect(await verifyToken(ring, forged, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('rejects a token under an unknown key id, or none', async () => {
    const unknown = jws.sign({ header: { alg: 'HS256', kid: 'k9', typ: 'JWT' }, payload: claims, secret: WAITING_1 });
    const noKid = jws.sign({ header: { alg: 'HS256', typ: 'JWT' }, payload: claims, secret: WAITING_1 });
    expect(await verifyToken(ring, unknown, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'unknown_key' });
    expect(await verifyToken(ring, noKid, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'unknown_key' });
  });

  it('rejects alg none and other algorithms', async () => {
    const none = `${base64url({ alg: 'none', kid: 'k1' })}.${base64url(claims)}.`;
    const hs512 = jws.sign({ header: { alg: 'HS512', kid: 'k1' }, payload: claims, secret: WAITING_1 });
    for (const token of [none, hs512]) {
      const result = await verifyToken(ring, token, 'default', NOW, VISITOR);
      expect(result.ok).toBe(false);
    }
  });

  it('rejects an expired token at its expiry second', async () => {
    const token = await signToken(ring, claims);
    expect((await verifyToken(ring, token, 'default', (IAT + 59) * 1000, VISITOR)).ok).toBe(true);
    expect(await verifyToken(ring, token, 'default', (IAT + 60) * 1000, VISITOR)).toEqual({ ok: false, reason: 'expired' });
  });

  it("rejects another queue's token", async () => {
    const token = await signToken(ring, { ...claims, q: 'other' });
    expect(await verifyToken(ring, token, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'wrong_queue' });
  });

  it('rejects well-signed tokens whose claims are not ours', async () => {
    const cases = [
      { q: 'default', k: 'x', t: 1, iat: IAT, exp: IAT + 60 },
      { q: 'default', k: 'a', t: -1, iat: IAT, exp: IAT + 60 },
      { q: 'default', k: 'a', t: '1', iat: IAT, exp: IAT + 60 },
      { q: 'default', k: 'a', t: 1.5, iat: IAT, exp: IAT + 60 },
      { k: 'a', t: 1, iat: IAT, exp: IAT + 60 },
    ];
    for (const payload of cases) {
      const token = jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload, secret: ACCESS_1 });
      expect(await verifyToken(ring, token, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'bad_claims' });
    }
  });

  it('carries the optional session claims, and refuses malformed ones', async () => {
    const session = { ...claims, k: 'a' as const, j: IAT - 300, s: IAT - 20, r: IAT };
    const token = await signToken(ring, session);
    expect(await verifyToken(ring, token, 'default', NOW, VISITOR)).toEqual({ ok: true, claims: session });
    for (const bad of [{ j: -1 }, { s: 'x' }, { r: 1.5 }]) {
      const forged = jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload: { ...claims, ...bad }, secret: WAITING_1 });
      expect(await verifyToken(ring, forged, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'bad_claims' });
    }
  });

  it('carries a pending join\'s key on a waiting token of no ticket, and only there', async () => {
    const pending = { q: 'default', k: 'w' as const, t: 0, iat: IAT, exp: IAT + 60, p: '0123456789abcdef' };
    expect(await verifyToken(ring, await signToken(ring, pending), 'default', NOW, VISITOR)).toEqual({ ok: true, claims: pending });
    const bad: [Record<string, unknown>, Buffer][] = [
      [{ ...pending, t: 7 }, WAITING_1],
      [{ ...pending, k: 'a' }, ACCESS_1],
      [{ ...pending, p: '0123456789ABCDEF' }, WAITING_1],
      [{ ...pending, p: '0123' }, WAITING_1],
      [{ ...pending, p: 1234 }, WAITING_1],
      [{ ...pending, j: IAT }, WAITING_1],
    ];
    for (const [payload, secret] of bad) {
      const forged = jws.sign({ header: { alg: 'HS256', kid: 'k1' }, payload, secret });
      expect(await verifyToken(ring, forged, 'default', NOW, VISITOR), JSON.stringify(payload)).toEqual({ ok: false, reason: 'bad_claims' });
    }
  });

  it.each(['', 'abc', 'a.b', 'a.b.c', '...', '%%%.%%%.%%%', 'x'.repeat(5000)])('treats %j as malformed', async (junk) => {
    const result = await verifyToken(ring, junk, 'default', NOW, VISITOR);
    expect(result).toMatchObject({ ok: false });
  });
});

describe('interoperability with the jws reference implementation', () => {
  it('our tokens verify with jws', async () => {
    const token = await signToken(ring, claims);
    expect(jws.verify(token, 'HS256', WAITING_1)).toBe(true);
    expect(jws.verify(token, 'HS256', purposeKey(KEY_2, 'waiting'))).toBe(false);
    // Never signed with the ring key itself.
    expect(jws.verify(token, 'HS256', KEY_1)).toBe(false);
    const decoded = jws.decode(token);
    expect(decoded?.header).toEqual({ alg: 'HS256', kid: 'k1', typ: 'JWT' });
    // jws parses a JSON payload when the header says typ JWT.
    expect(decoded?.payload).toEqual(claims);
  });

  it('tokens made by jws verify with our code', async () => {
    const token = jws.sign({ header: { alg: 'HS256', kid: 'k1', typ: 'JWT' }, payload: claims, secret: WAITING_1 });
    expect(await verifyToken(ring, token, 'default', NOW, VISITOR)).toEqual({ ok: true, claims });
  });
});

describe('a key per purpose', () => {
  const KINDS = [
    ['w', 'waiting'],
    ['a', 'access'],
    ['c', 'admin-form'],
    ['b', 'bypass'],
  ] as const;

  it('signs each kind with its own key derived from the ring key, and with no other', async () => {
    for (const [kind, purpose] of KINDS) {
      const token = await signToken(ring, { ...claims, k: kind });
      for (const [, other] of KINDS) {
        expect(jws.verify(token, 'HS256', purposeKey(KEY_1, other)), `${kind} checked with the ${other} key`).toBe(other === purpose);
      }
      expect(jws.verify(token, 'HS256', KEY_1)).toBe(false);
    }
    const keys = new Set(KINDS.map(([, purpose]) => purposeKey(KEY_1, purpose).toString('hex')));
    expect(keys.size).toBe(KINDS.length);
  });

  it('refuses a waiting ticket re-labelled as an access token', async () => {
    const ticket = await signToken(ring, claims);
    const [h, , sig] = ticket.split('.');
    // The kind edited, the signature kept.
    const edited = `${h}.${base64url({ ...claims, k: 'a' })}.${sig}`;
    // Re-signed with a key the attacker might get from a slip: the ring key, or the waiting key.
    const byRingKey = jws.sign({ header: { alg: 'HS256', kid: 'k1', typ: 'JWT' }, payload: { ...claims, k: 'a' }, secret: KEY_1 });
    const byWaitingKey = jws.sign({ header: { alg: 'HS256', kid: 'k1', typ: 'JWT' }, payload: { ...claims, k: 'a' }, secret: WAITING_1 });
    for (const token of [edited, byRingKey, byWaitingKey]) {
      expect(await verifyToken(ring, token, 'default', NOW, ['a'])).toEqual({ ok: false, reason: 'bad_signature' });
    }
    // Signed with the access key, the same claims pass: the key made the difference.
    const genuine = jws.sign({ header: { alg: 'HS256', kid: 'k1', typ: 'JWT' }, payload: { ...claims, k: 'a' }, secret: ACCESS_1 });
    expect(await verifyToken(ring, genuine, 'default', NOW, ['a'])).toEqual({ ok: true, claims: { ...claims, k: 'a' } });
  });

  it('refuses every kind re-labelled as every other kind', async () => {
    for (const [from, fromPurpose] of KINDS) {
      for (const [to] of KINDS) {
        if (to === from) continue;
        const relabelled = jws.sign({ header: { alg: 'HS256', kid: 'k1', typ: 'JWT' }, payload: { ...claims, k: to }, secret: purposeKey(KEY_1, fromPurpose) });
        expect(await verifyToken(ring, relabelled, 'default', NOW, [to]), `${from} as ${to}`).toEqual({ ok: false, reason: 'bad_signature' });
      }
    }
  });

  it('refuses a genuine token of a kind the caller does not take', async () => {
    const form = await signToken(ring, { ...claims, k: 'c' });
    expect(await verifyToken(ring, form, 'default', NOW, VISITOR)).toEqual({ ok: false, reason: 'wrong_kind' });
    expect(await verifyToken(ring, form, 'default', NOW, ['c'])).toEqual({ ok: true, claims: { ...claims, k: 'c' } });
  });

  it('keeps rotation working for every kind: the old kid still verifies, the new kid signs', async () => {
    const rotated = parseKeyRing(`k2:${KEY_2},k1:${KEY_1}`);
    for (const [kind, purpose] of KINDS) {
      const old = await signToken(ring, { ...claims, k: kind });
      const fresh = await signToken(rotated, { ...claims, k: kind });
      expect(jws.decode(fresh)?.header.kid).toBe('k2');
      expect(jws.verify(fresh, 'HS256', purposeKey(KEY_2, purpose))).toBe(true);
      expect(await verifyToken(rotated, old, 'default', NOW, [kind])).toEqual({ ok: true, claims: { ...claims, k: kind } });
      expect(await verifyToken(rotated, fresh, 'default', NOW, [kind])).toEqual({ ok: true, claims: { ...claims, k: kind } });
      expect(await verifyToken(ring, fresh, 'default', NOW, [kind])).toEqual({ ok: false, reason: 'unknown_key' });
    }
  });
});
