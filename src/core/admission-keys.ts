/**
 * The admission keys (secret `admission_keys`, see admission.ts): a JSON array of private P-256 JWKs,
 * each with a `kid`. The first signs; every one is listed in the JWKS the origin verifies with.
 */
import type { JWK } from 'jose';

export interface AdmissionKey {
  readonly kid: string;
  readonly privateJwk: JWK;
  readonly publicJwk: JWK;
}

/** Parses `admission_keys`: a JSON array of private P-256 JWKs with distinct `kid`s. Throws with what is wrong. */
export function parseAdmissionKeys(text: string): AdmissionKey[] {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw new Error('must be a JSON array of private P-256 JWKs (npm run keys makes one)');
  }
  if (!Array.isArray(document) || document.length === 0) throw new Error('must be a non-empty JSON array of private P-256 JWKs (npm run keys makes one)');
  const seen = new Set<string>();
  return document.map((entry: unknown, i: number) => {
    const jwk = entry as Record<string, unknown>;
    const where = `key ${i + 1}`;
    if (typeof jwk !== 'object' || jwk === null) throw new Error(`${where} is not a JWK object`);
    const { kty, crv, x, y, d, kid } = jwk;
    if (kty !== 'EC' || crv !== 'P-256') throw new Error(`${where} must be an EC key on P-256 (kty "EC", crv "P-256")`);
    if (typeof kid !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(kid)) throw new Error(`${where} needs a kid of 1-64 of A-Z, a-z, 0-9, . _ -`);
    if (seen.has(kid)) throw new Error(`${where} repeats the kid ${kid}`);
    seen.add(kid);
    const coordinate = (v: unknown) => typeof v === 'string' && /^[A-Za-z0-9_-]{43}$/.test(v);
    if (!coordinate(x) || !coordinate(y)) throw new Error(`${where} (${kid}) needs its public point x and y (43 base64url characters each)`);
    if (!coordinate(d)) throw new Error(`${where} (${kid}) needs its private part d (43 base64url characters): the Secret Store holds the private key`);
    const publicJwk: JWK = { kty: 'EC', crv: 'P-256', x: x as string, y: y as string, kid, alg: 'ES256', use: 'sig' };
    return { kid, privateJwk: { kty: 'EC', crv: 'P-256', x: x as string, y: y as string, d: d as string }, publicJwk };
  });
}

/** The JWKS document: the public half of every listed key. */
export function jwksDocument(keys: readonly AdmissionKey[]): { keys: JWK[] } {
  return { keys: keys.map((key) => key.publicJwk) };
}
