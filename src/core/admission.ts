/**
 * The signed admission (`admission_header`): every request the edge passes to the origin carries a
 * compact JWS, ES256, that says the waiting room let it through — the queue, the ticket, when it was
 * let in, when its session ends, and how (`queue`, `walk-in`, `vip`, or for requests the queue does
 * not hold: `bypass`, `unqueued`, `store-down`, `event-over`). The origin checks it with any JWT
 * library and the public keys at `<prefix>.well-known/jwks.json`; no call back, no store call.
 *
 * Keys: the secret `admission_keys`, a JSON array of private P-256 JWKs, each with a `kid`; the first
 * signs, every one is listed in the JWKS (rotation: put a new key first, keep the old one listed
 * until its tokens have expired, then remove it).
 *
 * Cost: an admitted visitor's admission is signed once and carried in the cookie
 * `<cookie_name>_adm` (HttpOnly) until half its lifetime is gone, bound to the visitor's access
 * token by an HMAC (a derived key of the ring, `admission`), so the request path checks one HMAC
 * instead of signing. Requests without an access token (bypass rules, unqueued paths) are signed
 * each time, except that a long-lived host (Node) keeps one signature per kind of grant for half
 * its lifetime. A header the client sends under the admission header's name of any queue of the
 * service is always removed, whether ours is added or not (see HandlerDeps.admissionHeaders).
 */
import { describeError } from './auth-throttle';
import { decodeJwt, importJWK, SignJWT } from 'jose';
import { parseAdmissionKeys, type AdmissionKey } from './admission-keys';
import { base64url } from './bytes';
import type { AdmissionClaim, Config, Secrets } from './config';
import type { HandlerContext } from './context';
import { readCookieValues, serializeCookie } from './cookies';
import type { KeyRing } from './tokens';
import type { OriginHeaders } from './ports';
import type { Grant, Trace } from './types';

export type { AdmissionVia, Grant } from './types';

/** The issuer of every admission: what the origin checks `iss` against. */
export const ADMISSION_ISSUER = 'waiting-room';

/** Imported signing keys, kept by the secret's text (importing is not free on the edge). */
const imported = new Map<string, Promise<CryptoKey>>();

async function signingKey(key: AdmissionKey): Promise<CryptoKey> {
  const id = `${key.kid}|${key.privateJwk.d ?? ''}`;
  let found = imported.get(id);
  if (found === undefined) {
    found = importJWK(key.privateJwk, 'ES256') as Promise<CryptoKey>;
    imported.set(id, found);
    if (imported.size > 16) imported.delete(imported.keys().next().value!);
  }
  return found;
}

export type AdmissionSettings = Pick<Config, 'queueName' | 'admissionAudience' | 'admissionClaims' | 'admissionLifetimeSeconds'>;

/** Signs an admission for `grant` at `nowMs`: the claims the operator chose, the audience, the issuer, short-lived. */
export async function signAdmission(key: AdmissionKey, settings: AdmissionSettings, grant: Grant, nowMs: number): Promise<{ token: string; exp: number }> {
  const iat = Math.floor(nowMs / 1000);
  let exp = iat + settings.admissionLifetimeSeconds;
  // Never past the session: a header replayed after the session ended is expired.
  if (grant.sessionExpires !== undefined) exp = Math.min(exp, grant.sessionExpires);
  const chosen = new Set<AdmissionClaim>(settings.admissionClaims);
  const claims: Record<string, unknown> = {};
  if (chosen.has('queue')) claims['queue'] = settings.queueName;
  if (chosen.has('ticket') && grant.ticket !== undefined) claims['ticket'] = grant.ticket;
  if (chosen.has('admitted_at') && grant.admittedAt !== undefined) claims['admitted_at'] = grant.admittedAt;
  if (chosen.has('session_expires') && grant.sessionExpires !== undefined) claims['session_expires'] = grant.sessionExpires;
  if (chosen.has('via')) claims['via'] = grant.via;
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: 'JWT' })
    .setIssuer(ADMISSION_ISSUER)
    .setAudience(settings.admissionAudience)
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .sign(await signingKey(key));
  return { token, exp };
}

/** Carried admissions whose HMAC held, by cookie value (see carriedAdmission); bounded, oldest out first. */
const checked = new Map<string, { readonly binding: string; readonly ring: KeyRing; readonly exp: unknown; readonly aud: unknown }>();
const CHECKED_MAX = 20_000;

/** The HMAC that binds a carried admission to one access token (the ring's derived `admission` key). */
export async function carryTag(ring: KeyRing, token: string, binding: string): Promise<string> {
  const key = await ring.current.keyFor('admission');
  const mac = await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(`${token}|${binding}`));
  return base64url(new Uint8Array(mac).subarray(0, 16));
}

/**
 * A carried admission from the cookie, if it is ours, made for this access token (`binding`), for
 * this audience, and has more than half its lifetime left: the token to forward. Else undefined,
 * and a new one is signed.
 */
export async function carriedAdmission(ring: KeyRing, settings: AdmissionSettings, value: string | undefined, grant: Grant, nowMs: number): Promise<string | undefined> {
  const binding = grant.binding;
  if (binding === undefined) return undefined;
  if (value === undefined || value.length > 2048) return undefined;
  const tilde = value.lastIndexOf('~');
  if (tilde < 1) return undefined;
  const token = value.slice(0, tilde);
  // A long-lived host (Node) has checked this very cookie for this binding with this ring before.
  let known = checked.get(value);
  if (known === undefined || known.binding !== binding || known.ring !== ring) {
    if ((await carryTag(ring, token, binding)) !== value.slice(tilde + 1)) return undefined;
    let claims: { exp?: unknown; aud?: unknown };
    try {
      claims = decodeJwt(token);
    } catch {
      return undefined;
    }
    known = { binding, ring, exp: claims.exp, aud: claims.aud };
    checked.set(value, known);
    if (checked.size > CHECKED_MAX) checked.delete(checked.keys().next().value!);
  }
  const { exp, aud } = known;
  // An operator who changed the audience or the lifetime gets new admissions at once.
  if (aud !== settings.admissionAudience || typeof exp !== 'number') return undefined;
  const left = exp * 1000 - nowMs;
  if (left <= 0) return undefined;
  // One that ends with the session cannot be made longer: it serves until then.
  return left > (settings.admissionLifetimeSeconds * 1000) / 2 || exp === grant.sessionExpires ? token : undefined;
}

/** The cookie a carried admission travels in. */
export function admissionCookieName(settings: Pick<Config, 'cookieName'>): string {
  return `${settings.cookieName}_adm`;
}

/** Parsed key sets, kept by the secret's text. */
let parsedKeys: { readonly text: string; readonly keys: AdmissionKey[] } | undefined;

/** The admission keys the secret holds; throws with what is wrong (or that it is not set). */
export async function admissionKeys(secrets: Pick<Secrets, 'admissionKeys'>): Promise<AdmissionKey[]> {
  const text = await secrets.admissionKeys();
  if (text === undefined || text === '') throw new Error('the secret admission_keys is not set');
  if (parsedKeys?.text !== text) parsedKeys = { text, keys: parseAdmissionKeys(text) };
  return parsedKeys.keys;
}

/**
 * Admissions kept by a long-lived host (Node) for half their lifetime: those of grants without an
 * access token (the same for every request of their kind) and, with admission_carry = none, each
 * admitted visitor's. On Fastly an instance serves one request and this stays empty.
 */
const shared = new Map<string, { readonly token: string; readonly exp: number }>();
/** Kinds of grant, and with admission_carry = none the admitted visitors, a host keeps at most. */
const SHARED_MAX = 20_000;

/**
 * What the origin request carries: the signed admission header (none when the feature is off or
 * signing failed; a client's copy is removed either way, see OriginHeaders), and the cookie that
 * carries the admission on.
 */
export interface Admitted {
  readonly header: OriginHeaders['set'];
  readonly cookie: string | undefined;
}

/**
 * The admission of a request the edge passes to the origin: ours (carried, shared, or signed now)
 * in place of the client's. A failure to sign (no keys, a broken key) passes the request without
 * one and says why in the log: the origin decides what an unsigned request gets.
 */
export async function admissionFor(ctx: HandlerContext, request: Request, grant: Grant, trace: Trace): Promise<Admitted> {
  const { config, secrets, clock } = ctx;
  const name = config.admissionHeader;
  if (name === 'off') return { header: undefined, cookie: undefined };
  const nowMs = clock.now();
  const half = (config.admissionLifetimeSeconds * 1000) / 2;
  let sharedKey: string | undefined;
  const carry = config.admissionCarry === 'cookie';
  if (grant.binding !== undefined && carry) {
    const value = readCookieValues(request.headers.get('cookie'), admissionCookieName(config))[0];
    const carried = await carriedAdmission(secrets.keyRing, config, value, grant, nowMs);
    if (carried !== undefined) return { header: { name, value: carried }, cookie: undefined };
  } else {
    // Kept by this host: a grant without an access token is the same for all of its kind; with
    // admission_carry = none, an admitted visitor's is its own (keyed by its binding).
    sharedKey = `${config.queueName}|${grant.via}|${grant.binding ?? ''}|${grant.sessionExpires ?? ''}|${config.admissionAudience}|${config.admissionClaims.join(',')}|${config.admissionLifetimeSeconds}`;
    const kept = shared.get(sharedKey);
    if (kept !== undefined && kept.exp * 1000 - nowMs > half) return { header: { name, value: kept.token }, cookie: undefined };
  }
  let signed: { token: string; exp: number };
  try {
    const [key] = (await admissionKeys(secrets)) as [AdmissionKey];
    signed = await signAdmission(key, config, grant, nowMs);
  } catch (error) {
    const why = `admission_unsigned: ${describeError(error)}`;
    trace.reason = trace.reason === undefined ? why : `${trace.reason}; ${why}`;
    return { header: undefined, cookie: undefined };
  }
  const header = { name, value: signed.token };
  if (sharedKey !== undefined) {
    shared.set(sharedKey, signed);
    if (shared.size > SHARED_MAX) shared.delete(shared.keys().next().value!);
    return { header, cookie: undefined };
  }
  const tag = await carryTag(secrets.keyRing, signed.token, grant.binding!);
  const maxAge = Math.max(1, signed.exp - Math.floor(nowMs / 1000));
  return { header, cookie: serializeCookie(admissionCookieName(config), `${signed.token}~${tag}`, { maxAge }) };
}
