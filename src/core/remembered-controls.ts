/**
 * The operator's controls, remembered by each POP (Node host: each process) across a store that
 * forgets. A flush, a restart without persistence or a failover to an empty replica takes the
 * queue's `hold`, `open` and pause with it, and the room would silently go back to normal: letting
 * newcomers in under hold, sending everyone on the site back to the line under open. On-call
 * reaches for those switches in an incident, when a store restart is likeliest.
 *
 * So every store call of a queue carries what the caller's POP last saw of its controls
 * (AdmissionPolicy.restore), and the store's scripts apply it in the very run that finds the state
 * absent (RESTORE in the Lua prelude; the memory store mirrors it), before that run decides
 * anything, at no billed command: the fields go into the run's one HSET. While the state lives the
 * memory is ignored, so an operator's change always wins. The store records when and what was
 * restored (QueueStats.lostState) for the console and the metrics.
 *
 * The memory is kept in the POP's cache (StateCache.put), learnt from every state a call returns:
 * the generation, the switch and the operator's pause (not a pause by the switch or by a recovery
 * window, which the state tells apart). A POP that never saw the queue remembers nothing, and a
 * brand-new queue is not mistaken for a lost one. What a POP cannot know: a change made through
 * another POP after this one's last store call; it restores what it last saw.
 */
import type { AdmissionPolicy, QueueState, QueueStore, RememberedControls, StateCache } from './ports';

/** How long a POP keeps what it saw when it sees nothing new: a week, as the last valid settings. */
export const REMEMBER_SECONDS = 7 * 86_400;
/** A memory older than this is written again even when unchanged, so a queue in use never ages out. */
const REFRESH_MS = 3_600_000;

interface Memory extends RememberedControls {
  readonly generation: number;
  /** When this POP last wrote it, ms. */
  readonly atMs: number;
}

/** Per database with several (AdmissionPolicy.shard): each has a generation of its own; the first and the whole queue share one. */
function memoryKey(queue: string, shard: number | undefined): string {
  return shard === undefined || shard === 0 ? `wr-controls:${queue}` : `wr-controls:${queue}:s${shard}`;
}

/** `store` with every call carrying this POP's memory of the queue's controls, and learning from its answers. */
export function rememberControls(store: QueueStore, cache: StateCache, now: () => number): QueueStore {
  const recall = async (queue: string, shard: number | undefined): Promise<Memory | undefined> => {
    try {
      return await cache.peek<Memory>(memoryKey(queue, shard));
    } catch {
      // A cache that fails remembers nothing: the store's own state still decides.
      return undefined;
    }
  };
  const withMemory = (policy: AdmissionPolicy, memory: Memory | undefined): AdmissionPolicy =>
    memory === undefined ? policy : { ...policy, restore: { switch: memory.switch, paused: memory.paused } };
  const learn = async (queue: string, shard: number | undefined, memory: Memory | undefined, state: QueueState): Promise<void> => {
    // Generation 0: a stats read of an absent state, which says nothing about the controls.
    if (state.generation === 0) return;
    // The operator's pause is visible only while neither switch is on and no recovery window holds.
    const pauseHidden = state.switch !== undefined || state.recovering === true;
    const paused = pauseHidden ? (memory?.paused ?? false) : state.paused;
    const atMs = now();
    if (memory !== undefined && memory.generation === state.generation && memory.switch === state.switch && memory.paused === paused && atMs - memory.atMs < REFRESH_MS) return;
    try {
      await cache.put(memoryKey(queue, shard), { generation: state.generation, switch: state.switch, paused, atMs } satisfies Memory, REMEMBER_SECONDS);
    } catch {
      // Remembered next time.
    }
  };
  /** One call of `queue` with the memory going out and coming back. */
  const through = async <T>(queue: string, policy: AdmissionPolicy, call: (policy: AdmissionPolicy) => Promise<T>, stateOf: (result: T) => QueueState | undefined): Promise<T> => {
    const memory = await recall(queue, policy.shard);
    const result = await call(withMemory(policy, memory));
    const state = stateOf(result);
    if (state !== undefined) await learn(queue, policy.shard, memory, state);
    return result;
  };
  const isState = <T>(result: T): QueueState => result as unknown as QueueState;
  const noState = (): undefined => undefined;
  return {
    join: (queue, nowMs, policy, options) => through(queue, policy, (p) => store.join(queue, nowMs, p, options), isState),
    poll: (queue, nowMs, policy) => through(queue, policy, (p) => store.poll(queue, nowMs, p), isState),
    claim: (queue, ticket, nowMs, policy, waitedMs, generation) => through(queue, policy, (p) => store.claim(queue, ticket, nowMs, p, waitedMs, generation), isState),
    touch: (queue, ticket, nowMs, policy, untilMs, generation) => through(queue, policy, (p) => store.touch(queue, ticket, nowMs, p, untilMs, generation), noState),
    leave: (queue, ticket, nowMs, policy, graceMs, generation) => through(queue, policy, (p) => store.leave(queue, ticket, nowMs, p, graceMs, generation), noState),
    admit: (queue, count, nowMs, policy, key) => through(queue, policy, (p) => store.admit(queue, count, nowMs, p, key), isState),
    control: (queue, change, nowMs, policy) => through(queue, policy, (p) => store.control(queue, change, nowMs, p), isState),
    // A read: it restores nothing (the store writes nothing in it), but what it shows is learnt.
    stats: (queue, nowMs, policy, options) => through(queue, policy, () => store.stats(queue, nowMs, policy, options), isState),
    draw: (queue, ticket, nowMs, policy, waitedMs, generation) => through(queue, policy, (p) => store.draw(queue, ticket, nowMs, p, waitedMs, generation), isState),
    reset: (queue, nowMs, policy, expectedEpoch) => through(queue, policy, (p) => store.reset(queue, nowMs, p, expectedEpoch), isState),
    history: (queue, nowMs) => store.history(queue, nowMs),
    ...(store.record !== undefined && { record: store.record.bind(store) }),
    peek: (queue) => store.peek(queue),
    createVips: (queue, hashes, code, nowMs) => store.createVips(queue, hashes, code, nowMs),
    useVip: (queue, hash, nowMs) => store.useVip(queue, hash, nowMs),
    appendAudit: (queue, entry, nowMs, merge) => store.appendAudit(queue, entry, nowMs, merge),
    readAudit: (queue, limit, nowMs) => store.readAudit(queue, limit, nowMs),
  };
}
