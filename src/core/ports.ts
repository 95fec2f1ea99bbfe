/**
 * Ports: the narrow interfaces the core needs from the outside world. The Fastly adapter and the
 * Node host each implement them; tests implement them to inject faults and time.
 */

/** Admission thresholds; 0 means no limit. */
export interface Thresholds {
  /** Most admitted visitors holding a slot at once (active sessions plus called tickets' reservations). */
  readonly maxActive: number;
  /** Most visitors admitted in any 60-second window. */
  readonly maxNewPerMinute: number;
}

/**
 * Automatic admission by period (the rate mode, used while no threshold is in effect): the first
 * request of each period moves the cursor by `count`, but never further than `count` past the
 * tail, so quiet periods do not bank admissions.
 */
export interface AutoAdmission {
  /** Visitors let in per period; 0 turns automatic admission off. */
  readonly count: number;
  /** Length of a period in milliseconds. */
  readonly periodMs: number;
}

/** Everything a store script needs to decide admissions; configured values, overridable at runtime. */
export interface AdmissionPolicy {
  readonly auto: AutoAdmission;
  /** Configured thresholds; runtime overrides kept in the store take precedence. */
  readonly thresholds: Thresholds;
  /** A slot lives this long after its holder's last activity (sliding), ms. */
  readonly sessionMs: number;
  /** A called ticket's reserved slot waits this long for its holder, ms. */
  readonly reservationMs: number;
  /**
   * A scheduled event's start (ms since the epoch); 0 or absent = none. Before it, joins take
   * pre-queue tickets and nothing is admitted (no period step, no call, no walk-in, explicit admits
   * admit 0). The first script run at or after it freezes the pre-queue: `eventSize` = the tail
   * before that run's own ticket, `eventSeed` = that call's `seed`. A different start (the operator
   * rescheduled) freezes anew.
   */
  readonly eventStartMs?: number;
  /**
   * How waiting visitors are let in: `fifo` (default) calls tickets in order by moving the cursor;
   * `random` draws among the visitors waiting and still polling (see `QueueStore.draw`).
   */
  readonly method?: 'fifo' | 'random';
  /** Random method: a waiting visitor takes part in draws while its last poll is younger than this, ms. */
  readonly presenceMs?: number;
  /**
   * Fresh randomness from the caller for this one call, an integer 0 .. 2^48 - 1: it drives the
   * random method's draws, and becomes the event's shuffle seed when this call freezes the
   * pre-queue. Scripts read no clock and no random source of their own.
   */
  readonly seed?: number;
  /**
   * Adaptive admission (see docs/adaptive-admission.md): the controller's settings and this POP's
   * recent origin outcomes. Only `join` and `poll` (the calls that load a POP's state) carry it to
   * the store, which keeps the settings it last got; the other calls use those.
   */
  readonly adaptive?: AdaptivePolicy;
  /**
   * The controls the caller's POP last saw this queue under (see RememberedControls): applied by
   * the call that finds the queue's state absent, so a store that lost its state (a flush, a restart
   * without persistence) has its emergency switch and pause back before that call decides anything.
   * Ignored while the state exists.
   */
  readonly restore?: RememberedControls;
  /** Only `join` carries it: this instance's refusals and store errors, added to the totals when the join takes a ticket. */
  readonly tally?: EdgeTally;
  /**
   * With several databases (`store_shards`, see ShardedStore): the database of the visitor this
   * call is about (its token's `sh`), 0 .. shards - 1. Absent: the queue as a whole (an operator's
   * call, or a single database).
   */
  readonly shard?: number;
}

/** The operator's controls as a POP remembers them across a store that forgets (see AdmissionPolicy.restore). */
export interface RememberedControls {
  readonly switch: 'open' | 'hold' | undefined;
  /** Paused by the operator (not by the switch, nor by a recovery window). */
  readonly paused: boolean;
}

/** What one POP (or Node host) saw of the origin over its last 10 seconds (see OriginMeter.recent). */
export interface OriginReport {
  /** The reporting POP: its report replaces its own previous one. 1-32 characters of [A-Za-z0-9_.-]. */
  readonly pop: string;
  /** Requests passed to the origin that got an answer or failed. */
  readonly requests: number;
  /** Of those, the ones that failed: a 5xx or 429 answer, or none (timeout, refused connection). */
  readonly errors: number;
  /** Of those, the ones not failed whose first byte came later than the slow threshold. */
  readonly slow: number;
}

/**
 * The controller's settings. It tunes the admission knob in effect (rate mode: the visitors let in
 * per period; capacity mode: max active, or max new per minute when that is the only threshold)
 * between `min` and `max`, on 20 answers since its last move at least: down as far as the share of
 * errors or of slow answers is over its target (5 % off just over it, half at three times it, 30 %
 * at most once it knows the value it was cut from), up while the origin is healthy and people wait
 * (a step, or half the way back to just under that value, or a try above it after a hold; see
 * adaptiveValue in src/store/adaptive.ts).
 */
export interface AdaptivePolicy {
  /** On from the configuration (the console may switch it either way, see RuntimeControl.adaptive). */
  readonly enabled: boolean;
  /** Bounds of the learned value, 1 <= min <= max. */
  readonly min: number;
  readonly max: number;
  /** Targets, whole percent 0-100: over them the value goes down. */
  readonly errorPercent: number;
  readonly slowPercent: number;
  /** This POP's recent origin outcomes, when it counts them. */
  readonly report?: OriginReport | undefined;
}

/** A move of the learned value, newest last in AdaptiveStatus.moves. */
export interface AdaptiveMove {
  readonly atMs: number;
  readonly from: number;
  readonly to: number;
  /** `errors`/`slow`: over target, down; `healthy`: up; `pinned`/`released`: the operator. */
  readonly reason: 'errors' | 'slow' | 'healthy' | 'pinned' | 'released';
}

/** The controller as the store last left it (QueueStats.adaptive). */
export interface AdaptiveStatus {
  /** In effect now: from the configuration, or as the console switched it. */
  readonly enabled: boolean;
  /** Who decided `enabled`: the configuration, or the console (until it hands back). */
  readonly source: 'config' | 'console';
  /** The knob it moves, from the mode the queue is in. */
  readonly knob: 'admit_per_period' | 'max_active' | 'max_new_per_minute';
  /** The value in effect: learned, or pinned by the operator. */
  readonly value: number;
  /** The operator's value holds until released. */
  readonly pinned: boolean;
  readonly min: number;
  readonly max: number;
  readonly errorPercent: number;
  readonly slowPercent: number;
  /** What the last decision saw, summed over the POPs' fresh reports; null before any. */
  readonly signals: { readonly atMs: number; readonly requests: number; readonly errors: number; readonly slow: number; readonly pops: number } | null;
  /** The last moves, oldest first (at most ADAPTIVE_LOG). */
  readonly moves: readonly AdaptiveMove[];
}

/** What the store knows about one queue. Ticket `t` is called once `t <= cursor`. */
export interface QueueState {
  /** The last ticket handed out (0 before the first visitor). */
  readonly tail: number;
  /** The highest ticket called (0 before anyone is called). */
  readonly cursor: number;
  /** Admission paused by the operator: nobody new is called (explicit admits still work). */
  readonly paused: boolean;
  /** The emergency switch when it is not `normal` (see EmergencySwitch); `hold` also reports paused. */
  readonly switch?: 'open' | 'hold' | undefined;
  /** Paused only by the recovery window after a lost state, not by the operator or the switch. */
  readonly recovering?: true;
  /** Thresholds in effect: runtime overrides, else the configured ones. Capacity mode when either is > 0. */
  readonly maxActive: number;
  readonly maxNewPerMinute: number;
  /**
   * Rate mode's visitors a period in effect (a runtime override, else `admit_per_period`; adaptive
   * admission's value while it moves it). Reported by `stats` and `control` only.
   */
  readonly admitPerPeriod?: number;
  /** Slots held: active sessions plus reservations of called tickets not yet claimed. */
  readonly active: number;
  /**
   * Visitors admitted in the last 60 s. Capacity mode: arrivals, i.e. claims at their claim time
   * plus live reservations (which is what the per-minute limit bounds); rate mode: tickets called.
   */
  readonly admittedLastMinute: number;
  /** The same over the last 300 s: the measured admission rate. */
  readonly admittedLast5Minutes: number;
  /** Event: the pre-queue size frozen at the start (tickets 1..eventSize); 0 before it or without an event. */
  readonly eventSize: number;
  /** Event: the seed frozen with the pre-queue (the shuffle's key); 0 when not frozen. */
  readonly eventSeed: number;
  /** Random method: visitors waiting and present (polled within `presenceMs`); 0 in FIFO. */
  readonly waiting: number;
  /** Changes each time the queue is reset (0 = never reset): a waiting ticket from before a reset is void. */
  readonly epoch: number;
  /**
   * The life of the store's state: set afresh when the store finds the queue's state absent (lost in
   * a restart without persistence, a failover, a flush). Every token carries it: a token of another
   * generation holds a ticket number that may be someone else's now. 0 only from `stats` on a state
   * that has none yet.
   */
  readonly generation: number;
  /**
   * FIFO with ticket blocks: the holes instances reported (numbers nobody holds) above the cursor,
   * ascending, disjoint, within the tail; absent when there are none. A visitor's people ahead and
   * the line's waiting count leave them out (see holesBetween). Read with the controls: no command.
   */
  readonly holes?: readonly TicketRange[];
}

export interface JoinResult extends QueueState {
  /** The ticket just taken (unique and contiguous across all callers), or, replayed, the one its key took before. */
  readonly ticket: number;
  /** The ticket was called and claimed in the same call (a walk-in; capacity mode: with its slot). */
  readonly claimed: boolean;
  /** The join's key had taken this ticket already (a retry of a join whose answer was lost): nothing new was taken. */
  readonly replayed: boolean;
  /**
   * Block joins only (JoinOptions.block): the numbers taken, `from` = `ticket`. Absent when no block
   * was taken: a join of size 1 (the answer of an ordinary join), the random method and an open
   * switch (which take size 1 or none). A replay of a keyed block join answers the block its key took.
   */
  readonly block?: TicketRange;
}

/** What `peek` reads: tail and cursor, and the reported holes above the cursor (absent: none). */
export type QueuePeek = Pick<QueueState, 'tail' | 'cursor' | 'holes'>;

/** Ticket numbers from..to, inclusive. */
export interface TicketRange {
  readonly from: number;
  readonly to: number;
}

/**
 * Numbers a caller took in blocks and will never hand out, of one epoch and generation: the store
 * passes over them when it calls tickets, so they spend no admission and no capacity. Ranges in
 * ascending order, not overlapping, at most MAX_BLOCK_HOLE_RANGES. Numbers the store had called
 * already, or that lie in an event's pre-queue (called by place), are left to lapse as abandoned
 * tickets are; so are holes past the store's bound (see MAX_STORED_HOLE_RANGES in scripts.ts).
 */
export interface BlockHoles {
  readonly epoch: number;
  readonly generation: number;
  readonly ranges: readonly TicketRange[];
}

/** The most numbers one join may take (JoinOptions.block.size). */
export const MAX_TICKET_BLOCK = 1000;

/** The most hole ranges one join may report (BlockHoles.ranges). */
export const MAX_BLOCK_HOLE_RANGES = 32;

/** A join key (JoinOptions.joinKey): 16 lower-case hex digits, 64 random bits. */
export const JOIN_KEY_PATTERN = /^[0-9a-f]{16}$/;

/** How long the store answers a retried join with its ticket, and a pending join's cookie lives, s. */
export const JOIN_KEEP_SECONDS = 600;

/** What a join may be told besides the policy (see QueueStore.join). */
export interface JoinOptions {
  /** The recovery window to open when this join brings the first evidence of a lost state, ms. */
  readonly recoverMs?: number;
  /** Open it only if this join finds the state absent (the caller's POP served it before). */
  readonly recoverIfNew?: boolean;
  /** The tail and generation the caller's POP last saw: a ticket at or below it means a rollback. */
  readonly floor?: StateFloor;
  /**
   * 64 random bits as 16 lower-case hex digits, made by the caller for this visitor's join and
   * sent again by the visitor whose join got no answer: a join whose key the store recorded within
   * the last 10 minutes (same epoch and generation) answers that ticket again instead of a new one.
   */
  readonly joinKey?: string;
  /**
   * Take `size` consecutive numbers (1 .. MAX_TICKET_BLOCK) in this one join: the first is this
   * join's ticket, the caller hands out the rest (see ticket-blocks.ts). `holes`: the caller's
   * earlier numbers it will never hand out. Size 1 without holes is an ordinary join.
   */
  readonly block?: { readonly size: number; readonly holes?: BlockHoles | undefined };
}

export interface ClaimResult extends QueueState {
  /** The slot is now the ticket's (its reservation was claimed, or there was room). */
  readonly claimed: boolean;
}

/** Random method: where one waiting visitor's ticket stands after its poll. */
export interface DrawResult extends QueueState {
  /**
   * `drawn`: this ticket was drawn and is now admitted (rate mode; it is collected, so it is let in
   * once) or holds its slot (capacity mode, `claimed`); `front`: drawn in capacity mode but no slot
   * could be claimed (paused meanwhile); `waiting`: still in the draw, presence renewed; `unknown`:
   * not in the draw (its presence lapsed, it was collected already, or the queue was reset): the
   * caller takes a new ticket for the visitor.
   */
  readonly outcome: 'drawn' | 'front' | 'waiting' | 'unknown';
  /** Capacity mode: the slot is now the ticket's. */
  readonly claimed: boolean;
}

/**
 * The most queues whose figures one admin page or poll shows in its list: its own queue's, which
 * the page has read already, and the first others', one store call each. With the page's read of
 * its recent changes (the audit trail), 7 calls in all, 28 backend requests with `store_retries` at
 * its most (3), within the 32 Fastly allows a request. Further queues are listed without figures,
 * each a link to its own page.
 */
export const OVERVIEW_READS = 6;

/** The queue an admin page is about, with the figures the page read for it. */
export interface CurrentQueue {
  readonly name: string;
  readonly stats: QueueStats;
}

/** One queue's figures for the admin console's list of queues; `stats` undefined when the store did not answer. */
export interface QueueOverview {
  readonly name: string;
  readonly method: 'fifo' | 'random';
  /** The scheduled event's phase now, when the queue has one. */
  readonly event?: 'before' | 'open' | 'over' | undefined;
  readonly stats: QueueStats | undefined;
  /** Its figures were not read for this page: more queues than one request may read (see OVERVIEW_READS). */
  readonly unread?: true;
}

/**
 * Why a new ticket was not given, as the console and the sale's record count it: over the
 * per-client limit, no proof of work yet (a challenge was sent), a proof that failed (forged, wrong,
 * reused, another client's), no challenge provider's token yet (or an expired one: the widget was
 * sent), or a token the provider refused. In this order in the store's totals.
 */
export const REFUSAL_REASONS = ['ticket_limit', 'proof_missing', 'proof_failed', 'challenge_missing', 'challenge_failed'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/**
 * The wait histogram's upper bounds, ms: a visitor let in after waiting w is counted in the first
 * bucket whose bound w does not exceed, else in the last, unbounded one. 5 s, 15 s, 30 s, 1, 2, 5,
 * 10, 20, 30 min, 1 h, 2 h.
 */
export const WAIT_BOUNDS_MS: readonly number[] = [5_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000];

/**
 * What a serving instance (a Node process, a Fastly instance across the requests of a reused
 * sandbox) counted that happens without a store call: new tickets refused by reason, and store
 * calls that failed. Carried into the store by the instance's next join that takes a ticket (see
 * AdmissionPolicy.tally), so it costs no command.
 */
export interface EdgeTally {
  readonly refused: Readonly<Record<RefusalReason, number>>;
  readonly storeErrors: number;
}

/** The sale's running totals as the store keeps them (ctl `rt`, see scripts.ts): only ever grow, but with the state. */
export interface SaleTotals extends EdgeTally {
  /** Visitors let in: claims, walk-ins and collected draws (an explicit admit calls; the claim lets in). */
  readonly admitted: number;
  /** Calls that lapsed unclaimed: the holder never came back within the claim deadline. */
  readonly lapsed: number;
  /** Changes of the emergency switch. */
  readonly switchChanges: number;
  /** The waits of the visitors let in: sum and longest, ms. */
  readonly waitSumMs: number;
  readonly waitMaxMs: number;
  /** Visitors let in per wait bucket (WAIT_BOUNDS_MS, then the unbounded one); not cumulative. */
  readonly waitBuckets: readonly number[];
}

/** One minute of the sale's record: the history point, with the totals as they stood then. */
export interface RecordPoint extends HistoryPoint {
  /** The reset in force then (ms; 0 = none): a change between points is a reset. */
  readonly epoch: number;
  /** The controls then: 0 normal, 1 paused by the operator, 2 switched to hold, 3 switched open, 4 paused while recovering. */
  readonly mode: number;
  readonly totals: SaleTotals;
}

/** One minute of a queue's history, for the admin console's chart. */
export interface HistoryPoint {
  /** Start of the minute, ms since the epoch. */
  readonly atMs: number;
  /** Tail and cursor as the minute's first admission run saw them. */
  readonly tail: number;
  readonly cursor: number;
  /** Visitors waiting then: `tail - cursor` in FIFO, the present ones in random. */
  readonly waiting: number;
  /** Slots held then (capacity mode). */
  readonly active: number;
  /** Admissions in the 60 s before it (the same figure as `admittedLastMinute`). */
  readonly admittedLastMinute: number;
}

export interface AdmitResult extends QueueState {
  /**
   * How many tickets this call let in (the cursor never passes the tail on a manual admit); on a
   * replay, how many the call that applied the key let in.
   */
  readonly admitted: number;
  /** The idempotency key had been applied already: nothing was admitted now. */
  readonly replayed: boolean;
  /**
   * The count the call that applied the key asked for (this call's when it applied it now). 0 on a
   * replay of a key recorded before the count was (until 27 November 2026): unknown.
   */
  readonly asked: number;
}

/** Idempotency keys of explicit admits (an `Idempotency-Key` header, a console form's submission id). */
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

export interface ResetResult extends QueueState {
  /** The reset was done now; false when the epoch expected was no longer current (nothing changed). */
  readonly applied: boolean;
}

/** Runtime controls kept in the store. `null` returns a threshold to its configured value. */
/**
 * The emergency switch: `normal`; `open`, the waiting room steps aside (everyone passes, nobody is
 * queued, no ticket is taken); `hold`, nobody new gets in (as paused, and explicit admits, claims of
 * called tickets and walk-ins are refused too). Visitors already admitted keep their access.
 */
export type EmergencySwitch = 'normal' | 'open' | 'hold';

export interface RuntimeControl {
  readonly paused?: boolean;
  readonly switch?: EmergencySwitch;
  readonly maxActive?: number | null;
  readonly maxNewPerMinute?: number | null;
  /** Adaptive admission switched on or off from the console; `null` hands it back to the configuration. */
  readonly adaptive?: 'on' | 'off' | null;
  /** Pins the adaptive knob at this value (an integer >= 1) until released with `null`. */
  readonly adaptivePin?: number | null;
  /** Rate mode's visitors a period (`admit_per_period`); `null` returns it to the configured value. */
  readonly admitPerPeriod?: number | null;
}

export interface QueueStats extends QueueState {
  /** Reservations of called tickets still waiting for their holders (included in `active`). */
  readonly reserved: number;
  /** Mean wait from ticket to claimed slot over the last 300 s; null when nobody was measured. */
  readonly avgWaitSeconds: number | null;
  /** The last hour's history, as `history` answers it: only when asked for (`StatsOptions.history`). */
  readonly history?: readonly HistoryPoint[];
  /** The adaptive controller, when the store has its settings (a join or poll carried them). */
  readonly adaptive?: AdaptiveStatus;
  /**
   * This generation began when a call found the state absent and its POP remembered the queue: the
   * store had lost its state. When, and which controls that call restored (`open`, `hold`, `paused`).
   */
  readonly lostState?: { readonly atMs: number; readonly restored: readonly ('open' | 'hold' | 'paused')[] };
  /** The sale's totals now (with the arrivals since the last point: see record_history). */
  readonly totals?: SaleTotals;
  /** Several databases (`store_shards`): each one's tail and cursor, in order (the figures above are their sums). */
  readonly databases?: readonly { readonly tail: number; readonly cursor: number }[];
}

/** What a POP last saw of a queue's state (see QueueStore.join). */
export interface StateFloor {
  readonly tail: number;
  readonly generation: number;
}

export interface StatsOptions {
  /** Read the last hour's history in the same store call (the admin panel: figures and chart at once). */
  readonly history?: boolean;
}

/**
 * A VIP access code as stored: how many uses it has left at creation (1..1,000,000) and when it
 * stops working (ms since the epoch; null = no expiry of its own).
 */
export interface VipCode {
  readonly uses: number;
  readonly expiresAtMs: number | null;
}

/** The outcome of spending one use of a VIP code: the uses left after this one, or why it was refused. */
export type VipUse =
  | { readonly ok: true; readonly remaining: number }
  | { readonly ok: false; readonly reason: 'unknown' | 'expired' | 'used_up' };

/** The most entries a queue's audit trail keeps (the newest; see QueueStore.appendAudit). */
export const AUDIT_MAX_ENTRIES = 5_000;
/** How long a queue's audit trail lives after its last entry, ms: 30 days. */
export const AUDIT_KEEP_MS = 30 * 86_400_000;
/** The longest entry the audit trail takes, bytes (the core keeps its entries well within it). */
export const AUDIT_ENTRY_MAX_BYTES = 4_096;

/** Entries with one tag in a row are one entry (see QueueStore.appendAudit): the tag (1 to 64 bytes, no tab) and what this one adds. */
export interface AuditMerge {
  readonly tag: string;
  readonly add: number;
}

/** What an append did: the entries kept (0 when merged), or that it was merged into the newest. */
export interface AuditAppended {
  readonly kept: number;
  readonly merged: boolean;
}

/**
 * The queue's shared state. Every method is one round trip and atomic in the store. Methods throw
 * when the store fails; the core turns that into a decision (see `store_failure`).
 */
export interface QueueStore {
  /**
   * Take the next ticket and run admission; in capacity mode a walk-in claims its slot in the same call.
   * Options (JoinOptions): `recoverMs`: the caller has just seen a token of a lost generation. The first such join of a
   * generation opens a recovery window of that length, in which capacity mode admits nobody new
   * (reported as paused), so the lost state's holders refresh into the count first. With
   * `recoverIfNew`, the caller saw no such token but its POP has served this queue's state before:
   * the window opens only if this join finds the state absent (then it was lost, not new), in the
   * same call, before the join itself could walk in. `floor`: the tail and generation the caller's
   * POP last saw; a ticket at or below it in that generation means the store was rolled back (a
   * failover to a replica that missed the latest writes): the join then starts a new generation,
   * voiding every ticket of the old one, numbers go on above the floor, and `recoverMs` (if given)
   * opens the recovery window. `joinKey`: a retry of a join whose answer was lost gets the same
   * ticket (`replayed`), so a ticket nobody received is not spent on the retry's new one.
   */
  join(queue: string, nowMs: number, policy: AdmissionPolicy, options?: JoinOptions): Promise<JoinResult>;
  /** Run admission (expire lapsed slots, call tickets into free room, or the period step) and read the state. */
  poll(queue: string, nowMs: number, policy: AdmissionPolicy): Promise<QueueState>;
  /**
   * Capacity mode: a called ticket takes its slot for `sessionMs`. Claims its reservation, or, when
   * the reservation lapsed, takes free room within the thresholds. `waitedMs` feeds the average wait.
   */
  claim(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<ClaimResult>;
  /**
   * Capacity mode: renew a held slot to `nowMs + sessionMs`, capped at `untilMs`; false when it is gone.
   * `generation` is the holder's token's: a holder from a lost generation gets its slot registered
   * again under a member of its own (see scripts.ts, Generations), so capacity counts it once more.
   * The same argument on claim, leave and draw: there a ticket of another generation is refused
   * (claim: not claimed; draw: unknown) or only its own re-registered slot is freed (leave).
   */
  touch(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, untilMs: number, generation?: number): Promise<boolean>;
  /**
   * Capacity mode: the holder leaves. `graceMs` 0 frees the slot at once (and calls the next ticket
   * into it); > 0 lets it lapse after the grace unless touched (a tab that may just be navigating).
   */
  leave(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, graceMs: number, generation?: number): Promise<boolean>;
  /**
   * Let up to `count` waiting visitors in (the operator's or origin's explicit decision), never past
   * the tail. With an `idempotencyKey` the store remembers the result for 10 minutes: a repeat with
   * the same key admits nobody and answers the recorded count with `replayed`.
   */
  admit(queue: string, count: number, nowMs: number, policy: AdmissionPolicy, idempotencyKey?: string): Promise<AdmitResult>;
  /** Change runtime controls; they act at once and read back with the state. */
  control(queue: string, change: RuntimeControl, nowMs: number, policy: AdmissionPolicy): Promise<QueueState>;
  /** Read the figures without changing anything; with `history`, the last hour's history too. */
  stats(queue: string, nowMs: number, policy: AdmissionPolicy, options?: StatsOptions): Promise<QueueStats>;
  /**
   * Random method: a waiting visitor's poll (one call, never cached). Renews the ticket's presence,
   * runs admission (draws among the present visitors), and says where the ticket stands; in capacity
   * mode a drawn ticket claims its slot in the same call. `waitedMs` feeds the average wait.
   */
  draw(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<DrawResult>;
  /** Per-minute samples of the last hour, oldest first (minutes without any store call have none). */
  history(queue: string, nowMs: number): Promise<readonly HistoryPoint[]>;
  /**
   * The sale's record: the points of `minutes` minutes (1 .. 10,080, all it keeps) from `fromMs` (a minute start)
   * younger than seven days, oldest first, resets included; one round trip. Absent on a store that
   * keeps none.
   */
  record?(queue: string, nowMs: number, fromMs: number, minutes: number): Promise<readonly RecordPoint[]>;
  /**
   * Empty the line: waiting tickets, reservations, figures, history and the event's frozen pre-queue
   * go; the tail stays (numbers are never reused) and the cursor moves to it; held slots stay and
   * keep counting until they lapse (their holders' tokens still pass); runtime controls and VIP codes
   * stay. The epoch becomes `nowMs`, so waiting tickets from before are void. With `expectedEpoch`,
   * nothing changes unless it is the current epoch (`applied` false), so a retry resets once.
   */
  reset(queue: string, nowMs: number, policy: AdmissionPolicy, expectedEpoch?: number): Promise<ResetResult>;
  /** Read tail and cursor, and ticket blocks' reported holes above the cursor, without side effects. */
  peek(queue: string): Promise<QueuePeek>;
  /**
   * Store VIP codes under `codeHashes` (the caller hashes the codes; the store never sees them),
   * 1 to VIP_MAX_BATCH (100) in one store call, all with `uses` >= 1 and the same optional expiry:
   * one flag per hash, in order, false where that hash exists already or repeats an earlier one of
   * the batch. The store forgets a code a day after its expiry, or 30 days after its creation when
   * it has none.
   */
  createVips(queue: string, codeHashes: readonly string[], code: VipCode, nowMs: number): Promise<boolean[]>;
  /** Spend one use of a VIP code atomically: a code with N uses admits exactly N callers. */
  useVip(queue: string, codeHash: string, nowMs: number): Promise<VipUse>;
  /** The webhook outbox in the same store (see WebhookOutbox); absent in a store that keeps none. */
  readonly outbox?: WebhookOutbox;
  /**
   * Append one entry (text opaque to the store, 1 to AUDIT_ENTRY_MAX_BYTES bytes) to the queue's
   * audit trail: the newest AUDIT_MAX_ENTRIES are kept, for AUDIT_KEEP_MS after the last append.
   * A reset leaves the trail; no visitor's request touches it. With `merge`, a run of entries with
   * the same tag is one entry: the newest replaces the run's, `#SUM#` and `#CALLS#` in its text
   * replaced by the run's sum of `add` and its length; an entry without a tag ends the run.
   */
  appendAudit(queue: string, entry: string, nowMs: number, merge?: AuditMerge): Promise<AuditAppended>;
  /** The newest `limit` (1 to AUDIT_MAX_ENTRIES) entries of the audit trail, newest first. */
  readAudit(queue: string, limit: number, nowMs: number): Promise<readonly string[]>;
}

/**
 * The per-POP cache of a queue's read state: on Fastly the POP's cache (`fastly:cache`), on the
 * Node host process memory. Waiting visitors' polls are answered from it, so store load follows
 * arrivals and admissions, not the size of the crowd.
 */
export interface StateCache {
  /**
   * The value cached under `key` while it is younger than `ttlSeconds`; otherwise `load()` runs
   * (once for all concurrent callers in this POP) and its value is cached. A `load` that throws
   * caches nothing and its error reaches every caller that waited for it.
   */
  getOrLoad<T>(key: string, ttlSeconds: number, load: () => Promise<T>): Promise<{ readonly value: T; readonly hit: boolean }>;
  /** The value cached under `key` while it is fresh, else undefined: a lookup that never loads or waits. */
  peek<T>(key: string): Promise<T | undefined>;
  /** Caches `value` under `key` for `ttlSeconds`, replacing what was there (see remembered-controls.ts). */
  put<T>(key: string, value: T, ttlSeconds: number): Promise<void>;
}

/**
 * Operator-supplied templates that replace the built-in ones without a redeploy: on Fastly the KV
 * Store `wr_templates`, on the Node host a directory. Keys: `<queue>/holding.html` or
 * `holding.html`, and `style.css`. `undefined` when there is no such key.
 */
export interface TemplateSource {
  get(key: string): Promise<string | undefined>;
}

/**
 * Posts a challenge provider's siteverify form (see challenge.ts) and returns its answer: on Fastly
 * through the named backend `challenge`, on the Node host with fetch. Throws when the provider
 * cannot be reached; may stop waiting after `timeoutMs` (the core stops waiting then in any case).
 */
export interface SiteVerifier {
  post(url: string, form: URLSearchParams, timeoutMs: number): Promise<Response>;
}

/**
 * What the edge does to the headers of a request it passes on: every copy the client sent of a
 * name in `drop` is removed (the admission header of every queue of the service, lower case, so a
 * client can send none of them through), then `set`, the signed admission, is added if there is one.
 */
export interface OriginHeaders {
  readonly drop: readonly string[];
  readonly set?: { readonly name: string; readonly value: string } | undefined;
}

/** Forwards a request to the origin and returns its response, streamed, the body unread. */
export interface Origin {
  forward(request: Request, headers?: OriginHeaders): Promise<Response>;
}

/** One structured record per request. */
export interface RequestLog {
  readonly ts: string;
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly decision: string;
  readonly queue?: string;
  readonly ticket?: number;
  readonly cursor?: number;
  readonly tail?: number;
  readonly store_ms?: number;
  /** `hit` when a waiting visitor's poll was answered from the per-POP cache, `miss` when it asked the store. */
  readonly cache?: 'hit' | 'miss';
  readonly store_error?: string;
  /**
   * Ticket blocks (`ticket_blocks`): `handed` when the visitor's number came from a block this
   * instance took, with no store call; on a block join what it took (`took 41-60`) and the holes
   * it reported (`reported 7 holes`).
   */
  readonly block?: string;
  readonly pop?: string;
  readonly reason?: string;
  /**
   * The client's throttle key (its address; IPv6 by /64), only on failed sign-ins and on sign-ins
   * refused because the client is held: who is guessing, never what was guessed.
   */
  readonly client?: string;
  /**
   * Who acted, on admin and API requests that signed in: the console account's name, or `api` for
   * the origin's bearer token. With `reason`, a change's line says who changed what (the audit trail).
   */
  readonly actor?: string;
}

export interface Logger {
  log(record: RequestLog): void;
}

/** The spans a failure count can cover, seconds: what Fastly's `RateCounter.lookupCount` accepts. */
export type FailureWindow = 10 | 20 | 30 | 40 | 50 | 60;

/**
 * Counts failed sign-ins per client and holds clients that failed too often, with the semantics of
 * Fastly's Edge Rate Limiting: a rate counter (`increment`, then the count over the last 10-60 s)
 * and a penalty box (an entry held for whole minutes, 1-60). On Fastly it is the POP's ERL, on the
 * Node host process memory. Counts are per POP and may be approximate (Fastly's may undercount by
 * up to 10%); both keep a bounded number of entries, evicting the least recently counted client
 * and the hold that ends soonest. The policy (how many failures, how long a hold) is the core's
 * (see auth-throttle.ts). Methods throw when the platform's limiter fails.
 */
export interface FailureLimiter {
  /** True while `key` is held in the penalty box. */
  isHeld(key: string): Promise<boolean>;
  /** Counts one failure of `key`; returns its failures over the last `windowSeconds`, this one included. */
  countFailure(key: string, windowSeconds: FailureWindow): Promise<number>;
  /** Holds `key` for `minutes` (a whole number, 1-60) from now; holding it again restarts the hold. */
  hold(key: string, minutes: number): Promise<void>;
  /** The counts of `key` over the last `windowSeconds`, counting nothing (the console's figures). */
  countOf(key: string, windowSeconds: FailureWindow): Promise<number>;
}

/** What the origin answered one request we passed to it (see OriginMeter). */
export type OriginOutcome = 'ok' | 'error' | 'slow';

/**
 * Counts the origin's answers in this POP, per queue, for adaptive admission: on Fastly the POP's
 * Edge Rate Limiting rate counter, on the Node host process memory. Never a store call; both
 * methods are synchronous and may throw (ERL not enabled): the core then counts nothing.
 */
export interface OriginMeter {
  /** Counts one answer: `error` (5xx, 429, or none), `slow` (first byte over the slow threshold), else `ok`. */
  count(queue: string, outcome: OriginOutcome): void;
  /** This POP's answers of the last 10 seconds: all of them, the errors, the slow ones. */
  recent(queue: string): { readonly requests: number; readonly errors: number; readonly slow: number };
}

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

/** Facts about the client that only the platform knows. */
export interface ClientInfo {
  /** The client's IP address as text (IPv4 or IPv6), or undefined when unknown. */
  readonly address: string | undefined;
  /** Name of the point of presence serving the request, for logs. */
  readonly pop: string | undefined;
  /** The client's country (ISO 3166-1 alpha-2) from the edge's geolocation, when known. */
  readonly country?: string | undefined;
}

/** One delivery waiting in a queue's webhook outbox (see WebhookOutbox). */
export interface OutboxDelivery {
  /** `<event id>|<webhook name>`: one delivery of one event to one webhook. */
  readonly key: string;
  /** The delivery's attempts so far, this one included (1 on the first). */
  readonly attempt: number;
  /** The JSON body, as it is sent and signed. */
  readonly body: string;
}

/** What `WebhookOutbox.take` hands out: the deliveries now due, and when the next one left falls due. */
export interface OutboxTake {
  readonly due: readonly OutboxDelivery[];
  /** When the earliest delivery still in the outbox falls due, ms; 0 when it is empty. */
  readonly nextDueMs: number;
}

/**
 * A queue's webhook outbox, kept in the store (see docs/webhooks.md): the deliveries not yet
 * acknowledged, each due at a time, and the event ids already recorded, so an event seen by two
 * POPs is delivered under one id once. Bounded: at most OUTBOX_MAX deliveries (the oldest go first)
 * and the last OUTBOX_SEEN ids. Every method is one store call, never made on a visitor's request
 * in the steady state (see webhooks.ts).
 */
export interface WebhookOutbox {
  /**
   * Records event `id` with one delivery per webhook in `hooks` (their names), due now, unless the
   * id was recorded before. With a `guard`, only if the guard's stored mark is below `above`; the
   * mark becomes `set`. Returns whether it was recorded now, and how many old deliveries it pushed out.
   */
  add(queue: string, id: string, hooks: readonly string[], body: string, nowMs: number, guard?: OutboxGuard): Promise<{ readonly added: boolean; readonly dropped: number }>;
  /** Hands out up to `limit` due deliveries, each then leased (not due again) for `leaseMs`. */
  take(queue: string, nowMs: number, limit: number, leaseMs: number): Promise<OutboxTake>;
  /** A delivery's outcome: `done` (acknowledged) and `drop` (given up) remove it, `retry` makes it due at `retryAtMs`. Returns the next due time (0: empty). */
  settle(queue: string, key: string, outcome: 'done' | 'drop' | 'retry', retryAtMs: number): Promise<number>;
}

/** A mark kept with the outbox that an event must be above to be recorded (see WebhookOutbox.add). */
export interface OutboxGuard {
  readonly name: string;
  readonly above: number;
  readonly set: number;
}

/**
 * Sends one webhook request: on Fastly through the webhook's named backend, on the Node host with
 * fetch to its URL. Resolves with the status, or throws when no answer came; may stop waiting after
 * `timeoutMs` (the core stops waiting then in any case).
 */
export interface WebhookSender {
  send(target: { readonly url?: string | undefined; readonly backend?: string | undefined; readonly path?: string | undefined }, body: string, headers: Readonly<Record<string, string>>, timeoutMs: number): Promise<number>;
}
