/**
 * An independent model of what origins make of a path, for checking src/core/path-canon.ts: plain
 * regexes and the WHATWG URL parser, none of the code under test.
 */

const decode = (s: string) => s.replace(/%([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
const dropParams = (s: string) => s.replace(/;[^/]*/g, '');
const backslash = (s: string) => s.split('\\').join('/');
/** RFC 3986 / URL-standard dot removal, which keeps empty segments (and reads `%2e` as a dot). */
const whatwgResolve = (s: string) => new URL(`http://origin.test${s.startsWith('/') ? '' : '/'}${s}`).pathname;
const OPERATIONS = [decode, dropParams, backslash, whatwgResolve];

/**
 * Every result of up to `depth` origin steps (decode once, drop `;params`, backslash as slash, resolve
 * dots) in any order, each to be taken as the origin's final path (the matcher then collapses `//`
 * and resolves dots once more).
 */
export function originReadings(path: string, depth = 4): Set<string> {
  const found = new Set([path]);
  let frontier = [path];
  for (let d = 0; d < depth; d++) {
    const next: string[] = [];
    for (const p of frontier) {
      for (const op of OPERATIONS) {
        const q = op(p);
        if (!found.has(q)) {
          found.add(q);
          next.push(q);
        }
      }
    }
    frontier = next;
  }
  return found;
}
