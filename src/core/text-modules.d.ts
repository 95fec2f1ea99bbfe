// Templates are bundled as text (esbuild's `text` loader; a small plugin in test/vitest.config.ts).
declare module '*.html' {
  const text: string;
  export default text;
}
declare module '*.css' {
  const text: string;
  export default text;
}
declare module '*.svg' {
  const text: string;
  export default text;
}
declare module '*/templates/session.js' {
  const text: string;
  export default text;
}
declare module '*/templates/holding.js' {
  const text: string;
  export default text;
}
declare module '*/templates/admin.js' {
  const text: string;
  export default text;
}
// The store's Lua scripts and their fragments (src/store/lua), composed by src/store/lua-compose.ts.
declare module '*.lua' {
  const text: string;
  export default text;
}
