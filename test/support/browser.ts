/**
 * Real headless Chromium for the browser tests (Debian's, driven by playwright-core), and what they
 * check in every page: axe-core's accessibility findings, and a layout that fits the screen.
 * Screenshots go under test/.artifacts/screenshots, to be looked at, not compared.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const SHOTS = resolve(import.meta.dirname, '..', '.artifacts', 'screenshots');
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

/** Whether the browser is there; the suites skip themselves (saying so) when it is not. */
export const chromiumAvailable = existsSync(CHROMIUM);
if (!chromiumAvailable) console.warn(`browser tests skipped: ${CHROMIUM} is missing (apt-get install chromium)`);

/** One browser for a test file; the screenshot folder made. */
export async function launchChromium(): Promise<Browser> {
  mkdirSync(SHOTS, { recursive: true });
  console.log(`screenshots: ${SHOTS}`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/** The rules of WCAG 2.0 and 2.1, levels A and AA, as axe-core tags them. */
const WCAG_AA = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];

interface AxeViolation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly tags: readonly string[];
  readonly nodes: readonly { readonly target: readonly unknown[] }[];
}

/**
 * What axe-core finds in the page as it is now: every WCAG 2 A/AA violation, whatever its impact,
 * and the serious or critical findings of its best practices. The page's Content-Security-Policy
 * would refuse the injected script, so the page's context must be made with `bypassCSP: true`.
 */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async (tags) => {
    const axe = (globalThis as unknown as { axe: { run: (context: Document, options: object) => Promise<{ violations: AxeViolation[] }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: [...tags, 'best-practice'] } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, tags: v.tags, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  }, WCAG_AA);
  return violations
    .filter((v) => v.tags.some((t) => WCAG_AA.includes(t)) || v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/**
 * What does not fit: the page wider than the screen (sideways scrolling), or an element inside
 * `container` that sticks out of it (text running out of its card or tile). Empty when all fits.
 */
export async function layoutProblems(page: Page, container = 'main'): Promise<string[]> {
  return page.evaluate((selector) => {
    const problems: string[] = [];
    const root = document.documentElement;
    if (root.scrollWidth > root.clientWidth) problems.push(`the page is ${root.scrollWidth - root.clientWidth} px wider than the screen`);
    for (const box of document.querySelectorAll(selector)) {
      const outer = box.getBoundingClientRect();
      for (const el of box.querySelectorAll('*')) {
        const r = el.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        const name = `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}${el.className && typeof el.className === 'string' ? `.${el.className.split(' ').join('.')}` : ''}`;
        if (r.left < outer.left - 0.5 || r.right > outer.right + 0.5) problems.push(`${name} sticks out of ${selector} sideways`);
        if (el instanceof HTMLElement && el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible') problems.push(`${name} cuts its content`);
      }
    }
    return problems;
  }, container);
}

/**
 * Words that the page had to break to fit (`overflow-wrap: anywhere` keeps them on screen, but
 * "(configured" over ")" is not readable): each element of `selector` whose text would stick out
 * if words were kept whole. Scripts and languages that break anywhere (Japanese) never show here.
 */
export async function brokenWords(page: Page, selector: string): Promise<string[]> {
  return page.evaluate((s) => {
    const broken: string[] = [];
    for (const el of document.querySelectorAll<HTMLElement>(s)) {
      if (el.getClientRects().length === 0) continue;
      const before = el.style.overflowWrap;
      el.style.overflowWrap = 'normal';
      el.style.wordBreak = 'normal';
      if (el.scrollWidth > el.clientWidth + 1) broken.push(`${el.tagName.toLowerCase()}: ${el.textContent?.trim() ?? ''}`);
      el.style.overflowWrap = before;
      el.style.removeProperty('word-break');
    }
    return broken;
  }, selector);
}
