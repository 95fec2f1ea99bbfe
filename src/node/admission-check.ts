/**
 * The origin's side of the signed admission (see src/core/admission.ts): verify the header with
 * `jose` against the JWKS the waiting room publishes, and refuse what did not come through it. The
 * demo origin uses it (`npm start` with WR_DEMO_PROTECTED=1); docs/origin-protection.md shows the
 * same for Express. Nothing here is specific to this project but the defaults: any JWT library that
 * does ES256 and JWKS does the same.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';

export interface AdmissionCheckOptions {
  /** Where the waiting room publishes its keys: `https://<your site>/__wr/.well-known/jwks.json`. */
  readonly jwksUrl: string;
  /** The `admission_audience` setting. */
  readonly audience?: string;
  /** The `admission_header` setting. */
  readonly header?: string;
}

export type AdmissionCheck = { readonly ok: true; readonly claims: JWTPayload } | { readonly ok: false; readonly reason: string };

/** A verifier of admission headers: the keys are fetched once and kept (jose refetches for an unknown `kid`). */
export function createAdmissionCheck(options: AdmissionCheckOptions): (header: string | string[] | undefined) => Promise<AdmissionCheck> {
  let keys: ReturnType<typeof createRemoteJWKSet> | undefined;
  return async (header) => {
    if (header === undefined || header === '') return { ok: false, reason: 'no admission header' };
    if (Array.isArray(header)) return { ok: false, reason: 'more than one admission header' };
    keys ??= createRemoteJWKSet(new URL(options.jwksUrl));
    try {
      const { payload } = await jwtVerify(header, keys, {
        algorithms: ['ES256'],
        issuer: 'waiting-room',
        audience: options.audience ?? 'origin',
        requiredClaims: ['exp', 'iat'],
      });
      return { ok: true, claims: payload };
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      return { ok: false, reason: typeof code === 'string' ? code : error instanceof Error ? error.message : String(error) };
    }
  };
}

/**
 * Middleware for a plain node:http server: `next()` for a request the waiting room admitted (its
 * claims on `req.admission`), 403 for anything else.
 */
export function requireAdmission(options: AdmissionCheckOptions): (req: IncomingMessage & { admission?: JWTPayload }, res: ServerResponse, next: () => void) => void {
  const check = createAdmissionCheck(options);
  const header = (options.header ?? 'waiting-room-admission').toLowerCase();
  return (req, res, next) => {
    check(req.headers[header]).then(
      (result) => {
        if (result.ok) {
          req.admission = result.claims;
          next();
          return;
        }
        req.resume();
        res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
        res.end(`This site is served through its waiting room only (${result.reason}).\n`);
      },
      (error: unknown) => {
        req.resume();
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`admission check failed: ${String(error)}\n`);
      },
    );
  };
}
