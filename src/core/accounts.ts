/**
 * Operator accounts for the console: named accounts, each with a role, signed in with a password
 * that is kept only as a PBKDF2-HMAC-SHA256 hash (secret `admin_accounts`). The single
 * `admin_password` of before stays one admin account named `admin_user`.
 *
 * Roles, each including the one before: `viewer` sees everything and changes nothing; `operator`
 * also admits, pauses, switches, sets thresholds, makes VIP codes and pins adaptive admission;
 * `admin` also resets the queue. The origin's bearer token is an actor of its own (`api`) with the
 * rights it always had (all of them).
 *
 * The KDF: js-compute 3.46 has no PBKDF2 in `crypto.subtle` ("Supplied algorithm is not yet
 * supported", checked in the engine), so there PBKDF2 is built from its definition (RFC 8018) on
 * HMAC-SHA-256, which the engine has (Node uses its own PBKDF2, the same function, faster): one `crypto.subtle.sign` an iteration, with the password's key
 * imported once (its bytes kept referenced beside it, see importHmacKey). The output is the standard
 * PBKDF2-HMAC-SHA256 (a test compares it with Node's `pbkdf2Sync`), so a hash made anywhere works.
 * Its cost in the engine is what sets DEFAULT_ITERATIONS (docs/operating.md has the figures); a
 * verified sign-in is remembered per instance (VerifiedCache) so a console's polls do not pay it.
 */
import { base64url, hex } from './bytes';
import { importHmacKey, type HmacKeyWithBytes } from './tokens';

export const ROLES = ['viewer', 'operator', 'admin'] as const;
export type Role = (typeof ROLES)[number];

/** The rights a request needs: read (every role), change (operator, admin), reset (admin). */
export type Right = 'read' | 'change' | 'reset';

const NEEDED: Readonly<Record<Right, Role>> = { read: 'viewer', change: 'operator', reset: 'admin' };

/** Whether `role` holds `right`. */
export function allows(role: Role, right: Right): boolean {
  return ROLES.indexOf(role) >= ROLES.indexOf(NEEDED[right]);
}

/** The lowest role that holds `right`, for the refusal's text. */
export const roleFor = (right: Right): Role => NEEDED[right];

/** A stored password hash: `pbkdf2-sha256$<iterations>$<salt, base64url>$<32-byte hash, base64url>`. */
export interface PasswordHash {
  readonly iterations: number;
  readonly salt: Uint8Array<ArrayBuffer>;
  readonly hash: Uint8Array<ArrayBuffer>;
  /** The text it was parsed from (the verified cache's key includes it, so a changed hash is checked anew). */
  readonly text: string;
}

export interface Account {
  readonly name: string;
  readonly role: Role;
  /** A hash to check the password against; undefined for the `admin_password` account (`password`). */
  readonly hash?: PasswordHash | undefined;
  /** The `admin_password` account's password, compared in constant time as before. */
  readonly password?: string | undefined;
}

export const HASH_SCHEME = 'pbkdf2-sha256';
/**
 * Iterations `hash-password` uses unless told otherwise. Measured in the engine (js-compute 3.46,
 * docs/operating.md "Accounts"): about 65 µs an iteration, so 5,000 cost about a third of a second of
 * CPU at a sign-in (then cached, see VERIFIED_TTL_MS). More iterations cost every wrong guess as
 * much as a right sign-in; the per-client and per-account throttle bounds how many are tried.
 */
export const DEFAULT_ITERATIONS = 5_000;
export const MIN_ITERATIONS = 1_000;
/** Past this a sign-in would take seconds of CPU in the engine. */
export const MAX_ITERATIONS = 100_000;
const MIN_SALT_BYTES = 16;
const HASH_BYTES = 32;

/** Account names: what a Basic-Auth user name can carry (no colon) and a log line shows plainly. */
export const ACCOUNT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
/** The name the origin's bearer token acts under in the audit trail; no account may take it. */
export const API_ACTOR = 'api';

export class AccountsError extends Error {
  readonly code = 'ERR_ACCOUNTS';
}

function fromBase64url(text: string, what: string): Uint8Array<ArrayBuffer> {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) throw new AccountsError(`${what} is not base64url`);
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

/** Parses a hash's text; throws AccountsError saying what is wrong (never echoing the hash). */
export function parsePasswordHash(text: string): PasswordHash {
  const parts = text.split('$');
  if (parts.length !== 4 || parts[0] !== HASH_SCHEME) {
    throw new AccountsError(`hash must be "${HASH_SCHEME}$<iterations>$<salt>$<hash>" (make one with npm run keys -- hash-password)`);
  }
  const [, iterationsText, saltText, hashText] = parts as [string, string, string, string];
  if (!/^[0-9]{1,7}$/.test(iterationsText)) throw new AccountsError('hash iterations must be a whole number');
  const iterations = Number(iterationsText);
  if (iterations < MIN_ITERATIONS || iterations > MAX_ITERATIONS) {
    throw new AccountsError(`hash iterations must be from ${MIN_ITERATIONS} to ${MAX_ITERATIONS}, got ${iterations}`);
  }
  const salt = fromBase64url(saltText, 'hash salt');
  if (salt.length < MIN_SALT_BYTES) throw new AccountsError(`hash salt must be at least ${MIN_SALT_BYTES} bytes`);
  const hash = fromBase64url(hashText, 'hash value');
  if (hash.length !== HASH_BYTES) throw new AccountsError(`hash value must be ${HASH_BYTES} bytes`);
  return { iterations, salt, hash, text };
}

/**
 * Parses `admin_accounts`: a JSON object of name → `{"role": …, "hash": …}`. Throws AccountsError
 * naming the account and what is wrong with it.
 */
export function parseAccounts(text: string): readonly Account[] {
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch {
    throw new AccountsError('must be a JSON object like {"alice": {"role": "operator", "hash": "pbkdf2-sha256$…"}}');
  }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new AccountsError('must be a JSON object of account name → {"role", "hash"}');
  }
  const accounts: Account[] = [];
  const seen = new Set<string>();
  for (const [name, value] of Object.entries(input as Record<string, unknown>)) {
    if (!ACCOUNT_NAME_PATTERN.test(name)) throw new AccountsError(`account ${JSON.stringify(name).slice(0, 70)}: a name is 1-64 of A-Z, a-z, 0-9, ".", "_", "@", "-", starting with a letter or digit`);
    if (name.toLowerCase() === API_ACTOR) throw new AccountsError(`account "${name}": the name is kept for the origin's API token in the audit trail`);
    if (seen.has(name.toLowerCase())) throw new AccountsError(`account "${name}" is given twice (names are compared without case)`);
    seen.add(name.toLowerCase());
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new AccountsError(`account "${name}" must be {"role": …, "hash": …}`);
    const { role, hash, ...rest } = value as Record<string, unknown>;
    const extra = Object.keys(rest)[0];
    if (extra !== undefined) throw new AccountsError(`account "${name}": unknown field ${JSON.stringify(extra).slice(0, 40)} (only role and hash)`);
    if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role)) throw new AccountsError(`account "${name}": role must be viewer, operator or admin`);
    if (typeof hash !== 'string') throw new AccountsError(`account "${name}": hash is missing (make one with npm run keys -- hash-password)`);
    try {
      accounts.push({ name, role: role as Role, hash: parsePasswordHash(hash) });
    } catch (error) {
      throw new AccountsError(`account "${name}": ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (accounts.length === 0) throw new AccountsError('names no account; leave the secret out instead');
  return accounts;
}

/** Whether the platform's WebCrypto has PBKDF2 (Node does; the Fastly engine does not): learnt at the first use. */
let nativePbkdf2: boolean | undefined;

/**
 * PBKDF2-HMAC-SHA256, 32 bytes: the platform's own where it has one (Node: a few ms for the
 * default iterations), else built on its HMAC (pbkdf2ByHmac; the Fastly engine).
 */
export async function pbkdf2Sha256(password: string, salt: Uint8Array<ArrayBuffer>, iterations: number): Promise<Uint8Array<ArrayBuffer>> {
  if (nativePbkdf2 !== false) {
    try {
      const bytes = new TextEncoder().encode(password);
      const key = await crypto.subtle.importKey('raw', bytes, 'PBKDF2', false, ['deriveBits']);
      // The Fastly engine's types have no deriveBits (it has none): typed here as Node's WebCrypto has it.
      const subtle = crypto.subtle as unknown as { deriveBits(algorithm: { name: 'PBKDF2'; hash: 'SHA-256'; salt: Uint8Array<ArrayBuffer>; iterations: number }, key: CryptoKey, length: number): Promise<ArrayBuffer> };
      const bits = await subtle.deriveBits({ name: 'PBKDF2', hash: 'SHA-256', salt, iterations }, key, HASH_BYTES * 8);
      nativePbkdf2 = true;
      void bytes;
      return new Uint8Array(bits);
    } catch (error) {
      if (nativePbkdf2 === true) throw error;
      nativePbkdf2 = false;
    }
  }
  return pbkdf2ByHmac(password, salt, iterations);
}

/**
 * PBKDF2-HMAC-SHA256 (RFC 8018, one 32-byte block) over the platform's HMAC: the engine has no
 * PBKDF2 of its own (see the module header).
 */
export async function pbkdf2ByHmac(password: string, salt: Uint8Array, iterations: number): Promise<Uint8Array<ArrayBuffer>> {
  const pair: HmacKeyWithBytes = await importHmacKey(new TextEncoder().encode(password), ['sign']);
  const first = new Uint8Array(salt.length + 4);
  first.set(salt);
  first[salt.length + 3] = 1;
  let u = new Uint8Array(await crypto.subtle.sign('HMAC', pair.key, first));
  const out = u.slice();
  for (let i = 1; i < iterations; i++) {
    u = new Uint8Array(await crypto.subtle.sign('HMAC', pair.key, u));
    for (let j = 0; j < HASH_BYTES; j++) out[j]! ^= u[j]!;
  }
  // The password's bytes stay referenced until here (js-compute keeps a pointer, not a copy).
  void pair.bytes;
  return out;
}

/** A new hash's text for `password` (for `npm run keys -- hash-password`). */
export async function hashPassword(password: string, iterations = DEFAULT_ITERATIONS, salt?: Uint8Array<ArrayBuffer>): Promise<string> {
  if (!Number.isInteger(iterations) || iterations < MIN_ITERATIONS || iterations > MAX_ITERATIONS) {
    throw new AccountsError(`iterations must be from ${MIN_ITERATIONS} to ${MAX_ITERATIONS}`);
  }
  const s = salt ?? crypto.getRandomValues(new Uint8Array(MIN_SALT_BYTES));
  const hash = await pbkdf2Sha256(password, s, iterations);
  return `${HASH_SCHEME}$${iterations}$${base64url(s)}$${base64url(hash)}`;
}

/** Whether `password` matches `hash` (the comparison does not stop at the first differing byte). */
export async function verifyPassword(password: string, hash: PasswordHash): Promise<boolean> {
  const derived = await pbkdf2Sha256(password, hash.salt, hash.iterations);
  let diff = derived.length ^ hash.hash.length;
  for (let i = 0; i < hash.hash.length; i++) diff |= (derived[i] ?? 0) ^ hash.hash[i]!;
  return diff === 0;
}

/** How long a verified sign-in is remembered in one instance: a console's polls within it pay no KDF. */
export const VERIFIED_TTL_MS = 5 * 60_000;
/** The most sign-ins remembered per instance; the oldest goes first. */
export const VERIFIED_MAX = 64;

/**
 * Sign-ins verified recently, per instance (a reused sandbox, the Node process): keyed by the
 * SHA-256 of the account, the password and the stored hash, never the password itself; bounded
 * (VERIFIED_MAX, oldest out) and expiring (VERIFIED_TTL_MS after it was verified). A changed
 * hash or role gives another key, so an account's new password is checked anew at once, and a
 * removed account is not found before its cache entry is looked at.
 */
export class VerifiedCache {
  readonly #entries = new Map<string, number>();
  constructor(
    private readonly ttlMs = VERIFIED_TTL_MS,
    private readonly max = VERIFIED_MAX,
  ) {}

  static async keyOf(account: Account, password: string): Promise<string> {
    const text = `${account.name}\u0000${account.role}\u0000${account.hash?.text ?? ''}\u0000${password}`;
    return hex(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text))));
  }

  has(key: string, nowMs: number): boolean {
    const until = this.#entries.get(key);
    if (until === undefined) return false;
    if (until <= nowMs) {
      this.#entries.delete(key);
      return false;
    }
    return true;
  }

  add(key: string, nowMs: number): void {
    this.#entries.delete(key);
    this.#entries.set(key, nowMs + this.ttlMs);
    while (this.#entries.size > this.max) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
  }

  get size(): number {
    return this.#entries.size;
  }
}

/** The instance's cache (module state: one per reused sandbox or Node process). */
export const verifiedSignIns = new VerifiedCache();

/** The account a Basic-Auth user name names (exact name), if any. */
export function findAccount(accounts: readonly Account[], user: string): Account | undefined {
  return accounts.find((a) => a.name === user);
}

/**
 * Checks a password against an account: the `admin_password` account by constant-time comparison,
 * a hashed one from the cache or by the KDF (then cached). `compare` is the constant-time text
 * comparison (http.ts's), passed in to keep this module free of it.
 */
export async function checkPassword(account: Account, password: string, nowMs: number, compare: (a: string, b: string) => boolean, cache: VerifiedCache = verifiedSignIns): Promise<boolean> {
  if (account.hash === undefined) return compare(password, account.password ?? '') && account.password !== undefined;
  const key = await VerifiedCache.keyOf(account, password);
  if (cache.has(key, nowMs)) return true;
  const ok = await verifyPassword(password, account.hash);
  if (ok) cache.add(key, nowMs);
  return ok;
}
