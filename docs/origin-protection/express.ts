/**
 * Origin protection for an Express app: every request must carry the waiting room's signed
 * admission, verified with `jose` against the keys the waiting room publishes. Copy this into your
 * app (it needs `express` and `jose`), point `jwksUrl` at your site's
 * `/__wr/.well-known/jwks.json`, and put the middleware before your routes.
 * Tested in test/origin-examples.test.ts against a running waiting room.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { createRemoteJWKSet, jwtVerify } from 'jose';

export interface AdmissionOptions {
  /** https://<your site>/__wr/.well-known/jwks.json */
  jwksUrl: string;
  /** The waiting room's `admission_audience` (default `origin`). */
  audience?: string;
  /** The waiting room's `admission_header` (default `waiting-room-admission`). */
  header?: string;
}

/** 403 for any request the waiting room did not let through; its claims on `res.locals.admission` otherwise. */
export function admissionRequired(options: AdmissionOptions) {
  // Fetched on first use and kept; refetched when a token names a key it does not know (a rotation).
  const keys = createRemoteJWKSet(new URL(options.jwksUrl));
  return async (req: Request, res: Response, next: NextFunction) => {
    const token = req.get(options.header ?? 'waiting-room-admission');
    if (!token) {
      res.status(403).type('text').send('Please come in through the waiting room.');
      return;
    }
    try {
      const { payload } = await jwtVerify(token, keys, { algorithms: ['ES256'], issuer: 'waiting-room', audience: options.audience ?? 'origin' });
      res.locals['admission'] = payload;
      next();
    } catch {
      res.status(403).type('text').send('Please come in through the waiting room.');
    }
  };
}

/** A shop behind the middleware: what the test runs. */
export function createShop(options: AdmissionOptions): express.Express {
  const app = express();
  app.use(admissionRequired(options));
  app.get('/', (_req, res) => {
    const admission = res.locals['admission'] as { ticket?: number; via?: string };
    res.type('text').send(`welcome, ticket ${admission.ticket ?? '-'} (${admission.via ?? '?'})`);
  });
  return app;
}
