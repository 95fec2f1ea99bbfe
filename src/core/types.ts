/**
 * The types the request path's modules share, and the two small facts about a queue that both the
 * request path and the admin console ask (the event's phase, the admission mode). They live apart
 * from the modules that use them so that those can import them without importing each other: the
 * import graph of src/core has no cycle (test/import-cycles.test.ts).
 */
import type { Config } from './config';
import type { WaitEstimate } from './estimate';
import type { QueueState } from './ports';

/** What one request did, for its log line. Filled in as the request goes along. */
export interface Trace {
  decision: string;
  reason?: string;
  ticket?: number;
  cursor?: number;
  tail?: number;
  storeMs?: number;
  storeError?: string;
  cache?: 'hit' | 'miss';
  /** Ticket blocks: `handed` (a number of this instance's block, no store call), or what a block join took and reported. */
  block?: string;
  /** The client's throttle key, on failed sign-ins, held clients and refused tickets (see auth-throttle.ts, ticket-limit.ts). */
  client?: string;
  /** Who acted, on the console's and the API's requests: the account's name, or `api` for the origin's token. */
  actor?: string;
  /** The actor's role (viewer, operator, admin, or api); not logged (the audit trail has it). */
  role?: 'viewer' | 'operator' | 'admin' | 'api';
  /** The client's address as the platform gave it, for the sign-in throttle and the ticket limit; not logged. */
  readonly from?: string | undefined;
  /** The proof-of-work solution the request carries (its cookie), for a new ticket; not logged. */
  proof?: string | undefined;
  /** The challenge provider's token the request carries (its cookie), for a new ticket; not logged. */
  challenge?: string | undefined;
  /** The request's host name, which the provider's answer must name as where the token was solved; not logged. */
  host?: string | undefined;
  /** Cookies of ours the request spent on its new ticket (a solution, a provider's token): the response clears them. */
  spent?: string[] | undefined;
  /** The request was counted for the ticket limit already (see ticket-limit.ts); not logged. */
  ticketCounted?: boolean;
}

/** What the holding page needs to show a challenge provider's widget (see challenge.ts). */
export interface ChallengeHook {
  readonly provider: 'turnstile' | 'hcaptcha';
  /** The site key, public: the widget is made for it. */
  readonly siteKey: string;
  /** The provider's script that renders the widget. */
  readonly script: string;
  /** The class the provider's script looks for (`cf-turnstile`, `h-captcha`). */
  readonly widget: string;
  /** The cookie the widget's token goes back in. */
  readonly cookie: string;
}

/* The signed admission (see admission.ts). */
/** How a request came to be let through. */
export type AdmissionVia = 'queue' | 'walk-in' | 'vip' | 'bypass' | 'unqueued' | 'store-down' | 'event-over' | 'open';

/** What the edge knows of a request it passes: how it got in, and for admitted visitors their session. */
export interface Grant {
  readonly via: AdmissionVia;
  /** Admitted visitors: the ticket (0 for a VIP code), when the session began, when it ends (seconds). */
  readonly ticket?: number | undefined;
  readonly admittedAt?: number | undefined;
  readonly sessionExpires?: number | undefined;
  /** Admitted visitors: what binds a carried admission to this visitor's access token. */
  readonly binding?: string | undefined;
}

/** What the holding page needs to solve a proof-of-work challenge (see proof-of-work.ts). */
export interface PowChallenge {
  /** The signed challenge. */
  readonly challenge: string;
  /** Its nonce (also inside the signed challenge): what the solution hashes. */
  readonly nonce: string;
  /** Leading zero bits the solution's SHA-256 must have. */
  readonly difficulty: number;
  /** The cookie the solution goes back in, as `<challenge>~<counter>`. */
  readonly cookie: string;
}

/** The outcome of looking at a visitor's cookie and, if needed, asking the store. */
export type Visit =
  /** A valid access token. `slot`: it holds a capacity slot. `cookie`: a renewed token, if any. */
  | {
      readonly kind: 'access';
      readonly ticket: number;
      readonly slot: boolean;
      readonly cookie: string | undefined;
      /** The store generation the token's ticket belongs to (absent: a token from before generations). */
      readonly generation?: number | undefined;
      /** What the signed admission says of this visitor (see admission.ts). */
      readonly grant: Grant;
      /** With several databases: the one the visitor's ticket is in (see withShard). */
      readonly shard?: number | undefined;
    }
  /** The visitor's ticket was called (and in capacity mode its slot claimed): the cookie becomes an access token. */
  | { readonly kind: 'admitted'; readonly ticket: number; readonly slot: boolean; readonly cookie: string; readonly grant: Grant; readonly shard?: number | undefined }
  /**
   * In line: `ahead` visitors are before this one (FIFO), or `ahead` others are in the draw with it
   * (`draw`, the random method). `front`: called, waiting for a slot to free. `first`: the place
   * it was first shown (the start of its progress).
   */
  | {
      readonly kind: 'waiting';
      readonly ticket: number;
      readonly ahead: number;
      readonly front: boolean;
      readonly draw: boolean;
      readonly first: number;
      readonly state: QueueState;
      readonly cookie: string;
    }
  /** Before the event's start (or while its places are being drawn): a place in the pre-queue. */
  | { readonly kind: 'prequeue'; readonly ticket: number; readonly cookie: string }
  /** The store did not answer; `ticket` is known when the visitor already held one. */
  | { readonly kind: 'unavailable'; readonly ticket: number | undefined; readonly cookie: string | undefined }
  /** No valid token and none was to be taken (the status endpoint never takes a ticket). */
  | { readonly kind: 'none' }
  /** The emergency switch is open: the waiting room steps aside, the request passes; no ticket. */
  | { readonly kind: 'open' }
  /**
   * A new ticket refused for now, no store call: this client took more than `ticket_limit` (see
   * ticket-limit.ts), or the challenge provider did not answer and `challenge_unavailable = hold`.
   */
  | { readonly kind: 'limited'; readonly retryAfterSeconds: number; readonly why: 'ticket_limit' | 'challenge_down' }
  /**
   * No ticket before a check, no store call: a proof of work to solve (see proof-of-work.ts), or a
   * challenge provider's widget to pass (see challenge.ts).
   */
  | { readonly kind: 'challenge'; readonly pow?: PowChallenge | undefined; readonly hook?: ChallengeHook | undefined };
  /** No valid token and none was to be taken (the status endpoint never takes a ticket). */

/** Before the event's start, during it, or after its end. */
export type EventPhase = 'before' | 'open' | 'over';

export function eventPhase(config: Pick<Config, 'eventStartMs' | 'eventEndMs'>, nowMs: number): EventPhase {
  if (config.eventStartMs > 0 && nowMs < config.eventStartMs) return 'before';
  if (config.eventEndMs > 0 && nowMs >= config.eventEndMs) return 'over';
  return 'open';
}

/** What a waiting visitor is shown, as the page, the status JSON and the JSON for programs all need it. */
export interface HoldView {
  /** `waiting` in line or in the draw; `prequeue` before the start; `checking`: the store did not answer; `over`: the event ended; `unreachable`: the site itself did not answer. */
  readonly state: 'waiting' | 'prequeue' | 'checking' | 'over' | 'unreachable';
  readonly ticket: number | null;
  /** FIFO: the place in line (1 = next), and how many are ahead. */
  readonly place: number | null;
  readonly ahead: number | null;
  /** FIFO: the place first shown, where the progress bar starts. */
  readonly first: number | null;
  /** Called, waiting for a slot to free. */
  readonly front: boolean;
  readonly paused: boolean;
  /** The random method: how many visitors (this one included) are in the draw. */
  readonly inDraw: number | null;
  readonly estimate: WaitEstimate | null;
  /** Before the start: when the line opens, and whether places are then drawn or kept in arrival order. */
  readonly startsAtMs: number | null;
  readonly order: 'shuffle' | 'arrival' | null;
  /** Seconds until the next update (shortened to reach the start promptly). */
  readonly refreshSeconds: number;
  readonly nowMs: number;
  /**
   * How long after its last update the visitor's browser keeps its place (`queue_timeout_seconds`:
   * the waiting cookie's lifetime, renewed by every poll); absent where leaving loses it (a draw).
   */
  readonly awaySeconds?: number | undefined;
  /** "checking": the visitor has no place yet (a join the store did not answer, a check before one). */
  readonly newcomer?: boolean | undefined;
  /**
   * The visitor came with a VIP link the store refused (used up, expired, unknown): the page says so
   * once, and reloads this address, its own without the code.
   */
  readonly vipRefused?: string | undefined;
}

export function isCapacityMode(state: Pick<QueueState, 'maxActive' | 'maxNewPerMinute'>): boolean {
  return state.maxActive > 0 || state.maxNewPerMinute > 0;
}

/** How many of the numbers after+1 .. upTo are reported holes (nobody holds them). */
export function holesBetween(state: Pick<QueueState, 'holes'>, after: number, upTo: number): number {
  let n = 0;
  for (const { from, to } of state.holes ?? []) n += Math.max(0, Math.min(to, upTo) - Math.max(from, after + 1) + 1);
  return n;
}

/** FIFO: the people ahead of a place still waiting, the numbers between the cursor and it that somebody holds. */
export function peopleAhead(state: Pick<QueueState, 'cursor' | 'holes'>, place: number): number {
  return Math.max(0, place - state.cursor - 1 - holesBetween(state, state.cursor, place - 1));
}

/** The line's waiting count: the random method's present visitors; FIFO, the numbers not yet called that somebody holds. */
export function waitingOf(state: Pick<QueueState, 'tail' | 'cursor' | 'holes' | 'waiting'>, random: boolean): number {
  return random ? state.waiting : Math.max(0, state.tail - state.cursor - holesBetween(state, state.cursor, state.tail));
}

/** What a held visitor reads, in their language (see holding.ts). */
export interface HoldTexts {
  /** The page's heading for this state. */
  readonly heading: string;
  /** The label above the big figure, and the figure (place in line, visitors in the draw, or "…"). */
  readonly placeLabel: string;
  readonly place: string;
  /** One sentence under it: people ahead, the draw, the countdown, or why we are checking. */
  readonly detail: string;
  /** The estimate, paused or at-the-front sentence; empty when there is nothing to say. */
  readonly estimate: string;
  /** What the visitor needs to do (nothing), or how the event's start works. */
  readonly note: string;
  /** The ticket, as a reference for support; empty where a number would mislead (a lottery). */
  readonly ticket: string;
  /** The tab's title before the site's name: the place while waiting, else the heading. */
  readonly title: string;
  /** The tab's title and heading once it is the visitor's turn. */
  readonly turnTitle: string;
  /** How long the visitor may be away and keep their place; empty where that does not hold. */
  readonly away: string;
  /** Percent of the way from the first place shown to the front; null when it has no meaning. */
  readonly progress: number | null;
  readonly progressLabel: string;
  /** "Updated at {clock}" with `{clock}` for the browser's local time, and the no-JS variant's UTC time. */
  readonly updatedPattern: string;
  readonly updated: string;
  /**
   * "Next update in {n} seconds": the forms by count (`=2`, or a plural category of `rule`, one of
   * i18n.ts's PLURAL_RULES, which holding.js carries too), and the language's digits when not 0–9.
   */
  readonly nextUpdate: { readonly forms: Readonly<Record<string, string>>; readonly rule: string; readonly digits?: string | undefined };
  readonly refreshNote: string;
  readonly admitted: string;
  readonly failed: string;
  /**
   * Before the event's start: when the line opens, for the page's script to say in the browser's own
   * time zone (`{hm}` and `{zone}` in `pattern`); `placeLabel` says it in UTC for the page without it.
   */
  readonly opensAt?: { readonly atMs: number; readonly pattern: string } | undefined;
}

/** The admin console's figures of a queue, as text (see admin-view.ts). */
export interface AdminFigures {
  readonly waiting: string;
  readonly active: string;
  readonly admitted_last_minute: string;
  readonly avg_wait: string;
  /** New tickets refused for the per-client limit, last minute, where the page is served. */
  readonly refused: string;
  readonly est_wait: string;
  readonly tail: string;
  readonly cursor: string;
  readonly state: string;
  readonly mode: string;
  readonly method: string;
  readonly event: string;
  /** Adaptive admission: what it does, what it last saw, its last move. */
  readonly adaptive: string;
}
