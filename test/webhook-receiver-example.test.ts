/**
 * The receiver example of docs/webhooks.md (docs/webhooks/receiver.mjs), run as an operator runs
 * it, behind a real delivery from the Node host: it takes the signed event, refuses a forged
 * signature, another key and a stale (replayed) delivery, and acts on a repeated id once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signatureHeader } from '../src/core/webhooks';
import { API_TOKEN } from './support/fixtures';
import { startNodeStack, type Stack } from './support/stack';

const SECRET = 'whsec-example-0123456789abcdefghijklmnopqrs';

describe('the receiver example (docs/webhooks/receiver.mjs)', () => {
  let child: ChildProcess;
  let output = '';
  let url = '';
  let stack: Stack;

  beforeAll(async () => {
    child = spawn(process.execPath, [resolve(__dirname, '../docs/webhooks/receiver.mjs')], { env: { ...process.env, WEBHOOK_SECRET: SECRET, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    for (const deadline = Date.now() + 20_000; !/listening on http:\S+/.test(output); ) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the example did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    url = /listening on (http:\S+)/.exec(output)![1]!;
    stack = await startNodeStack({ webhooks: JSON.stringify([{ name: 'example', url: `${url}/`, events: ['switch.changed'] }]) }, undefined, { secrets: { webhook_secret: SECRET } });
  }, 60_000);
  afterAll(async () => {
    child?.kill('SIGTERM');
    await stack?.close();
  });

  const post = (body: string, signature: string) => fetch(`${url}/`, { method: 'POST', body, headers: { 'x-wr-signature': signature, 'content-type': 'application/json' } });

  it('takes a real delivery and refuses forged, foreign and stale ones', async () => {
    const answer = await fetch(`${stack.url}/__wr/api/control`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ switch: 'hold' }) });
    expect(answer.status).toBe(200);
    await expect.poll(() => /event switch\.changed (\S+) queue=default .*"to":"hold"/.exec(output)?.[1], { timeout: 20_000, message: 'the example took the delivery' }).toBeDefined();
    const id = /event switch\.changed (\S+)/.exec(output)![1]!;
    await expect.poll(() => stack.logs().some((r) => r.decision === 'webhook_delivered' && r.reason?.startsWith(`${id}|example`) === true), { message: 'the sender logged the 204' }).toBe(true);

    const body = JSON.stringify({ id: 'manual-1', type: 'queue.reset', queue: 'default', time: new Date().toISOString(), details: {} });
    const now = Math.floor(Date.now() / 1000);
    expect((await post(body, await signatureHeader(SECRET, now, body))).status).toBe(204);
    // The same id again (a retry whose first answer was lost): answered, not acted on twice.
    expect((await post(body, await signatureHeader(SECRET, now, body))).status).toBe(204);
    expect(output.match(/event queue\.reset manual-1/g)).toHaveLength(1);
    expect(output).toMatch(/duplicate manual-1/);
    expect((await post(body.replace('manual-1', 'manual-2'), await signatureHeader(SECRET, now, body))).status).toBe(401);
    expect((await post(body, await signatureHeader(`${SECRET}-other`, now, body))).status).toBe(401);
    expect((await post(body, await signatureHeader(SECRET, now - 301, body))).status).toBe(401);
    expect((await post(body, 'v1=deadbeef')).status).toBe(401);
    expect(output).toMatch(/refused: signed too long ago/);
    expect(output).toMatch(/refused: bad signature/);
  }, 60_000);
});
