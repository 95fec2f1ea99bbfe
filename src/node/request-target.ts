/**
 * Turns a request line's target and its Host header into the URL the handler sees, or says why the
 * request is bad. Total: it never throws, whatever bytes the client sent.
 *
 * The authority always comes from the Host header, never from the target: an absolute-form target
 * (`http://other/x`) and an origin-form one that starts with `//` (`//other/x`, `/\other/x`) both
 * contribute only their path and query. `new URL(target, "http://" + host)` would instead read
 * `//other/x` as a host, and a host built that way is where a proxy sends a visitor's cookies.
 */

export type TargetResult =
  | { readonly ok: true; readonly url: string }
  | { readonly ok: false; readonly status: 400 | 405; readonly reason: string };

/** Methods a fetch `Request` cannot carry: they get a 405, not a crash. */
const UNSUPPORTED_METHODS = new Set(['CONNECT', 'TRACE', 'TRACK']);

const MAX_PORT = 65_535;
const DEC_OCTET = '(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])';
const IPV4 = new RegExp(`^${DEC_OCTET}(?:\\.${DEC_OCTET}){3}$`);
/** RFC 3986 reg-name: unreserved, pct-encoded and sub-delims. Empty is refused here (see parseHost). */
const REG_NAME = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+$/;
/** The characters an IPv6 literal may contain (its grammar is left to the URL parser). */
const IPV6_CHARS = /^[0-9A-Fa-f:.]+$/;
/** RFC 3986 scheme, then `//` and the authority, up to the path, query or fragment. */
const ABSOLUTE_FORM = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(.*)$/s;

/**
 * A Host header value per RFC 9110 §7.2 and RFC 3986 §3.2.2: reg-name, IPv4 or `[IPv6]`, then an
 * optional `:port` of at most 65535. Returns the value, or undefined when it is not one.
 */
export function parseHost(value: string): string | undefined {
  let host = value;
  let port: string | undefined;
  if (host.startsWith('[')) {
    const close = host.indexOf(']');
    if (close < 0) return undefined;
    const literal = host.slice(1, close);
    // IPvFuture (`[v1.x]`) is valid RFC 3986 but no URL parser or origin takes it.
    if (!IPV6_CHARS.test(literal) || !literal.includes(':')) return undefined;
    const rest = host.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return undefined;
      port = rest.slice(1);
    }
    host = host.slice(0, close + 1);
  } else {
    const colon = host.lastIndexOf(':');
    if (colon >= 0) {
      port = host.slice(colon + 1);
      host = host.slice(0, colon);
    }
    if (!IPV4.test(host) && !REG_NAME.test(host)) return undefined;
  }
  if (port !== undefined && port !== '' && (!/^[0-9]{1,5}$/.test(port) || Number(port) > MAX_PORT)) return undefined;
  return value;
}

/**
 * The URL for a request: `http://` + the Host header + the target's path and query.
 * `hosts` are the request's Host header values (more than one is a bad request); `fallbackHost`
 * stands in when an HTTP/1.0 client sends none.
 */
export function requestUrl(method: string, target: string, hosts: readonly string[], fallbackHost: string): TargetResult {
  if (UNSUPPORTED_METHODS.has(method.toUpperCase())) return { ok: false, status: 405, reason: `${method} is not supported` };
  if (hosts.length > 1) return { ok: false, status: 400, reason: 'more than one Host header' };
  const given = hosts[0];
  const host = given === undefined ? fallbackHost : parseHost(given);
  if (host === undefined) return { ok: false, status: 400, reason: 'the Host header is not a valid host[:port]' };

  let path: string;
  if (target.startsWith('/')) {
    path = target;
  } else {
    const absolute = ABSOLUTE_FORM.exec(target);
    if (absolute === null) return { ok: false, status: 400, reason: 'the request target must be a path or an http(s) URL' };
    const [, scheme = '', authority = '', rest = ''] = absolute;
    if (!/^https?$/i.test(scheme)) return { ok: false, status: 400, reason: 'the request target must be a path or an http(s) URL' };
    // The authority is checked (a malformed request is refused) but not used.
    if (parseHost(authority) === undefined) return { ok: false, status: 400, reason: 'the request target names a malformed host' };
    path = rest.startsWith('/') ? rest : `/${rest}`;
  }

  let url: URL;
  try {
    // Concatenated, not resolved: the authority ends where the Host value ends (it holds no `/`,
    // `?`, `#`, `\` or `@`), so whatever the path holds stays path.
    url = new URL(`http://${host}${path}`);
  } catch {
    // A Host that RFC 3986 allows but the URL standard refuses (`a%20b`, bad punycode).
    return { ok: false, status: 400, reason: 'the Host header is not a valid host[:port]' };
  }
  if (url.host === '') return { ok: false, status: 400, reason: 'the Host header is not a valid host[:port]' };
  return { ok: true, url: url.href };
}
