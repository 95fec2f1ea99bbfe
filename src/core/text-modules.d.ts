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
