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
 * - A client is its address; an IPv6 client its /64 (one subscriber holds a whole /64); with
 *   `client_ipv4_prefix = 24` an IPv4 client is its /24. Counted per queue: each queue has its
 *   own limit, and a client's tickets in one queue do not use up its allowance in another.
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
import { clientKey, describeError } from './auth-throttle';
import type { Config } from './config';
import type { FailureLimiter } from './ports';

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

/**
 * Why a new ticket was not given, as the console counts it: over the per-client limit, no proof of
 * work yet (a challenge was sent), a proof that failed (forged, wrong, reused, another client's), no
 * challenge provider's token yet (or an expired one: the widget was sent), or a token the provider
 * refused.
 */
export type RefusalReason = 'ticket_limit' | 'proof_missing' | 'proof_failed' | 'challenge_missing' | 'challenge_failed';

const REFUSAL_REASONS: readonly RefusalReason[] = ['ticket_limit', 'proof_missing', 'proof_failed', 'challenge_missing', 'challenge_failed'];

/** The limiter's key under which a queue's refused tickets are counted, for the console (per POP). */
export function refusedTicketsKey(queueName: string, reason: RefusalReason): string {
  return `refused|${queueName}|${reason}`;
}

/** Counts one refusal for the console; a limiter that fails counts nothing and refuses nothing more. */
export async function countRefusal(limiter: FailureLimiter | undefined, queueName: string, reason: RefusalReason): Promise<void> {
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
  const key = ticketClientKey(settings, address);
  const client = clientKey(address, settings.clientIpv4Prefix);
  const minutes = settings.ticketPenaltyMinutes;
  const refused: TicketAllowance = { ok: false, retryAfterSeconds: minutes * 60 };
  // Each refusal is counted for the console (the operator sees an attack as it happens).
  const counted = () => countRefusal(limiter, settings.queueName, 'ticket_limit');
  try {
    if (await limiter.isHeld(key)) {
      await counted();
      trace.reason = `ticket_held: over ${settings.ticketLimit} new tickets in ${settings.ticketWindowSeconds} s; no ticket for up to ${minutes} min`;
      trace.client = client;
      return refused;
    }
    const window = settings.ticketWindowSeconds;
    const count = await limiter.countFailure(key, window);
    trace.ticketCounted = true;
    if (count <= settings.ticketLimit) return { ok: true };
    await limiter.hold(key, minutes);
    await counted();
    trace.reason = `ticket_limited: new ticket ${count} in ${window} s, over ${settings.ticketLimit}; held for ${minutes} min`;
    trace.client = client;
    return refused;
  } catch (error) {
    trace.reason = `ticket limit unavailable: ${describeError(error)}`;
    return { ok: true };
  }
}

/** The limiter's key for a client's session calls in a queue (the heartbeat script's; see allowSessionCall). */
export function sessionClientKey(settings: TicketLimitSettings, address: string | undefined): string {
  return `session|${ticketClientKey(settings, address)}`;
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
    const count = await limiter.countFailure(sessionClientKey(settings, address), settings.ticketWindowSeconds);
    if (count <= settings.ticketLimit) return true;
    trace.reason = `session_limited: store call ${count} in ${settings.ticketWindowSeconds} s, over ${settings.ticketLimit}; answered without the store`;
    trace.client = clientKey(address, settings.clientIpv4Prefix);
    return false;
  } catch (error) {
    trace.reason = `session limit unavailable: ${describeError(error)}`;
    return true;
  }
}
