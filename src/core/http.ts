/**
 * Small HTTP helpers shared by the handler, the admin routes and the origin adapters: JSON answers,
 * bounded body reads, Basic/Bearer credentials, a constant-time comparison and the origin's
 * request target.
 */

/**
 * Sent with every body the waiting room writes itself: a browser must not read our JSON or error
 * text as HTML or script, whatever it holds.
 */
export const NOSNIFF = { 'x-content-type-options': 'nosniff' } as const;

export function jsonResponse(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(`${JSON.stringify(body)}\n`, {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...NOSNIFF, ...headers },
  });
}

/** A 4xx with a reason a person can act on. */
export function errorResponse(status: number, error: string, headers: Record<string, string> = {}): Response {
  return jsonResponse(status, { error }, headers);
}

export type BodyResult = { readonly ok: true; readonly text: string } | { readonly ok: false; readonly response: Response };

/** Reads a small request body, refusing more than `limit` bytes without buffering the excess. */
export async function readSmallBody(request: Request, limit: number): Promise<BodyResult> {
  const declared = Number(request.headers.get('content-length') ?? '0');
  if (declared > limit) return { ok: false, response: errorResponse(413, `body must be at most ${limit} bytes`) };
  if (request.body === null) return { ok: true, text: '' };
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    let read: Awaited<ReturnType<typeof reader.read>>;
    try {
      read = await reader.read();
    } catch {
      // The client's connection ended before the body did (a reset, a proxy giving up): the
      // request is incomplete, the caller's mistake or its network's, and nothing is acted on.
      return { ok: false, response: errorResponse(400, 'the request body was cut short; nothing was changed, send it again') };
    }
    const { done, value } = read;
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      return { ok: false, response: errorResponse(413, `body must be at most ${limit} bytes`) };
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    all.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { ok: true, text: new TextDecoder().decode(all) };
}

/**
 * Compares two strings in time that depends only on their lengths, so a guess cannot be refined
 * one character at a time.
 */
export function timingSafeEqual(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  const length = Math.max(x.length, y.length);
  let diff = x.length ^ y.length;
  for (let i = 0; i < length; i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

export interface BasicCredentials {
  readonly user: string;
  readonly password: string;
}

/** Reads `Authorization: Basic …`; undefined when absent or not decodable. */
export function readBasicAuth(header: string | null): BasicCredentials | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/]+=*)\s*$/i.exec(header ?? '');
  if (!match?.[1]) return undefined;
  let decoded: string;
  try {
    const binary = atob(match[1]);
    decoded = new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Reads `Authorization: Bearer …`; undefined when absent. */
export function readBearer(header: string | null): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match?.[1];
}

/**
 * The request target to send to the origin for a request URL: its path and query, as a string to
 * append to the origin's own scheme and authority (never resolved against it).
 *
 * A path that starts with `//` is the one case where that string is not read as the same path:
 * URL parsing turns `/.//h/x`, `/x/..//h/x`, `/%2e//h/x` and `/\h/x` into `//h/x`, which any
 * server that resolves its request target against a base (as `new URL(target, base)` does) reads
 * as the host `h`. The leading slashes are collapsed to one; the waiting room's own path matching
 * collapses repeated slashes too, so the origin gets the path the decision was made on.
 */
export function originTarget(requestUrl: string): string {
  const url = new URL(requestUrl);
  return `${url.pathname.replace(/^\/{2,}/, '/')}${url.search}`;
}
