/**
 * Every store call goes through here: raced against a timeout and turned into data, so a slow or
 * broken store is an outcome the handler decides on, never an exception that becomes a 5xx.
 */
import type { Clock } from './ports';

export type StoreOutcome<T> =
  | { readonly ok: true; readonly value: T; readonly ms: number }
  | { readonly ok: false; readonly reason: 'timeout' | 'error'; readonly message: string; readonly ms: number };

export async function callStore<T>(call: () => Promise<T>, timeoutMs: number, clock: Clock): Promise<StoreOutcome<T>> {
  const started = clock.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    // The race does not cancel the losing call (src/core runs on the Fastly engine, which has no
    // AbortController): the adapters end it at the same deadline (Node: an abort signal per request;
    // Fastly: the backend's timeouts), and writes that must not apply twice are idempotent.
    const result = await Promise.race([call().then((value) => ({ value })), timeout]);
    const ms = clock.now() - started;
    if (result === 'timeout') return { ok: false, reason: 'timeout', message: `no answer within ${timeoutMs} ms`, ms };
    return { ok: true, value: result.value, ms };
  } catch (error) {
    return { ok: false, reason: 'error', message: error instanceof Error ? error.message : String(error), ms: clock.now() - started };
  } finally {
    clearTimeout(timer);
  }
}
