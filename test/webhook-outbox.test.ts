/**
 * The webhook outbox on every store (in memory, Upstash through the bridge, Redis) against a real
 * redis-server: an event id recorded once, a guard, deliveries handed out with a lease, retried and
 * settled, the bound; the scripts' pins against SCRIPT LOAD; and what its calls cost, counted as
 * Upstash bills them.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { WebhookOutbox } from '../src/core/ports';
import { OUTBOX_MAX, OUTBOX_SCRIPTS } from '../src/store/outbox';
import { adaptScript } from '../src/store/script-flags';
import { useEveryStore } from './support/every-store';

const stores = useEveryStore();
const outboxes = (): [string, WebhookOutbox][] => [
  ['memory', stores.memory().outbox!],
  ['upstash', stores.upstash().outbox!],
  ['redis', stores.redis().outbox!],
];

/** The same calls on each store's outbox, the same answers expected. */
async function sameEverywhere(run: (outbox: WebhookOutbox) => Promise<unknown[]>): Promise<unknown[]> {
  const answers: unknown[][] = [];
  for (const [name, outbox] of outboxes()) {
    const got = await run(outbox);
    if (answers.length > 0) expect(got, name).toEqual(answers[0]);
    answers.push(got);
  }
  return answers[0]!;
}

describe('webhook outbox, on every store', () => {
  it('records an event id once, whoever records it, with one delivery per webhook', async () => {
    const answers = await sameEverywhere(async (box) => [
      await box.add('q', 'q:queue.reset:1:5', ['ops', 'chat'], '{"a":1}', 1_000),
      // A second POP that found the same event: nothing new.
      await box.add('q', 'q:queue.reset:1:5', ['ops', 'chat'], '{"a":1}', 1_200),
      await box.take('q', 1_500, 10, 10_000),
      // Leased: not handed out again before the lease ends…
      await box.take('q', 2_000, 10, 10_000),
      // …and again after it, as a second attempt.
      await box.take('q', 11_500, 10, 10_000),
    ]);
    expect(answers[0]).toEqual({ added: true, dropped: 0 });
    expect(answers[1]).toEqual({ added: false, dropped: 0 });
    expect(answers[2]).toEqual({
      due: [
        { key: 'q:queue.reset:1:5|chat', attempt: 1, body: '{"a":1}' },
        { key: 'q:queue.reset:1:5|ops', attempt: 1, body: '{"a":1}' },
      ],
      nextDueMs: 11_500,
    });
    expect(answers[3]).toEqual({ due: [], nextDueMs: 11_500 });
    expect((answers[4] as { due: { attempt: number }[] }).due.map((d) => d.attempt)).toEqual([2, 2]);
  });

  it('settles: done and drop remove a delivery, retry makes it due at its retry', async () => {
    const answers = await sameEverywhere(async (box) => {
      await box.add('q', 'e1', ['a', 'b'], 'x', 0);
      await box.take('q', 0, 10, 1_000);
      return [
        await box.settle('q', 'e1|a', 'retry', 7_000),
        await box.settle('q', 'e1|b', 'retry', 3_000),
        await box.take('q', 2_000, 10, 1_000),
        await box.take('q', 3_000, 10, 1_000),
        await box.settle('q', 'e1|b', 'done', 0),
        await box.settle('q', 'e1|a', 'drop', 0),
        await box.take('q', 99_000, 10, 1_000),
        // A retry of a delivery settled already does not bring it back.
        await box.settle('q', 'e1|a', 'retry', 100_000),
        await box.take('q', 200_000, 10, 1_000),
      ];
    });
    expect(answers).toEqual([
      1_000,
      3_000,
      { due: [], nextDueMs: 3_000 },
      { due: [{ key: 'e1|b', attempt: 2, body: 'x' }], nextDueMs: 4_000 },
      7_000,
      0,
      { due: [], nextDueMs: 0 },
      0,
      { due: [], nextDueMs: 0 },
    ]);
  });

  it('a guard records a drained line once per line, whichever POP saw it', async () => {
    const answers = await sameEverywhere(async (box) => {
      const guard = (above: number, set: number) => ({ name: 'drained', above, set });
      return [
        // POP A saw ticket 10 waiting, then the line empty at tail 12.
        (await box.add('q', 'q:line.drained:1:0:12', ['ops'], 'a', 1, guard(10, 12))).added,
        // POP B saw ticket 9 waiting, and the line empty at tail 13: the same line.
        (await box.add('q', 'q:line.drained:1:0:13', ['ops'], 'b', 2, guard(9, 13))).added,
        // A new line: ticket 20 waited, empty again at 21.
        (await box.add('q', 'q:line.drained:1:0:21', ['ops'], 'c', 3, guard(20, 21))).added,
      ];
    });
    expect(answers).toEqual([true, false, true]);
  });

  it(`keeps at most ${OUTBOX_MAX} deliveries, pushing out those due first`, async () => {
    const answers = await sameEverywhere(async (box) => {
      for (let i = 0; i < OUTBOX_MAX; i += 1) await box.add('q', `e${i}`, ['a'], 'x', 1_000 + i);
      const over = await box.add('q', 'late', ['a', 'b'], 'y', 5_000);
      const taken = await box.take('q', 10_000, 1_000, 1_000);
      return [over, taken.due.length, taken.due.some((d) => d.key === 'e0|a' || d.key === 'e1|a'), taken.due.some((d) => d.key === 'late|b')];
    });
    expect(answers).toEqual([{ added: true, dropped: 2 }, OUTBOX_MAX, false, true]);
  });

  it('queues have outboxes of their own', async () => {
    const answers = await sameEverywhere(async (box) => {
      await box.add('one', 'same-id', ['a'], '1', 0);
      return [(await box.add('two', 'same-id', ['a'], '2', 0)).added, (await box.take('two', 0, 10, 1)).due];
    });
    expect(answers).toEqual([true, [{ key: 'same-id|a', attempt: 1, body: '2' }]]);
  });

  it('refuses ids, names and bodies it cannot keep, changing nothing', async () => {
    for (const [name, box] of outboxes()) {
      await expect(box.add('q', 'bad id', ['a'], 'x', 0), name).rejects.toThrow(/event id/);
      await expect(box.add('q', 'ok', ['A B'], 'x', 0), name).rejects.toThrow(/webhook name/);
      await expect(box.add('q', 'ok', ['a'], 'x'.repeat(20_000), 0), name).rejects.toThrow(/16 KiB/);
      expect((await box.take('q', 0, 10, 1)).due, name).toEqual([]);
    }
  });
});

describe('webhook outbox scripts', () => {
  it('pin each SHA-1 to node:crypto and to SCRIPT LOAD, and the Redis store maps them', async () => {
    const redis = stores.connection();
    for (const script of OUTBOX_SCRIPTS) {
      expect(script.sha1, script.name).toBe(createHash('sha1').update(script.text).digest('hex'));
      expect(await redis.script('LOAD', adaptScript(script.text)), script.name).toBe(createHash('sha1').update(adaptScript(script.text)).digest('hex'));
    }
  });

  it('start with the allow-key-locking shebang, touch only KEYS, and read no clock or randomness', () => {
    for (const { name, text } of OUTBOX_SCRIPTS) {
      expect(text.split('\n')[0], name).toBe('#!lua flags=allow-key-locking');
      expect(text, name).not.toMatch(/'TIME'|math\.random|redis\.call\('(?:RANDOMKEY|SRANDMEMBER|SPOP)'/);
      for (const [, comment] of text.matchAll(/--(.*)$/gm)) expect(comment, `${name}: no clock words in comments`).not.toMatch(/\btime\b/i);
      for (const [, first] of text.matchAll(/redis\.call\('\w+', ([^,)]+)/g)) expect(['K_BOX', 'K_DUE', 'K_SEEN'], `${name}: ${first}`).toContain(first);
    }
  });

  it('cost, as Upstash bills them: an empty look 3 commands; recording an event 7 whatever the webhooks, a repeat 2', async () => {
    const redis = stores.connection();
    const box = stores.redis().outbox!;
    await box.take('warm', 0, 10, 1);
    await box.add('warm', 'w', ['a'], 'x', 0);
    const billed = async (run: () => Promise<unknown>): Promise<number> => {
      await redis.config('RESETSTAT');
      await run();
      const info = String(await redis.info('commandstats'));
      const counted = [...info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)].filter(([, c]) => !c!.startsWith('config') && !c!.startsWith('info'));
      return counted.reduce((n, [, , calls]) => n + Number(calls), 0);
    };
    expect(await billed(() => box.take('q', 0, 10, 1))).toBe(3);
    expect(await billed(() => box.add('q', 'e', ['a', 'b'], 'x', 0))).toBe(7);
    expect(await billed(() => box.add('q', 'e', ['a', 'b'], 'x', 0))).toBe(2);
  });
});
