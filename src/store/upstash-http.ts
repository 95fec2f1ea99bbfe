/**
 * The store's two commands, EVALSHA and EVAL, sent by @upstash/redis's own HTTP client without the
 * rest of the library. `Redis` defines a method and a command class for each of its ~300 commands,
 * and none of them can be left out of a bundle (they are the class's fields); on Fastly every byte
 * of code the engine parses when the wasm is built stays in its initial memory, which every request
 * copies when its instance starts. Measured on the Compute host stand-in: the `Redis` class adds
 * 2.3 MB to the wasm's 8.4 MB of initial data and its sending client 0.1 MB (docs/benchmarks.md).
 *
 * What `redis.evalsha(sha, keys, args)` does is what this does: the command as an array (strings,
 * numbers and booleans as they are, anything else as JSON), sent through the client's `request`
 * (its retries, its handling of a non-2xx answer and of the read-your-writes token), the reply's
 * `error` thrown as an UpstashError and a reply without a result refused. test/upstash-http.test.ts
 * holds the two side by side on a real redis-server.
 */
import { HttpClient, error_exports } from '@upstash/redis/http-client';
import type { UpstashClientOptions, UpstashScriptClient } from './upstash-store';

function serialize(value: unknown): unknown {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? value : JSON.stringify(value);
}

/** A script client over `options` (createUpstashClientOptions), on Fastly with its `backend`. */
export function createUpstashScriptClient(options: UpstashClientOptions & { readonly backend?: string }): UpstashScriptClient {
  const client = new HttpClient({
    baseUrl: options.url,
    headers: { authorization: `Bearer ${options.token}` },
    retry: options.retry,
    responseEncoding: options.responseEncoding,
    ...(options.backend !== undefined && { options: { backend: options.backend } }),
  });
  const send = async (command: readonly unknown[]): Promise<unknown> => {
    const { result, error } = await client.request<unknown>({ body: command.map(serialize), upstashSyncToken: client.upstashSyncToken });
    if (error) throw new error_exports.UpstashError(error);
    if (result === undefined) throw new TypeError('Request did not return a result');
    return result;
  };
  const scripts = {
    evalsha: (sha1: string, keys: string[], args?: unknown[]) => send(['evalsha', sha1, keys.length, ...keys, ...(args ?? [])]),
    eval: (script: string, keys: string[], args?: unknown[]) => send(['eval', script, keys.length, ...keys, ...(args ?? [])]),
  };
  return scripts as unknown as UpstashScriptClient;
}
