/**
 * The audit trail: who changed what, when, and from where. Each change the console or the origin's
 * API applies (admit, pause and resume, the emergency switch, thresholds and mode, adaptive
 * admission and its pin, reset, VIP codes, bypass passes) becomes one entry, appended to the queue's
 * trail in the store after the change (one store call, on admin requests only) and carried on the
 * request's log line (`actor` and `reason`) whether or not the store took it.
 *
 * Entries are JSON text to the store (it keeps the newest AUDIT_MAX_ENTRIES for AUDIT_KEEP_MS after
 * the last; a reset leaves them). An entry that does not parse (written by a later version, or
 * damaged) is skipped when read, never an error: the trail is a record, not a control.
 */
import type { Role } from './accounts';
import { AUDIT_MAX_ENTRIES, type QueueStore } from './ports';

export type AuditAction = 'admit' | 'control' | 'reset' | 'vip_codes' | 'bypass_pass';
const ACTIONS: readonly AuditAction[] = ['admit', 'control', 'reset', 'vip_codes', 'bypass_pass'];

/** A value before or after a change: the fields of the state it touched. */
export type AuditValue = string | number | boolean | null;

export interface AuditEntry {
  /** When the change was applied, ms since the epoch. */
  readonly atMs: number;
  /** The account's name, or `api` for the origin's bearer token. */
  readonly actor: string;
  readonly role: Role | 'api';
  /** The client as the sign-in throttle keys it (its IPv4 address, or its IPv6 /64; see clientKey). */
  readonly client: string;
  readonly action: AuditAction;
  /** What changed, in the words the console's notice used. */
  readonly change: string;
  /** The fields the change touched, as they were (where the request read them) and as they are. */
  readonly before?: Readonly<Record<string, AuditValue>> | undefined;
  readonly after?: Readonly<Record<string, AuditValue>> | undefined;
}

/** The longest `change` text kept; the store takes 4 KB an entry and the rest must fit beside it. */
const MAX_CHANGE_CHARS = 600;

/** An entry as the store keeps it: short keys, one line of JSON. */
export function encodeAuditEntry(entry: AuditEntry): string {
  return JSON.stringify({
    t: entry.atMs,
    a: entry.actor,
    r: entry.role,
    c: entry.client,
    x: entry.action,
    w: entry.change.length > MAX_CHANGE_CHARS ? `${entry.change.slice(0, MAX_CHANGE_CHARS - 1)}…` : entry.change,
    ...(entry.before !== undefined && { b: entry.before }),
    ...(entry.after !== undefined && { f: entry.after }),
  });
}

const isValues = (v: unknown): v is Record<string, AuditValue> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => x === null || ['string', 'number', 'boolean'].includes(typeof x));

/** An entry back from the store's text; undefined when it is not one (see the module header). */
export function decodeAuditEntry(text: string): AuditEntry | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Record<string, unknown>;
  const role = o['r'];
  if (typeof o['t'] !== 'number' || !Number.isSafeInteger(o['t']) || typeof o['a'] !== 'string' || typeof o['c'] !== 'string' || typeof o['w'] !== 'string') return undefined;
  if (role !== 'viewer' && role !== 'operator' && role !== 'admin' && role !== 'api') return undefined;
  if (!ACTIONS.includes(o['x'] as AuditAction)) return undefined;
  if ((o['b'] !== undefined && !isValues(o['b'])) || (o['f'] !== undefined && !isValues(o['f']))) return undefined;
  return {
    atMs: o['t'],
    actor: o['a'],
    role,
    client: o['c'],
    action: o['x'] as AuditAction,
    change: o['w'],
    ...(o['b'] !== undefined && { before: o['b'] as Record<string, AuditValue> }),
    ...(o['f'] !== undefined && { after: o['f'] as Record<string, AuditValue> }),
  };
}

/** The newest `limit` entries, newest first (what the console lists). Throws when the store fails. */
export async function recentAudit(store: Pick<QueueStore, 'readAudit'>, queue: string, limit: number, nowMs: number): Promise<AuditEntry[]> {
  const texts = await store.readAudit(queue, Math.min(Math.max(1, limit), AUDIT_MAX_ENTRIES), nowMs);
  return texts.map(decodeAuditEntry).filter((e): e is AuditEntry => e !== undefined);
}

/**
 * The entries applied from `fromMs` (inclusive) to `toMs` (exclusive), oldest first: the operator's
 * actions on a sale's time line (for its report). Reads the whole kept trail (at most
 * AUDIT_MAX_ENTRIES, one store call). Throws when the store fails.
 */
export async function readAudit(store: Pick<QueueStore, 'readAudit'>, queue: string, fromMs: number, toMs: number): Promise<AuditEntry[]> {
  const entries = await recentAudit(store, queue, AUDIT_MAX_ENTRIES, toMs);
  return entries.filter((e) => e.atMs >= fromMs && e.atMs < toMs).reverse();
}

/** An entry as the JSON routes answer it. */
export function auditJson(entry: AuditEntry): Record<string, unknown> {
  return {
    at: new Date(entry.atMs).toISOString(),
    actor: entry.actor,
    role: entry.role,
    client: entry.client,
    action: entry.action,
    change: entry.change,
    ...(entry.before !== undefined && { before: entry.before }),
    ...(entry.after !== undefined && { after: entry.after }),
  };
}
