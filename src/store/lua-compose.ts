/**
 * Puts the store's Lua together from the files under src/store/lua (bundled as text). Pure string
 * work, so it runs the same in the Fastly engine, on Node and in tests; the pinned SHA-1s in
 * scripts.ts cover its output, so any change in what it produces fails the contract suite.
 *
 * Three conventions, each chosen so a file stays valid Lua that can be read, linted and diffed:
 * - A line starting with `---` is documentation: it is dropped, with its line break, so it costs the
 *   script nothing (the scripts' own `--` comments are part of what Redis runs, and of the hash).
 * - A line `-- #include NAME` (or `-- #include NAME(ARGS)`), with its line break, is replaced by the
 *   fragment lib/NAME.lua, itself composed; `__ARGS__` in the fragment becomes ARGS. A fragment's
 *   text is its file with the documentation dropped, byte for byte: a blank line after the
 *   documentation is part of the script.
 * - `__NAME__` (upper case) is a constant the TS side owns (MINUTE_MS, STATE_LENGTH, …), written as
 *   the decimal the TS template literals used to produce, so the two sides cannot drift apart. An
 *   unknown name is an error when the script is composed (the first time its text is asked for;
 *   the contract suite composes every one), never a script that fails in Redis.
 */

const DOC_LINE = /^---[^\n]*(?:\n|$)/gm;
const INCLUDE = /^-- #include ([a-z_]+)(?:\(([^)\n]*)\))?\n/gm;
const CONSTANT = /__([A-Z][A-Z0-9_]*)__/g;
/** Fragments include fragments (policy_header → prelude → generation → recovery); deeper means a cycle. */
const MAX_DEPTH = 8;

export type LuaConstants = Readonly<Record<string, number | string>>;

export function composeLua(text: string, fragments: Readonly<Record<string, string>>, constants: LuaConstants): string {
  const expanded = expand(text, fragments, 0);
  return expanded.replace(CONSTANT, (_, name: string) => {
    const value = constants[name];
    if (value === undefined) throw new Error(`lua: unknown constant __${name}__`);
    return String(value);
  });
}

function expand(text: string, fragments: Readonly<Record<string, string>>, depth: number): string {
  if (depth > MAX_DEPTH) throw new Error('lua: includes nested too deep (a cycle?)');
  return text.replace(DOC_LINE, '').replace(INCLUDE, (_, name: string, args: string | undefined) => {
    const fragment = fragments[name];
    if (fragment === undefined) throw new Error(`lua: unknown fragment ${name}`);
    const takesArgs = fragment.includes('__ARGS__');
    if (takesArgs !== (args !== undefined)) throw new Error(`lua: fragment ${name} ${takesArgs ? 'needs' : 'takes no'} arguments`);
    const body = expand(fragment, fragments, depth + 1);
    return args === undefined ? body : body.split('__ARGS__').join(args);
  });
}
