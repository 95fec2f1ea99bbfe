/**
 * Per-client limits on new tickets: one client without cookies must not take the tickets of a
 * crowd. Every request that would take a ticket (a visitor with no valid ticket or access token) is
 * counted for its client before the store is asked; the one over `ticket_limit` within
 * `ticket_window_seconds` holds the client for `ticket_penalty_minutes`, and a held client gets no
 * ticket: a 429 with `Retry-After`, no store call. On Fastly the counting is the POP's Edge Rate
 * Limiting (a `RateCounter` and a `PenaltyBox`, POP-local); on the Node host the same semantics in
 * memory. Neither costs a store call.
 *
 * Choices:
 * - A client is its address; an IPv6 client its /64 (one subscriber holds a whole /64), a 6to4 or
 *   IPv4-mapped one the IPv4 address it carries; with `client_ipv4_prefix = 24` an IPv4 client is
 *   its /24. Counted per queue: each queue has its own limit, and a client's tickets in one queue
 *   do not use up its allowance in another.
 * - A native IPv6 client's site, its /48, is counted too, with SITE_ALLOWANCE_MULTIPLE × the
 *   allowance (see auth-throttle.ts): a /56 or /48 holder taking each ticket from a /64 of its
 *   own gets no more than that. Either count over its allowance holds what it counts. It is one
 *   more limiter call for IPv6 joins only, and no store call.
 * - Only requests that would take a ticket count, and requests that try a VIP code (`?wr_vip=`),
 *   which cost a store call each whatever the visitor holds: a held client's VIP attempts are
 *   refused as its tickets are, with no store call. A waiting visitor's polls and an admitted
 *   visitor's pages never count. A request counted for its VIP code is not counted again for the
 *   ticket it may take when the code does not work. A visitor asking again after a lost join answer (with its join key)
 *   is a join and counts, as it must for a bot that replays that cookie.
 * - A held client's requests are not counted again: the hold is what refuses them.
 * - When the limiter fails, the ticket is given as if there were no limit, and the log says why:
 *   an outage of a protection must not keep the crowd out.
 * - The limit is per POP on Fastly (Edge Rate Limiting counts in each POP): a client spread over N
 *   POPs gets N × the allowance, which a single bot client rarely is.
 */
import { tallyRefusal } from './edge-tally';
import { clientKey, clientSiteKey, describeError, SITE_ALLOWANCE_MULTIPLE } from './auth-throttle';
import type { Config } from './config';
import { REFUSAL_REASONS, type FailureLimiter, type RefusalReason } from './ports';

export type TicketLimitSettings = Pick<Config, 'queueName' | 'ticketLimit' | 'ticketWindowSeconds' | 'ticketPenaltyMinutes' | 'clientIpv4Prefix'>;

/** The log fields the limit fills in. */
export interface TicketLimitTrace {
  reason?: string;
  client?: string;
  /** This request was counted already (its VIP code was; see allowNewTicket): not counted again. */
  ticketCounted?: boolean;
}

/** May this client take a new ticket now? `retryAfterSeconds`: when it may ask again, at the latest. */
export type TicketAllowance = { readonly ok: true } | { readonly ok: false; readonly retryAfterSeconds: number };

export type { RefusalReason } from './ports';

/** The limiter's key under which a queue's refused tickets are counted, for the console (per POP). */
export function refusedTicketsKey(queueName: string, reason: RefusalReason): string {
  return `refused|${queueName}|${reason}`;
}

/** Counts one refusal for the console; a limiter that fails counts nothing and refuses nothing more. */
export async function countRefusal(limiter: FailureLimiter | undefined, queueName: string, reason: RefusalReason): Promise<void> {
  // And in the sale's record, carried by this instance's next join (see edge-tally.ts).
  tallyRefusal(queueName, reason);
  if (limiter === undefined) return;
  await limiter.countFailure(refusedTicketsKey(queueName, reason), 60).catch(() => 0);
}

/** New tickets refused in this queue over the last minute at this POP, by reason; null where the limiter cannot say. */
export async function refusedTicketsLastMinute(limiter: FailureLimiter | undefined, queueName: string): Promise<Record<RefusalReason, number | null>> {
  const counts = await Promise.all(
    REFUSAL_REASONS.map(async (reason): Promise<[RefusalReason, number | null]> => {
      if (limiter === undefined) return [reason, null];
      try {
        return [reason, await limiter.countOf(refusedTicketsKey(queueName, reason), 60)];
      } catch {
        return [reason, null];
      }
    }),
  );
  return Object.fromEntries(counts) as Record<RefusalReason, number | null>;
}

/** The limiter's key for a client in a queue: the queue, then the client's key (see `clientKey`). */
export function ticketClientKey(settings: TicketLimitSettings, address: string | undefined): string {
  return `${settings.queueName}|${clientKey(address, settings.clientIpv4Prefix)}`;
}

/** What a request is counted under: its client, and for a native IPv6 client its site too (see clientSiteKey). */
interface Counted {
  /** The limiter's key. */
  readonly key: string;
  /** The client or site, for the log. */
  readonly client: string;
  readonly limit: number;
  /** How the log names it beside the count: empty for the client, ` from its /48` for the site. */
  readonly whose: string;
}

function countedUnder(settings: TicketLimitSettings, address: string | undefined, prefix = ''): Counted[] {
  const client = clientKey(address, settings.clientIpv4Prefix);
  const site = clientSiteKey(address);
  const counted: Counted[] = [{ key: `${prefix}${settings.queueName}|${client}`, client, limit: settings.ticketLimit, whose: '' }];
  if (site !== undefined) counted.push({ key: `${prefix}${settings.queueName}|${site}`, client: site, limit: settings.ticketLimit * SITE_ALLOWANCE_MULTIPLE, whose: ' from its /48' });
  return counted;
}

/**
 * Counts one new ticket for the client and says whether it may have it. Sets the log's reason and
 * client key when it refuses, or when the limiter failed (then it allows).
 */
export async function allowNewTicket(
  limiter: FailureLimiter | undefined,
  settings: TicketLimitSettings,
  address: string | undefined,
  trace: TicketLimitTrace,
): Promise<TicketAllowance> {
  if (limiter === undefined || settings.ticketLimit === 0) return { ok: true };
  // A request that tried a VIP code was counted and let through for it; its new ticket, if the
  // code did not work, is the same request.
  if (trace.ticketCounted === true) return { ok: true };
  const under = countedUnder(settings, address);
  const minutes = settings.ticketPenaltyMinutes;
  const window = settings.ticketWindowSeconds;
  const refused: TicketAllowance = { ok: false, retryAfterSeconds: minutes * 60 };
  // Each refusal is counted for the console (the operator sees an attack as it happens).
  const counted = () => countRefusal(limiter, settings.queueName, 'ticket_limit');
  try {
    for (const c of under) {
      if (!(await limiter.isHeld(c.key))) continue;
      await counted();
      trace.reason = `ticket_held: over ${c.limit} new tickets in ${window} s${c.whose}; no ticket for up to ${minutes} min`;
      trace.client = c.client;
      return refused;
    }
    // Counted under each before either decides: a site's count must include its clients' refused tickets too.
    const counts = await Promise.all(under.map((c) => limiter.countFailure(c.key, window)));
    trace.ticketCounted = true;
    const over = under.findIndex((c, i) => (counts[i] ?? 0) > c.limit);
    const c = under[over];
    if (c === undefined) return { ok: true };
    await limiter.hold(c.key, minutes);
    await counted();
    trace.reason = `ticket_limited: new ticket ${counts[over]} in ${window} s${c.whose}, over ${c.limit}; held for ${minutes} min`;
    trace.client = c.client;
    return refused;
  } catch (error) {
    trace.reason = `ticket limit unavailable: ${describeError(error)}`;
    return { ok: true };
  }
}

/**
 * May this client make one more store call through the heartbeat script's paths (`heartbeat`,
 * `leave`) now? The same allowance as its new tickets, `ticket_limit` within
 * `ticket_window_seconds`, counted apart from them (a visitor's heartbeats never use up its
 * tickets) and without a hold: past it, the call is answered without the store until the window
 * moves on. A real visitor makes at most one such call per `activity_refresh_seconds` and one per
 * page it leaves, so only a flood reaches it. `0` turns it off with the ticket limit; a limiter
 * that fails allows, as for tickets.
 */
export async function allowSessionCall(limiter: FailureLimiter | undefined, settings: TicketLimitSettings, address: string | undefined, trace: TicketLimitTrace): Promise<boolean> {
  if (limiter === undefined || settings.ticketLimit === 0) return true;
  try {
    const under = countedUnder(settings, address, 'session|');
    const counts = await Promise.all(under.map((c) => limiter.countFailure(c.key, settings.ticketWindowSeconds)));
    const over = under.findIndex((c, i) => (counts[i] ?? 0) > c.limit);
    const c = under[over];
    if (c === undefined) return true;
    trace.reason = `session_limited: store call ${counts[over]} in ${settings.ticketWindowSeconds} s${c.whose}, over ${c.limit}; answered without the store`;
    trace.client = c.client;
    return false;
  } catch (error) {
    trace.reason = `session limit unavailable: ${describeError(error)}`;
    return true;
  }
}
