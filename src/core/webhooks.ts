/**
 * Signed webhooks (docs/webhooks.md): what happened to a queue, told to the operator's systems.
 *
 * Events are found where the store is consulted anyway, never by a call of their own on a visitor's
 * request: the operator's actions (switch, pause, reset: their answers, and for a switch or pause
 * the figures read just before), and the states other calls return (a waiting visitor's poll that
 * missed the POP's cache and ran admission, the console's and the metrics' reads, explicit admits):
 * the line drained, admission stalled, the event opened or closed, the store lost its state. All of
 * that is looked at after the response (Fastly: `event.waitUntil`; Node: in the background), so a
 * visitor never waits on it.
 *
 * Each event gets an id made from the store's state (queue, type, generation, epoch, the ticket or
 * minute it is about), so two POPs that see the same event make the same id, and the store's
 * outbox records an id once (WebhookOutbox.add). Each POP also remembers in its cache the ids it
 * recorded, so a state that lasts (a stall) costs one store call per POP, not one per look. The
 * outbox holds one delivery per event and webhook until the receiver answers 2xx; a delivery that
 * fails is retried with backoff by a later request of any POP that knows one is due.
 */
import type { Config } from './config';
import type { Clock, Logger, OutboxGuard, QueueState, QueueStats, QueueStore, RuntimeControl, StateCache, WebhookOutbox, WebhookSender } from './ports';
import { eventPhase, waitingOf } from './types';
import type { WebhookEventType, WebhookTarget } from './webhook-targets';

export { WEBHOOK_EVENTS, parseWebhookTargets, type WebhookEventType, type WebhookTarget } from './webhook-targets';

/** The signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export const SIGNATURE_HEADER = 'x-wr-signature';
export const EVENT_ID_HEADER = 'x-wr-event-id';
export const EVENT_TYPE_HEADER = 'x-wr-event';
export const ATTEMPT_HEADER = 'x-wr-delivery-attempt';
/** A receiver refuses a delivery signed longer ago than this (a replay), seconds. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;
/** A receiver that has not answered by then has failed this attempt. */
export const DELIVERY_TIMEOUT_MS = 3_000;
/** Attempts before a delivery is given up (the last about 40 minutes after the first). */
export const MAX_ATTEMPTS = 8;
/** A stall: people wait and nobody has been called for this long (as one POP saw the line). */
export const STALL_MS = 5 * 60_000;
/** An event's opening or close is told if seen within this long after it, never later. */
export const EVENT_NOTICE_MS = 3_600_000;
/** How often a console or metrics read looks for deliveries due that no POP flagged. */
export const SWEEP_MS = 60_000;
/**
 * Deliveries one pump hands out. On Fastly each is a backend request, and so is each store call
 * (the take, then a settle per delivery): 4 keeps the work after a response at about 10 backend
 * requests, well within the 32 Fastly allows a request with its own calls.
 */
export const PUMP_BATCH = 4;

/** The wait before attempt `attempt + 1` after attempt `attempt` failed: 2 s, 6 s, 18 s, … up to 10 min. */
export function retryDelayMs(attempt: number): number {
  return Math.min(2_000 * 3 ** Math.max(0, attempt - 1), 600_000);
}

/** What a delivery's body says. */
export interface WebhookEvent {
  readonly id: string;
  readonly type: WebhookEventType;
  readonly queue: string;
  /** When it was found, ISO 8601. */
  readonly time: string;
  readonly details: Readonly<Record<string, unknown>>;
}

const encoder = new TextEncoder();

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** HMAC-SHA256 of `<timestamp>.<body>` under `secret`, lower-case hex. */
export async function signatureOf(secret: string, timestamp: number, body: string): Promise<string> {
  // The key is made for this one signature, its bytes referenced until it is done (the Fastly
  // engine's imported key points at them, see DESIGN.md).
  const keyBytes = encoder.encode(secret);
  const key = await crypto.subtle.importKey('raw', keyBytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const mac = await crypto.subtle.sign('HMAC', key, encoder.encode(`${timestamp}.${body}`));
  void keyBytes.length;
  return hex(mac);
}

/** The signature header's value for a body sent at `timestamp` (unix seconds). */
export async function signatureHeader(secret: string, timestamp: number, body: string): Promise<string> {
  return `t=${timestamp},v1=${await signatureOf(secret, timestamp, body)}`;
}

export type Verification = { readonly ok: true; readonly timestamp: number } | { readonly ok: false; readonly reason: 'malformed' | 'stale' | 'bad_signature' };

/**
 * What a receiver checks: the header is well formed, its timestamp within `toleranceSeconds` of
 * `nowSeconds` (older is a replay), and the signature the HMAC of `<t>.<body>` (compared in
 * constant time).
 */
export async function verifySignature(secret: string, header: string | null | undefined, body: string, nowSeconds: number, toleranceSeconds = SIGNATURE_TOLERANCE_SECONDS): Promise<Verification> {
  const match = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (match === null) return { ok: false, reason: 'malformed' };
  const timestamp = Number(match[1]);
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) return { ok: false, reason: 'stale' };
  const expected = await signatureOf(secret, timestamp, body);
  let diff = 0;
  for (let i = 0; i < expected.length; i += 1) diff |= expected.charCodeAt(i) ^ match[2]!.charCodeAt(i);
  return diff === 0 ? { ok: true, timestamp } : { ok: false, reason: 'bad_signature' };
}

/** An event found, before it is recorded. */
export interface FoundEvent {
  readonly type: WebhookEventType;
  readonly id: string;
  readonly details: Readonly<Record<string, unknown>>;
  readonly guard?: OutboxGuard;
}

/** What one POP remembers of a queue's line between looks (in its cache). */
export interface LineMemory {
  readonly generation: number;
  readonly epoch: number;
  /** The last ticket seen waiting; 0 when the line was last seen empty. */
  readonly last: number;
  readonly cursor: number;
  /** Since when the cursor has stood still with people waiting, ms. */
  readonly since: number;
}

/** The operator's pause, as the state shows it (a switch or a recovery window hides it). */
function operatorPaused(state: QueueState): boolean | undefined {
  return state.switch !== undefined || state.recovering === true ? undefined : state.paused;
}

/** Events an operator's change made: the state before (when it could be read) and after. */
export function controlEvents(queue: string, change: RuntimeControl, before: QueueState | undefined, after: QueueState, nowMs: number): FoundEvent[] {
  const found: FoundEvent[] = [];
  const g = after.generation;
  if (change.switch !== undefined) {
    const from = before === undefined ? undefined : (before.switch ?? 'normal');
    const to = after.switch ?? 'normal';
    if (from !== to) found.push({ type: 'switch.changed', id: `${queue}:switch.changed:${g}:${nowMs}:${to}`, details: { from: from ?? null, to } });
  }
  if (change.paused !== undefined) {
    const was = before === undefined ? undefined : operatorPaused(before);
    if (was !== change.paused) {
      const type = change.paused ? 'queue.paused' : 'queue.resumed';
      found.push({ type, id: `${queue}:${type}:${g}:${nowMs}`, details: { tail: after.tail, cursor: after.cursor } });
    }
  }
  return found;
}

/**
 * Events a state shows, against what this POP remembered of the line: the line drained (people
 * waited, none do now: recorded once per line by a guard on the last ticket seen waiting), admission
 * stalled (people wait and the cursor has not moved for STALL_MS, nobody let in over the last five
 * minutes, not paused, not held, not before the event), the event opened or closed, the store lost
 * its state (a new generation, or the stats' `lostState`).
 */
export function stateEvents(queue: string, config: Readonly<Config>, state: QueueState & Partial<Pick<QueueStats, 'lostState'>>, memory: LineMemory | undefined, nowMs: number): { found: FoundEvent[]; memory: LineMemory | undefined } {
  const found: FoundEvent[] = [];
  const g = state.generation;
  if (g === 0) return { found, memory };
  const waiting = waitingOf(state, config.queueMethod === 'random');
  const same = memory !== undefined && memory.generation === g && memory.epoch === state.epoch;
  if (state.lostState !== undefined) {
    found.push({ type: 'store.state_lost', id: `${queue}:store.state_lost:${g}`, details: { at: new Date(state.lostState.atMs).toISOString(), restored: state.lostState.restored } });
  } else if (memory !== undefined && memory.generation !== 0 && memory.generation !== g) {
    found.push({ type: 'store.state_lost', id: `${queue}:store.state_lost:${g}`, details: { at: new Date(nowMs).toISOString(), restored: [] } });
  }
  let next: LineMemory;
  if (waiting > 0) {
    const still = same && memory.cursor === state.cursor && memory.last > 0;
    next = { generation: g, epoch: state.epoch, last: state.tail, cursor: state.cursor, since: still ? memory.since : nowMs };
    const held = state.paused || state.switch === 'hold' || eventPhase(config, nowMs) === 'before';
    if (still && !held && nowMs - memory.since >= STALL_MS && state.admittedLast5Minutes === 0) {
      found.push({
        type: 'admission.stalled',
        id: `${queue}:admission.stalled:${g}:${state.epoch}:${state.cursor}`,
        details: { waiting, cursor: state.cursor, stalled_minutes: Math.floor((nowMs - memory.since) / 60_000) },
      });
    }
  } else {
    next = { generation: g, epoch: state.epoch, last: 0, cursor: state.cursor, since: nowMs };
    if (same && memory.last > 0) {
      found.push({
        type: 'line.drained',
        id: `${queue}:line.drained:${g}:${state.epoch}:${state.tail}`,
        details: { tail: state.tail, cursor: state.cursor },
        guard: { name: 'drained', above: memory.last, set: state.tail },
      });
    }
  }
  if (config.eventStartMs > 0 && nowMs >= config.eventStartMs && nowMs < config.eventStartMs + EVENT_NOTICE_MS) {
    found.push({ type: 'event.opened', id: `${queue}:event.opened:${config.eventStartMs}`, details: { start: new Date(config.eventStartMs).toISOString(), prequeue: state.eventSize } });
  }
  if (config.eventEndMs > 0 && nowMs >= config.eventEndMs && nowMs < config.eventEndMs + EVENT_NOTICE_MS) {
    found.push({ type: 'event.closed', id: `${queue}:event.closed:${config.eventEndMs}`, details: { end: new Date(config.eventEndMs).toISOString(), after: config.eventAfter } });
  }
  const unchanged = memory !== undefined && memory.generation === next.generation && memory.epoch === next.epoch && memory.last === next.last && memory.cursor === next.cursor && memory.since === next.since;
  return { found, memory: unchanged ? memory : next };
}

export interface WebhookDeps {
  readonly targets: readonly WebhookTarget[];
  /** Each queue's settings, by name. */
  readonly configs: ReadonlyMap<string, Readonly<Config>>;
  readonly outbox: WebhookOutbox;
  readonly sender: WebhookSender;
  readonly secret: () => Promise<string | undefined>;
  readonly cache: StateCache;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Runs `work` off the request's path (after the response on Fastly, in the background on Node). */
  readonly defer: (work: () => Promise<void>) => void;
  /** A store call's timeout (the outbox's calls are store calls), ms. */
  readonly storeTimeoutMs: number;
  /** A delivery's timeout. @default DELIVERY_TIMEOUT_MS */
  readonly deliveryTimeoutMs?: number;
}

const LINE_KEY = (queue: string): string => `wr-hooks-line:${queue}`;
const SENT_KEY = (id: string): string => `wr-hooks-sent:${id}`;
const DUE_KEY = (queue: string): string => `wr-hooks-due:${queue}`;
const SWEPT_KEY = (queue: string): string => `wr-hooks-swept:${queue}`;
const DAY_SECONDS = 86_400;

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

export interface Webhooks {
  /** `store` with its answers looked at for events (after the response). */
  watch(store: QueueStore): QueueStore;
  /** Sends what is due in `queue`'s outbox now (tests and the hosts' sweeps). */
  pump(queue: string): Promise<void>;
}

export function createWebhooks(deps: WebhookDeps): Webhooks {
  const { targets, configs, outbox, sender, cache, clock, logger } = deps;
  const timeoutMs = deps.deliveryTimeoutMs ?? DELIVERY_TIMEOUT_MS;
  const pumping = new Set<string>();
  /** Queues where an event was recorded while their pump ran: it runs once more before it stops. */
  const again = new Set<string>();

  const hooksFor = (queue: string, type: WebhookEventType): string[] =>
    targets.filter((t) => t.events.includes(type) && (t.queues.length === 0 || t.queues.includes(queue))).map((t) => t.name);
  const wanted = (queue: string): boolean => targets.some((t) => t.queues.length === 0 || t.queues.includes(queue));

  const log = (queue: string, decision: string, reason: string, status = 0): void =>
    logger.log({ ts: new Date(clock.now()).toISOString(), method: 'POST', path: '(webhook)', status, decision, queue, reason });

  const peek = async <T>(key: string): Promise<T | undefined> => {
    try {
      return await cache.peek<T>(key);
    } catch {
      return undefined;
    }
  };
  const put = async <T>(key: string, value: T, ttl: number): Promise<void> => {
    try {
      await cache.put(key, value, ttl);
    } catch {
      // Only a memory of this POP: at worst the store is asked again.
    }
  };

  const noteDue = (queue: string, nextDueMs: number): Promise<void> => put(DUE_KEY(queue), nextDueMs, DAY_SECONDS);

  /** Records the events no POP of ours recorded yet; true when one was recorded now. */
  async function record(queue: string, events: readonly FoundEvent[], nowMs: number): Promise<boolean> {
    let recorded = false;
    for (const event of events) {
      const hooks = hooksFor(queue, event.type);
      if (hooks.length === 0) continue;
      if ((await peek<number>(SENT_KEY(event.id))) !== undefined) continue;
      const body: WebhookEvent = { id: event.id, type: event.type, queue, time: new Date(nowMs).toISOString(), details: event.details };
      try {
        const result = await withTimeout(outbox.add(queue, event.id, hooks, JSON.stringify(body), nowMs, event.guard), deps.storeTimeoutMs, 'webhook outbox');
        if (result.added) {
          recorded = true;
          log(queue, 'webhook_event', `${event.type} ${event.id}${result.dropped > 0 ? `; outbox full, ${result.dropped} oldest dropped` : ''}`);
        }
        await put(SENT_KEY(event.id), nowMs, DAY_SECONDS);
      } catch (error) {
        log(queue, 'webhook_store_error', `${event.type} ${event.id} not recorded: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    if (recorded) {
      await noteDue(queue, nowMs);
      if (pumping.has(queue)) again.add(queue);
    }
    return recorded;
  }

  async function deliver(queue: string, key: string, attempt: number, body: string, secret: string | undefined): Promise<'done' | 'drop' | 'retry'> {
    const name = key.slice(key.lastIndexOf('|') + 1);
    const target = targets.find((t) => t.name === name);
    if (target === undefined) {
      log(queue, 'webhook_dropped', `${key}: no webhook named ${name} any more`);
      return 'drop';
    }
    if (secret === undefined || secret === '') {
      log(queue, 'webhook_failed', `${key}: the secret webhook_secret is not set, nothing is sent unsigned`);
      return attempt >= MAX_ATTEMPTS ? 'drop' : 'retry';
    }
    const event = JSON.parse(body) as WebhookEvent;
    const timestamp = Math.floor(clock.now() / 1000);
    const headers = {
      'content-type': 'application/json',
      [SIGNATURE_HEADER]: await signatureHeader(secret, timestamp, body),
      [EVENT_ID_HEADER]: event.id,
      [EVENT_TYPE_HEADER]: event.type,
      [ATTEMPT_HEADER]: String(attempt),
      'user-agent': 'waiting-room-webhooks/1',
    };
    let status = 0;
    let failure: string | undefined;
    try {
      status = await withTimeout(sender.send(target, body, headers, timeoutMs), timeoutMs, 'webhook');
      if (status < 200 || status > 299) failure = `answered ${status}`;
    } catch (error) {
      failure = error instanceof Error ? error.message : String(error);
    }
    if (failure === undefined) {
      log(queue, 'webhook_delivered', `${key} attempt ${attempt}`, status);
      return 'done';
    }
    const outcome = attempt >= MAX_ATTEMPTS ? 'drop' : 'retry';
    log(queue, outcome === 'drop' ? 'webhook_dropped' : 'webhook_failed', `${key} attempt ${attempt}: ${failure}${outcome === 'drop' ? '; given up' : `; next in ${retryDelayMs(attempt) / 1000} s`}`, status);
    return outcome;
  }

  async function pump(queue: string): Promise<void> {
    if (pumping.has(queue)) return;
    pumping.add(queue);
    try {
      do {
        again.delete(queue);
        await pumpOnce(queue);
      } while (again.has(queue));
    } finally {
      pumping.delete(queue);
    }
  }

  async function pumpOnce(queue: string): Promise<void> {
    try {
      const nowMs = clock.now();
      const taken = await withTimeout(outbox.take(queue, nowMs, PUMP_BATCH, timeoutMs + deps.storeTimeoutMs * 2 + 5_000), deps.storeTimeoutMs, 'webhook outbox');
      let next = taken.nextDueMs;
      if (taken.due.length > 0) {
        const secret = await deps.secret();
        const outcomes = await Promise.all(taken.due.map(async (d) => ({ d, outcome: await deliver(queue, d.key, d.attempt, d.body, secret) })));
        for (const { d, outcome } of outcomes) {
          next = await withTimeout(outbox.settle(queue, d.key, outcome, outcome === 'retry' ? clock.now() + retryDelayMs(d.attempt) : 0), deps.storeTimeoutMs, 'webhook outbox');
        }
      }
      await noteDue(queue, next);
    } catch (error) {
      log(queue, 'webhook_store_error', `outbox not read: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** After the response: the events a state shows, recorded; then what is due, sent. */
  async function look(queue: string, state: QueueState, nowMs: number, extra: readonly FoundEvent[], sweep: boolean): Promise<void> {
    const config = configs.get(queue);
    if (config === undefined) return;
    const memory = await peek<LineMemory>(LINE_KEY(queue));
    const seen = stateEvents(queue, config, state, memory, nowMs);
    if (seen.memory !== memory && seen.memory !== undefined) await put(LINE_KEY(queue), seen.memory, DAY_SECONDS);
    const recorded = await record(queue, [...extra, ...seen.found], nowMs);
    const due = await peek<number>(DUE_KEY(queue));
    let go = recorded || (due !== undefined && due > 0 && due <= nowMs);
    if (!go && sweep) {
      // A console or metrics read: at most once a minute per POP, a look at the outbox for what
      // no POP of ours flagged (a delivery another POP left, a flag evicted from the cache).
      const swept = await peek<number>(SWEPT_KEY(queue));
      if (swept === undefined || nowMs - swept >= SWEEP_MS) {
        await put(SWEPT_KEY(queue), nowMs, DAY_SECONDS);
        go = true;
      }
    }
    if (go) await pump(queue);
  }

  const later = (queue: string, state: QueueState, nowMs: number, extra: readonly FoundEvent[] = [], sweep = false): void => {
    if (!wanted(queue)) return;
    deps.defer(() =>
      look(queue, state, nowMs, extra, sweep).catch((error: unknown) => log(queue, 'webhook_error', error instanceof Error ? error.message : String(error))),
    );
  };

  function watch(store: QueueStore): QueueStore {
    // With several databases, a visitor's call answers one database's state, not the queue's: only
    // the calls about the whole queue (the console's and the metrics' reads, admits) are looked at.
    const observed = async <T extends QueueState>(queue: string, nowMs: number, call: Promise<T>, sweep = false, shard?: number): Promise<T> => {
      const state = await call;
      if (shard === undefined) later(queue, state, nowMs, [], sweep);
      return state;
    };
    return {
      ...(store.outbox !== undefined && { outbox: store.outbox }),
      ...(store.record !== undefined && { record: store.record.bind(store) }),
      join: (queue, nowMs, policy, options) => store.join(queue, nowMs, policy, options),
      poll: (queue, nowMs, policy) => observed(queue, nowMs, store.poll(queue, nowMs, policy), false, policy.shard),
      claim: (queue, ticket, nowMs, policy, waitedMs, generation) => store.claim(queue, ticket, nowMs, policy, waitedMs, generation),
      touch: (queue, ticket, nowMs, policy, untilMs, generation) => store.touch(queue, ticket, nowMs, policy, untilMs, generation),
      leave: (queue, ticket, nowMs, policy, graceMs, generation) => store.leave(queue, ticket, nowMs, policy, graceMs, generation),
      admit: (queue, count, nowMs, policy, key) => observed(queue, nowMs, store.admit(queue, count, nowMs, policy, key), false, policy.shard),
      async control(queue, change, nowMs, policy) {
        const asks = wanted(queue) && (change.switch !== undefined || change.paused !== undefined);
        // The operator's request (never a visitor's): one read first, so an unchanged switch is no event.
        let before: QueueState | undefined;
        if (asks) {
          try {
            before = await store.stats(queue, nowMs, policy);
          } catch {
            before = undefined;
          }
        }
        const after = await store.control(queue, change, nowMs, policy);
        if (asks) later(queue, after, nowMs, controlEvents(queue, change, before, after, nowMs));
        else later(queue, after, nowMs);
        return after;
      },
      stats: (queue, nowMs, policy, options) => observed(queue, nowMs, store.stats(queue, nowMs, policy, options), true, policy.shard),
      draw: (queue, ticket, nowMs, policy, waitedMs, generation) => observed(queue, nowMs, store.draw(queue, ticket, nowMs, policy, waitedMs, generation), false, policy.shard),
      async reset(queue, nowMs, policy, expectedEpoch) {
        const result = await store.reset(queue, nowMs, policy, expectedEpoch);
        const found: FoundEvent[] = result.applied
          ? [{ type: 'queue.reset', id: `${queue}:queue.reset:${result.generation}:${result.epoch}`, details: { tail: result.tail, epoch: result.epoch } }]
          : [];
        later(queue, result, nowMs, found);
        return result;
      },
      history: (queue, nowMs) => store.history(queue, nowMs),
      peek: (queue) => store.peek(queue),
      createVips: (queue, hashes, code, nowMs) => store.createVips(queue, hashes, code, nowMs),
      useVip: (queue, hash, nowMs) => store.useVip(queue, hash, nowMs),
      appendAudit: (queue, entry, nowMs, merge) => store.appendAudit(queue, entry, nowMs, merge),
      readAudit: (queue, limit, nowMs) => store.readAudit(queue, limit, nowMs),
    };
  }

  return { watch, pump };
}
