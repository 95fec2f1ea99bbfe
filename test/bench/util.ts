/**
 * Small helpers every part of the bench uses: progress lines, timeouts, the HTTP client the
 * passes check answers with, cookies, statistics, and the run's list of things to stop.
 */
import http from 'node:http';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// Platform-free, so the engine's reuse simulation (test/engine/reuse-sim.ts) keeps cookies the same way.
export { keepCookies } from '../support/cookie-jar';

/** The page every visitor asks for. */
export const PATH = '/products';
export const REQUEST_TIMEOUT_MS = 10_000;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A progress line on stderr (the report goes to stdout). */
export function log(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** `key=value, …` of a room's settings, as the report names them. */
export function describeSettings(settings: Readonly<Record<string, string>>): string {
  return Object.entries(settings)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
}

/** What the run started, stopped last first, each within a bound, once (a signal, the watchdog or the end). */
export class Cleanups {
  readonly #steps: { name: string; run: () => Promise<unknown> }[] = [];
  #running: Promise<void> | undefined;
  add(name: string, run: () => Promise<unknown>): void {
    this.#steps.push({ name, run });
  }
  runAll(): Promise<void> {
    return (this.#running ??= (async () => {
      while (this.#steps.length > 0) {
        const step = this.#steps.pop()!;
        try {
          await withTimeout(step.run(), 6_000, `stopping ${step.name}`);
        } catch (error) {
          log(`could not stop ${step.name}: ${messageOf(error)}`);
        }
      }
    })());
  }
}

export function findProjectFile(name: string): string {
  // The bundle runs from bin/; the project root is one level up. Fall back to the working directory.
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [resolve(here, '..', name), resolve(here, '..', '..', name), resolve(process.cwd(), name)]) {
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`${name} not found next to the project`);
}

export interface Reply {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

export function send(agent: http.Agent, method: string, url: string, headers: http.OutgoingHttpHeaders = {}, body?: string): Promise<Reply> {
  return new Promise<Reply>((resolvePromise, reject) => {
    const allHeaders = body === undefined ? headers : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers };
    const req = http.request(url, { method, agent, headers: allHeaders }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`${method} ${url}: no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** `name=value` of our cookie in a response's Set-Cookie headers. */
export function cookieFrom(reply: Pick<Reply, 'headers'>, name: string): string | undefined {
  for (const line of reply.headers['set-cookie'] ?? []) {
    const pair = line.split(';', 1)[0] ?? '';
    if (pair.startsWith(`${name}=`)) return pair;
  }
  return undefined;
}

/** The claims of a cookie's JWS, read without verifying. */
export function tokenClaims(cookie: string): Record<string, unknown> | undefined {
  const payload = cookie.slice(cookie.indexOf('=') + 1).split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    return typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The `k` claim (w: waiting, a: access) of a cookie's JWS, read without verifying. */
export function tokenKind(cookie: string): string | undefined {
  const claims = tokenClaims(cookie);
  return claims === undefined ? undefined : String(claims['k']);
}

/** Runs `task(0..n-1)` with `concurrency` lanes; the first failure stops new tasks and is thrown. */
export async function runConcurrent(n: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async (): Promise<void> => {
    while (next < n && failure === undefined) {
      const i = next++;
      try {
        await task(i);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, concurrency) }, lane));
  if (failure !== undefined) throw failure;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] ?? NaN;
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? NaN : values.reduce((a, b) => a + b, 0) / values.length;
}

export function median(values: readonly number[]): number {
  return percentile([...values].sort((a, b) => a - b), 50);
}

export const ms = (value: number): string => (Number.isFinite(value) ? value.toFixed(2) : 'n/a');
export const signedMs = (value: number): string => (Number.isFinite(value) ? `${value >= 0 ? '+' : ''}${value.toFixed(2)}` : 'n/a');
