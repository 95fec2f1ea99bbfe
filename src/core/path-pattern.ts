/**
 * Path rules: which request paths a configured pattern list covers (for example the paths the
 * waiting room guards, or the static assets it lets through).
 *
 * Paths and patterns go through the same normalisation, so a rule cannot be dodged by spelling a
 * path differently (`/SALE`, `//sale`, `/%73ale`, `/x/../sale`), and matching walks the path once
 * per pattern with no backtracking regex, so hostile paths cost time linear in their length.
 *
 * Pattern syntax (comma-separated list):
 * - must start with `/`; no whitespace, `?` or `#` (patterns see the path only, never a query);
 * - `*` matches any run of characters inside one segment, never a `/`;
 * - a trailing `/*` or `/**` matches the prefix itself and everything under it: `/static/*`
 *   matches `/static`, `/static/` and `/static/a/b.css`, but not `/staticx`;
 * - `**` anywhere else is refused, as it would read like a globstar that this syntax lacks;
 * - anything else is an exact match, trailing slash included (`/sale` does not match `/sale/`;
 *   write `/sale/*` to cover both);
 * - write `%2A` for a literal `*` and `%2C` for a literal `,`.
 */

/** A path pattern list that cannot be used as configured. */
export class PathPatternError extends Error {
  readonly code = 'ERR_PATH_PATTERN' as const;
  /** The offending pattern, as written (trimmed). */
  readonly pattern: string;

  constructor(pattern: string, reason: string) {
    super(`invalid path pattern "${pattern}": ${reason}`);
    this.name = 'PathPatternError';
    this.pattern = pattern;
  }
}

export interface PathPattern {
  /** The pattern as written (trimmed). */
  readonly source: string;
  /** The pattern after normalisation, wildcards kept. */
  readonly normalized: string;
  /** True for a trailing `/*` or `/**`: the fixed part and everything below it. */
  readonly coversSubtree: boolean;
  /** Segments of the fixed part, each split at `*` into the literal pieces between wildcards. */
  readonly segments: readonly (readonly string[])[];
}

/** Paths longer than this are normalised every time (memory stays bounded by the two limits). */
const MAX_REMEMBERED_PATH = 256;
const MAX_REMEMBERED_PATHS = 1024;
const normalized = new Map<string, string>();

/**
 * Canonical form of a URL pathname, for matching only (never forward it):
 * - percent-escapes of unreserved characters (letters, digits, `-._~`) are decoded, so `/%73ale`
 *   is `/sale` and `/%2e%2e/` is a `..` segment, as the URL standard and most origins treat them;
 * - every other valid escape stays encoded with upper-case hex (`%2f` becomes `%2F`). An encoded
 *   slash in particular is data inside one segment to the URL standard and to most origins;
 *   decoding it would split segments the origin keeps whole and let `%2F..%2F` climb out of a
 *   prefix here when it does not at the origin. A rule can name `%2F` explicitly if needed;
 * - characters a URL parser would have escaped (controls, space, `"`, `#`, `<`, `>`, `?`, `^`,
 *   backtick, `{`, `}`, and non-ASCII as UTF-8) are escaped the same way, so a raw path and a
 *   parsed one compare equal;
 * - ASCII letters are lower-cased (rules are case-insensitive); escapes keep upper-case hex;
 * - repeated slashes collapse and `.`/`..` segments are resolved, never above the root. A trailing
 *   slash is kept, and a path not starting with `/` gets one.
 * Malformed escapes (`%zz`, a lone `%`) are kept as they are; this never throws.
 */
export function normalizePath(rawPath: string): string {
  let normal = normalized.get(rawPath);
  if (normal === undefined) {
    normal = resolveSegments(canonicalizeCharacters(rawPath));
    // A pure function of the text, asked of the same path four times per request (its readings,
    // the reserved prefix, bypass and queue rules): remembered, within a bound, instead of redone.
    if (rawPath.length <= MAX_REMEMBERED_PATH) {
      if (normalized.size >= MAX_REMEMBERED_PATHS) normalized.clear();
      normalized.set(rawPath, normal);
    }
  }
  return normal;
}


/**
 * Parse a comma-separated pattern list; blank text is an empty list.
 * @throws PathPatternError naming the first bad pattern (an empty entry such as `/a,,/b` included).
 */
export function parsePathPatterns(text: string): PathPattern[] {
  if (text.trim() === '') return [];
  return text.split(',').map((entry) => compilePattern(entry.trim()));
}

/** True when the normalised `path` matches at least one pattern. */
export function matchesAnyPath(path: string, patterns: readonly PathPattern[]): boolean {
  if (patterns.length === 0) return false;
  const segments = normalizePath(path).split('/');
  for (const pattern of patterns) {
    if (matchesPattern(segments, pattern)) return true;
  }
  return false;
}

function compilePattern(source: string): PathPattern {
  if (source === '') throw new PathPatternError(source, 'empty pattern');
  if (!source.startsWith('/')) throw new PathPatternError(source, 'must start with "/"');
  if (/\s/.test(source)) throw new PathPatternError(source, 'must not contain whitespace');
  if (source.includes('?') || source.includes('#')) {
    throw new PathPatternError(source, 'must not contain "?" or "#": patterns match the path only');
  }

  const normalized = normalizePath(source);
  let fixed = normalized;
  let coversSubtree = false;
  if (fixed.endsWith('/**')) {
    fixed = fixed.slice(0, -3);
    coversSubtree = true;
  } else if (fixed.endsWith('/*')) {
    fixed = fixed.slice(0, -2);
    coversSubtree = true;
  }
  if (fixed.includes('**')) {
    throw new PathPatternError(source, '"**" is only allowed as a final "/**"');
  }

  const segments = fixed.split('/').map((segment) => segment.split('*'));
  return { source, normalized, coversSubtree, segments };
}

function matchesPattern(pathSegments: readonly string[], pattern: PathPattern): boolean {
  const wanted = pattern.segments;
  if (pattern.coversSubtree ? pathSegments.length < wanted.length : pathSegments.length !== wanted.length) {
    return false;
  }
  for (const [index, pieces] of wanted.entries()) {
    if (!matchesSegment(pathSegments[index] ?? '', pieces)) return false;
  }
  return true;
}

/**
 * Match one segment against a glob split at its `*`s. The first piece must start the segment, the
 * last must end it, and the middle ones are found left to right; taking the leftmost occurrence
 * of each is always safe with `*` as the only wildcard, so there is no backtracking.
 */
function matchesSegment(segment: string, pieces: readonly string[]): boolean {
  const first = pieces[0] ?? '';
  if (pieces.length === 1) return segment === first;
  const last = pieces[pieces.length - 1] ?? '';
  if (segment.length < first.length + last.length) return false;
  if (!segment.startsWith(first) || !segment.endsWith(last)) return false;

  const end = segment.length - last.length;
  let at = first.length;
  for (let i = 1; i < pieces.length - 1; i++) {
    const piece = pieces[i] ?? '';
    if (piece === '') continue;
    const found = segment.indexOf(piece, at);
    if (found === -1 || found + piece.length > end) return false;
    at = found + piece.length;
  }
  return true;
}

/** Collapse empty segments and resolve `.` and `..`, keeping a trailing slash. */
function resolveSegments(path: string): string {
  const parts = path.split('/');
  const kept: string[] = [];
  for (const part of parts) {
    if (part === '' || part === '.') continue;
    if (part === '..') kept.pop();
    else kept.push(part);
  }
  // As in RFC 3986 dot-segment removal, `/a/.` and `/a/b/..` name a directory: `/a/`.
  const last = parts[parts.length - 1];
  const endsAsDirectory = parts.length > 1 && (last === '' || last === '.' || last === '..');
  const joined = '/' + kept.join('/');
  return endsAsDirectory && kept.length > 0 ? joined + '/' : joined;
}

/** Decode unreserved escapes, upper-case the rest, escape what a URL parser would, fold case. */
function canonicalizeCharacters(raw: string): string {
  let out = '';
  // Characters that need no change are copied in runs: most paths are already canonical.
  let runStart = 0;
  for (let i = 0; i < raw.length; i++) {
    const code = raw.charCodeAt(i);
    if (isKeptAsIs(code)) continue;
    out += raw.slice(runStart, i);

    if (code === 0x25 /* % */) {
      const high = hexDigitValue(raw.charCodeAt(i + 1));
      const low = high < 0 ? -1 : hexDigitValue(raw.charCodeAt(i + 2));
      if (low < 0) {
        out += '%';
      } else {
        const byte = high * 16 + low;
        out += isUnreserved(byte) ? String.fromCharCode(lowerAscii(byte)) : escapeByte(byte);
        i += 2;
      }
    } else if (code >= 0x80) {
      let codePoint = code;
      const next = raw.charCodeAt(i + 1);
      if (code >= 0xd800 && code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        codePoint = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00);
        i += 1;
      } else if (code >= 0xd800 && code <= 0xdfff) {
        // A lone surrogate has no UTF-8 form; URL parsers substitute U+FFFD.
        codePoint = 0xfffd;
      }
      out += escapeCodePoint(codePoint);
    } else if (isEscapedByUrlParser(code)) {
      out += escapeByte(code);
    } else {
      out += String.fromCharCode(lowerAscii(code));
    }
    runStart = i + 1;
  }
  return runStart === 0 ? raw : out + raw.slice(runStart);
}

/** Printable ASCII other than `%`, upper-case letters and what a URL parser escapes. */
function isKeptAsIs(code: number): boolean {
  return (
    code > 0x20 &&
    code < 0x7f &&
    code !== 0x25 &&
    !(code >= 0x41 && code <= 0x5a) &&
    !isEscapedByUrlParser(code)
  );
}

function isUnreserved(byte: number): boolean {
  return (
    (byte >= 0x30 && byte <= 0x39) ||
    (byte >= 0x41 && byte <= 0x5a) ||
    (byte >= 0x61 && byte <= 0x7a) ||
    byte === 0x2d ||
    byte === 0x2e ||
    byte === 0x5f ||
    byte === 0x7e
  );
}

/** ASCII characters in the URL standard's path percent-encode set (plus DEL). */
function isEscapedByUrlParser(code: number): boolean {
  if (code <= 0x20 || code === 0x7f) return true;
  switch (code) {
    case 0x22: // "
    case 0x23: // #
    case 0x3c: // <
    case 0x3e: // >
    case 0x3f: // ?
    case 0x5e: // ^
    case 0x60: // `
    case 0x7b: // {
    case 0x7d: // }
      return true;
    default:
      return false;
  }
}

function lowerAscii(code: number): number {
  return code >= 0x41 && code <= 0x5a ? code + 0x20 : code;
}

const HEX_DIGITS = '0123456789ABCDEF';

function escapeByte(byte: number): string {
  return '%' + HEX_DIGITS.charAt(byte >>> 4) + HEX_DIGITS.charAt(byte & 0x0f);
}

/** UTF-8 percent-encoding of one code point (0x80 and above). */
function escapeCodePoint(codePoint: number): string {
  if (codePoint < 0x800) {
    return escapeByte(0xc0 | (codePoint >>> 6)) + escapeByte(0x80 | (codePoint & 0x3f));
  }
  if (codePoint < 0x10000) {
    return (
      escapeByte(0xe0 | (codePoint >>> 12)) +
      escapeByte(0x80 | ((codePoint >>> 6) & 0x3f)) +
      escapeByte(0x80 | (codePoint & 0x3f))
    );
  }
  return (
    escapeByte(0xf0 | (codePoint >>> 18)) +
    escapeByte(0x80 | ((codePoint >>> 12) & 0x3f)) +
    escapeByte(0x80 | ((codePoint >>> 6) & 0x3f)) +
    escapeByte(0x80 | (codePoint & 0x3f))
  );
}

function hexDigitValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  if (code >= 0x41 && code <= 0x46) return code - 0x37;
  if (code >= 0x61 && code <= 0x66) return code - 0x57;
  return -1;
}
