/**
 * Reading and writing the queue cookie. The parser accepts any `Cookie` header a browser or a
 * client library sends (spaces, other cookies, quoted values, duplicates, junk) and never throws:
 * a header we cannot read is the same as no cookie.
 */

/** Every value sent for `name`, in header order (a browser may send duplicates across paths). */
export function readCookieValues(header: string | null | undefined, name: string): string[] {
  if (!header) return [];
  const values: string[] = [];
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    let value = part.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (value !== '') values.push(value);
  }
  return values;
}

export interface CookieOptions {
  /** Lifetime in seconds; 0 deletes the cookie. */
  readonly maxAge: number;
}

/**
 * A `Set-Cookie` value for the queue cookie: host-only, whole site, not readable by scripts, sent
 * on top-level navigations from other sites (so links into a sale work) but not on cross-site
 * subrequests.
 */
export function serializeCookie(name: string, value: string, options: CookieOptions): string {
  return `${name}=${value}; Max-Age=${Math.max(0, Math.floor(options.maxAge))}; Path=/; HttpOnly; Secure; SameSite=Lax`;
}
