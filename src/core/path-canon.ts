/**
 * What an origin might make of a request path, and the conservative decisions built on it.
 *
 * Origins disagree about paths: Tomcat drops `;params` from each segment, many servers decode `%2F`
 * to `/` (some twice), IIS and others read `\` as `/`, and RFC 3986 dot removal keeps the empty
 * segments that `//` leaves while other servers collapse them first. A path that we read one way
 * and the origin another is how a queue is dodged (`/static/..;/shop` is a static asset to us and
 * the shop to Tomcat). So instead of one canonical form, `readPath` gives every reading reachable
 * by any order of those steps, each in the canonical form of `normalizePath` (so the matching
 * semantics of path-pattern.ts are kept), and the rules decide conservatively:
 * - a bypass rule applies only if every reading matches it (and the path is not ambiguous);
 * - a queue rule applies if any reading matches it (or the path is ambiguous);
 * - a path any reading of which lands under our reserved prefix, spelt other than exactly the
 *   prefix, gets a 404 from us and is never forwarded.
 * A path is ambiguous when its readings cannot all be enumerated within fixed bounds (nested
 * encodings deeper than MAX_DECODES, or more intermediate forms than MAX_STATES / MAX_WORK allow):
 * it is then treated as hostile, never as clean. Pure: runs the same on Fastly and in Node.
 */
import { matchesAnyPath, normalizePath, type PathPattern } from './path-pattern';

/** Nested percent-encodings followed; a deeper one makes the path ambiguous. */
export const MAX_DECODES = 3;
/** Distinct intermediate forms explored before the path is called ambiguous. */
const MAX_STATES = 256;
/**
 * Characters of intermediate forms examined before the path is called ambiguous: bounds the cost
 * of a hostile path (the Fastly engine interprets this code; a long path of `..;\%252f` must
 * not cost a request its CPU budget). An ordinary path with escapes needs a few forms.
 */
const MAX_WORK = 32 * 1024;
/** Decoding passes when looking for our prefix in an ambiguous path. */
const DEEP_DECODES = 16;

export interface PathReadings {
  /** Distinct readings, each a fixpoint of `normalizePath`; the first is `normalizePath(raw)`. */
  readonly readings: readonly string[];
  /** True when not every reading could be enumerated: rules must treat the path as hostile. */
  readonly ambiguous: boolean;
}

/**
 * One intermediate form. `decoded: false` is the request's spelling (escapes are escapes);
 * `decoded: true` is a string of bytes (char codes 0..255) after at least one decoding pass, in
 * which a `%` is a literal byte that a further pass may or may not read as an escape.
 */
interface State {
  readonly text: string;
  readonly decoded: boolean;
  readonly decodes: number;
}

/** Characters that can make a path read two ways; a path without any has one reading. */
const SUSPICIOUS = /[%;\\]|\/\/|(?:^|\/)\.\.?(?:\/|$)/;

/** Every reading an origin might make of `rawPath` (a URL pathname, or a raw request target's path). */
export function readPath(rawPath: string): PathReadings {
  const literal = normalizePath(rawPath);
  if (!SUSPICIOUS.test(rawPath)) return { readings: [literal], ambiguous: false };

  const readings = new Set<string>([literal]);
  const seen = new Set<string>();
  const queue: State[] = [{ text: rawPath, decoded: false, decodes: 0 }];
  let ambiguous = false;
  let work = 0;
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const key = (next.decoded ? 'd' : 'e') + next.text;
    if (seen.has(key)) continue;
    work += next.text.length;
    if (seen.size >= MAX_STATES || work > MAX_WORK) {
      ambiguous = true;
      break;
    }
    seen.add(key);
    for (const reading of readingsOf(next)) readings.add(reading);
    queue.push(
      { ...next, text: backslashAsSlash(next.text) },
      { ...next, text: dropParams(next.text) },
      { ...next, text: removeDotSegments(next.text) },
    );
    if (hasEscape(next.text)) {
      if (next.decodes >= MAX_DECODES) ambiguous = true;
      else queue.push({ text: decodeOnce(next), decoded: true, decodes: next.decodes + 1 });
    }
  }
  return { readings: [...readings], ambiguous };
}

/** Bypass only when every reading an origin might make is a bypass path. */
export function bypassApplies(path: PathReadings, patterns: readonly PathPattern[]): boolean {
  if (path.ambiguous || patterns.length === 0) return false;
  return path.readings.every((reading) => matchesAnyPath(reading, patterns));
}

/** Queue when any reading an origin might make is a queued path, or when the readings are unknown. */
export function queueApplies(path: PathReadings, patterns: readonly PathPattern[]): boolean {
  if (patterns.length === 0) return false;
  return path.ambiguous || path.readings.some((reading) => matchesAnyPath(reading, patterns));
}

/**
 * How a path stands to our reserved prefix (`/__wr/`): `own` when it is spelt exactly with it,
 * `near` when some reading of it is under the prefix (or is the prefix without its trailing slash)
 * in any other spelling (`/__WR/`, `/%5F%5Fwr/`, `/__wr;x/`, `//__wr/`), else `none`. A `near`
 * path must be answered by us and never forwarded: the origin may well read it as our prefix.
 */
export function reservedPrefixMatch(rawPath: string, prefix: string, known?: PathReadings): 'own' | 'near' | 'none' {
  if (rawPath.startsWith(prefix)) return 'own';
  const readings = known ?? readPath(rawPath);
  const canonical = normalizePath(prefix);
  const bare = canonical.slice(0, -1);
  for (const reading of readings.readings) {
    if (reading.startsWith(canonical) || reading === bare) return 'near';
  }
  // Readings not enumerated: look for the prefix's name anywhere once everything is decoded.
  if (readings.ambiguous && mentionsDecoded(rawPath, bare)) return 'near';
  return 'none';
}

/**
 * A same-site relative reference for a redirect to `pathname` (plus `search`, `?…` or empty):
 * dot segments resolved, repeated slashes and backslashes collapsed, controls, spaces and non-ASCII
 * escaped, so the result starts with a single `/` followed by neither `/` nor `\` (or is just `/`)
 * and can never be read as `//other.host/`. Case and escapes are kept: the origin sees the path
 * the visitor asked for.
 */
export function sameSiteLocation(pathname: string, search: string): string {
  const kept: string[] = [];
  const parts = pathname.split(/[/\\]/);
  for (const part of parts) {
    if (part === '' || isDotSegment(part, 1)) continue;
    if (isDotSegment(part, 2)) kept.pop();
    else kept.push(escapeUnsafe(part, true));
  }
  const last = parts[parts.length - 1] ?? '';
  const directory = parts.length > 1 && (last === '' || isDotSegment(last, 1) || isDotSegment(last, 2));
  const path = '/' + kept.join('/') + (directory && kept.length > 0 ? '/' : '');
  const query = escapeUnsafe(search);
  return path + (query === '' || query === '?' ? '' : query.startsWith('?') ? query : `?${query}`);
}

/** The query string (`?…` or empty) without any parameter named `name`, other parameters byte for byte. */
export function withoutQueryParam(search: string, name: string): string {
  const body = search.startsWith('?') ? search.slice(1) : search;
  if (body === '') return '';
  const kept = body.split('&').filter((pair) => {
    const key = pair.split('=', 1)[0] ?? '';
    try {
      return decodeURIComponent(key.replace(/\+/g, ' ')) !== name;
    } catch {
      return key !== name;
    }
  });
  return kept.length === 0 ? '' : `?${kept.join('&')}`;
}

/**
 * The readings of one form. After a decoding pass the bytes are read two ways: as final (a `%` is
 * a literal `%25`), and as a spelling a server behind a decoding proxy parses again (a `%` starts
 * an escape, as in the request's own spelling).
 */
function readingsOf(state: State): string[] {
  if (!state.decoded) return [normalizePath(state.text)];
  let literal = '';
  let spelling = '';
  for (let i = 0; i < state.text.length; i++) {
    const byte = state.text.charCodeAt(i);
    const plain = byte > 0x20 && byte < 0x7f;
    literal += plain && byte !== 0x25 ? state.text.charAt(i) : escapeByte(byte);
    spelling += plain ? state.text.charAt(i) : escapeByte(byte);
  }
  return [normalizePath(literal), normalizePath(spelling)];
}

function backslashAsSlash(text: string): string {
  return text.includes('\\') ? text.replace(/\\/g, '/') : text;
}

/** Tomcat's reading: `;` and what follows it are dropped from each segment. */
function dropParams(text: string): string {
  return text.includes(';') ? text.replace(/;[^/]*/g, '') : text;
}

/**
 * RFC 3986 remove_dot_segments: empty segments are kept (`/a//../b` is `/a/b`), unlike the
 * collapsing done by normalizePath; `%2e` counts as a dot, as the URL standard reads it.
 */
function removeDotSegments(text: string): string {
  if (!/(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)/i.test(text)) return text;
  const parts = text.split('/');
  const out: string[] = [];
  for (const [index, part] of parts.entries()) {
    const last = index === parts.length - 1;
    if (isDotSegment(part, 1)) {
      if (last) out.push('');
    } else if (isDotSegment(part, 2)) {
      if (out.length > 1) out.pop();
      if (last) out.push('');
    } else {
      out.push(part);
    }
  }
  const joined = out.join('/');
  return joined.startsWith('/') || text.startsWith('/') === false ? joined : '/' + joined;
}

/** True when `part` is `.` (dots = 1) or `..` (dots = 2), each dot possibly spelt `%2e`. */
function isDotSegment(part: string, dots: 1 | 2): boolean {
  const rest = part.toLowerCase().replace(/%2e/g, '.');
  return rest === (dots === 1 ? '.' : '..');
}

function hasEscape(text: string): boolean {
  return /%[0-9a-f]{2}/i.test(text);
}

/** One decoding pass. From the request's spelling, other characters become their UTF-8 bytes. */
function decodeOnce(state: State): string {
  let out = '';
  const text = state.text;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x25) {
      const high = hexDigitValue(text.charCodeAt(i + 1));
      const low = high < 0 ? -1 : hexDigitValue(text.charCodeAt(i + 2));
      if (low >= 0) {
        out += String.fromCharCode(high * 16 + low);
        i += 2;
        continue;
      }
    }
    if (state.decoded || code < 0x80) {
      out += text.charAt(i);
      continue;
    }
    let codePoint = code;
    const next = text.charCodeAt(i + 1);
    if (code >= 0xd800 && code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      codePoint = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00);
      i += 1;
    } else if (code >= 0xd800 && code <= 0xdfff) {
      codePoint = 0xfffd;
    }
    for (const byte of utf8Bytes(codePoint)) out += String.fromCharCode(byte);
  }
  return out;
}

/** Whether `needle` shows in `text` at any depth of decoding (bounded), backslash read as slash, case ignored. */
function mentionsDecoded(text: string, needle: string): boolean {
  let current = text;
  for (let pass = 0; pass <= DEEP_DECODES; pass++) {
    if (current.toLowerCase().replace(/\\/g, '/').includes(needle)) return true;
    const next = current.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    if (next === current) return false;
    current = next;
  }
  return false;
}

/**
 * Escapes what must never appear raw in a Location header: controls (browsers drop tabs and
 * newlines, which could join `/` and `/`), space, DEL, non-ASCII; in a path segment also `?` and `#`.
 */
function escapeUnsafe(text: string, segment = false): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code > 0x20 && code < 0x7f && !(segment && (code === 0x3f || code === 0x23))) {
      out += text.charAt(i);
      continue;
    }
    let codePoint = code;
    const next = text.charCodeAt(i + 1);
    if (code >= 0xd800 && code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      codePoint = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00);
      i += 1;
    } else if (code >= 0xd800 && code <= 0xdfff) {
      codePoint = 0xfffd;
    }
    for (const byte of codePoint < 0x80 ? [codePoint] : utf8Bytes(codePoint)) out += escapeByte(byte);
  }
  return out;
}

function utf8Bytes(codePoint: number): number[] {
  if (codePoint < 0x80) return [codePoint];
  if (codePoint < 0x800) return [0xc0 | (codePoint >>> 6), 0x80 | (codePoint & 0x3f)];
  if (codePoint < 0x10000) return [0xe0 | (codePoint >>> 12), 0x80 | ((codePoint >>> 6) & 0x3f), 0x80 | (codePoint & 0x3f)];
  return [0xf0 | (codePoint >>> 18), 0x80 | ((codePoint >>> 12) & 0x3f), 0x80 | ((codePoint >>> 6) & 0x3f), 0x80 | (codePoint & 0x3f)];
}

const HEX_DIGITS = '0123456789ABCDEF';

function escapeByte(byte: number): string {
  return '%' + HEX_DIGITS.charAt(byte >>> 4) + HEX_DIGITS.charAt(byte & 0x0f);
}

function hexDigitValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  if (code >= 0x41 && code <= 0x46) return code - 0x37;
  if (code >= 0x61 && code <= 0x66) return code - 0x57;
  return -1;
}
