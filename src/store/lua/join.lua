#!lua flags=allow-key-locking
--- Take the next ticket and run admission (before the event's start: nothing is admitted). Random
--- method: the ticket joins the draw (the number it is given, after a rollback too). Capacity mode: a ticket called (drawn) in this call, or
--- (FIFO) one called before it existed, claims its slot at once (a walk-in, wait 0). Rate mode: the
--- period step (FIFO: only while nobody waits, after handing on lapsed calls); FIFO: a ticket the
--- cursor had already passed, or that this join's own step called, walks in (admitted now, claimed)
--- if the rate window has room (see Rate window in the header); random: a ticket drawn in this call enters at once (it is stored
--- neither in the draw nor as a reservation) and is reported claimed. Writes no history point. ARGV 12:
--- the recovery window, ms ('' = none; see Recovery); ARGV 13 'new': open it only if this run finds
--- the state absent (the caller's POP served it before, so it was lost), '' = open it (a token of a
--- lost generation is the evidence). ARGV 14, 15: the tail and generation the caller's POP last saw
--- ('' = none): a ticket at or below that tail in that generation means the store was rolled back.
--- ARGV 17: adaptive admission's settings and the POP's report ('' = none; see controller).
--- ARGV 18: the caller's instance's refusals and store errors ('' = none; see take_tally), added
--- to the sale's totals by a join that takes a ticket (a replay or an open switch takes none).
--- ARGV 16: the join key ('' = none; see Joins in the header): a join whose key ctl's join ring
--- holds (same epoch and generation, under JOIN_KEEP_MS old) is a retry of one whose answer was
--- lost, and gets that ticket again instead of a new one. The tail, the ring entry and the rest of
--- ctl's changes go in the run's one HSET, so a rate FIFO join costs three billed commands (EVALSHA,
--- HMGET, HSET), its period step included.
--- ARGV 19: a ticket block's size ('' = 1; see Blocks in the header): FIFO takes that many numbers
--- (the tail moves by it; the first is the ticket), the random method one. ARGV 20: the caller's
--- holes ('' = none; see holes.lua), kept with the run's other ctl fields at no command.
--- Returns the state, then ticket, claimed (0/1), replayed (0/1), and when a block was taken its
--- last number (none for size 1, random, switched open: the reply of an ordinary join).
-- wr join: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, recover_ms, recover_when, floor_tail, floor_gen, join_key, adaptive, tally, block_size, holes; returns {state..., ticket, claimed, replayed, block_last}
-- #include policy_header
defer_ctl()
-- #include join_ring

local RECOVER_WINDOW = 0
if (ARGV[12] or '') ~= '' then
  RECOVER_WINDOW = arg_int(12, 1)
  if ARGV[13] == 'new' then RECOVER_IF_NEW_MS = RECOVER_WINDOW else RECOVER_MS = RECOVER_WINDOW end
end
local FLOOR_TAIL, FLOOR_GEN
if (ARGV[14] or '') ~= '' then FLOOR_TAIL, FLOOR_GEN = arg_int(14, 0), arg_int(15, 1) end
ac_take(17)
local BLOCK = 1
if (ARGV[19] or '') ~= '' then BLOCK = arg_int(19, 1, __MAX_TICKET_BLOCK__) end
if RANDOM then BLOCK = 1 end
local paused, max_active, max_new = read_controls()
if RANDOM or max_active > 0 or max_new > 0 then start_book() end
-- The caller's holes count whatever this join does (a retry's too); switched open, nothing is kept.
add_holes(ARGV[20] or '', ctl_int('cursor') or 0, ctl_int('tail') or 0)
local replay = join_replay()
if replay then return replay_join(replay, paused, max_active, max_new) end
if SWITCH == 'open' then
  -- The room steps aside: no ticket, nothing written; the edge lets the visitor through. Unless this
  -- run found the state absent: its generation and what it restored (see RESTORE) are kept.
  local open = read_state(ctl_int('tail') or 0, ctl_int('cursor') or 0, paused, max_active, max_new)
  open[__STATE_LENGTH__ + 1], open[__STATE_LENGTH__ + 2], open[__STATE_LENGTH__ + 3] = 0, 0, 0
  if GEN_CREATED then flush_ctl() end
  return open
end
local ticket = (ctl_int('tail') or 0) + 1
set_ctl('tail', fmt(ticket + BLOCK - 1))
-- The edge's refusals and store errors ride on the ticket's write (see take_tally).
take_tally(18)
prologue(ticket - 1)
local tail = ticket + BLOCK - 1
local cursor = ctl_int('cursor') or 0
-- Rolled back (see Generations): the caller's POP saw this generation with a tail of at least this
-- ticket, so the store lost its latest writes but kept the generation, and numbers are being handed
-- out twice. A new generation voids every ticket of the old one; numbers go on above the floor
-- (those below it are nobody's now, so the cursor moves up to it and no call is spent on them), and
-- capacity mode holds new admissions for the window while the old holders register again.
if FLOOR_TAIL and FLOOR_GEN == GEN and ticket <= FLOOR_TAIL then
  local g = fresh_gen(GEN)
  GEN = g
  ticket = FLOOR_TAIL + 1
  tail = ticket + BLOCK - 1
  cursor = math.max(cursor, FLOOR_TAIL)
  set_ctl('gen', fmt(g), 'tail', fmt(tail), 'cursor', fmt(cursor), 'lp', fmt(math.max(ctl_int('lp') or 0, FLOOR_TAIL)))
  -- Holes were the old generation's numbers.
  HOLES = {}
  save_holes()
  -- Random: the old numbers leave the draw with their generation (their holders join again).
  if RANDOM then
    redis.call('DEL', K_WAITING)
    PRES = {n = 0, dirty = true}
  end
  if RECOVER_WINDOW > 0 then
    RECOVER_MS = RECOVER_WINDOW
    paused = recovering(0, max_active, max_new) or paused
  end
end
local claimed = 0
-- Capacity mode or the random method with others waiting ahead (or nobody to be admitted now): the
-- admission step is the polls' (random: the draws'), as in rate FIFO; this join only takes its
-- number, and reports the book's figures (see book_figures).
local capacity = max_active > 0 or max_new > 0
if not (capacity or RANDOM) then drop_book() end
-- Holes right above the cursor are nobody's: passed over, so a join with only holes ahead of it
-- has nobody ahead (see holes.lua; rate FIFO marks them claimed, so they never lapse).
if not RANDOM and cursor < ticket - 1 and #holes() > 0 then
  local target, passed, spans = pass_holes(cursor, 0, ticket - 1)
  if target > cursor then
    if capacity then take_holes(target) else pass_spans(spans, passed) end
    cursor = target
    set_ctl('cursor', fmt(cursor))
  end
end
local queued = (RANDOM or capacity) and (paused or not OPEN or cursor < ticket - 1)
-- The ticket joins the draw: stored now, unless random rate mode's step runs here (with nobody
-- ahead), where it stands in the draw unstored and is stored only if not drawn (see draw_tickets).
local function join_draw()
  redis.call('ZADD', K_WAITING, fmt(NOW), fmt(ticket))
  presence_add(1)
end
if RANDOM and (capacity or queued) then join_draw() end
if queued then
  -- Nothing to admit here: the ticket waits, unclaimed.
elseif capacity and not RANDOM then
  claimed = walk_in(ticket, max_active, max_new)
  if claimed == 1 then cursor = ticket end
elseif capacity then
  expire()
  cursor = advance(tail, cursor, paused, max_active, max_new)
  claimed = take_slot(ticket, tail, cursor, paused, max_active, max_new, 0)
elseif RANDOM then
  -- In the draw unstored only while the rate window has room to let it in at once.
  if window_room() then JOINER = fmt(ticket) end
  cursor = admission_step(tail, cursor, paused, max_active, max_new)
  -- Drawn by this run: it enters at once, wait 0, without a reservation written and claimed.
  if DRAWN_NOW[fmt(ticket)] then
    collect(ticket, 0, true)
    window_take()
    claimed = 1
  else
    JOINER = nil
    join_draw()
  end
else
  if not OPEN and cursor > ticket - 1 then
    cursor = ticket - 1
    set_ctl('cursor', fmt(cursor))
  end
  -- Lapsed calls are handed on here too (no command: see process_lapses), so the lapse frontier
  -- keeps up when every visitor walks in. The period step runs in a join only while nobody waits:
  -- its calls are then walk-ins. With people waiting it is the poll's (a waiting visitor polls
  -- every refresh, so a period's step is not missed).
  cursor = process_lapses(tail, cursor, paused)
  if cursor >= ticket - 1 then cursor = auto_admit(tail, cursor, paused) end
  -- Called before it existed, or by this join's own step: it walks in if the rate window has room
  -- (see rate_gate; written with the join's one HSET), else it claims on its next poll.
  if ticket <= cursor then claimed = rate_gate(ticket) end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
-- No history point: a join is the hottest call; the minute's first poll, claim, draw, admit or
-- control writes it.
state[__STATE_LENGTH__ + 1] = ticket
state[__STATE_LENGTH__ + 2] = claimed
state[__STATE_LENGTH__ + 3] = 0
if BLOCK > 1 then state[__STATE_LENGTH__ + 4] = tail end
join_record(ticket, claimed, BLOCK > 1 and tail or 0)
flush_ctl()
return state
