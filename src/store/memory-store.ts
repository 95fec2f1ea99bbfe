/**
 * In-memory QueueStore: the embedded default for a single local process (`npm start`) and the
 * reference the Lua scripts are held to by the shared contract suite.
 *
 * Each method does all its work synchronously before its promise settles, so under one event loop
 * every call is atomic, as a Lua script is in Redis. No node:* imports: this module also runs inside
 * the Fastly engine for build-time checks. State lives as long as the instance; it is not shared
 * between processes or POPs.
 */

import type { AdmitResult, AutoAdmission, JoinResult, QueueState, QueueStore } from '../core/ports';
import { assertAdmitCount, assertQueueName, checkAuto, periodStart, type CheckedAuto } from './scripts';

interface MemoryQueue {
  tail: number;
  cursor: number;
  /** Start (ms) of the last period whose automatic admission ran; undefined = never. */
  lastPeriodStart: number | undefined;
}

export class MemoryQueueStore implements QueueStore {
  readonly #queues = new Map<string, MemoryQueue>();

  async join(queue: string, nowMs: number, auto: AutoAdmission): Promise<JoinResult> {
    assertQueueName(queue);
    const checked = checkAuto(nowMs, auto);
    const state = this.#queue(queue);
    state.tail += 1;
    runAutoAdmission(state, checked);
    return { ticket: state.tail, tail: state.tail, cursor: state.cursor };
  }

  async poll(queue: string, nowMs: number, auto: AutoAdmission): Promise<QueueState> {
    assertQueueName(queue);
    const checked = checkAuto(nowMs, auto);
    const state = this.#queue(queue);
    runAutoAdmission(state, checked);
    return { tail: state.tail, cursor: state.cursor };
  }

  async admit(queue: string, count: number): Promise<AdmitResult> {
    assertQueueName(queue);
    assertAdmitCount(count);
    const state = this.#queue(queue);
    const before = state.cursor;
    state.cursor = Math.max(before, Math.min(before + count, state.tail));
    return { tail: state.tail, cursor: state.cursor, admitted: state.cursor - before };
  }

  async peek(queue: string): Promise<QueueState> {
    assertQueueName(queue);
    // Reads without creating an entry, as GET does not create a key.
    const state = this.#queues.get(queue);
    return { tail: state?.tail ?? 0, cursor: state?.cursor ?? 0 };
  }

  #queue(queue: string): MemoryQueue {
    let state = this.#queues.get(queue);
    if (state === undefined) {
      state = { tail: 0, cursor: 0, lastPeriodStart: undefined };
      this.#queues.set(queue, state);
    }
    return state;
  }
}

/** The same rule as `auto_admit` in scripts.ts. */
function runAutoAdmission(state: MemoryQueue, auto: CheckedAuto): void {
  if (auto.count <= 0) return;
  const start = periodStart(auto.nowMs, auto.periodMs);
  if (state.lastPeriodStart !== undefined && start <= state.lastPeriodStart) return;
  state.lastPeriodStart = start;
  state.cursor = Math.max(state.cursor, Math.min(state.cursor + auto.count, state.tail + auto.count));
}
