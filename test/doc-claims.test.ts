/**
 * What the docs say about the holding page is what the page is: its weight on the wire (the
 * figure in docs/operating.md is measured here, on the Node host, which compresses as Fastly's
 * `x-compress-hint` asks the edge to) and the template slots an operator's own holding.html may use
 * (each documented slot renders; each slot of the built-in page is documented).
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoOrigin } from '../src/node/demo-origin';
import { startHost, type RunningServer } from '../src/node/host';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { MemoryQueueStore } from '../src/store/memory-store';
import { PROJECT_ROOT } from './support/compute-host';
import { BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './support/fixtures';

const OPERATING = readFileSync(join(PROJECT_ROOT, 'docs/operating.md'), 'utf8');

/** Bytes on the wire of one GET, as a browser accepting compression receives them, and the body when it was not compressed. */
function fetchRaw(url: string, encoding: string): Promise<{ bytes: number; encoding: string | undefined; body: string }> {
  return new Promise((done, fail) => {
    http
      .get(url, { headers: { 'accept-encoding': encoding, accept: 'text/html', 'accept-language': 'en' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          done({ bytes: body.length, encoding: res.headers['content-encoding'], body: body.toString('utf8') });
        });
      })
      .on('error', fail);
  });
}

/** A waiting room on the Node host, in front of the demo origin, with someone already in line. */
async function startRoom(templates?: Record<string, string>): Promise<RunningServer> {
  const built = buildWaitingRoom({
    settings: source({ ...BASE_SETTINGS, page_title: 'Demo shop' }),
    secrets: source(BASE_SECRETS),
    store: new MemoryQueueStore(),
    originUrl: origin.url,
    logger: new MemoryLogger(),
    templates: templates === undefined ? undefined : { get: async (key) => templates[key] },
  });
  const room = await startHost(built.handler);
  rooms.push(room);
  // Someone ahead, so the page shows a place, a wait and a progress bar.
  await fetch(`${room.url}/`).then((r) => r.arrayBuffer());
  return room;
}

let origin: RunningServer;
const rooms: RunningServer[] = [];
beforeAll(async () => {
  origin = await startDemoOrigin();
});
afterAll(async () => {
  for (const room of rooms) await room.close();
  await origin?.close();
});

describe('the holding page the docs describe', () => {
  it('weighs what docs/operating.md says, with the stylesheet, script and logo it loads, compressed', async () => {
    const room = await startRoom();
    const claim = /weighs about ([\d.]+) KB\s+compressed/.exec(OPERATING);
    expect(claim, 'docs/operating.md: "weighs about N KB compressed"').not.toBeNull();
    const page = await fetchRaw(`${room.url}/`, 'identity');
    // What the page itself loads from the edge: its stylesheet, script and (built-in) logo.
    const assets = [...page.body.matchAll(/(?:href|src)="(\/__wr\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toEqual(expect.arrayContaining(['/__wr/assets/style.css', '/__wr/assets/holding.js', '/__wr/assets/logo.svg']));
    let total = 0;
    for (const path of ['/', ...new Set(assets)]) {
      const { bytes, encoding } = await fetchRaw(`${room.url}${path}`, 'gzip');
      expect(encoding, path).toBe('gzip');
      total += bytes;
    }
    const kb = total / 1024;
    const said = Number(claim![1]);
    console.log(`holding page with its assets: ${total} bytes compressed (${kb.toFixed(2)} KB; docs/operating.md says about ${said} KB)`);
    expect(Math.abs(kb - said), `measured ${kb.toFixed(2)} KB against the ${said} KB docs/operating.md says: write the measurement there`).toBeLessThanOrEqual(said * 0.1);
  });
});

describe('the template slots the docs list', () => {
  /** The list in docs/operating.md: "Templates use `{{slot}}` (escaped) slots: `a`, `b`, …, and `{{{live}}}`". */
  const sentence = /Templates use `\{\{slot\}\}` \(escaped\) slots:([\s\S]*?)\.\s/.exec(OPERATING)?.[1] ?? '';
  const listed = [...sentence.matchAll(/`(\{\{\{)?([a-z_]+)\}{0,3}`/g)].map((m) => ({ name: m[2]!, raw: m[1] !== undefined }));
  const builtIn = [...new Set([...readFileSync(join(PROJECT_ROOT, 'templates/holding.html'), 'utf8').matchAll(/\{\{\{?\s*([a-z_]+)\s*\}?\}\}/g)].map((m) => m[1]!))];

  it('lists every slot of the built-in holding page', () => {
    expect(listed.length).toBeGreaterThan(10);
    expect(builtIn.filter((slot) => !listed.some((l) => l.name === slot))).toEqual([]);
  });

  it('lists only slots an operator\'s own holding.html can use: a template of all of them is served, not the built-in page', async () => {
    const template = `<!doctype html><html><body><p id="own">own template</p>${listed.map((l) => (l.raw ? `{{{${l.name}}}}` : `<i>{{${l.name}}}</i>`)).join('\n')}</body></html>`;
    const room = await startRoom({ 'holding.html': template });
    const page = await fetchRaw(`${room.url}/`, 'identity');
    expect(page.body).toContain('<p id="own">own template</p>');
  });
});
