import type { Worker } from 'node:worker_threads';

/** The worker's next message, or a rejection if it errors, exits or stays silent for `timeoutMs`. */
export function nextWorkerMessage<T>(worker: Worker, timeoutMs: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cleanup = (): void => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
    const onMessage = (message: T): void => {
      cleanup();
      resolve(message);
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(new Error(`${what}: ${error.message}`));
    };
    const onExit = (code: number): void => {
      cleanup();
      reject(new Error(`${what}: the worker exited with code ${code}`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`${what}: no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
  });
}
