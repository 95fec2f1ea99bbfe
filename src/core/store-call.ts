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
    // The losing call is not cancelled (the Fastly engine has no AbortController); its result is
    // ignored, and the Upstash client's own retries are bounded separately.
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
