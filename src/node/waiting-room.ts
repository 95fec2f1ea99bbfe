/**
 * Wires the core handler for Node: parsed settings, a store, the HTTP origin, a logger and a clock.
 * `npm start` and the end-to-end tests build the waiting room through here.
 */
import { ConfigError, type Config, type ConfigProblem, type Secrets, type SettingSource } from '../core/config';
import type { Handler } from '../core/handler';
import type { QueueSetup } from '../core/queues';
import { createService } from '../core/service';
import type { Clock, FailureLimiter, Logger, OriginMeter, QueueStore, SiteVerifier, StateCache, TemplateSource, WebhookSender } from '../core/ports';
import { MemoryStateCache } from '../platform/memory-cache';
import { MemoryFailureLimiter } from '../platform/memory-limiter';
import { MemoryOriginMeter } from '../platform/memory-meter';
import { hostname } from 'node:os';
import { createHttpOrigin, createStreamLogger, fetchSiteVerifier, systemClock, type OriginTimeouts } from '../platform/node';

export interface WaitingRoomOptions {
  readonly settings: SettingSource;
  readonly secrets: SettingSource;
  readonly store: QueueStore | ((config: Readonly<Config>, secrets: Readonly<Secrets>) => QueueStore);
  readonly originUrl: string;
  /** How long the origin may take: by default Fastly's backend defaults (see DEFAULT_ORIGIN_TIMEOUTS). */
  readonly originTimeouts?: OriginTimeouts;
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** The process is one POP: by default its cache lives in memory. */
  readonly cache?: StateCache;
  /** Template overrides (the KV Store's stand-in); see directoryTemplateSource. */
  readonly templates?: TemplateSource | undefined;
  /** Problems the host found in its sources before parsing (names that are not ours): refused with the rest. */
  readonly problems?: readonly ConfigProblem[];
  /** Failed sign-ins per client: by default counted in this process's memory, on `clock`. */
  readonly authLimiter?: FailureLimiter;
  /** New tickets per client: by default counted in this process's memory, on `clock`. */
  readonly ticketLimiter?: FailureLimiter;
  /** The challenge provider's siteverify: by default Node's fetch. */
  readonly siteVerifier?: SiteVerifier;
  /** The origin's answers for adaptive admission: by default counted in this process's memory, on `clock`. */
  readonly originMeter?: OriginMeter;
  /** The name this host reports its counts under (several hosts sharing one Redis each need their own): by default host name and process id. */
  readonly meterName?: string;
  /** Webhook deliveries: by default Node's fetch to each webhook's `url`. */
  readonly webhookSender?: WebhookSender;
}

/**
 * Webhook deliveries with fetch, to the webhook's `url` (the Node host sends to plain URLs; a
 * webhook with only a Fastly `backend` cannot be reached from here, and its deliveries fail, said in the log).
 */
export const fetchWebhookSender: WebhookSender = {
  async send(target, body, headers, timeoutMs) {
    if (target.url === undefined) throw new Error('this webhook has no "url": the Node host sends to plain URLs, not Fastly backends');
    const response = await fetch(target.url, { method: 'POST', body, headers, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    // The body is not read: only the status counts, and the connection is let go.
    await response.body?.cancel();
    return response.status;
  },
};

/** Work off the request's path: started once the current turn (the response's) is done. */
function inBackground(work: () => Promise<void>): void {
  setImmediate(() => {
    work().catch((error: unknown) => console.error(`waiting room: background work failed: ${error instanceof Error ? error.message : String(error)}`));
  });
}

export interface WaitingRoom {
  readonly handler: Handler;
  readonly config: Readonly<Config>;
  readonly secrets: Readonly<Secrets>;
  readonly queues: readonly QueueSetup[];
}

/** Throws `ConfigError` naming every bad setting (and every problem of `options.problems`) before anything starts. */
export function buildWaitingRoom(options: WaitingRoomOptions): WaitingRoom {
  const clock = options.clock ?? systemClock;
  const found = options.problems ?? [];
  let service;
  try {
    service = createService(options.settings, options.secrets, {
      store: options.store,
      origin: createHttpOrigin(options.originUrl, options.originTimeouts === undefined ? {} : { timeouts: options.originTimeouts }),
      logger: options.logger ?? createStreamLogger(),
      clock,
      cache: options.cache ?? new MemoryStateCache(clock),
      templates: options.templates,
      authLimiter: options.authLimiter ?? new MemoryFailureLimiter(clock),
      ticketLimiter: options.ticketLimiter ?? new MemoryFailureLimiter(clock),
      siteVerifier: options.siteVerifier ?? fetchSiteVerifier,
      originMeter: options.originMeter ?? new MemoryOriginMeter(clock),
      meterName: options.meterName ?? `${hostname().slice(0, 20)}-${process.pid}`,
      webhookSender: options.webhookSender ?? fetchWebhookSender,
      defer: inBackground,
    });
  } catch (error) {
    if (error instanceof ConfigError && found.length > 0) throw new ConfigError([...found, ...error.problems]);
    throw error;
  }
  if (found.length > 0) throw new ConfigError(found);
  return { handler: service.handler, config: service.config, secrets: service.secrets, queues: service.queues };
}
