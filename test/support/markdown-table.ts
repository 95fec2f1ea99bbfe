/** A Markdown table with padded columns, for the bench's and the simulation's reports. */
export function table(header: readonly string[], align: readonly ('l' | 'r')[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, 3, ...rows.map((r) => (r[i] ?? '').length)));
  const cell = (text: string, i: number): string => (align[i] === 'r' ? text.padStart(widths[i] ?? 0) : text.padEnd(widths[i] ?? 0));
  const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => cell(c, i)).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (align[i] === 'r' ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}
