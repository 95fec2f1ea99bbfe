/**
 * Where Upstash's Lua dialect differs from Redis 7's: Upstash takes `#!lua flags=allow-key-locking`
 * (lock only the keys in KEYS), Redis 7 refuses it ("Unexpected flag in script shebang"). Both the
 * local Upstash bridge and the direct Redis store hand Redis the script with that flag dropped.
 * Pure string work (no node:*), shared by both.
 */

export const KEY_LOCKING_FLAG = 'allow-key-locking';

/**
 * Rewrites a script's shebang for Redis 7: drops Upstash's `allow-key-locking`, keeping the line
 * (so line numbers in error messages still match) and any other flags. A read-only call of a
 * script with a shebang also gets `no-writes`, without which Redis 7 refuses EVAL_RO/EVALSHA_RO
 * outright; Upstash, like Redis 6.2, only refuses the writes themselves.
 */
export function adaptScript(script: string, readOnly = false): string {
  const line = /^#!([^\r\n]*)/.exec(script);
  if (!line) return script;
  const [engine = '', ...params] = (line[1] ?? '').trim().split(/\s+/);
  let flags: string[] | undefined;
  const others = params.filter((param) => {
    if (!param.startsWith('flags=')) return true;
    flags = param.slice('flags='.length).split(',').filter((flag) => flag !== '' && flag !== KEY_LOCKING_FLAG);
    return false;
  });
  if (readOnly && !flags?.includes('no-writes')) flags = [...(flags ?? []), 'no-writes'];
  const rebuilt = ['#!' + engine, ...others, ...(flags?.length ? [`flags=${flags.join(',')}`] : [])].join(' ');
  return rebuilt === line[0] ? script : rebuilt + script.slice(line[0].length);
}
