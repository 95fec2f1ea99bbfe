/**
 * Node adapter: the origin reached over node:http(s) with both bodies streamed, a stdout logger,
 * the system clock and the local config file. Used by the `npm start` host and the tests.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { SettingSource } from '../core/config';
import { originTarget } from '../core/http';
import type { Clock, Logger, Origin, RequestLog, TemplateSource } from '../core/ports';

/** Headers that describe one hop, not the message; a proxy must not pass them on. */
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/**
 * An origin at `baseUrl`. node:http rather than fetch: Node's fetch decodes gzip bodies while
 * keeping `content-encoding`, which would corrupt a pass-through.
 */
export function createHttpOrigin(baseUrl: string, agent?: http.Agent): Origin {
  const base = new URL(baseUrl);
  const client = base.protocol === 'https:' ? https : http;
  // Where every request goes: the configured scheme, host and port, fixed here once. The request
  // contributes only its path and query, as a string (see originTarget), never a host.
  const destination = {
    protocol: base.protocol,
    hostname: base.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: base.port === '' ? (base.protocol === 'https:' ? 443 : 80) : Number(base.port),
  };
  return {
    forward(request) {
      const path = originTarget(request.url);
      const headers: Record<string, string | string[]> = {};
      request.headers.forEach((value, name) => {
        if (!HOP_BY_HOP.has(name) && name !== 'host') headers[name] = value;
      });
      return new Promise<Response>((resolve, reject) => {
        const outgoing = client.request({ ...destination, path, method: request.method, headers, agent }, (res) => {
          const responseHeaders = new Headers();
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
            const name = res.rawHeaders[i]!.toLowerCase();
            if (!HOP_BY_HOP.has(name)) responseHeaders.append(name, res.rawHeaders[i + 1]!);
          }
          const status = res.statusCode ?? 502;
          const noBody = NULL_BODY_STATUSES.has(status) || request.method === 'HEAD';
          if (noBody) res.resume();
          const body = noBody ? null : (Readable.toWeb(res) as unknown as ReadableStream<Uint8Array>);
          resolve(new Response(body, { status, statusText: res.statusMessage ?? '', headers: responseHeaders }));
        });
        outgoing.on('error', reject);
        if (request.body === null) {
          outgoing.end();
        } else {
          const source = Readable.fromWeb(request.body as unknown as NodeReadableStream<Uint8Array>);
          source.on('error', (error) => outgoing.destroy(error));
          source.pipe(outgoing);
        }
      });
    },
  };
}

export const systemClock: Clock = { now: () => Date.now() };

export function createStreamLogger(write: (line: string) => void = (line) => process.stdout.write(line)): Logger {
  return { log: (record: RequestLog) => write(`${JSON.stringify(record)}\n`) };
}

export interface LocalConfig {
  readonly settings: SettingSource;
  readonly secrets: SettingSource;
}

/**
 * Reads `devconfig.json`: `config` holds Config Store settings and `dev_secrets` the values that
 * stand in for the Secret Store locally. Environment variables `WR_<KEY>` override either.
 */
export function readLocalConfig(path: string, env: NodeJS.ProcessEnv = process.env): LocalConfig {
  const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
  const root = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
  const section = (name: string): Record<string, unknown> => {
    const value = root[name];
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  };
  const lookup = (values: Record<string, unknown>) => (key: string) => {
    const fromEnv = env[`WR_${key.toUpperCase()}`];
    if (fromEnv !== undefined) return fromEnv;
    const value = values[key];
    return typeof value === 'string' ? value : value === undefined ? undefined : String(value);
  };
  return { settings: lookup(section('config')), secrets: lookup(section('dev_secrets')) };
}

/**
 * Template overrides from a directory, named as the KV Store keys are (`holding.html`,
 * `<queue>/holding.html`, `style.css`): what the KV Store `wr_templates` is on Fastly.
 */
export function directoryTemplateSource(dir: string): TemplateSource {
  return {
    async get(key) {
      if (!/^(?:[a-z0-9][a-z0-9_-]{0,31}\/)?[a-z0-9._-]+$/.test(key) || key.includes('..')) return undefined;
      try {
        return await readFile(join(dir, key), 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw error;
      }
    },
  };
}
