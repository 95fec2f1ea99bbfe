/**
 * The store's contract with Redis: key layout, argument checks, and the Lua scripts that make every
 * queue operation one atomic round trip. The in-memory store imports the argument checks from here
 * too, so both stores accept and reject exactly the same input.
 *
 * Key layout, per queue (the `{queue}` hash tag keeps a queue's keys in one slot on a cluster):
 *   `${prefix}:{${queue}}:ctl`      HASH, the queue's counters and controls, read by every policy
 *                                   script with ONE HMGET (Upstash bills every command a script runs,
 *                                   so what the hot scripts need lives in one hash) and written with
 *                                   at most one HSET per run (see set_ctl/flush_ctl). Fields:
 *                                   `tail`, the last ticket handed out (HINCRBY; absent = 0);
 *                                   `cursor`, the highest ticket called (absent = 0); `period`, rate
 *                                   mode: start (ms since the epoch) of the last period whose
 *                                   automatic admission ran (absent = never; a start time rather than
 *                                   a period index, so that changing `periodMs` cannot make it look
 *                                   far in the future and stall admission); `paused` ("1" or
 *                                   absent), `max_active`, `max_new_per_minute` (overrides; absent =
 *                                   the configured value); the event's frozen pre-queue: `ev_start`
 *                                   (the start it was frozen for), `ev_size`, `ev_seed` (see Events);
 *                                   `epoch` (ms of the last reset; absent = 0, never); `gen`, the
 *                                   generation (see Generations); `recover_until` (ms, see
 *                                   Recovery); `hist`, the minute whose history point is written;
 *                                   `c0`..`c60`, rate FIFO's calls per 5-s bucket of the last five
 *                                   minutes (CALL_BUCKET_MS, CALL_SLOTS), each `<bucket start>:<first
 *                                   called>:<last called>:<lapsed>`, reused round-robin (see
 *                                   Figures); `seat`, `w1`, `w5`, capacity mode and random: the
 *                                   book (see Book); `pres`, random: `<stored>:<bound>`, the
 *                                   waiting set's size and a score at or before its lowest ('' =
 *                                   empty), so presence lapses and is counted only once someone
 *                                   can have lapsed (see Methods); `j0`..`j4095`, the join
 *                                   ring (see Joins); `i0`..`i4095`,
 *                                   the idempotency ring: the keys of recent admits by slot, only
 *                                   read by the admit script (see idempotent_slot.lua); `h0`..`h10079`,
 *                                   the sale's record, a point per minute for seven days: slot
 *                                   `h<minute index mod RECORD_SLOTS>` holds `<minute>:<tail>:
 *                                   <cursor>:<waiting>:<active>:<admitted_1m>:<epoch>:<controls>:
 *                                   <totals>`, the state the minute's first poll, claim, draw,
 *                                   admit or control returned (after its admission step), the reset
 *                                   epoch and the controls' mode then, and `rt` as it stood, written
 *                                   with the run's other ctl fields; joins, the hottest call, write
 *                                   none. `waiting` is `tail - cursor` (at least 0) in FIFO, the
 *                                   present visitors in random. Read by history (the last hour's
 *                                   slots, points of the current epoch) and record (a day of slots
 *                                   a run, points younger than RECORD_MS); a reset keeps them.
 *                                   `rt`, the sale's running totals (TOTALS_LENGTH counts, see
 *                                   totals.lua), written only by runs that write ctl anyway; `rf`,
 *                                   the arrivals before this (ms) are in `rt` (capacity mode: the
 *                                   minute's point adds the later ones; an arrival marked `w`
 *                                   counted itself); `ru`, '1' once capacity mode wrote
 *                                   reservations (their claims count nowhere until a point adds
 *                                   them), '0' after a point outside capacity mode or a reset added
 *                                   them (see record_history).
 *   `${prefix}:{${queue}}:active`   capacity mode: ZSET ticket → slot expiry (ms, >= 0). A slot is
 *                                   live while its expiry is > now. Capacity mode and the random
 *                                   method: also the ARRIVALS, at negative scores (-1 - arrival ms),
 *                                   kept 300 s: `<ticket>:<waitedMs>` for a claimed reservation,
 *                                   `<ticket>w:<waitedMs>` for one that counted itself in the
 *                                   totals (a walk-in, a collected draw), `<ticket>@<now>[#k]:<waitedMs>` for a
 *                                   slot taken directly (a late claim after the reservation lapsed,
 *                                   or a returning holder), unique so that two arrivals never
 *                                   collapse into one; the wait is the average wait's. A slot and
 *                                   its arrival are written by one ZADD. Scores split the two kinds:
 *                                   slot commands range over [0, +inf), arrival counts over
 *                                   (-inf, -1].
 *   `${prefix}:{${queue}}:reserved` ZSET ticket → reservation expiry (ms), in every mode: a called
 *                                   (drawn) ticket's slot (capacity mode) or admission (rate mode),
 *                                   held for its holder for `reservationMs`: its claim deadline.
 *   `${prefix}:{${queue}}:admits`, `…:waits`  written by no script since issue 13 (the arrivals
 *                                   and their waits are in `active`); still passed as KEYS 3 and 4,
 *                                   and deleted by reset, so a state from before goes with the line.
 *   `${prefix}:{${queue}}:waiting`  random method: ZSET ticket → last poll time (ms): the visitors
 *                                   taking part in draws. A member is present while its score is
 *                                   > now - presenceMs; every writing random-mode script first
 *                                   removes the others (once `pres` says one can have lapsed). A
 *                                   drawn ticket leaves it for good.
 *   `${prefix}:{${queue}}:vip:<hash>`  HASH, one per VIP access code; `<hash>` is the lower-case hex
 *                                   SHA-256 the caller made of the code (the store never sees a
 *                                   code). Fields: `left` (uses left; kept at 0 once used up, so a
 *                                   spent code reads as used up rather than unknown) and `exp`
 *                                   (expiry in ms; absent = none). A Redis TTL cleans it up:
 *                                   VIP_KEEP_EXPIRED_MS after its expiry, or VIP_TTL_MS after its
 *                                   creation when it has none. The TTL is relative (PEXPIRE of
 *                                   `exp - now + keep`), so it needs no agreement between the
 *                                   caller's clock and Redis's. Only the two VIP scripts touch it.
 *
 * Modes: capacity mode while the effective `maxActive > 0 || maxNewPerMinute > 0`, else rate mode
 * (the period step, exactly as before thresholds existed). Figures are exact at the run's now (a
 * slot or reservation whose expiry is <= now is not counted even before a script removes it), so
 * `stats` needs no writes and every script reports the same numbers.
 *
 * Book (capacity mode and the random method; issue 13: Upstash bills every command a script runs,
 * so the hot scripts must not count sorted sets). ctl keeps what admission needs, read by the HMGET
 * every run makes and written by its one HSET. `seat` = `<slots>:<lapse_r>:<lapse_a>`: the stored
 * slots and reservations, and per set (reserved, active) a time at or before its earliest expiry
 * ('' = nothing stored): until it comes nothing there can have lapsed, so no expiry command runs;
 * when it comes, the lapsed go and the set's earliest expiry is read (two commands). `w1`, `w5` (60
 * s, 300 s) = `<edge>:<count>:<floor>:<t1,…>`: count = arrivals after the window's edge + every
 * stored reservation (a live reservation counts once, in both windows, until its claim turns it
 * into an arrival at the claim: the count does not move, so a claim writes no ctl); the listed
 * times (at most 16) are arrivals known exactly, every unlisted arrival is at or after floor, and
 * every arrival at or before edge has been taken out. A run takes out the listed arrivals that left
 * the window at no cost, and reads the window again from `active` (one ZREVRANGEBYSCORE of the
 * earliest 17, and a ZCOUNT when there are more, plus the reservations' ZCARD) only when an unlisted
 * one may have left (floor <= now - window) or its clock is behind an edge already taken out; that
 * read also trims arrivals older than 300 s. A run that may not write (stats) or does no admission
 * work (a queued join) uses the book only when it answers exactly at its now, and counts by score
 * otherwise. An absent book (none yet, a queue that was in rate FIFO, which drops it, a lost ctl) is
 * built from the sets; a run that writes a new generation starts an empty one and deletes what the
 * sets still hold (a lost life's: its holders register again, see Generations), one DEL.
 *
 * Figures. Rate FIFO counts CALLS, the pace of the line: the tickets called in the last 60 s (300
 * s) less the calls that lapsed unclaimed, from ctl's 5-s call buckets (read with the controls, so
 * the figures cost no command). A bucket counts while any of it is in the window, so the window
 * edges are 5 s coarse; only tickets that exist and are still called count (at most min(tail,
 * cursor)), so a call made before its ticket existed counts once somebody holds it, at its call's
 * time. Claims and walk-ins write nothing for the figures; a late holder let in after its call lapsed
 * is not counted again. Capacity mode and the random method count ARRIVALS exactly: a visitor
 * arrives when it claims its slot (a walk-in at its join, a called ticket at its claim, a late
 * claim or returning holder at that claim), not when its ticket is called: the call only reserves.
 * So `admittedLastMinute` = claims whose claim time is in the last 60 s + live reservations
 * (called, not yet claimed, WHATEVER their call time: each is one arrival still to come, counted
 * exactly once), and `admittedLast5Minutes` the same over 300 s, kept by the book (random rate mode: a draw is a
 * reservation, counted while live and then at its collection). `maxNewPerMinute` keeps that minute figure <= the limit (explicit admits aside): a reservation is
 * counted from its call until it becomes a claim (then counted at its claim time) or lapses (then
 * counted no more), so the visitors who actually arrive in ANY 60 s window never exceed the limit,
 * however long a reservation lasts.
 *
 * Capacity and random joins: a join with others waiting ahead of it (cursor < ticket - 1), or while
 * nobody may be admitted (paused, recovering, before the event's start), runs no admission step: the
 * waiting visitors' polls do, as in rate mode. It takes its number and reports the book's figures
 * (see Book), so it costs what a rate join costs. A join with nobody ahead walks in when both thresholds leave room, straight to its
 * slot (no reservation written and claimed in the same run; its arrival and a wait of 0 recorded).
 * The random method's joins follow the same rule: with undrawn tickets ahead (cursor < ticket - 1)
 * the draws are the waiting visitors' (each poll is a draw); a join with nobody ahead runs the step,
 * and may be drawn at once: it stands last in the draw without being stored, and drawn it enters
 * directly (no entry in `waiting`, no reservation written and collected in the same run).
 *
 * Claims in every mode (why: a ticket whose holder never got the cookie — a join that timed out
 * after the store took the ticket — or who walked away must not use up an admission). A called
 * ticket holds a reservation until its claim deadline, `reservationMs` after the call (the handler
 * passes (refresh + cache) s + 5 s: the holder notices the call on its next poll once its POP's
 * cache expires). The holder's claim takes the reservation out (capacity mode and random: it
 * becomes an arrival, counted once per ticket: two tabs count once). A reservation that lapses
 * unclaimed gives its admission to the next ticket:
 *   - capacity mode: expire() frees the slot and its per-minute share, advance() calls as many next
 *     tickets as there is room, in one step (k phantoms called together lapse and are replaced
 *     together; k phantoms called one after another into one slot hold it k × reservationMs);
 *   - rate FIFO: process_lapses() calls one next waiting ticket per lapsed call, at once, in the
 *     poll, join and control scripts (it costs no command: see Rate window); a lapsed operator's
 *     call is handed on as the operator's, so an explicit admit of N lets in N people who show up,
 *     given N waiting. Any other handed-on call only invites: its claim passes the rate window;
 *   - random rate mode: redraw() draws as many again among the present visitors.
 * No banking, restated with the credit: a period step moves the cursor by at most the count and
 * never more than the count past the tail; a lapsed call's admission is spent at once on a ticket
 * that exists (never past the tail) or dropped, never stored for later. So in any period, calls
 * live or claimed from that period's step <= the count, plus replacements one-for-one for calls
 * that lapsed. Paused or before the event's start: rate FIFO keeps lapsed calls stored (they count
 * for nothing) and replaces them when admission may run again; random rate mode drops them.
 * FIFO order: a lapsed ticket is skipped, never admitted ahead of an earlier waiting ticket, since
 * replacements are the next tickets after the cursor. A skipped holder who comes back after its
 * deadline: rate mode lets it in when the rate window has room (its turn came; it already waited),
 * counted there once per period however often it asks; capacity mode lets it take a
 * slot only if there is room (take_slot), else it waits at the front. Walk-ins (a ticket called by
 * or before its own join) are claimed at the join. If that join's answer is lost, its retry gets
 * the same ticket (see Joins): the walk-in's admission or slot goes to the visitor who asked for it.
 * One who never comes back is a visitor who left without saying so: a rate-mode walk-in used one
 * of its period's admissions, a capacity-mode one holds its slot until the inactivity timeout.
 *
 * Rate window (rate FIFO): the rate is a promise about ANY window of one period, so a call only
 * invites, and the admission is decided when it happens: rate_gate() lets a walk-in (at its join)
 * or a claim in only while ctl `rw`, the admissions of the last PERIOD_MS (in steps of PERIOD_MS/16,
 * each counted until its last admission leaves the window: never under the truth), holds fewer than
 * the quota; else the holder waits at the front and claims again on its next poll, and its call
 * holds (ctl `rp`: it came, so its call does not lapse). An operator's call (ctl `ra`, the ranges of
 * explicit admits and their hand-ons) passes the window and is counted in it. So claims and walk-ins
 * in any window of one period <= the quota, plus explicit admits, whatever lapsed before. Rate FIFO
 * writes no reservation: a call lapses RESERVATION_MS after the run that made it (ctl `rq`: each
 * calling run's time and last ticket) unless its ticket claimed (ctl `rc`, a bitmap above the lapse
 * frontier `lp`) or came (`rp`); process_lapses() settles the calls whose deadline passed, up to the
 * tickets that exist, moves the frontier and trims the bitmaps below it, all in ctl: a claim, a
 * walk-in, a hand-on and an admit each cost the run's HMGET and HSET and nothing else. A claim the
 * bitmap holds is let in again without counting (two tabs, a retry); a late claim below the
 * frontier is remembered for a period (ctl `rl`, the last 32). With no quota (automatic admission
 * off) there is no rate to keep: only explicit admits call, and their claims pass. Random rate
 * mode: a draw's reservation is its record, so the window alone decides its collection (draw's
 * settle, the join's own draw): held back, the drawn visitor's reservation is renewed (one ZADD XX)
 * and it is collected on a later poll; a join is in the draw unstored only while the window has
 * room. The operator's draws are reserved half a ms short (a score in .5) and pass the window.
 *
 * Joins: the caller gives each join a key (join's ARGV 16: 64 random bits in hex), and the visitor
 * whose join got no answer carries it in a cookie to its next request. ctl's join ring (`j0`..
 * `j4095`, the slot named by the key's first JOIN_SLOT_DIGITS hex digits) holds `<key>:<ticket>:
 * <ms>:<epoch>:<generation>:<claimed>` for the slot's latest join; a join whose key it holds, in the
 * same epoch and generation and within JOIN_KEEP_MS, takes no ticket: it answers that one again
 * (`replayed`), a claimed walk-in still claimed (capacity: its slot renewed). The entry is written
 * and read with the run's other ctl fields, so keys cost no command. A later join whose key falls in
 * the same slot overwrites the entry (after n joins an entry survives with probability
 * (1 - 1/4096)^n: 88% after 500); its retry then takes a new ticket, as without a key, and the
 * lost one is a phantom that admission skips (above).
 *
 * Blocks (issue 34; JoinOptions.block, src/core/ticket-blocks.ts): a FIFO join may take B numbers
 * in its one run (tail += B; the first is its ticket, its caller hands out the rest); the random
 * method takes one (every ticket stands in its draw). Numbers a caller took and will never hand out
 * (its block aged out) are holes: the caller reports them on a later join (ARGV 20) and ctl `bh`
 * keeps them (see holes.lua: at most MAX_STORED_HOLE_RANGES ranges above the cursor, of one epoch
 * and generation; a reset deletes it, a lost state or a new generation voids it). Every FIFO call
 * of tickets passes over them: a period step calls `count` real tickets, an explicit admit of N
 * calls N real ones, a lapsed call is handed on to a real one, capacity's advance reserves room
 * only for real ones, and a join with only holes ahead of it has nobody ahead. Rate FIFO marks the
 * holes it passes claimed (`rc`), so their calls never lapse and hand an admission on, and counts
 * them as lapsed in its call buckets, so the figures do not count them as calls; the record's
 * `waiting` leaves them out. All of it is read and written with ctl's HMGET and HSET: holes add no
 * command (a keyed retry that writes nothing else writes them with one HSET). A hole reported after
 * its number was called, or never reported, is called and lapses as an abandoned ticket does.
 *
 * Events (both methods): with an event start S > 0 in the policy and now < S, no script admits
 * anybody: no period step (the period key is not consumed), no call into free room, no walk-in, no
 * direct slot, explicit admits admit 0, no draw. Joins still take tickets (and, in rate FIFO mode, a
 * cursor left ahead of the tail by an earlier period step is pulled back to the tail, since those
 * calls were for tickets nobody held: the first pre-queue visitors must not walk in). Holding a
 * slot or a reservation from before stays valid. The first writing script (join, poll, claim, draw,
 * admit, control, leave) run at now >= S whose `ev_start` is not S freezes the pre-queue: `ev_start`
 * = S, `ev_size` = the tail before that run's own ticket, `ev_seed` = its ARGV seed. A rescheduled S
 * freezes anew. Every state reports `ev_size`/`ev_seed` when `ev_start` = S, else 0 (stats the same,
 * writing nothing). touch neither freezes nor lapses presence.
 *
 * Methods: FIFO (0) calls tickets in order by moving the cursor. Random (1) draws among the present
 * members of `waiting` instead: a draw of n tickets runs a Park–Miller minimal standard generator
 * seeded from ARGV seed (state = (seed mod 2147483646) + 1; next = state * 16807 mod 2147483647,
 * exact in doubles; one stream per script run), and picks rank r = floor(next / 2147483647 * N)
 * among the N members of `waiting` in ZSET order (score, then member bytes), removes it, N - 1,
 * n times (the ranks are mapped to the set as it stands, so one ZRANGE reads each run of ranks less
 * than 16 apart, and one ZREM and one ZADD write them all).
 * Each drawn ticket is reserved exactly as a FIFO call (reserved, counted by the book) and the
 * cursor counts the draws, so `tail - cursor` is still the number not yet called. Capacity mode
 * draws min(free room, N); rate mode's period step draws min(count, N) (same period rules; lapsed
 * reservations are expired as in capacity mode); admit(count) draws min(count, N). In random mode a
 * slot is taken only through a live reservation (or renewed), never directly from free room, and a
 * rate-mode reservation is "collected" by its holder's draw (ZREM reserved, its arrival at now,
 * wait recorded): a ticket drawn and collected cannot be drawn again, so nobody is admitted twice.
 * Presence is counted in ctl `pres` (see the key layout): a join adds one, a draw takes its k out,
 * and the lapsed leave (ZREMRANGEBYSCORE, then the new lowest score read) only once now -
 * presenceMs reaches its bound; N is that count. A waiting poll renews its presence first (ZADD XX
 * CH: one command when the score changes) and settles only a ticket its own step drew: a ticket in
 * the draw holds no reservation or slot.
 *
 * Method switches mid-queue are not smoothed over: a FIFO ticket never entered `waiting` (its draw
 * answers unknown), and in random mode the cursor counts draws, not a ticket number, so a switch back
 * to FIFO would call tickets by number again. In FIFO the draw script answers from the cursor (see
 * DRAW, src/store/lua/draw.lua); the handler uses it in random mode only.
 *
 * Reset empties the line, not the site: ticket numbers are never handed out twice, so the tail stays
 * and the cursor moves up to it; held slots stay (their holders' access tokens still pass, so they
 * must keep counting against max_active until they lapse). Reservations, figures, the draw, history
 * and the period go, `ev_*` is cleared in ctl, the controls stay; `epoch` = now so the caller can void
 * waiting tickets from before. It admits nobody. It takes the epoch the caller saw and does nothing
 * when that is no longer current, so a retried reset applies once.
 *
 * Generations: ctl `gen` identifies the life of the queue's state. The first script that finds it
 * absent (the state was lost: a restart without persistence, a failover, a flush; or a new queue)
 * writes a fresh one from its seed and time, and every state reports it, so the caller carries it in
 * every token. A token whose generation is not the store's is from a lost state, in which ticket
 * numbers restarted at 1: its number may be someone else's now. claim and draw refuse such a ticket
 * (read-only; the caller gives the visitor a new ticket); touch registers such a holder's slot again
 * under the member `<ticket>@g<generation>`, distinct from every plain ticket, so capacity counts it
 * again without taking or renewing anybody else's slot; leave frees only that member. Tokens without
 * a generation (issued before it existed) count as current.
 *
 * Recovery: the holders of a lost state are still on the site, but the store no longer counts them
 * until each refreshes its slot (touch, above). A join that brings the first evidence of the loss (a
 * visitor whose token is of another generation; join's ARGV 12 = the window, ms) opens a window:
 * ctl `recover_until` = now + window, once per generation. While it is open, capacity mode admits
 * nobody new (as if paused: no call, no walk-in, no direct slot; explicit admits still work), so
 * every holder refreshes into the count before any room is handed out. Rate mode has no slots to
 * count and is not held, but what the lost state let in during its last period is unknown: the
 * opening run writes ctl `rw` as one full step (RATE_WINDOW_FULL) at now, so the rate window lets
 * nobody in for a period.
 *
 * Restore: a lost state also loses the operator's emergency switch and pause, and the room would go
 * back to normal silently (letting newcomers in under hold, sending everyone back to the line under
 * open). Every writing script may be given, as its last ARGV, the controls the caller's POP last saw
 * (`rc:<switch>:<paused>`, see remembered-controls.ts); the run that writes a fresh generation (and
 * only it) applies them before it decides anything, and writes ctl `restored` = `<now>:<what>` (what:
 * open, hold, paused, comma-separated; empty when the POP knew the queue running normally), which
 * stats reports. No command is added: the fields join the run's writes, and a join under open that
 * created the generation writes it (other open joins still write nothing). The state's controls
 * mode tells an operator's pause (1) from a pause by a recovery window alone (4), so a POP never
 * remembers a window as a pause.
 *
 * Scripts: every one starts with `#!lua flags=allow-key-locking` (Upstash then locks only the keys in
 * KEYS, so queues do not wait on each other) and therefore touches only keys passed in KEYS: they
 * are bound once to `K_*` locals at the top. They are deterministic: the time comes in ARGV, nothing
 * reads the clock or a random source. They run in Redis 7's shebang mode, so they declare no
 * `no-writes` flag and return only flat integer arrays (Lua numbers are truncated to integers on the
 * way out anyway), except `history`, which returns its members as stored (strings the store parses).
 *
 * Policy scripts share KEYS (policyKeys) and ARGV 1..11 (policyArgv): now, auto count, period ms,
 * max active, max new per minute, session ms, reservation ms, event start ms (0 = none), seed
 * (0..2^48-1), method (0 fifo, 1 random), presence ms (>= 1 in random). Their own ARGV follow at
 * 12+. They return the state first: {tail, cursor, paused, max_active, max_new_per_minute, active,
 * admitted_1m, admitted_5m, event_size, event_seed, waiting, epoch, generation, holes} (STATE_LENGTH
 * values; holes, the one string, is the reported holes above the cursor), extras from 15 on.
 *
 * The SHA-1 of each script is pinned as a literal so that EVALSHA needs no hashing at the edge; a
 * test asserts each pin equals both node:crypto's SHA-1 and `SCRIPT LOAD`. If you edit a script,
 * `npm run pin-scripts` rewrites the literals (the contract test tells you when one is stale). The Lua
 * itself lives in src/store/lua (one file per script, shared parts in lua/lib; see lua-compose.ts).
 */

import { MAX_BLOCK_HOLE_RANGES, MAX_TICKET_BLOCK, type JoinOptions, AUDIT_ENTRY_MAX_BYTES, AUDIT_KEEP_MS, AUDIT_MAX_ENTRIES, IDEMPOTENCY_KEY_PATTERN, type AuditMerge, JOIN_KEEP_SECONDS, JOIN_KEY_PATTERN, type AdmissionPolicy, type EmergencySwitch, type RememberedControls, type RuntimeControl, type StateFloor, REFUSAL_REASONS, WAIT_BOUNDS_MS, type EdgeTally, type RecordPoint, type SaleTotals } from '../core/ports';
import { composeLua } from './lua-compose';
import JOIN_FILE from './lua/join.lua';
import POLL_FILE from './lua/poll.lua';
import CLAIM_FILE from './lua/claim.lua';
import TOUCH_FILE from './lua/touch.lua';
import LEAVE_FILE from './lua/leave.lua';
import ADMIT_FILE from './lua/admit.lua';
import CONTROL_FILE from './lua/control.lua';
import STATS_FILE from './lua/stats.lua';
import DRAW_FILE from './lua/draw.lua';
import RESET_FILE from './lua/reset.lua';
import HISTORY_FILE from './lua/history.lua';
import RECORD_FILE from './lua/record.lua';
import PEEK_FILE from './lua/peek.lua';
import CREATE_VIP_FILE from './lua/create_vip.lua';
import USE_VIP_FILE from './lua/use_vip.lua';
import AUDIT_APPEND_FILE from './lua/audit_append.lua';
import AUDIT_READ_FILE from './lua/audit_read.lua';
import RECOVERY_LUA from './lua/lib/recovery.lua';
import GENERATION_LUA from './lua/lib/generation.lua';
import PRELUDE_LUA from './lua/lib/prelude.lua';
import EVENTS_LUA from './lua/lib/events.lua';
import FIGURES_LUA from './lua/lib/figures.lua';
import DRAWS_LUA from './lua/lib/draws.lua';
import RATE_MODE_LUA from './lua/lib/rate_mode.lua';
import HOLES_LUA from './lua/lib/holes.lua';
import BOOK_LUA from './lua/lib/book.lua';
import CAPACITY_MODE_LUA from './lua/lib/capacity_mode.lua';
import POLICY_HEADER_LUA from './lua/lib/policy_header.lua';
import READ_QUEUE_LUA from './lua/lib/read_queue.lua';
import REFUSE_FOREIGN_LUA from './lua/lib/refuse_foreign.lua';
import IDEMPOTENT_SLOT_LUA from './lua/lib/idempotent_slot.lua';
import IDEMPOTENT_REPLAY_LUA from './lua/lib/idempotent_replay.lua';
import IDEMPOTENT_RECORD_LUA from './lua/lib/idempotent_record.lua';
import JOIN_RING_LUA from './lua/lib/join_ring.lua';
import HISTORY_READ_LUA from './lua/lib/history_read.lua';
import TOTALS_LUA from './lua/lib/totals.lua';
import VIP_PRELUDE_LUA from './lua/lib/vip_prelude.lua';
import CONTROLLER_LUA from './lua/lib/controller.lua';
import { AC_CUT_KEEP_MAX, AC_CUT_KEEP_MIN, AC_CUT_SPAN, AC_GENTLE_KEEP, AC_MIN_REQUESTS, AC_PLATEAU_MS, AC_PROBE_HEADROOM, AC_SLOTS, AC_STEP_MS, AC_STEPS, AC_TRY_BACKOFF, AC_WINDOW_MS, ADAPTIVE_LOG, adaptiveArg, AdaptiveArgumentError, adaptiveControlArgv } from './adaptive';

/** @default key prefix for every store key. */
export const DEFAULT_KEY_PREFIX = 'wr';

/** Queue names the stores accept (the caller validates them first; the stores assert it again). */
export const QUEUE_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** Key prefixes the stores accept: no braces (they would move the hash tag), no spaces. */
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

/** The sliding window of `maxNewPerMinute` and of `admittedLastMinute`, ms. */
export const MINUTE_MS = 60_000;

/** How long admissions and waits are kept: the window of `admittedLast5Minutes` and `avgWaitSeconds`, ms. */
export const KEEP_MS = 300_000;

/**
 * Rate FIFO counts its calls per bucket of this length, in CALL_SLOTS fields of ctl reused
 * round-robin: the figures' window edges are this coarse, ms.
 */
export const CALL_BUCKET_MS = 5_000;

/** Enough buckets to cover KEEP_MS and the bucket in progress. */
export const CALL_SLOTS = KEEP_MS / CALL_BUCKET_MS + 1;

/** The span of the per-minute history the console's chart reads, ms (one hour). */
export const HISTORY_MS = 3_600_000;

/** The last hour's minutes: the record's slots the hour's history reads. */
export const HISTORY_SLOTS = HISTORY_MS / MINUTE_MS;

/** How long the sale's record keeps its per-minute points, ms (seven days). */
export const RECORD_MS = 7 * 24 * 3_600_000;

/** ctl's record slots `h0`..`h10079`: one per minute of RECORD_MS, reused round-robin. */
export const RECORD_SLOTS = RECORD_MS / MINUTE_MS;

/**
 * The record script reads at most this many minutes a run: all it keeps, so a report or the
 * console's chart is one store call (one backend request of the few Fastly allows a request), its
 * HMGETs a day of fields each (well under Lua's unpack limit).
 */
export const RECORD_READ_MINUTES = RECORD_SLOTS;

/** Why a new ticket was refused at the edge, in the order the totals keep them. */
export const TALLY_REASONS = REFUSAL_REASONS;

/** An edge tally's counts: one per refusal reason, then store errors. */
export const TALLY_LENGTH = TALLY_REASONS.length + 1;

/**
 * ctl `rt`'s counts: admitted, lapsed calls, switch changes, the wait sum and max (ms), a count per
 * wait bucket (WAIT_BOUNDS_MS and the unbounded one), then the tally's.
 */
export const TOTALS_LENGTH = 5 + WAIT_BOUNDS_MS.length + 1 + TALLY_LENGTH;

/** A join's tally argument (`rt:<refused by reason>...:<store errors>`), '' when there is nothing to carry. */
export function tallyArg(tally: EdgeTally | undefined): string {
  if (tally === undefined) return '';
  const counts = [...TALLY_REASONS.map((r) => tally.refused[r]), tally.storeErrors];
  if (!counts.every((n) => Number.isSafeInteger(n) && n >= 0 && n <= 1_000_000_000)) throw new StoreArgumentError('tally counts must be integers from 0 to 1000000000');
  return counts.every((n) => n === 0) ? '' : `rt:${counts.join(':')}`;
}

/** A record read's span: a minute start (ms) and 1 .. RECORD_READ_MINUTES minutes. */
export function checkRecordSpan(fromMs: number, minutes: number): [number, number] {
  if (!Number.isSafeInteger(fromMs) || fromMs < 0 || fromMs % MINUTE_MS !== 0) throw new StoreArgumentError('fromMs must be a minute start (ms since the epoch)');
  if (!Number.isSafeInteger(minutes) || minutes < 1 || minutes > RECORD_READ_MINUTES) throw new StoreArgumentError(`minutes must be an integer from 1 to ${RECORD_READ_MINUTES}`);
  return [fromMs, minutes];
}

/** Totals with nothing counted. */
export function emptyTotals(): SaleTotals {
  return totalsFrom(new Array<number>(TOTALS_LENGTH).fill(0));
}

/** ctl `rt`'s counts (see TOTALS_LENGTH) as SaleTotals. */
export function totalsFrom(n: readonly number[]): SaleTotals {
  const at = (i: number): number => n[i] ?? 0;
  const tally = 5 + WAIT_BOUNDS_MS.length + 1;
  return {
    admitted: at(0),
    lapsed: at(1),
    switchChanges: at(2),
    waitSumMs: at(3),
    waitMaxMs: at(4),
    waitBuckets: n.slice(5, tally),
    refused: Object.fromEntries(TALLY_REASONS.map((r, i) => [r, at(tally + i)])) as SaleTotals['refused'],
    storeErrors: at(tally + TALLY_REASONS.length),
  };
}

/** The counts of SaleTotals in ctl `rt`'s order (the memory store keeps them so). */
export function totalsCounts(t: SaleTotals): number[] {
  return [t.admitted, t.lapsed, t.switchChanges, t.waitSumMs, t.waitMaxMs, ...t.waitBuckets, ...TALLY_REASONS.map((r) => t.refused[r]), t.storeErrors];
}

/** Parses ctl `rt` as the scripts write it (TOTALS_LENGTH counts, colon-separated; '' = none); undefined if malformed. */
export function parseTotals(text: string): SaleTotals | undefined {
  if (text === '') return emptyTotals();
  const parts = text.split(':');
  if (parts.length !== TOTALS_LENGTH || !parts.every((p) => /^\d{1,16}$/.test(p))) return undefined;
  const n = parts.map(Number);
  return n.every((x) => Number.isSafeInteger(x)) ? totalsFrom(n) : undefined;
}

/**
 * A record point as the scripts write it: `<minute>:<tail>:<cursor>:<waiting>:<active>:<admitted_1m>`
 * then `:<epoch>:<mode>:<totals>` (points from before the record have only the first six).
 */
export function parseRecordPoint(text: string): RecordPoint | undefined {
  const parts = text.split(':');
  if (parts.length !== 8 + TOTALS_LENGTH && parts.length !== 6) return undefined;
  if (!parts.every((p) => /^\d{1,16}$/.test(p))) return undefined;
  const n = parts.map(Number);
  if (!n.every((x) => Number.isSafeInteger(x))) return undefined;
  const [atMs = 0, tail = 0, cursor = 0, waiting = 0, active = 0, admittedLastMinute = 0, epoch = 0, mode = 0] = n;
  if (atMs % MINUTE_MS !== 0 || mode > 4) return undefined;
  const totals = parts.length === 6 ? emptyTotals() : totalsFrom(n.slice(8));
  return { atMs, tail, cursor, waiting, active, admittedLastMinute, epoch, mode, totals };
}

/** @default presence window of the random method when the policy has none, ms. */
export const DEFAULT_PRESENCE_MS = 30_000;

/** The largest seed a policy may carry: 2^48 - 1 (exact in a double, and in Lua). */
export const MAX_SEED = 281_474_976_710_655;

/** How long an explicit admit's idempotency key remembers its result, ms (10 minutes). */
export const IDEMPOTENCY_MS = 600_000;

/**
 * ctl's idempotency ring: its slots (`i0`..`i4095`), and how many keys one slot keeps at most (its
 * newest). A key is forgotten early only when 32 more keys of its slot come within its 10 minutes:
 * at 50 admits a second (30,000 keys in 10 minutes, 7.3 a slot on average) that is under one
 * chance in 10^10 per slot. Until 27 November 2026 ctl kept the newest 128 keys of the queue, which
 * an origin admitting one seat at a time pushed out in seconds.
 */
export const IDEMPOTENCY_SLOTS = 4096;
export const IDEMPOTENCY_SLOT_KEEP = 32;

/** The slot of ctl's idempotency ring that holds `key` (the Lua's own hash, in idempotent_slot.lua). */
export function idempotencySlot(key: string): number {
  let h = 0;
  for (let i = 0; i < key.length; i += 1) h = (h * 31 + key.charCodeAt(i)) % IDEMPOTENCY_SLOTS;
  return h;
}

/** How long ctl's join ring answers a retried join with its ticket, ms (10 minutes). */
export const JOIN_KEEP_MS = JOIN_KEEP_SECONDS * 1000;

/** The join ring has 16^JOIN_SLOT_DIGITS slots (4,096), picked by a key's first hex digits. */
export const JOIN_SLOT_DIGITS = 3;

/** Join keys the stores accept (64 random bits in hex, made by the handler). */
export { JOIN_KEY_PATTERN };

/** Idempotency keys the stores accept: the same pattern the admin API checks. */
export { IDEMPOTENCY_KEY_PATTERN };

/** Length of the state every policy script returns first (see the header). */
export const STATE_LENGTH = 14;

/**
 * Where the state carries the reported holes above the cursor (its last field, the one string):
 * `<from>-<to>,...` ascending, '' for none (see holes_text in holes.lua).
 */
export const STATE_HOLES_INDEX = STATE_LENGTH - 1;

/** Thrown for input a store refuses; nothing has been changed when it is thrown. */
export class StoreArgumentError extends RangeError {
  readonly code = 'ERR_STORE_ARGUMENT';
  constructor(message: string) {
    super(message);
    this.name = 'StoreArgumentError';
  }
}

export interface QueueKeys {
  readonly active: string;
  readonly reserved: string;
  readonly admits: string;
  readonly waits: string;
  readonly ctl: string;
  readonly waiting: string;
}

export function assertQueueName(queue: string): void {
  if (typeof queue !== 'string' || !QUEUE_NAME_PATTERN.test(queue)) {
    throw new StoreArgumentError(`invalid queue name ${JSON.stringify(queue)}: expected ${QUEUE_NAME_PATTERN}`);
  }
}

export function assertKeyPrefix(prefix: string): void {
  if (typeof prefix !== 'string' || !KEY_PREFIX_PATTERN.test(prefix)) {
    throw new StoreArgumentError(`invalid key prefix ${JSON.stringify(prefix)}: expected ${KEY_PREFIX_PATTERN}`);
  }
}

export function buildQueueKeys(prefix: string, queue: string): QueueKeys {
  assertKeyPrefix(prefix);
  assertQueueName(queue);
  const base = `${prefix}:{${queue}}`;
  return {
    active: `${base}:active`,
    reserved: `${base}:reserved`,
    admits: `${base}:admits`,
    waits: `${base}:waits`,
    ctl: `${base}:ctl`,
    waiting: `${base}:waiting`,
  };
}

/** KEYS of every policy script, in the order the Lua binds them to `K_*`. */
export function policyKeys(keys: QueueKeys): string[] {
  return [
    keys.active,
    keys.reserved,
    keys.admits,
    keys.waits,
    keys.ctl,
    keys.waiting,
  ];
}

/** An admission policy after validation, with the time it applies to. */
export interface CheckedPolicy {
  /** Floored to whole ms. */
  readonly nowMs: number;
  /** Rate mode: visitors per period (0 = off). */
  readonly count: number;
  /** Rate mode: period length; only meaningful when `count > 0` (0 otherwise). */
  readonly periodMs: number;
  /** Configured thresholds (runtime overrides live in the store). */
  readonly maxActive: number;
  readonly maxNewPerMinute: number;
  readonly sessionMs: number;
  readonly reservationMs: number;
  /** 0 = no event. */
  readonly eventStartMs: number;
  /** 0 .. MAX_SEED. */
  readonly seed: number;
  readonly method: 'fifo' | 'random';
  /** >= 1; DEFAULT_PRESENCE_MS when the policy has none. */
  readonly presenceMs: number;
  /** The controls to restore if the state is found absent (AdmissionPolicy.restore). */
  readonly restore: RememberedControls | undefined;
}

function isSafeCount(value: unknown, min: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min;
}

function checkTime(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > Number.MAX_SAFE_INTEGER) {
    throw new StoreArgumentError(`invalid ${name} ${String(value)}: expected a finite time in ms since the epoch`);
  }
  return Math.floor(value);
}

/** Validates the time and policy every policy-bound method takes. `nowMs` may carry a fraction; it is floored. */
export function checkPolicy(nowMs: number, policy: AdmissionPolicy): CheckedPolicy {
  const now = checkTime('nowMs', nowMs);
  const count: unknown = policy?.auto?.count;
  if (!isSafeCount(count, 0)) {
    throw new StoreArgumentError(`invalid auto.count ${String(count)}: expected an integer >= 0`);
  }
  const periodMs: unknown = policy.auto.periodMs;
  if (count > 0 && !isSafeCount(periodMs, 1)) {
    throw new StoreArgumentError(`invalid auto.periodMs ${String(periodMs)}: expected an integer >= 1`);
  }
  const maxActive: unknown = policy.thresholds?.maxActive;
  if (!isSafeCount(maxActive, 0)) {
    throw new StoreArgumentError(`invalid thresholds.maxActive ${String(maxActive)}: expected an integer >= 0`);
  }
  const maxNewPerMinute: unknown = policy.thresholds.maxNewPerMinute;
  if (!isSafeCount(maxNewPerMinute, 0)) {
    throw new StoreArgumentError(`invalid thresholds.maxNewPerMinute ${String(maxNewPerMinute)}: expected an integer >= 0`);
  }
  const sessionMs: unknown = policy.sessionMs;
  if (!isSafeCount(sessionMs, 1)) {
    throw new StoreArgumentError(`invalid sessionMs ${String(sessionMs)}: expected an integer >= 1`);
  }
  const reservationMs: unknown = policy.reservationMs;
  if (!isSafeCount(reservationMs, 1)) {
    throw new StoreArgumentError(`invalid reservationMs ${String(reservationMs)}: expected an integer >= 1`);
  }
  const eventStartMs: unknown = policy.eventStartMs ?? 0;
  if (!isSafeCount(eventStartMs, 0)) {
    throw new StoreArgumentError(`invalid eventStartMs ${String(eventStartMs)}: expected an integer time in ms since the epoch, or 0 for none`);
  }
  const seed: unknown = policy.seed ?? 0;
  if (!isSafeCount(seed, 0) || seed > MAX_SEED) {
    throw new StoreArgumentError(`invalid seed ${String(seed)}: expected an integer from 0 to ${MAX_SEED}`);
  }
  const method: unknown = policy.method ?? 'fifo';
  if (method !== 'fifo' && method !== 'random') {
    throw new StoreArgumentError(`invalid method ${String(method)}: expected fifo or random`);
  }
  const presenceMs: unknown = policy.presenceMs ?? DEFAULT_PRESENCE_MS;
  if (!isSafeCount(presenceMs, 1)) {
    throw new StoreArgumentError(`invalid presenceMs ${String(presenceMs)}: expected an integer >= 1`);
  }
  const restore: unknown = policy.restore;
  if (restore !== undefined) {
    const r = restore as Partial<RememberedControls>;
    if (typeof restore !== 'object' || restore === null || typeof r.paused !== 'boolean' || (r.switch !== undefined && r.switch !== 'open' && r.switch !== 'hold')) {
      throw new StoreArgumentError('invalid restore: expected { switch: open | hold | undefined, paused: boolean }');
    }
  }
  return {
    restore: restore === undefined ? undefined : { switch: (restore as RememberedControls).switch, paused: (restore as RememberedControls).paused },
    nowMs: now,
    count,
    periodMs: count > 0 ? (periodMs as number) : 0,
    maxActive,
    maxNewPerMinute,
    sessionMs,
    reservationMs,
    eventStartMs,
    seed,
    method,
    presenceMs,
  };
}

/** Whether admission may run at `nowMs`: no event, or its start has come. */
export function isOpen(p: CheckedPolicy): boolean {
  return p.eventStartMs === 0 || p.nowMs >= p.eventStartMs;
}

const MINSTD_MODULUS = 2_147_483_647;

/**
 * The random method's generator, the same arithmetic as `next_rank` in the Lua (Park–Miller minimal
 * standard, every step exact in doubles): `nextRank(n)` picks a rank in 0..n-1. One per script run.
 */
export function createDrawRng(seed: number): { nextRank(n: number): number } {
  let state = (seed % (MINSTD_MODULUS - 1)) + 1;
  return {
    nextRank(n: number): number {
      state = (state * 16_807) % MINSTD_MODULUS;
      return Math.min(Math.floor((state / MINSTD_MODULUS) * n), n - 1);
    },
  };
}

/** A draw's outcome by the code the draw script returns. */
export const DRAW_OUTCOMES = { 0: 'waiting', 1: 'drawn', 2: 'front', 3: 'unknown' } as const;

export function checkTicket(ticket: number): number {
  if (!isSafeCount(ticket, 1)) {
    throw new StoreArgumentError(`invalid ticket ${String(ticket)}: expected an integer >= 1`);
  }
  return ticket;
}

/**
 * `waitedMs` is a difference of two clocks (the join time in the visitor's token, possibly stamped by
 * another POP, and now), so a small negative value is clock skew rather than bad input: it counts as
 * 0. Fractions are floored. Only a non-number, NaN or infinity is refused.
 */
export function checkWaitedMs(waitedMs: number): number {
  if (typeof waitedMs !== 'number' || !Number.isFinite(waitedMs)) {
    throw new StoreArgumentError(`invalid waitedMs ${String(waitedMs)}: expected a finite number of ms`);
  }
  return Math.min(Math.max(0, Math.floor(waitedMs)), Number.MAX_SAFE_INTEGER);
}

/** `untilMs` caps a renewed slot (the end of the visitor's session); +Infinity means no cap. */
export function checkUntilMs(untilMs: number): number {
  if (typeof untilMs !== 'number' || Number.isNaN(untilMs) || untilMs < 0) {
    throw new StoreArgumentError(`invalid untilMs ${String(untilMs)}: expected a time in ms since the epoch`);
  }
  return Math.min(Math.floor(untilMs), Number.MAX_SAFE_INTEGER);
}

export function checkGraceMs(graceMs: number): number {
  if (!isSafeCount(graceMs, 0)) {
    throw new StoreArgumentError(`invalid graceMs ${String(graceMs)}: expected an integer >= 0`);
  }
  return graceMs;
}

/**
 * An admit's count: at least 1, or 0 with an idempotency key (`keyed`): a replay check, which lets
 * nobody in and answers what the key let in if it was used (ShardedStore asks it of a database
 * whose share is 0, so a retry there still replays).
 */
export function assertAdmitCount(count: number, keyed = false): void {
  if (!isSafeCount(count, keyed ? 0 : 1)) {
    throw new StoreArgumentError(`invalid admit count ${String(count)}: expected an integer >= 1${keyed ? ', or 0 with an idempotency key' : ''}`);
  }
}

/** Most uses one VIP code may have. */
export const VIP_MAX_USES = 1_000_000;

/**
 * Most VIP codes one create_vip call makes: the most an operator asks for at once (the admin API's
 * 1-100), so a batch is one store request. One request per code would pass Fastly's 32 backend
 * requests per client request.
 */
export const VIP_MAX_BATCH = 100;

/** A VIP code without an expiry of its own is forgotten this long after its creation, ms (30 days). */
export const VIP_TTL_MS = 30 * 24 * 3_600_000;

/**
 * A VIP code with an expiry is kept this long past it (ms, one day), so that using it then reads
 * `expired` rather than `unknown`; after that it is forgotten.
 */
export const VIP_KEEP_EXPIRED_MS = 24 * 3_600_000;

/** What the stores accept as a code's hash: lower-case hex SHA-256. */
export const VIP_HASH_PATTERN = /^[0-9a-f]{64}$/;

/** Validates a bare time (the VIP methods take no policy); floored to whole ms. */
export function checkNowMs(nowMs: number): number {
  return checkTime('nowMs', nowMs);
}

export function checkVipHash(codeHash: string): string {
  if (typeof codeHash !== 'string' || !VIP_HASH_PATTERN.test(codeHash)) {
    throw new StoreArgumentError('invalid VIP code hash: expected 64 lower-case hex digits (SHA-256)');
  }
  return codeHash;
}

/** A batch of VIP code hashes for create_vip: 1 to VIP_MAX_BATCH, each a valid hash. */
export function checkVipBatch(codeHashes: readonly string[]): readonly string[] {
  if (!Array.isArray(codeHashes) || codeHashes.length < 1 || codeHashes.length > VIP_MAX_BATCH) {
    throw new StoreArgumentError(`invalid VIP batch: expected 1 to ${VIP_MAX_BATCH} code hashes`);
  }
  for (const hash of codeHashes) checkVipHash(hash);
  return codeHashes;
}

/** The key of one VIP code, under its queue's hash tag; validates prefix, queue and hash. */
export function vipKey(prefix: string, queue: string, codeHash: string): string {
  assertKeyPrefix(prefix);
  assertQueueName(queue);
  return `${prefix}:{${queue}}:vip:${checkVipHash(codeHash)}`;
}

/** A queue's audit trail (see audit_append.lua): a list beside the queue's keys, none of the policy scripts'. */
export function auditKey(prefix: string, queue: string): string {
  assertKeyPrefix(prefix);
  assertQueueName(queue);
  return `${prefix}:{${queue}}:audit`;
}

/** Where a run of merged audit entries is counted (see audit_append.lua). */
export function auditMergeKey(prefix: string, queue: string): string {
  assertKeyPrefix(prefix);
  assertQueueName(queue);
  return `${prefix}:{${queue}}:audit_merge`;
}

/** A merge of audit entries: a tag of 1 to 64 bytes without a tab, and a whole number to add. */
export function checkAuditMerge(merge: AuditMerge | undefined): { tag: string; add: number } {
  if (merge === undefined) return { tag: '', add: 0 };
  const bytes = typeof merge.tag === 'string' ? new TextEncoder().encode(merge.tag).length : 0;
  if (bytes < 1 || bytes > 64 || merge.tag.includes('\t')) throw new StoreArgumentError('invalid audit merge tag: expected 1 to 64 bytes, no tab');
  if (!Number.isSafeInteger(merge.add) || merge.add < 0) throw new StoreArgumentError('invalid audit merge count: expected a whole number');
  return { tag: merge.tag, add: merge.add };
}

/** An audit entry: a string of 1 to AUDIT_ENTRY_MAX_BYTES UTF-8 bytes. */
export function checkAuditEntry(entry: string): string {
  const bytes = typeof entry === 'string' ? new TextEncoder().encode(entry).length : 0;
  if (bytes < 1 || bytes > AUDIT_ENTRY_MAX_BYTES) throw new StoreArgumentError(`invalid audit entry: expected 1 to ${AUDIT_ENTRY_MAX_BYTES} bytes`);
  return entry;
}

/** How many audit entries to read: a whole number from 1 to AUDIT_MAX_ENTRIES. */
export function checkAuditLimit(limit: number): number {
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > AUDIT_MAX_ENTRIES) throw new StoreArgumentError(`invalid audit limit: expected 1 to ${AUDIT_MAX_ENTRIES}`);
  return limit;
}

/** Validates an idempotency key (IDEMPOTENCY_KEY_PATTERN). */
export function checkIdempotencyKey(key: string): string {
  if (typeof key !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw new StoreArgumentError(`invalid idempotency key: expected 1-64 of A-Z, a-z, 0-9, ".", "_", ":", "-"`);
  }
  return key;
}


/** join's key: undefined, or JOIN_KEY_PATTERN. */
export function checkJoinKey(key: string | undefined): string {
  if (key === undefined) return '';
  if (typeof key !== 'string' || !JOIN_KEY_PATTERN.test(key)) throw new StoreArgumentError('invalid join key: expected 16 lower-case hex digits');
  return key;
}

/**
 * The most hole ranges ctl `bh` keeps (see Blocks in the header): past it the highest go, and are
 * called and lapse as unreported holes do. 64 ranges are about 1.5 KB read by every run's HMGET
 * while holes are pending, and nothing when none are.
 */
export const MAX_STORED_HOLE_RANGES = 64;

/**
 * join's block (JoinOptions.block) as its two ARGV: the size ('' for 1: an ordinary join) and the
 * holes (`<epoch>:<generation>:<from>-<to>,...`, '' for none). Sizes 1..MAX_TICKET_BLOCK; holes
 * of at most MAX_BLOCK_HOLE_RANGES ranges of ticket numbers >= 1, ascending and not overlapping.
 */
export function blockArgv(block: JoinOptions['block']): [string, string] {
  if (block === undefined) return ['', ''];
  const { size, holes } = block;
  if (!Number.isSafeInteger(size) || size < 1 || size > MAX_TICKET_BLOCK) throw new StoreArgumentError(`invalid block size ${String(size)}: expected an integer from 1 to ${MAX_TICKET_BLOCK}`);
  if (holes === undefined) return [size === 1 ? '' : String(size), ''];
  if (!isSafeCount(holes?.epoch, 0) || !isSafeCount(holes.generation, 0) || !Array.isArray(holes.ranges) || holes.ranges.length > MAX_BLOCK_HOLE_RANGES) {
    throw new StoreArgumentError(`invalid block holes: expected an epoch and a generation >= 0 and at most ${MAX_BLOCK_HOLE_RANGES} ranges`);
  }
  let last = 0;
  for (const r of holes.ranges) {
    if (!isSafeCount(r?.from, 1) || !isSafeCount(r.to, r.from) || r.from <= last) throw new StoreArgumentError('invalid block holes: expected ranges of ticket numbers >= 1, from <= to, ascending and not overlapping');
    last = r.to;
  }
  const ranges = holes.ranges.map((r) => `${r.from}-${r.to}`).join(',');
  return [size === 1 ? '' : String(size), ranges === '' ? '' : `${holes.epoch}:${holes.generation}:${ranges}`];
}

/** join's floor: undefined, or a tail >= 0 and a generation >= 1, both safe integers. */
export function checkFloor(floor: StateFloor | undefined): StateFloor | undefined {
  if (floor === undefined) return undefined;
  if (!isSafeCount(floor?.tail, 0) || !isSafeCount(floor.generation, 1)) {
    throw new StoreArgumentError(`invalid floor ${JSON.stringify(floor)}: expected a tail >= 0 and a generation >= 1`);
  }
  return floor;
}

/** join's recovery window, ms: undefined or 0 for none, else an integer >= 1. */
export function checkRecoverMs(recoverMs: number | undefined): number {
  if (recoverMs === undefined || recoverMs === 0) return 0;
  if (!isSafeCount(recoverMs, 1)) throw new StoreArgumentError(`invalid recoverMs ${String(recoverMs)}: expected an integer >= 1`);
  return recoverMs;
}

/** A token's generation as an optional ARGV: '' for none (a token from before generations). */
export function generationArg(generation: number | undefined): string {
  if (generation === undefined || generation === 0) return '';
  if (!isSafeCount(generation, 1)) throw new StoreArgumentError(`invalid generation ${String(generation)}: expected an integer >= 1`);
  return String(generation);
}

/** A VIP code to create, after validation, with the time it is created at. */
export interface CheckedVip {
  /** Floored to whole ms. */
  readonly nowMs: number;
  readonly uses: number;
  readonly expiresAtMs: number | null;
  /** How long the store keeps the code from now, ms: see VIP_TTL_MS and VIP_KEEP_EXPIRED_MS. */
  readonly keepMs: number;
}

const VIP_FIELDS = new Set(['uses', 'expiresAtMs']);

/**
 * Validates a VIP code before anything is written: `uses` an integer 1..VIP_MAX_USES, `expiresAtMs`
 * null or a safe integer later than `nowMs`. Both fields are required and no others are accepted, so
 * a misspelt expiry cannot create a code that never expires.
 */
export function checkVipCode(code: { readonly uses: number; readonly expiresAtMs: number | null }, nowMs: number): CheckedVip {
  const now = checkTime('nowMs', nowMs);
  if (typeof code !== 'object' || code === null || Array.isArray(code)) {
    throw new StoreArgumentError('invalid VIP code: expected an object');
  }
  for (const field of Object.keys(code)) {
    if (!VIP_FIELDS.has(field)) {
      throw new StoreArgumentError(`invalid VIP code field ${JSON.stringify(field)}: expected uses and expiresAtMs`);
    }
  }
  const uses: unknown = code.uses;
  if (!isSafeCount(uses, 1) || uses > VIP_MAX_USES) {
    throw new StoreArgumentError(`invalid VIP uses ${String(uses)}: expected an integer from 1 to ${VIP_MAX_USES}`);
  }
  const expiresAtMs: unknown = code.expiresAtMs;
  if (expiresAtMs !== null && (!isSafeCount(expiresAtMs, 0) || expiresAtMs <= nowMs)) {
    throw new StoreArgumentError(`invalid VIP expiresAtMs ${String(expiresAtMs)}: expected null or an integer time in ms after now`);
  }
  return {
    nowMs: now,
    uses,
    expiresAtMs,
    keepMs: expiresAtMs === null ? VIP_TTL_MS : expiresAtMs - now + VIP_KEEP_EXPIRED_MS,
  };
}

/** ARGV of the create_vip script: now, uses, expiry ('' = none). */
export function vipCreateArgv(v: CheckedVip): string[] {
  return [String(v.nowMs), String(v.uses), v.expiresAtMs === null ? '' : String(v.expiresAtMs)];
}

/** Why a VIP use was refused, by the status the use_vip script returns (0 is success). */
export const VIP_REFUSALS = { 1: 'unknown', 2: 'expired', 3: 'used_up' } as const;

/** A runtime change after validation: `undefined` leaves a control as it is, `null` removes an override. */
export interface CheckedControl {
  readonly paused: boolean | undefined;
  readonly maxActive: number | null | undefined;
  readonly maxNewPerMinute: number | null | undefined;
  readonly switch: EmergencySwitch | undefined;
  readonly adaptive: 'on' | 'off' | null | undefined;
  readonly adaptivePin: number | null | undefined;
  readonly admitPerPeriod: number | null | undefined;
}

const CONTROL_FIELDS = new Set(['paused', 'maxActive', 'maxNewPerMinute', 'switch', 'adaptive', 'adaptivePin', 'admitPerPeriod']);
const SWITCHES: readonly EmergencySwitch[] = ['normal', 'open', 'hold'];

/**
 * Validates a runtime change before anything is written. Unknown fields are refused rather than
 * ignored: a misspelt `maxactive` must not look like it was applied.
 */
export function checkControl(change: RuntimeControl): CheckedControl {
  if (typeof change !== 'object' || change === null || Array.isArray(change)) {
    throw new StoreArgumentError('invalid control change: expected an object');
  }
  for (const field of Object.keys(change)) {
    if (!CONTROL_FIELDS.has(field)) {
      throw new StoreArgumentError(`invalid control field ${JSON.stringify(field)}: expected paused, maxActive, maxNewPerMinute, admitPerPeriod, switch, adaptive or adaptivePin`);
    }
  }
  const { paused, maxActive, maxNewPerMinute } = change;
  const sw = change.switch;
  if (sw !== undefined && !SWITCHES.includes(sw)) {
    throw new StoreArgumentError(`invalid switch ${JSON.stringify(sw)}: expected normal, open or hold`);
  }
  if (paused !== undefined && typeof paused !== 'boolean') {
    throw new StoreArgumentError(`invalid paused ${String(paused)}: expected true or false`);
  }
  const { admitPerPeriod } = change;
  for (const [name, value] of [['maxActive', maxActive], ['maxNewPerMinute', maxNewPerMinute], ['admitPerPeriod', admitPerPeriod]] as const) {
    if (value !== undefined && value !== null && !isSafeCount(value, 0)) {
      throw new StoreArgumentError(`invalid ${name} ${String(value)}: expected an integer >= 0, or null for the configured value`);
    }
  }
  const { adaptive, adaptivePin } = change;
  if (adaptive !== undefined && adaptive !== null && adaptive !== 'on' && adaptive !== 'off') {
    throw new StoreArgumentError(`invalid adaptive ${JSON.stringify(adaptive)}: expected on, off, or null for the configured value`);
  }
  if (adaptivePin !== undefined && adaptivePin !== null && !isSafeCount(adaptivePin, 1)) {
    throw new StoreArgumentError(`invalid adaptivePin ${String(adaptivePin)}: expected an integer >= 1, or null to release the pin`);
  }
  return { paused, maxActive, maxNewPerMinute, switch: sw, adaptive, adaptivePin, admitPerPeriod };
}

/** Adaptive admission's settings and report as the join and poll scripts take them (see adaptiveArg). */
export function checkAdaptive(a: AdmissionPolicy['adaptive']): string {
  try {
    return adaptiveArg(a);
  } catch (error) {
    if (error instanceof AdaptiveArgumentError) throw new StoreArgumentError(error.message);
    throw error;
  }
}

/** Start (ms) of the period containing `nowMs`; the same arithmetic as the Lua `auto_admit`. */
export function periodStart(nowMs: number, periodMs: number): number {
  return Math.floor(nowMs / periodMs) * periodMs;
}

/**
 * ARGV 1..11 of every policy script, as strings so no JSON number formatting (exponents, fractions)
 * reaches Lua: now, auto count, period ms, configured max active, configured max new per minute,
 * session ms, reservation ms, event start ms, seed, method (0 fifo, 1 random), presence ms.
 */
export function policyArgv(p: CheckedPolicy): string[] {
  return [
    p.nowMs,
    p.count,
    p.periodMs,
    p.maxActive,
    p.maxNewPerMinute,
    p.sessionMs,
    p.reservationMs,
    p.eventStartMs,
    p.seed,
    p.method === 'random' ? 1 : 0,
    p.presenceMs,
  ].map(String);
}

/**
 * The controls a POP remembers, as the last ARGV of a writing script (`rc:<switch>:<0|1>`, see
 * RESTORE in the prelude), or nothing when it remembers none.
 */
export function restoreArgv(p: CheckedPolicy): string[] {
  return p.restore === undefined ? [] : [`rc:${p.restore.switch ?? ''}:${p.restore.paused ? 1 : 0}`];
}

/** ARGV 12..18 of the control script (16, 17: adaptive admission, see adaptiveControlArgv; 18 the period quota): '' = leave as it is, 'del' = back to configured / unpause; the switch. */
export function controlArgv(c: CheckedControl): string[] {
  const threshold = (v: number | null | undefined): string => (v === undefined ? '' : v === null ? 'del' : String(v));
  return [
    c.paused === undefined ? '' : c.paused ? '1' : '0',
    threshold(c.maxActive),
    threshold(c.maxNewPerMinute),
    c.switch ?? '',
    ...adaptiveControlArgv(c.adaptive, c.adaptivePin),
    threshold(c.admitPerPeriod),
  ];
}

/** The mean wait, in seconds with one decimal, from the sum and count the stores keep; null for none. */
export function averageWaitSeconds(sumMs: number, count: number): number | null {
  return count > 0 ? Math.round(sumMs / count / 100) / 10 : null;
}

// ---------------------------------------------------------------------------------------------
// Lua. Each script is a file under ./lua, its shared parts under ./lua/lib, bundled as text and put
// together by composeLua (see lua-compose.ts for the conventions) the first time its text is asked
// for; the pinned hashes cover the composed text. Not at module load: the 14 composed scripts are
// 395 KB of strings, and on Fastly what the module builds at load stays in the wasm's initial
// memory, copied for every request, where the text is needed only on NOSCRIPT (EVALSHA goes by the
// pinned hash). Measured: the wasm's data section 6.08 MB with the texts composed at load, 5.85 MB
// without.

/** The constants the Lua files name as `__NAME__`: one source of truth on the TS side. */
const LUA_CONSTANTS = {
  MAX_TICKET_BLOCK,
  MAX_STORED_HOLE_RANGES,
  AUDIT_MAX_ENTRIES,
  AUDIT_KEEP_MS,
  AUDIT_ENTRY_MAX_BYTES,
  MINUTE_MS,
  KEEP_MS,
  CALL_BUCKET_MS,
  CALL_SLOTS,
  HISTORY_MS,
  HISTORY_SLOTS,
  RECORD_MS,
  RECORD_SLOTS,
  RECORD_READ_MINUTES,
  WAIT_BOUNDS: WAIT_BOUNDS_MS.join(', '),
  TOTALS_LENGTH,
  TALLY_LENGTH,
  MAX_SEED,
  STATE_LENGTH,
  IDEMPOTENCY_MS,
  IDEMPOTENCY_SLOTS,
  IDEMPOTENCY_SLOT_KEEP,
  JOIN_KEEP_MS,
  JOIN_SLOT_DIGITS,
  VIP_MAX_USES,
  VIP_MAX_BATCH,
  VIP_KEEP_EXPIRED_MS,
  VIP_TTL_MS,
  AC_MIN_REQUESTS,
  AC_CUT_KEEP_MAX,
  AC_CUT_KEEP_MIN,
  AC_CUT_SPAN,
  AC_GENTLE_KEEP,
  AC_PLATEAU_MS,
  AC_PROBE_HEADROOM,
  AC_SLOTS,
  AC_STEP_MS,
  AC_STEPS,
  AC_TRY_BACKOFF,
  AC_WINDOW_MS,
  ADAPTIVE_LOG,
} as const;

const LUA_FRAGMENTS: Readonly<Record<string, string>> = {
  recovery: RECOVERY_LUA,
  generation: GENERATION_LUA,
  prelude: PRELUDE_LUA,
  events: EVENTS_LUA,
  figures: FIGURES_LUA,
  draws: DRAWS_LUA,
  rate_mode: RATE_MODE_LUA,
  holes: HOLES_LUA,
  book: BOOK_LUA,
  capacity_mode: CAPACITY_MODE_LUA,
  policy_header: POLICY_HEADER_LUA,
  read_queue: READ_QUEUE_LUA,
  refuse_foreign: REFUSE_FOREIGN_LUA,
  idempotent_slot: IDEMPOTENT_SLOT_LUA,
  idempotent_replay: IDEMPOTENT_REPLAY_LUA,
  idempotent_record: IDEMPOTENT_RECORD_LUA,
  join_ring: JOIN_RING_LUA,
  history_read: HISTORY_READ_LUA,
  totals: TOTALS_LUA,
  vip_prelude: VIP_PRELUDE_LUA,
  controller: CONTROLLER_LUA,
};

const lua = (text: string): string => composeLua(text, LUA_FRAGMENTS, LUA_CONSTANTS);

export const JOIN_SHA1 = 'f66aab53c1bc996dd60f538dd5fd8a68bf21be95';
export const POLL_SHA1 = '77ad4bc23bc9a4ea5660794ee45e96fe0e45779f';
export const CLAIM_SHA1 = '82716785660233c60195e95ac459ff4f04258c46';
export const TOUCH_SHA1 = 'def50c83273bfa32e41abf43b3b785665a3304bc';
export const LEAVE_SHA1 = '0ef5858de1c2fcf4e4a6484fd9559f40c4168c0e';
export const ADMIT_SHA1 = '060ce0f1d446909cbc807b83f1a6bddd86a4fe35';
export const CONTROL_SHA1 = '4e3ebad0e04707b4b9551339df5179d42ceb5a5a';
export const STATS_SHA1 = '0c25403b60681428d3b827b5f3cc2cc084fdf9d1';
export const PEEK_SHA1 = 'b4327ba7409611bdc65927a506d622ceb6ec4ebb';
export const CREATE_VIP_SHA1 = '9ac8933ef2b110728118240c231af09b377db470';
export const USE_VIP_SHA1 = '512ff4ccf1962982ba759a2c32693f4d8079b512';
export const DRAW_SHA1 = '0cfac75251ea6f534acd0d79fbae76e93ba4e59b';
export const RESET_SHA1 = 'f6568bdc247887f7d0a81cc7b05f3483802a118e';
export const HISTORY_SHA1 = '74b9f219314fecc0d2e3d98f8816b99a317cb81e';
export const RECORD_SHA1 = '12440bc37cf49fc6fb957dc60c6c73c6624963f7';
export const AUDIT_APPEND_SHA1 = '41efef0b4f4b57613ac96c7fb2a1b2336cceb3d8';
export const AUDIT_READ_SHA1 = 'c96ef5cae622e41f4c1f5304bd8ccf281114e5c2';

export interface StoreScript {
  readonly name:
    | 'join'
    | 'poll'
    | 'claim'
    | 'touch'
    | 'leave'
    | 'admit'
    | 'control'
    | 'stats'
    | 'draw'
    | 'reset'
    | 'history'
    | 'record'
    | 'peek'
    | 'create_vip'
    | 'use_vip'
    | 'audit_append'
    | 'audit_read';
  readonly text: string;
  readonly sha1: string;
}

/** A script whose text is composed on first use and kept. */
function script(name: StoreScript['name'], file: string, sha1: string): StoreScript {
  let text: string | undefined;
  return {
    name,
    sha1,
    get text() {
      return (text ??= lua(file));
    },
  };
}

export const JOIN = script('join', JOIN_FILE, JOIN_SHA1);
export const POLL = script('poll', POLL_FILE, POLL_SHA1);
export const CLAIM = script('claim', CLAIM_FILE, CLAIM_SHA1);
export const TOUCH = script('touch', TOUCH_FILE, TOUCH_SHA1);
export const LEAVE = script('leave', LEAVE_FILE, LEAVE_SHA1);
export const ADMIT = script('admit', ADMIT_FILE, ADMIT_SHA1);
export const CONTROL = script('control', CONTROL_FILE, CONTROL_SHA1);
export const STATS = script('stats', STATS_FILE, STATS_SHA1);
export const PEEK = script('peek', PEEK_FILE, PEEK_SHA1);
export const CREATE_VIP = script('create_vip', CREATE_VIP_FILE, CREATE_VIP_SHA1);
export const USE_VIP = script('use_vip', USE_VIP_FILE, USE_VIP_SHA1);
export const DRAW = script('draw', DRAW_FILE, DRAW_SHA1);
export const RESET = script('reset', RESET_FILE, RESET_SHA1);
export const HISTORY = script('history', HISTORY_FILE, HISTORY_SHA1);
export const AUDIT_APPEND = script('audit_append', AUDIT_APPEND_FILE, AUDIT_APPEND_SHA1);
export const AUDIT_READ = script('audit_read', AUDIT_READ_FILE, AUDIT_READ_SHA1);
export const RECORD = script('record', RECORD_FILE, RECORD_SHA1);

/** Every script the stores use, for tests and for warming a script cache. */
export const STORE_SCRIPTS: readonly StoreScript[] = [
  JOIN,
  POLL,
  CLAIM,
  TOUCH,
  LEAVE,
  ADMIT,
  CONTROL,
  STATS,
  DRAW,
  RESET,
  HISTORY,
  RECORD,
  PEEK,
  CREATE_VIP,
  USE_VIP,
  AUDIT_APPEND,
  AUDIT_READ,
];
