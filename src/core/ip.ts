/**
 * IP addresses and CIDR lists, for matching a client address against operator rules (allow lists,
 * deny lists, bypasses).
 *
 * Every address lives in one 128-bit space: IPv4 is held in its IPv4-mapped IPv6 form
 * (`::ffff:a.b.c.d`) and an IPv4 prefix /n becomes /(96 + n). An IPv4 rule therefore matches a
 * client that arrives as `::ffff:a.b.c.d` and a mapped rule matches a plain IPv4 client, with no
 * special case in the matcher. One consequence worth knowing: `::/0` contains the mapped block, so
 * it matches IPv4 clients too (while `0.0.0.0/0` matches only IPv4 and IPv4-mapped clients).
 *
 * Choices:
 * - Zone ids (`fe80::1%eth0`) are rejected. A zone only means something on one host's own link and
 *   never appears on a client address seen at the edge; stripping it would quietly turn a rule for
 *   one interface into a rule for every link, so it is treated as a typo instead.
 * - CIDR entries with host bits set (`10.1.2.3/8`) are accepted and masked to their network
 *   (`10.0.0.0/8`): that is what the operator almost always means, and failing a deploy over it
 *   would be unhelpful.
 * - IPv4 parts are strictly decimal 0-255 without leading zeros, because `010` is octal (8) to
 *   some tools and decimal (10) to others; refusing it keeps a rule from meaning two things.
 */

/** How an address or rule was written: 4 for a dotted quad, 6 for any IPv6 text (mapped included). */
export type IpFamily = 4 | 6;

export interface Ip {
  readonly family: IpFamily;
  /** 16 bytes in network order; IPv4 in IPv4-mapped form. Treat as read-only. */
  readonly bytes: Uint8Array;
}

export interface CidrRange {
  /** The entry as written, for logs and messages. */
  readonly source: string;
  readonly family: IpFamily;
  /** Prefix length as written (0-32 for IPv4, 0-128 for IPv6). */
  readonly prefix: number;
  /** Prefix length in the 128-bit space: an IPv4 /8 is 104. */
  readonly bits: number;
  /** Network address with host bits cleared, 16 bytes. Treat as read-only. */
  readonly network: Uint8Array;
}

/** A CIDR list that cannot be used as configured. */
export class CidrError extends Error {
  readonly code = 'ERR_CIDR' as const;
  /** The offending entry, as written. */
  readonly entry: string;

  constructor(entry: string, reason: string) {
    super(`invalid CIDR entry "${entry}": ${reason}`);
    this.name = 'CidrError';
    this.entry = entry;
  }
}

// The longest valid text is a full IPv6 with an IPv4 tail in brackets (47 characters); anything
// much longer is rejected before parsing so hostile headers cost nothing.
const MAX_ADDRESS_TEXT = 64;

// Bytes 10 and 11 are 0xff in every IPv4-mapped address.
const MAPPED_MARKER_AT = 10;
const IPV4_AT = 12;
const IPV4_BITS_OFFSET = 96;

/** Parse an IPv4 dotted quad or IPv6 address (optionally `[bracketed]`); undefined when invalid. */
export function parseIp(text: string): Ip | undefined {
  if (text.length > MAX_ADDRESS_TEXT) return undefined;
  if (text.startsWith('[')) {
    // Brackets are URL syntax for IPv6 only.
    if (!text.endsWith(']')) return undefined;
    const bytes = readIpv6(text.slice(1, -1));
    return bytes && { family: 6, bytes };
  }
  if (text.includes(':')) {
    const bytes = readIpv6(text);
    return bytes && { family: 6, bytes };
  }
  const bytes = new Uint8Array(16);
  bytes[MAPPED_MARKER_AT] = 0xff;
  bytes[MAPPED_MARKER_AT + 1] = 0xff;
  return readIpv4(text, bytes, IPV4_AT) ? { family: 4, bytes } : undefined;
}

/**
 * The IPv4 address an IPv6 address stands for, as 4 bytes, or undefined: an IPv4-mapped address
 * (`::ffff:a.b.c.d`, how a dual-stack socket reports an IPv4 client) and a 6to4 address
 * (`2002:aabb:ccdd::/48`, RFC 3056), whose whole /48 is derived from, and reaches the world
 * through, the one IPv4 address in its bits 16-47. A dotted quad is its own IPv4.
 */
export function embeddedIpv4(ip: Ip): Uint8Array | undefined {
  const b = ip.bytes;
  if (b.subarray(0, MAPPED_MARKER_AT).every((x) => x === 0) && b[MAPPED_MARKER_AT] === 0xff && b[MAPPED_MARKER_AT + 1] === 0xff) return b.subarray(IPV4_AT, 16);
  if (b[0] === 0x20 && b[1] === 0x02) return b.subarray(2, 6);
  return undefined;
}

/**
 * Parse a comma- and/or whitespace-separated list of CIDRs or bare addresses (a bare address is a
 * /32 or /128). Empty entries are skipped, so blank text is an empty list.
 * @throws CidrError naming the first bad entry.
 */
export function parseCidrList(text: string): CidrRange[] {
  const ranges: CidrRange[] = [];
  for (const entry of text.split(/[\s,]+/)) {
    if (entry !== '') ranges.push(parseCidrEntry(entry));
  }
  return ranges;
}

/** True when `ip` falls in at least one of `ranges`. */
export function matchesAnyCidr(ip: Ip, ranges: readonly CidrRange[]): boolean {
  for (const range of ranges) {
    if (isInRange(ip.bytes, range)) return true;
  }
  return false;
}

/** `matchesAnyCidr` for address text; a missing or unparseable address matches nothing. */
export function isAddressInCidrs(address: string | undefined, ranges: readonly CidrRange[]): boolean {
  if (address === undefined || ranges.length === 0) return false;
  const ip = parseIp(address);
  return ip !== undefined && matchesAnyCidr(ip, ranges);
}

function parseCidrEntry(entry: string): CidrRange {
  const slash = entry.indexOf('/');
  const addressText = slash === -1 ? entry : entry.slice(0, slash);
  const prefixText = slash === -1 ? undefined : entry.slice(slash + 1);

  if (addressText.includes('%')) throw new CidrError(entry, 'zone ids (%...) are not allowed');
  const ip = parseIp(addressText);
  if (ip === undefined) throw new CidrError(entry, 'not an IPv4 or IPv6 address');

  const maxPrefix = ip.family === 4 ? 32 : 128;
  let prefix = maxPrefix;
  if (prefixText !== undefined) {
    // Digits only: no sign, spaces, hex or a second slash.
    if (!/^[0-9]{1,3}$/.test(prefixText)) {
      throw new CidrError(entry, `prefix length must be a number from 0 to ${maxPrefix}`);
    }
    prefix = Number(prefixText);
    if (prefix > maxPrefix) {
      throw new CidrError(entry, `prefix length must be from 0 to ${maxPrefix} for IPv${ip.family}`);
    }
  }

  const bits = ip.family === 4 ? IPV4_BITS_OFFSET + prefix : prefix;
  return { source: entry, family: ip.family, prefix, bits, network: maskToPrefix(ip.bytes, bits) };
}

function maskToPrefix(bytes: Uint8Array, bits: number): Uint8Array {
  const network = new Uint8Array(16);
  const whole = bits >>> 3;
  network.set(bytes.subarray(0, whole));
  const rest = bits & 7;
  if (rest !== 0) network[whole] = (bytes[whole] ?? 0) & partialByteMask(rest);
  return network;
}

function isInRange(bytes: Uint8Array, range: CidrRange): boolean {
  const whole = range.bits >>> 3;
  for (let i = 0; i < whole; i++) {
    if (bytes[i] !== range.network[i]) return false;
  }
  const rest = range.bits & 7;
  if (rest === 0) return true;
  return ((bytes[whole] ?? 0) & partialByteMask(rest)) === range.network[whole];
}

/** Mask keeping the top `bits` (1-7) bits of a byte. */
function partialByteMask(bits: number): number {
  return (0xff << (8 - bits)) & 0xff;
}

/** Read a strict dotted quad into `out[at..at+3]`; false when `text` is not one. */
function readIpv4(text: string, out: Uint8Array, at: number): boolean {
  const parts = text.split('.');
  if (parts.length !== 4) return false;
  for (const [index, part] of parts.entries()) {
    if (part.length === 0 || part.length > 3) return false;
    if (part.length > 1 && part.charCodeAt(0) === 0x30) return false;
    let value = 0;
    for (let i = 0; i < part.length; i++) {
      const digit = part.charCodeAt(i) - 0x30;
      if (digit < 0 || digit > 9) return false;
      value = value * 10 + digit;
    }
    if (value > 255) return false;
    out[at + index] = value;
  }
  return true;
}

/** Read any RFC 4291 text form (no brackets, no zone); undefined when invalid. */
function readIpv6(text: string): Uint8Array | undefined {
  const gap = text.indexOf('::');
  // A second `::` would make the zero run's length ambiguous (`:::` is caught here too).
  if (gap !== -1 && text.indexOf('::', gap + 1) !== -1) return undefined;

  let words: number[] | undefined;
  if (gap === -1) {
    words = readWords(text, true);
    if (words === undefined || words.length !== 8) return undefined;
  } else {
    const tailText = text.slice(gap + 2);
    const head = readWords(text.slice(0, gap), false);
    const tail = readWords(tailText, true);
    // `::` stands for at least one zero group, so at most seven are written around it.
    if (head === undefined || tail === undefined || head.length + tail.length > 7) return undefined;
    words = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  }

  const bytes = new Uint8Array(16);
  for (const [index, word] of words.entries()) {
    bytes[index * 2] = word >>> 8;
    bytes[index * 2 + 1] = word & 0xff;
  }
  return bytes;
}

/**
 * Read colon-separated 16-bit groups; an empty string is no groups. A dotted quad is allowed as
 * the last group when `allowIpv4Tail` and counts as two words.
 */
function readWords(text: string, allowIpv4Tail: boolean): number[] | undefined {
  if (text === '') return [];
  const groups = text.split(':');
  const words: number[] = [];
  for (const [index, group] of groups.entries()) {
    if (allowIpv4Tail && index === groups.length - 1 && group.includes('.')) {
      const quad = new Uint8Array(4);
      if (!readIpv4(group, quad, 0)) return undefined;
      words.push(((quad[0] ?? 0) << 8) | (quad[1] ?? 0), ((quad[2] ?? 0) << 8) | (quad[3] ?? 0));
      continue;
    }
    const word = readHexGroup(group);
    if (word === undefined) return undefined;
    words.push(word);
  }
  return words;
}

function readHexGroup(group: string): number | undefined {
  if (group.length === 0 || group.length > 4) return undefined;
  let value = 0;
  for (let i = 0; i < group.length; i++) {
    const digit = hexDigitValue(group.charCodeAt(i));
    if (digit < 0) return undefined;
    value = value * 16 + digit;
  }
  return value;
}

function hexDigitValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  if (code >= 0x41 && code <= 0x46) return code - 0x37;
  if (code >= 0x61 && code <= 0x66) return code - 0x57;
  return -1;
}
