/**
 * The queue cookie: a compact JWS (HS256, with a key id) made and checked with `jose`.
 *
 * A key ring signs with its first (current) key and verifies with any key it still holds, so keys
 * rotate without logging anybody out; removing a key invalidates every token signed with it (the
 * emergency reset). Verification reports why a token failed as data, never by throwing.
 *
 * No token is signed with a ring key itself: each kind of token has its own key, derived from the
 * ring key as HMAC-SHA256(ring key, "wr/v1/" + purpose). A waiting ticket re-labelled as an access
 * token, or an admin form token passed off as a bypass pass, then fails its signature, whatever a
 * caller forgets to check.
 */
import { decodeJwt, decodeProtectedHeader, jwtVerify, SignJWT, errors as joseErrors, type JWTHeaderParameters } from 'jose';
import { JOIN_KEY_PATTERN } from './ports';

/**
 * What a derived key signs; part of the derivation label, so never rename one (it would log everybody
 * out). Each token kind has one (PURPOSE_OF_KIND); `admission` signs what the origin is told (see
 * admission.ts) and `admin-notice` tags the console's notice in its address (see admin-notice.ts).
 */
export type KeyPurpose = 'waiting' | 'access' | 'admin-form' | 'bypass' | 'proof' | 'admission' | 'admin-notice';

export interface SigningKey {
  readonly kid: string;
  /** The HMAC key of one purpose, derived and imported once per key and purpose (neither is free on the edge). */
  keyFor(purpose: KeyPurpose): Promise<CryptoKey>;
}

export interface KeyRing {
  readonly current: SigningKey;
  readonly byKid: ReadonlyMap<string, SigningKey>;
}

/**
 * `w`: a waiting ticket; `a`: an access token; `c`: an admin form's anti-forgery token; `b`: a bypass
 * pass; `h`: a proof-of-work challenge (see proof-of-work.ts).
 */
export type TokenKind = 'w' | 'a' | 'c' | 'b' | 'h';

/** The key each kind of token is signed with. */
export const PURPOSE_OF_KIND: Readonly<Record<TokenKind, KeyPurpose>> = { w: 'waiting', a: 'access', c: 'admin-form', b: 'bypass', h: 'proof' };

/** Prefix of the derivation label: a new version of the scheme changes it. */
export const KEY_DERIVATION_LABEL = 'wr/v1/';

export interface TokenClaims {
  /** Queue the token belongs to. */
  readonly q: string;
  readonly k: TokenKind;
  /** Ticket number (0 for tokens that carry none). */
  readonly t: number;
  /** Issued at, seconds since the epoch. */
  readonly iat: number;
  /** Expires at, seconds since the epoch. */
  readonly exp: number;
  /** When the visitor took the ticket, seconds (carried from ticket to access token, for wait times). */
  readonly j?: number;
  /** Access tokens that hold a slot: when the session began, seconds (for the session maximum). */
  readonly s?: number;
  /** Access tokens that hold a slot: when the slot was last refreshed in the store, seconds. */
  readonly r?: number;
  /** Waiting tickets: the first place the visitor was shown (the start of the holding page's progress bar). */
  readonly f?: number;
  /** Waiting tickets: the queue's epoch when the ticket was taken; a reset changes it and voids the ticket. */
  readonly g?: number;
  /**
   * Waiting and access tokens: the store generation the ticket belongs to. When the store loses its
   * state, numbers restart under a new generation, and this tells an old ticket from a new one.
   */
  readonly gen?: number;
  /**
   * A waiting token without a ticket (`t` 0): the key of the visitor's join that got no answer
   * from the store, sent again with its next join so that it gets the ticket that join took.
   */
  readonly p?: string;
  /** Waiting tokens of the shadow queue (1): a place that never moves, for a failed proof of work. */
  readonly x?: number;
  /** Access tokens: how the visitor got in, when not by its call in the queue (1: it walked in). */
  readonly v?: number;
  /** Proof-of-work challenges (`h`): the nonce (32 hex digits), the difficulty in bits, and the client it was made for (16 hex digits). */
  readonly n?: string;
  readonly d?: number;
  readonly o?: string;
  /**
   * Waiting and access tokens of a queue over several databases (`store_shards`): the database the
   * visitor's ticket is in, 1 .. 7; absent for the first (0), so tokens from before keep working.
   */
  readonly sh?: number;
}

export type VerifyFailure = 'malformed' | 'unknown_key' | 'bad_signature' | 'expired' | 'bad_claims' | 'wrong_queue' | 'wrong_kind';

export type VerifyResult = { readonly ok: true; readonly claims: TokenClaims } | { readonly ok: false; readonly reason: VerifyFailure };

export class KeyRingError extends Error {
  readonly code = 'ERR_KEY_RING';
  constructor(message: string) {
    super(message);
    this.name = 'KeyRingError';
  }
}

const KID_PATTERN = /^[A-Za-z0-9._-]{1,32}$/;
const MIN_SECRET_BYTES = 32;
/** A compact JWS of ours is well under this; anything longer is not worth parsing. */
const MAX_TOKEN_LENGTH = 1024;
/**
 * A compact JWS with an HS256 signature spelt the one way it can be: 32 bytes are 43 base64url
 * characters, no padding, and the last carries two unused bits that must be zero. Decoders ignore
 * those bits, so without this each token would have several accepted spellings.
 */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;

/** How a random secret looks, in one sentence an operator can act on (it goes into error messages and the docs). */
export const SECRET_RULE =
  'at least 8 different characters, no character more than 6 times in a row, and not a repeated pattern (generate one with `openssl rand -base64 32`)';

/**
 * Why a secret is too weak to sign or authenticate with, or undefined. A random secret passes
 * with near certainty (of 32 random hex digits, about 1 in a million has a run of 7, and fewer
 * fall below 8 distinct characters); what fails is what people type: `aaaa…`, `abcabc…`, `0000…`.
 * Never names the secret's value.
 */
export function secretWeakness(secret: string): string | undefined {
  const distinct = new Set(secret).size;
  if (distinct < 8) return `has only ${distinct} different characters; a secret needs ${SECRET_RULE}`;
  if (/(.)\1{6}/su.test(secret)) return `repeats one character more than 6 times in a row; a secret needs ${SECRET_RULE}`;
  // A string equals a rotation of itself by less than its length exactly when it is periodic.
  if ((secret + secret).indexOf(secret, 1) < secret.length) return `is a repeated pattern; a secret needs ${SECRET_RULE}`;
  return undefined;
}

/**
 * Why a value is a stand-in for a secret rather than one (a template's `<your key>`, `changeme`,
 * `replace-me`, `placeholder`), or undefined. Never names the value.
 */
export function placeholderWeakness(secret: string): string | undefined {
  if (/<[^<>]*>/.test(secret) || /change[\s_.-]*me|replace|placeholder/i.test(secret)) {
    return 'is a placeholder, not a secret: put your own random value there';
  }
  return undefined;
}

/**
 * Why a value is a passphrase where a key is expected (only letters and separators: `correct horse
 * battery staple`, `my-long-signing-key`), or undefined: words are guessed far faster than their
 * length suggests. A random key has digits or symbols among its letters.
 */
export function passphraseWeakness(secret: string): string | undefined {
  return /^[A-Za-z\s._-]+$/.test(secret) ? `is made of words, where a random key is expected; a key needs ${SECRET_RULE}, and digits or symbols among its letters` : undefined;
}

export interface KeyRingEntry {
  readonly kid: string;
  readonly secret: string;
}

/**
 * Reads `kid:secret,kid:secret` and checks each entry: a key id, a secret of at least 32 bytes
 * (HS256 wants a key as long as its output) that looks random (`secretWeakness`), no kid twice.
 */
export function parseKeyRingEntries(text: string): KeyRingEntry[] {
  const entries = text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  if (entries.length === 0) throw new KeyRingError('needs at least one "kid:secret" entry');
  const seen = new Set<string>();
  return entries.map((entry, index) => {
    const colon = entry.indexOf(':');
    const kid = colon < 0 ? '' : entry.slice(0, colon);
    const secret = colon < 0 ? '' : entry.slice(colon + 1);
    if (!KID_PATTERN.test(kid)) {
      throw new KeyRingError(`entry ${index + 1}: key id must be 1-32 of A-Z, a-z, 0-9, ".", "_", "-" before a colon`);
    }
    if (new TextEncoder().encode(secret).length < MIN_SECRET_BYTES) {
      throw new KeyRingError(`entry ${index + 1} (${kid}): secret must be at least ${MIN_SECRET_BYTES} bytes, with ${SECRET_RULE}`);
    }
    const weakness = placeholderWeakness(secret) ?? secretWeakness(secret) ?? passphraseWeakness(secret);
    if (weakness !== undefined) throw new KeyRingError(`entry ${index + 1} (${kid}): secret ${weakness}`);
    if (seen.has(kid)) throw new KeyRingError(`entry ${index + 1}: key id ${kid} appears twice`);
    seen.add(kid);
    return { kid, secret };
  });
}

/** Parses `kid:secret,kid:secret` (the first entry signs; all verify); see parseKeyRingEntries. */
export function parseKeyRing(text: string): KeyRing {
  const byKid = new Map<string, SigningKey>();
  let current: SigningKey | undefined;
  for (const { kid, secret } of parseKeyRingEntries(text)) {
    const key = createSigningKey(kid, secret);
    byKid.set(kid, key);
    current ??= key;
  }
  if (current === undefined) throw new KeyRingError('needs at least one "kid:secret" entry');
  return { current, byKid };
}

/**
 * Imports raw HMAC key bytes and keeps the bytes for as long as the key: js-compute (3.46) keeps a
 * pointer to the bytes a raw key was imported from, not a copy, so a key whose bytes were collected
 * signs and verifies with whatever later fills that memory. A fresh sandbox never lives long enough
 * to see it; a reused one (sandbox-reuse.ts) does from its second request on. Node copies; holding
 * the bytes there costs 32 bytes a key.
 */
export async function importHmacKey(bytes: Uint8Array<ArrayBuffer> | ArrayBuffer, usages: KeyUsage[]): Promise<HmacKeyWithBytes> {
  const key = await crypto.subtle.importKey('raw', bytes, { name: 'HMAC', hash: 'SHA-256' }, false, usages);
  return { key, bytes };
}

/** A CryptoKey with the bytes it was imported from (see importHmacKey): keep the pair, never the key alone. */
export interface HmacKeyWithBytes {
  readonly key: CryptoKey;
  readonly bytes: Uint8Array<ArrayBuffer> | ArrayBuffer;
}

function createSigningKey(kid: string, secret: string): SigningKey {
  let ringKey: Promise<HmacKeyWithBytes> | undefined;
  /** Each purpose's key with its bytes (see importHmacKey); the map keeps both alive with the SigningKey. */
  const derived = new Map<KeyPurpose, Promise<HmacKeyWithBytes>>();
  const derive = async (purpose: KeyPurpose): Promise<HmacKeyWithBytes> => {
    ringKey ??= importHmacKey(new TextEncoder().encode(secret), ['sign']);
    const bytes = await crypto.subtle.sign('HMAC', (await ringKey).key, new TextEncoder().encode(KEY_DERIVATION_LABEL + purpose));
    return importHmacKey(bytes, ['sign', 'verify']);
  };
  return {
    kid,
    async keyFor(purpose) {
      let key = derived.get(purpose);
      if (key === undefined) {
        key = derive(purpose);
        derived.set(purpose, key);
      }
      return (await key).key;
    },
  };
}

/**
 * Why verifyToken would refuse a token, where that can be told without checking its signature (no
 * crypto): its length and shape, its header (HS256 and a key id the ring holds), its claims (our
 * shape, one of `kinds`, `queue`, not expired). Undefined: only the signature check can tell. A
 * caller that bounds the signature checks of a request spends them only on tokens that pass this,
 * so junk sent beside a real token cannot use them up. A token with several faults may be refused
 * here for another of them than verifyToken names first.
 */
export function precheckToken(ring: KeyRing, token: string, queue: string, nowMs: number, kinds: readonly TokenKind[]): VerifyFailure | undefined {
  if (token.length > MAX_TOKEN_LENGTH || !COMPACT_JWS.test(token)) return 'malformed';
  let header: JWTHeaderParameters;
  let payload: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(token) as JWTHeaderParameters;
    payload = decodeJwt(token);
  } catch {
    return 'malformed';
  }
  if (header.alg !== 'HS256') return 'malformed';
  if (typeof header.kid !== 'string' || !ring.byKid.has(header.kid)) return 'unknown_key';
  const claims = readClaims(payload);
  if (claims === undefined) return 'bad_claims';
  if (!kinds.includes(claims.k)) return 'wrong_kind';
  if (claims.q !== queue) return 'wrong_queue';
  // jose's own test: expired once `exp` <= now in whole seconds, no tolerance.
  if (claims.exp <= Math.floor(nowMs / 1000)) return 'expired';
  return undefined;
}

/** Signs claims with the ring's current key for their kind. */
export async function signToken(ring: KeyRing, claims: TokenClaims): Promise<string> {
  const { iat, exp, ...rest } = claims;
  return new SignJWT({ ...rest })
    .setProtectedHeader({ alg: 'HS256', kid: ring.current.kid, typ: 'JWT' })
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .sign(await ring.current.keyFor(PURPOSE_OF_KIND[claims.k]));
}

class UnknownKeyError extends Error {}

/**
 * Verifies a token of one of `kinds` for `queue` at `nowMs`. Only HS256 is accepted (so `alg: none`
 * and algorithm confusion fail), the key is chosen by `kid` from the ring and by the kind the token
 * claims, so the kind is covered by the signature; the claims must have our shape.
 */
export async function verifyToken(ring: KeyRing, token: string, queue: string, nowMs: number, kinds: readonly TokenKind[]): Promise<VerifyResult> {
  return (await verifyTokenBy(ring, token, queue, nowMs, kinds)).result;
}

/**
 * verifyToken, also naming the ring key whose derived key checked the signature (when it was
 * checked and held): what a cache of verified tokens must find again in the ring to trust an entry.
 */
export async function verifyTokenBy(
  ring: KeyRing,
  token: string,
  queue: string,
  nowMs: number,
  kinds: readonly TokenKind[],
): Promise<{ readonly result: VerifyResult; readonly key: SigningKey | undefined }> {
  let used: SigningKey | undefined;
  const result = await verifyWith(ring, token, queue, nowMs, kinds, (key) => (used = key));
  return { result, key: result.ok ? used : undefined };
}

async function verifyWith(
  ring: KeyRing,
  token: string,
  queue: string,
  nowMs: number,
  kinds: readonly TokenKind[],
  chosen: (key: SigningKey) => void,
): Promise<VerifyResult> {
  if (token.length > MAX_TOKEN_LENGTH || !COMPACT_JWS.test(token)) return { ok: false, reason: 'malformed' };
  let claimed: unknown;
  try {
    claimed = decodeJwt(token)['k'];
  } catch {
    return { ok: false, reason: 'malformed' };
  }
  if (!isTokenKind(claimed)) return { ok: false, reason: 'bad_claims' };
  if (!kinds.includes(claimed)) return { ok: false, reason: 'wrong_kind' };
  const purpose = PURPOSE_OF_KIND[claimed];
  let payload: Record<string, unknown>;
  try {
    const result = await jwtVerify(
      token,
      async (header: JWTHeaderParameters) => {
        const key = header.kid === undefined ? undefined : ring.byKid.get(header.kid);
        if (key === undefined) throw new UnknownKeyError();
        chosen(key);
        return key.keyFor(purpose);
      },
      { algorithms: ['HS256'], currentDate: new Date(nowMs), clockTolerance: 0 },
    );
    payload = result.payload;
  } catch (error) {
    return { ok: false, reason: classifyFailure(error) };
  }
  const claims = readClaims(payload);
  // The signature covered `k`, so it is still the kind that chose the key.
  if (claims === undefined || claims.k !== claimed) return { ok: false, reason: 'bad_claims' };
  if (claims.q !== queue) return { ok: false, reason: 'wrong_queue' };
  return { ok: true, claims };
}

function isTokenKind(value: unknown): value is TokenKind {
  return value === 'w' || value === 'a' || value === 'c' || value === 'b' || value === 'h';
}

function classifyFailure(error: unknown): VerifyFailure {
  if (error instanceof UnknownKeyError) return 'unknown_key';
  if (error instanceof joseErrors.JWTExpired) return 'expired';
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'bad_signature';
  if (error instanceof joseErrors.JWTClaimValidationFailed) return 'bad_claims';
  return 'malformed';
}

function readClaims(payload: Record<string, unknown>): TokenClaims | undefined {
  const { q, k, t, iat, exp, j, s, r, f, g, gen, p, n, d, o, x, v, sh } = payload;
  if (typeof q !== 'string') return undefined;
  if (!isTokenKind(k)) return undefined;
  if (!isWholeNumber(t) || !isWholeNumber(iat) || !isWholeNumber(exp)) return undefined;
  // A proof-of-work challenge carries its nonce, difficulty and client, and nothing else.
  if (k === 'h' || n !== undefined || d !== undefined || o !== undefined) {
    if (k !== 'h' || t !== 0 || typeof n !== 'string' || !/^[0-9a-f]{32}$/.test(n) || typeof o !== 'string' || !/^[0-9a-f]{16}$/.test(o)) return undefined;
    if (!isWholeNumber(d) || d < 1 || d > 32) return undefined;
    if ([j, s, r, f, g, gen, p, x, v, sh].some((value) => value !== undefined)) return undefined;
    return { q, k, t, iat, exp, n, d, o };
  }
  // The database: 1 .. 7 (the first is never named), on waiting and access tokens.
  if (sh !== undefined && (!isWholeNumber(sh) || sh < 1 || sh > MAX_SHARD_CLAIM)) return undefined;
  const shard = sh === undefined ? {} : { sh };
  // A shadow ticket is a waiting token with a number, and nothing that ties it to the store.
  if (x !== undefined && (x !== 1 || k !== 'w' || !isWholeNumber(t) || t < 1 || g !== undefined || gen !== undefined || p !== undefined)) return undefined;
  // A pending join (`p`): a waiting token of no ticket, and nothing else.
  if (p !== undefined) {
    if (k !== 'w' || t !== 0 || typeof p !== 'string' || !JOIN_KEY_PATTERN.test(p)) return undefined;
    if ([j, s, r, f, g, gen, v].some((value) => value !== undefined)) return undefined;
    return { q, k, t, iat, exp, p, ...shard };
  }
  if (v !== undefined && (k !== 'a' || v !== 1)) return undefined;
  const optional = { j, s, r, f, g, gen, x, v };
  const claims: Record<string, number> = {};
  for (const [name, value] of Object.entries(optional)) {
    if (value === undefined) continue;
    if (!isWholeNumber(value)) return undefined;
    claims[name] = value;
  }
  return { q, k, t, iat, exp, ...claims, ...shard };
}

/** The highest database a token may name (`sh`): store_shards is at most 8. */
const MAX_SHARD_CLAIM = 7;

function isWholeNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
