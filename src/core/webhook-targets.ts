/**
 * The `webhooks` setting: which URLs (a named backend and a path on Fastly, a plain URL on the Node
 * host) get which events (see docs/webhooks.md). A JSON array, validated as a whole: every problem
 * is named by its place (`webhooks[1].events[0]`). Not secret: the HMAC key is the secret
 * `webhook_secret`. Imports nothing from config.ts, which reads the setting through here.
 */

/** Every event a webhook may ask for. */
export const WEBHOOK_EVENTS = [
  'switch.changed',
  'queue.paused',
  'queue.resumed',
  'queue.reset',
  'event.opened',
  'event.closed',
  'store.state_lost',
  'line.drained',
  'admission.stalled',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

export interface WebhookTarget {
  /** 1-32 of a-z, 0-9, _ and -: names its deliveries in the outbox and the log. */
  readonly name: string;
  /** The Node host's destination: an http(s) URL. */
  readonly url?: string | undefined;
  /** Fastly's destination: a backend declared on the service (Compute fetches only those)… */
  readonly backend?: string | undefined;
  /** …and the path and query sent to it. @default "/" */
  readonly path?: string | undefined;
  /** The events it gets. */
  readonly events: readonly WebhookEventType[];
  /** The queues whose events it gets; empty: every queue's. */
  readonly queues: readonly string[];
}

/** Most webhooks a service names. */
export const MAX_WEBHOOKS = 10;
const NAME_PATTERN = /^[a-z0-9_-]{1,32}$/;
/** What Fastly accepts as a backend name. */
const BACKEND_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$/;
const PATH_PATTERN = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*$/;
const QUEUE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const FIELDS = new Set(['name', 'url', 'backend', 'path', 'events', 'queues']);

export type WebhookTargetsResult =
  | { readonly ok: true; readonly targets: readonly WebhookTarget[] }
  | { readonly ok: false; readonly problems: readonly { readonly key: string; readonly message: string }[] };

/** Parses the `webhooks` setting (empty: none). */
export function parseWebhookTargets(text: string | undefined, key = 'webhooks'): WebhookTargetsResult {
  if (text === undefined || text.trim() === '') return { ok: true, targets: [] };
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    return { ok: false, problems: [{ key, message: `must be JSON: ${error instanceof Error ? error.message : String(error)}` }] };
  }
  if (!Array.isArray(document) || document.length > MAX_WEBHOOKS) {
    return { ok: false, problems: [{ key, message: `must be a JSON array of at most ${MAX_WEBHOOKS} webhooks ({"name", "url" or "backend" and "path", "events"})` }] };
  }
  const problems: { key: string; message: string }[] = [];
  const targets: WebhookTarget[] = [];
  const names = new Set<string>();
  document.forEach((item: unknown, i) => {
    const at = `${key}[${i}]`;
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      problems.push({ key: at, message: 'must be an object with "name", "url" or "backend", and "events"' });
      return;
    }
    const o = item as Record<string, unknown>;
    for (const field of Object.keys(o)) if (!FIELDS.has(field)) problems.push({ key: `${at}.${field}`, message: `is not a webhook field (${[...FIELDS].join(', ')})` });
    const name = o['name'];
    if (typeof name !== 'string' || !NAME_PATTERN.test(name)) problems.push({ key: `${at}.name`, message: 'must be 1-32 of a-z, 0-9, _ and -' });
    else if (names.has(name)) problems.push({ key: `${at}.name`, message: `repeats the name ${name}` });
    else names.add(name);
    const url = o['url'];
    if (url !== undefined) {
      let parsed: URL | undefined;
      try {
        parsed = typeof url === 'string' ? new URL(url) : undefined;
      } catch {
        parsed = undefined;
      }
      if (parsed === undefined || !/^https?:$/.test(parsed.protocol) || parsed.username !== '' || parsed.password !== '') {
        problems.push({ key: `${at}.url`, message: 'must be an http:// or https:// URL without credentials (the request is signed instead)' });
      }
    }
    const backend = o['backend'];
    if (backend !== undefined && (typeof backend !== 'string' || !BACKEND_PATTERN.test(backend))) problems.push({ key: `${at}.backend`, message: 'must be the name of a backend of the service' });
    const path = o['path'];
    if (path !== undefined && (typeof path !== 'string' || path.length > 1024 || !PATH_PATTERN.test(path))) problems.push({ key: `${at}.path`, message: 'must start with / and hold only URL characters' });
    if (path !== undefined && backend === undefined) problems.push({ key: `${at}.path`, message: 'goes with "backend" (on Fastly); on the Node host put the path in "url"' });
    if (url === undefined && backend === undefined) problems.push({ key: at, message: 'needs "url" (the Node host) or "backend" with "path" (Fastly), or both' });
    const events = o['events'];
    const wanted: WebhookEventType[] = [];
    if (!Array.isArray(events) || events.length === 0) {
      problems.push({ key: `${at}.events`, message: `must be a non-empty array of ${WEBHOOK_EVENTS.join(', ')}, or ["*"] for all` });
    } else {
      events.forEach((event: unknown, j) => {
        if (event === '*') wanted.push(...WEBHOOK_EVENTS);
        else if (typeof event === 'string' && (WEBHOOK_EVENTS as readonly string[]).includes(event)) wanted.push(event as WebhookEventType);
        else problems.push({ key: `${at}.events[${j}]`, message: `is not an event; one of ${WEBHOOK_EVENTS.join(', ')}, or "*"` });
      });
    }
    const queues = o['queues'];
    if (queues !== undefined && (!Array.isArray(queues) || !queues.every((q) => typeof q === 'string' && QUEUE_PATTERN.test(q)))) {
      problems.push({ key: `${at}.queues`, message: 'must be an array of queue names' });
    }
    targets.push({
      name: typeof name === 'string' ? name : '',
      ...(typeof url === 'string' && { url }),
      ...(typeof backend === 'string' && { backend, path: typeof path === 'string' ? path : '/' }),
      events: [...new Set(wanted)],
      queues: Array.isArray(queues) ? (queues as string[]) : [],
    });
  });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, targets };
}

/**
 * What one host cannot send (check-config's host-specific view): Fastly sends only through a
 * declared `backend`, the Node host only to a `url`. The service itself starts either way (the
 * same settings may serve both hosts); such a webhook's deliveries fail, each saying why.
 */
export function webhookHostProblems(targets: readonly WebhookTarget[], host: 'fastly' | 'node', key = 'webhooks'): { key: string; message: string }[] {
  return targets.flatMap((target, i) => {
    if (host === 'fastly' && target.backend === undefined) return [{ key: `${key}[${i}]`, message: `${target.name} has no "backend": on Fastly a webhook is sent through a backend declared on the service, to its "path"` }];
    if (host === 'node' && target.url === undefined) return [{ key: `${key}[${i}]`, message: `${target.name} has no "url": the Node host sends to a plain URL` }];
    return [];
  });
}
