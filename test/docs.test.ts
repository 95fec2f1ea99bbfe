/**
 * The docs a person navigates: every relative link in the README and docs/ reaches a file that
 * exists and, with an anchor, a heading in it; every page in docs/ is linked from the README, which
 * stays a front page.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pages = ['README.md', 'CHANGELOG.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
}

/** The anchors of a Markdown file's headings (code blocks skipped). */
function anchors(text: string): Set<string> {
  const found = new Set<string>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fence = !fence;
    const match = fence ? null : /^#{1,6} (.*)$/.exec(line);
    if (match) found.add(slug(match[1]!));
  }
  return found;
}

/** Relative links outside code blocks and inline code: [text](target). */
function links(text: string): string[] {
  const prose = text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z]+:/.test(t));
}

describe('the docs', () => {
  it.each(pages)('%s: every relative link reaches a file and a heading', (page) => {
    const text = readFileSync(join(root, page), 'utf8');
    const broken: string[] = [];
    for (const target of links(text)) {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? join(root, page) : resolve(dirname(join(root, page)), path);
      if (!existsSync(file)) {
        broken.push(`${target}: no file ${relative(root, file)}`);
        continue;
      }
      if (anchor !== undefined && file.endsWith('.md') && !anchors(readFileSync(file, 'utf8')).has(anchor)) {
        broken.push(`${target}: no heading #${anchor} in ${relative(root, file)}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('every page in docs/ is linked from the README', () => {
    const linked = new Set(links(readFileSync(join(root, 'README.md'), 'utf8')).map((t) => t.split('#')[0]));
    const unlinked = pages.filter((p) => p.startsWith('docs/') && !linked.has(p));
    expect(unlinked).toEqual([]);
  });

  it('the README is a front page: what it is, the two commands, the request path, links', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(Buffer.byteLength(readme)).toBeLessThan(12_000);
    expect(readme).toMatch(/npm ci && npm start/);
    expect(readme).toMatch(/^npm test /m);
    expect(readme).toMatch(/## The request path/);
  });

  it('the README says first what a visitor and an operator get, and links the sale plan before any other page', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const opening = readme.slice(0, readme.indexOf('\n## '));
    expect(opening).toMatch(/\*\*A visitor\*\* gets/);
    expect(opening).toMatch(/\*\*An operator\*\* gets/);
    expect(links(readme).find((t) => t.startsWith('docs/'))).toBe('docs/plan-your-sale.md');
  });

  it('the sale plan is one page: before, during, after, the settings that matter, the smoke check, the runbook', () => {
    const plan = readFileSync(join(root, 'docs/plan-your-sale.md'), 'utf8');
    expect([...plan.matchAll(/^## (\w+)/gm)].map((m) => m[1])).toEqual(['Before', 'During', 'After']);
    expect(plan).toMatch(/npm run smoke -- /);
    expect(plan).toMatch(/npm run check-config -- /);
    expect(links(plan)).toEqual(expect.arrayContaining(['operating.md#runbook', 'operating.md#emergency-switches', 'configuration.md']));
    expect(plan.split('\n').length).toBeLessThan(120);
  });

  it('the link checker finds a broken link and a missing heading', () => {
    // The checker itself: a link to a heading that is not there must be caught.
    expect(anchors('# Deploying to Fastly\n```\n# not a heading\n```\n## Step 1: the CLI').has('step-1-the-cli')).toBe(true);
    expect(anchors('```\n# not a heading\n```').size).toBe(0);
    expect(links('see [a](docs/a.md#x) and `[b](c.md)` and [web](https://example.com)')).toEqual(['docs/a.md#x']);
  });
});
