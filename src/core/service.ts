/**
 * The whole service: its queues (see queues.ts), one handler each, and the router in front of
 * them. With a single queue (no `queues` document) the router is that queue's handler itself.
 */
import { ConfigError, parseSecrets, type Config, type Secrets, type SettingSource } from './config';
import { admissionHeaderNames, createContext } from './context';
import { admissionPolicy, createHandler, type Handler } from './handler';
import { eventPhase } from './types';
import { errorResponse } from './http';
import { OVERVIEW_READS, type Clock, type CurrentQueue, type FailureLimiter, type Logger, type Origin, type OriginMeter, type QueueOverview, type QueueStore, type SiteVerifier, type StateCache, type TemplateSource, type WebhookSender } from './ports';
import { reservedPrefixMatch } from './path-canon';
import { parseQueues, selectQueue, type QueueSetup } from './queues';
import { pass } from './respond';
import { callStore } from './store-call';
import { rememberControls } from './remembered-controls';
import { createWebhooks } from './webhooks';
import type { Trace } from './types';

export interface ServiceDeps {
  /** The store, or how to make it from the service-wide settings (it may throw ConfigError). */
  readonly store: QueueStore | ((config: Readonly<Config>, secrets: Readonly<Secrets>) => QueueStore);
  readonly origin: Origin;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly cache: StateCache;
  /** Template overrides (the KV Store on Fastly); none by default. */
  readonly templates?: TemplateSource | undefined;
  /**
   * Counts failed sign-ins per client and holds guessers, shared by every queue (a guesser is the
   * same client whichever queue's admin it tries). Required: a host must not forget it.
   */
  readonly authLimiter: FailureLimiter;
  /**
   * Counts new tickets per client and holds clients over a queue's `ticket_limit` (keys carry the
   * queue). Required, like authLimiter.
   */
  readonly ticketLimiter: FailureLimiter;
  /** Asks the challenge provider about a token; fetch by default (Fastly: its `challenge` backend). */
  readonly siteVerifier?: SiteVerifier | undefined;
  /** Counts the origin's answers for adaptive admission, per queue (see HandlerDeps.originMeter). */
  readonly originMeter?: OriginMeter | undefined;
  /** The name this POP reports its counts under. */
  readonly meterName?: string | undefined;
  /**
   * How the secrets are read from their source: all at once and checked (parseSecrets, the
   * default), or as requests need them (parseSecretsOnDemand, on Fastly, where each is a lookup).
   */
  readonly readSecrets?: ((source: SettingSource) => Readonly<Secrets>) | undefined;
  /**
   * Sends webhook deliveries (Fastly: the webhook's backend; Node: fetch). Without it, or without
   * `defer`, or a store without an outbox, `webhooks` sends nothing (a log line says so once).
   */
  readonly webhookSender?: WebhookSender | undefined;
  /** Runs work off the request's path: after the response (Fastly's waitUntil), or in the background (Node). */
  readonly defer?: ((work: () => Promise<void>) => void) | undefined;
}

export interface Service {
  readonly handler: Handler;
  readonly queues: readonly QueueSetup[];
  readonly secrets: Readonly<Secrets>;
  /** The first queue's settings, which carry the service-wide ones (prefix, bypass, store). */
  readonly config: Readonly<Config>;
}


/** Builds the service; throws `ConfigError` naming every bad setting and secret at once. */
export function createService(settings: SettingSource, secretSource: SettingSource, deps: ServiceDeps): Service {
  const problems: ConfigError['problems'][number][] = [];
  let queues: QueueSetup[] = [];
  let secrets: Readonly<Secrets> | undefined;
  try {
    queues = parseQueues(settings);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems);
  }
  try {
    secrets = (deps.readSecrets ?? parseSecrets)(secretSource);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems);
  }
  if (problems.length > 0 || secrets === undefined || queues.length === 0) throw new ConfigError(problems);
  const keyRing = secrets;
  const config = queues[0]!.config;
  const raw = typeof deps.store === 'function' ? deps.store(config, secrets) : deps.store;
  // Every call carries this POP's memory of the operator's controls, for a store that forgets them.
  let store = rememberControls(raw, deps.cache, () => deps.clock.now());
  if (config.webhooks.length > 0) {
    if (raw.outbox === undefined || deps.webhookSender === undefined || deps.defer === undefined) {
      deps.logger.log({ ts: new Date(deps.clock.now()).toISOString(), method: '-', path: '-', status: 0, decision: 'webhooks_off', reason: 'webhooks are set but this host or store cannot send them' });
    } else {
      // Events found in the answers of the calls made anyway (see webhooks.ts), sent after the response.
      store = createWebhooks({
        targets: config.webhooks,
        configs: new Map(queues.map((q) => [q.config.queueName, q.config])),
        outbox: raw.outbox,
        sender: deps.webhookSender,
        secret: () => keyRing.webhookSecret(),
        cache: deps.cache,
        clock: deps.clock,
        logger: deps.logger,
        defer: deps.defer,
        storeTimeoutMs: config.storeTimeoutMs,
      }).watch(store);
    }
  }
  const many = queues.length > 1 || (settings('queues') ?? '').trim() !== '';
  // The queue on the page (its figures as the page read them) and the first others in their order,
  // at most OVERVIEW_READS in all.
  const overview = async (nowMs: number, current: CurrentQueue): Promise<QueueOverview[]> => {
    const others = queues.filter(({ config }) => config.queueName !== current.name).slice(0, OVERVIEW_READS - 1);
    const read = new Set(others.map(({ config }) => config.queueName));
    return Promise.all(
      queues.map(async ({ config }) => {
        const about = {
          name: config.queueName,
          method: config.queueMethod,
          event: config.eventStartMs > 0 || config.eventEndMs > 0 ? eventPhase(config, nowMs) : undefined,
        };
        if (config.queueName === current.name) return { ...about, stats: current.stats };
        if (!read.has(config.queueName)) return { ...about, stats: undefined, unread: true as const };
        // Through the same timeout as every store call: one queue that does not answer must not hold up the page.
        const stats = await callStore(() => store.stats(config.queueName, nowMs, admissionPolicy(config)), config.storeTimeoutMs, deps.clock);
        return { ...about, stats: stats.ok ? stats.value : undefined };
      }),
    );
  };
  // Whichever queue passes a request, the client's copies of every queue's admission header go.
  const admissionHeaders = admissionHeaderNames(queues.map((setup) => setup.config));
  const entries = queues.map((setup) => ({
    rule: setup.rule,
    handler: createHandler({ ...deps, store, config: setup.config, secrets: keyRing, admissionHeaders, ...(many && { overview }) }),
  }));
  const first = entries[0]!;
  if (!many) return { handler: first.handler, queues, secrets, config };
  // A request no queue holds is passed as a single queue passes a path outside its queue_paths:
  // signed `via: unqueued` with the service-wide (first queue's) admission settings. Not counted
  // for any queue's adaptive admission.
  const unqueued = createContext({ ...deps, store, config, secrets: keyRing, admissionHeaders, originMeter: undefined });

  const handler: Handler = async (request, client) => {
    const url = new URL(request.url);
    if (reservedPrefixMatch(url.pathname, config.pathPrefix) === 'near') {
      // Another spelling of our prefix: answered here, whichever queue (or none) the path falls in.
      deps.logger.log({
        ts: new Date(deps.clock.now()).toISOString(),
        method: request.method,
        path: url.pathname,
        status: 404,
        decision: 'reserved_spelling',
        ...(client.pop !== undefined && { pop: client.pop }),
      });
      return errorResponse(404, `no such path; the waiting room's own paths are spelt exactly ${config.pathPrefix}`);
    }
    if (url.pathname.startsWith(config.pathPrefix)) {
      // The waiting room's own paths name their queue; without one they are the first queue's.
      const name = url.searchParams.get('queue');
      const entry = name === null ? first : entries.find((e) => e.rule.name === name);
      return entry === undefined ? errorResponse(404, `no queue named ${JSON.stringify(name).slice(0, 40)}`) : entry.handler(request, client);
    }
    const entry = selectQueue(entries, { host: url.host, path: url.pathname, country: client.country });
    if (entry !== undefined) return entry.handler(request, client);
    const trace: Trace = { decision: 'no_queue', from: client.address };
    const response = await pass(unqueued, request, undefined, trace);
    deps.logger.log({
      ts: new Date(deps.clock.now()).toISOString(),
      method: request.method,
      path: url.pathname,
      status: response.status,
      decision: 'no_queue',
      ...(trace.reason !== undefined && { reason: trace.reason }),
      ...(client.pop !== undefined && { pop: client.pop }),
    });
    return response;
  };
  return { handler, queues, secrets, config };
}
