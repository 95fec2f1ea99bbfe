/**
 * Webhooks end to end on both hosts (the Node host, and the wasm on the Compute host stand-in with
 * sandbox reuse on, its webhook a declared backend): a real HTTP receiver gets exactly the events of
 * a scripted sale (switch to hold and back, pause, resume, the line drained by an admit, reset, then
 * the store flushed: its state lost),
 * each signed validly and accepted once by its id although it failed every first attempt; and a
 * receiver that hangs leaves visitors' answers untouched (no 5xx, all answered while the delivery
 * was still held open, so before the sender's timeout).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { verifySignature, type WebhookEvent } from '../src/core/webhooks';
import { findComputeHost } from './support/compute-host';
import { API_TOKEN } from './support/fixtures';
import { HttpVisitor, startNodeStack, startWasmStack, type Stack } from './support/stack';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

const WEBHOOK_SECRET = 'whsec-e2e-0123456789abcdefghijklmnopqrstuv';
const host = findComputeHost();

function settingsFor(receiver: WebhookReceiver): Record<string, string> {
  return {
    admit_per_period: '0',
    // The Node host sends to `url`; the wasm through the backend `hooks` (declared below) to `path`.
    webhooks: JSON.stringify([{ name: 'ops', url: `${receiver.url}/hooks`, backend: 'hooks', path: '/hooks', events: ['*'] }]),
  };
}

type Start = (receiver: WebhookReceiver) => Promise<Stack>;

async function api(stack: Stack, path: string, body?: unknown): Promise<Response> {
  const response = await fetch(`${stack.url}/__wr/api/${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return response;
}

function defineWebhookScenarios(name: string, start: Start, skip = false): void {
  describe.skipIf(skip)(`webhooks on ${name}`, () => {
    let stack: Stack | undefined;
    let receiver: WebhookReceiver | undefined;
    afterEach(async () => {
      await receiver?.close();
      await stack?.close();
      stack = undefined;
      receiver = undefined;
    });

    it('a receiver gets exactly the events of a scripted sale, signed, each accepted once by id though every first attempt failed', async () => {
      receiver = await startWebhookReceiver('fail-first');
      const s = (stack = await start(receiver));
      const visitors = [0, 1, 2].map(() => new HttpVisitor(s.url));
      for (const v of visitors) expect((await v.get('/')).status).toBeLessThan(500);
      for (const change of [{ switch: 'hold' }, { switch: 'normal' }, { paused: true }, { paused: false }]) {
        const answer = await api(s, 'control', change);
        expect(answer.status, await answer.clone().text()).toBe(200);
      }
      // The line, as the visitors' polls show it, then an admit that empties it.
      for (const v of visitors) expect((await v.get('/')).status).toBeLessThan(500);
      expect((await api(s, 'admit', { count: 3 })).status).toBe(200);
      expect((await api(s, 'reset', { confirm: 'default' })).status).toBe(200);
      const accepted = () => receiver!.received.filter((r) => r.status === 204);
      // Retries are sent by later requests that find them due: the console's reads, here.
      await expect
        .poll(
          async () => {
            await api(s, 'state');
            return accepted().length;
          },
          { timeout: 60_000, interval: 250, message: 'six deliveries accepted' },
        )
        .toBeGreaterThanOrEqual(6);
      const events = accepted().map((r) => JSON.parse(r.body) as WebhookEvent);
      expect(events.map((e) => e.type).sort()).toEqual(['line.drained', 'queue.paused', 'queue.reset', 'queue.resumed', 'switch.changed', 'switch.changed']);
      // Retries may land in another order than the events: each carries the time it was found.
      const switches = events.filter((e) => e.type === 'switch.changed').sort((a, b) => Date.parse(a.time) - Date.parse(b.time));
      expect(switches.map((e) => e.details)).toEqual(expect.arrayContaining([{ from: 'normal', to: 'hold' }, { from: 'hold', to: 'normal' }]));
      expect(Date.parse(switches[0]!.time)).toBeLessThanOrEqual(Date.parse(switches[1]!.time));
      // Once by id: six ids, each accepted once, each refused first (the receiver's 500) and sent again.
      const ids = events.map((e) => e.id);
      expect(new Set(ids).size).toBe(6);
      for (const id of ids) {
        const attempts = receiver.received.filter((r) => r.headers['x-wr-event-id'] === id);
        expect(attempts.map((r) => [r.status, r.headers['x-wr-delivery-attempt']]), id).toEqual([
          [500, '1'],
          [204, '2'],
        ]);
      }
      for (const r of receiver.received) {
        const event = JSON.parse(r.body) as WebhookEvent;
        expect(event).toMatchObject({ queue: 'default', id: r.headers['x-wr-event-id'], type: r.headers['x-wr-event'] });
        expect(Date.parse(event.time)).toBeGreaterThan(0);
        const t = Number(/^t=(\d+),/.exec(r.headers['x-wr-signature'] ?? '')?.[1]);
        expect(await verifySignature(WEBHOOK_SECRET, r.headers['x-wr-signature'], r.body, t), r.body).toMatchObject({ ok: true });
        expect(await verifySignature('another-secret-0123456789abcdefghijkl', r.headers['x-wr-signature'], r.body, t)).toMatchObject({ ok: false });
      }
      // Nothing more comes: a few more reads find nothing due.
      const before = receiver.received.length;
      for (let i = 0; i < 5; i += 1) await api(s, 'state');
      expect(receiver.received.length).toBe(before);
      // The store forgets everything (its outbox too, empty by now): the next calls find a new
      // generation, and the receiver is told once.
      await s.direct.flushall();
      await expect
        .poll(
          async () => {
            await visitors[0]!.get('/');
            await api(s, 'state');
            return accepted().length;
          },
          { timeout: 60_000, interval: 250, message: 'the lost state told' },
        )
        .toBe(7);
      const lost = JSON.parse(accepted()[6]!.body) as WebhookEvent;
      expect(lost.type).toBe('store.state_lost');
      expect(receiver.received.filter((r) => r.headers['x-wr-event-id'] === lost.id).map((r) => r.status)).toEqual([500, 204]);
    }, 120_000);

    it('a receiver that hangs slows no visitor: no 5xx, every answer while the delivery is still held open', async () => {
      receiver = await startWebhookReceiver('hang');
      const s = (stack = await start(receiver));
      const statuses: number[] = [];
      // Each round: a new event, its delivery held by the receiver, then visitors' requests. A round
      // counts when every answer came while that delivery was still held open (so before the
      // sender's timeout); one that outlasted it on a busy machine proves nothing and is run again.
      // Answers that waited on the receiver could never come while it holds them: every round fails.
      let clean = false;
      for (let round = 0; round < 5 && !clean; round += 1) {
        const seen = receiver.received.length;
        expect((await api(s, 'control', { paused: round % 2 === 0 })).status).toBe(200);
        await expect
          .poll(() => receiver!.received.slice(seen).find((r) => r.headers['x-wr-event']?.startsWith('queue.') === true && !r.abandoned), { timeout: 30_000, message: 'the delivery reached the receiver and is held' })
          .toBeDefined();
        const held = receiver.received.slice(seen).find((r) => r.headers['x-wr-event']?.startsWith('queue.') === true)!;
        const answers = await Promise.all([
          ...Array.from({ length: 8 }, async () => {
            const v = new HttpVisitor(s.url);
            const first = (await v.get('/')).status;
            return [first, (await v.get('/')).status];
          }),
          api(s, 'state').then((r) => [r.status]),
        ]);
        statuses.push(...answers.flat());
        clean = !held.abandoned && held.status === undefined;
      }
      expect(clean, 'a round whose answers all came while the delivery was held').toBe(true);
      expect(statuses.filter((status) => status >= 500)).toEqual([]);
    }, 180_000);
  });
}

defineWebhookScenarios('the Node host', (receiver) => startNodeStack(settingsFor(receiver), undefined, { secrets: { webhook_secret: WEBHOOK_SECRET } }));

defineWebhookScenarios(
  'the wasm on a Compute host (sandbox reuse on)',
  (receiver) =>
    startWasmStack({
      viceroyPath: host.found ? host.path : '',
      settings: settingsFor(receiver),
      secrets: { webhook_secret: WEBHOOK_SECRET },
      backends: { hooks: receiver.url },
    }),
  !host.found,
);
