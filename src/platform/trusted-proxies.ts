/**
 * The client's address behind proxies the operator trusts (TRUSTED_PROXIES): the Node host's
 * counterpart of `event.client.address` on Fastly, where the edge itself is the first hop.
 *
 * Choices:
 * - `X-Forwarded-For` is read only when the TCP peer is a trusted proxy. From anyone else it is
 *   text the client wrote, and believing it would let each request choose its own address (and so
 *   its own ticket allowance, sign-in count and `bypass_ips` match).
 * - The chain is walked from the right, skipping trusted proxies; the first address that is not one
 *   is the client. Each trusted proxy appends the address it saw, so everything left of the first
 *   untrusted one was written by the client and is never looked at (the left-most entry, which
 *   many frameworks take, is the one a client controls).
 * - An entry that is not an address stops the walk at the last hop that was vouched for (the
 *   trusted proxy that passed it on): a proxy that appends garbage has told us nothing, and falling
 *   back to anything further left would hand the choice to the client.
 * - Every hop trusted (a client inside the proxies' own network): the left-most one.
 * - An entry may carry a port (`192.0.2.1:5678`, `[2001:db8::1]:443`), as some proxies write it;
 *   the port is dropped, since a client is its address.
 * - A range of every address (`/0`) is refused: it would believe any client's header.
 */
import { isAddressInCidrs, parseCidrList, parseIp, type CidrRange } from '../core/ip';

/** Not a WR_ name: what a deployment sets beside HOST. */
export const TRUSTED_PROXIES_ENV = 'TRUSTED_PROXIES';

/** The most hops read from one header: more is not a chain any operator runs, and it bounds the work. */
const MAX_HOPS = 32;

export type TrustedProxiesParse = { readonly ok: true; readonly ranges: readonly CidrRange[] } | { readonly ok: false; readonly problem: string };

/** TRUSTED_PROXIES as written (addresses and CIDRs, separated by commas or spaces); unset or blank is none. */
export function parseTrustedProxies(text: string | undefined): TrustedProxiesParse {
  if (text === undefined || text.trim() === '') return { ok: true, ranges: [] };
  let ranges: CidrRange[];
  try {
    ranges = parseCidrList(text);
  } catch (error) {
    const entry = (error as { entry?: string }).entry ?? text;
    return { ok: false, problem: `must be IP addresses or CIDRs of the proxies in front, separated by commas; ${JSON.stringify(entry).slice(0, 80)} is not one (${error instanceof Error ? error.message.replace(/^invalid CIDR entry "[^"]*": /, '') : 'invalid'})` };
  }
  const everything = ranges.find((range) => range.prefix === 0);
  if (everything !== undefined) return { ok: false, problem: `${JSON.stringify(everything.source)} trusts every address, so any client could choose its own address with X-Forwarded-For: name the proxies' addresses or network` };
  return { ok: true, ranges };
}

/** One X-Forwarded-For entry as a bare address, or undefined when it is not one. */
function entryAddress(entry: string): string | undefined {
  const text = entry.trim();
  if (parseIp(text) !== undefined) return text.replace(/^\[|\]$/g, '');
  // IPv4 with a port, or a bracketed IPv6 with one.
  const withPort = /^(?:(\d{1,3}(?:\.\d{1,3}){3})|\[([0-9A-Fa-f:.]+)\]):\d{1,5}$/.exec(text);
  const bare = withPort?.[1] ?? withPort?.[2];
  return bare !== undefined && parseIp(bare) !== undefined ? bare : undefined;
}

/**
 * The client's address: `peer` (the socket's), unless `peer` is a trusted proxy, then the
 * right-most address of `forwardedFor` (every X-Forwarded-For header, joined with commas) that is
 * not a trusted proxy. See the module's choices for the edge cases.
 */
export function chooseClientAddress(peer: string | undefined, forwardedFor: string | readonly string[] | undefined, trusted: readonly CidrRange[]): string | undefined {
  if (forwardedFor === undefined || !isAddressInCidrs(peer, trusted)) return peer;
  const hops = (typeof forwardedFor === 'string' ? forwardedFor : forwardedFor.join(',')).split(',');
  let vouched = peer;
  for (let i = hops.length - 1, read = 0; i >= 0 && read < MAX_HOPS; i--, read++) {
    const hop = hops[i]!;
    // Empty list elements (`a,,b`, a trailing comma) are allowed by HTTP's list syntax.
    if (hop.trim() === '') continue;
    const address = entryAddress(hop);
    if (address === undefined) return vouched;
    if (!isAddressInCidrs(address, trusted)) return address;
    vouched = address;
  }
  return vouched;
}
