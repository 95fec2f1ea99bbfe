/**
 * A JSON object that names a key twice (`{"count": 1, "count": 100000}`) is read by JSON.parse as
 * its last value, by other parsers as its first: a proxy or a log in front of the API may see one
 * request where we would act on another. The admin API refuses such a body instead (see admin.ts).
 */

/**
 * The first key named twice at the top level of `text`, decoded (`"co\u0075nt"` is `count`), or
 * undefined. `text` must already have parsed as JSON: this only walks its strings and brackets.
 */
export function repeatedTopLevelKey(text: string): string | undefined {
  const seen = new Set<string>();
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{' || c === '[') depth += 1;
    else if (c === '}' || c === ']') depth -= 1;
    else if (c === '"') {
      const start = i;
      // To the closing quote: a backslash escapes the character after it (\" and \\ included).
      for (i += 1; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i += 1;
      if (depth !== 1 || !isKey(text, i + 1)) continue;
      const key = JSON.parse(text.slice(start, i + 1)) as string;
      if (seen.has(key)) return key;
      seen.add(key);
    }
  }
  return undefined;
}

/** Whether the string that ended just before `from` is a key: the next thing after it is a colon. */
function isKey(text: string, from: number): boolean {
  let j = from;
  while (j < text.length && (text[j] === ' ' || text[j] === '\t' || text[j] === '\n' || text[j] === '\r')) j += 1;
  return text[j] === ':';
}
