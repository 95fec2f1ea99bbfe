/**
 * A visitor's cookies as a browser keeps them, for the bench's load arms and the engine's reuse
 * simulation. No platform imports: it is bundled into a wasm as well as run on Node.
 */

/**
 * A Cookie header after an answer's Set-Cookie lines, as a browser keeps them: each cookie set
 * replaces the one of its name (the others stay, in their order), one set with `Max-Age=0` or an
 * empty value is dropped.
 */
export function keepCookies(sent: string | undefined, setCookie: readonly string[] | undefined): string | undefined {
  if (setCookie === undefined || setCookie.length === 0) return sent;
  const jar = new Map<string, string>();
  for (const pair of (sent ?? '').split(';')) {
    const at = pair.indexOf('=');
    if (at > 0) jar.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
  }
  for (const line of setCookie) {
    const [pair = '', ...attributes] = line.split(';');
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    const name = pair.slice(0, at).trim();
    const value = pair.slice(at + 1).trim();
    if (value === '' || attributes.some((a) => /^\s*max-age\s*=\s*0\s*$/i.test(a))) jar.delete(name);
    else jar.set(name, value);
  }
  return jar.size === 0 ? undefined : [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
}
