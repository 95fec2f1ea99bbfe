/**
 * The Lua files under src/store/lua and the step that puts them together. The pinned SHA-1s (checked
 * against SCRIPT LOAD in the store contract suite) prove the output byte for byte; these tests prove
 * the conventions themselves, and that no file is left out or left half-composed.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { composeLua } from '../src/store/lua-compose';
import { STORE_SCRIPTS } from '../src/store/scripts';

const LUA_DIR = resolve(__dirname, '../src/store/lua');

describe('composeLua', () => {
  it('drops documentation lines, expands includes (with arguments) and constants', () => {
    const fragments = { pair: '--- why\nlocal a = __ARGS__\n', outer: '\n-- #include inner\n', inner: 'local b = __TWO__\n' };
    const text = '#!lua\n--- doc\n-- keep me\n-- #include pair(1, 2)\n-- #include outer\nreturn a\n';
    expect(composeLua(text, fragments, { TWO: 2 })).toBe('#!lua\n-- keep me\nlocal a = 1, 2\n\nlocal b = 2\nreturn a\n');
  });

  it('refuses an unknown constant, an unknown fragment, missing or unexpected arguments, and cycles', () => {
    expect(() => composeLua('x = __NOPE__\n', {}, {})).toThrow(/unknown constant __NOPE__/);
    expect(() => composeLua('-- #include nope\n', {}, {})).toThrow(/unknown fragment nope/);
    expect(() => composeLua('-- #include f\n', { f: 'x = __ARGS__\n' }, {})).toThrow(/needs arguments/);
    expect(() => composeLua('-- #include f(1)\n', { f: 'x = 1\n' }, {})).toThrow(/takes no arguments/);
    expect(() => composeLua('-- #include f\n', { f: '-- #include f\n' }, {})).toThrow(/too deep/);
  });
});

describe('the store’s Lua files', () => {
  it('are one file per script, and every script is fully composed', () => {
    const files = readdirSync(LUA_DIR).filter((f) => f.endsWith('.lua')).map((f) => f.slice(0, -4)).sort();
    expect(files).toEqual(STORE_SCRIPTS.map((s) => s.name).sort());
    for (const { name, text } of STORE_SCRIPTS) {
      expect(text, name).not.toMatch(/#include|__[A-Z]|^---/m);
      // Each script starts with its file's first line (the shebang), so the file is what runs.
      expect(text.split('\n')[0], name).toBe(readFileSync(resolve(LUA_DIR, `${name}.lua`), 'utf8').split('\n')[0]);
    }
  });

  it('every fragment under lib/ is used by some script', () => {
    const used = new Set<string>();
    const walk = (file: string): void => {
      for (const [, name] of readFileSync(file, 'utf8').matchAll(/^-- #include ([a-z_]+)/gm)) {
        if (name === undefined || used.has(name)) continue;
        used.add(name);
        walk(resolve(LUA_DIR, 'lib', `${name}.lua`));
      }
    };
    for (const { name } of STORE_SCRIPTS) walk(resolve(LUA_DIR, `${name}.lua`));
    const fragments = readdirSync(resolve(LUA_DIR, 'lib')).map((f) => f.replace(/\.lua$/, '')).sort();
    expect(fragments).toEqual([...used].sort());
  });
});
