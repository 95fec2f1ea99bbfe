#!lua flags=allow-key-locking
--- A waiting visitor's poll. Random method: the prologue lapses presence; a ticket holding a live
--- slot renews it (drawn, claimed); one holding a live reservation claims its slot (capacity: drawn
--- and claimed, or front when take_slot cannot) or is collected (rate: drawn); one still in the draw
--- renews its presence to now, admission runs, and if it was drawn just now it is settled the same
--- way, else it is waiting; anything else is unknown and nothing is written for it. Admission runs in
--- every case. FIFO (not used by the handler): admission runs, then capacity mode tries take_slot;
--- drawn when claimed (capacity) or called (rate), front when called but not claimed (capacity),
--- waiting when issued and not called, unknown when above the tail. ARGV 12 ticket, 13 waited ms,
--- 14 the token's generation (another generation's ticket is unknown, and nothing runs).
--- Returns the state, then outcome (DRAW_OUTCOMES) and claimed (0/1).
-- wr draw: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, ticket, waited_ms, generation; returns {state..., outcome, claimed}
-- #include policy_header
defer_ctl()
-- #include read_queue

local ticket = arg_int(12, 1)
local waited = arg_int(13, 0)
-- #include refuse_foreign(3, 0)
local WAITING, DRAWN, FRONT, UNKNOWN = 0, 1, 2, 3
local m = fmt(ticket)
prologue(tail)
local function settle()
  if redis.call('ZSCORE', K_ACTIVE, m) or (capacity and redis.call('ZSCORE', K_RESERVED, m)) then
    if take_slot(ticket, tail, cursor, paused, max_active, max_new, waited) == 1 then return DRAWN, 1 end
    return FRONT, 0
  end
  local score = redis.call('ZSCORE', K_RESERVED, m)
  if score then
    -- Rate mode: the rate window decides (the operator's draws aside); a drawn visitor it holds
    -- back keeps its draw, renewed to a full claim deadline, and is collected on a later poll.
    if not string.find(score, '%.5$') and not window_room() then
      redis.call('ZADD', K_RESERVED, 'XX', fmt(NOW + RESERVATION_MS), m)
      return FRONT, 0
    end
    collect(ticket, waited)
    window_take()
    return DRAWN, 0
  end
  return nil, 0
end
-- Drawn by this run's own step: its reservation is the one just written.
local function settle_drawn()
  if capacity then
    if take_slot(ticket, tail, cursor, paused, max_active, max_new, waited) == 1 then return DRAWN, 1 end
    return FRONT, 0
  end
  -- Drawn by the step (never the operator's): the rate window decides; held back, its fresh
  -- reservation waits for a later poll.
  if not window_room() then return FRONT, 0 end
  collect(ticket, waited)
  window_take()
  return DRAWN, 0
end
local outcome, claimed = nil, 0
if RANDOM then
  expire()
  -- A ticket still in the draw (the common poll) holds no reservation or slot (a draw takes it out
  -- of the draw for good): its presence is renewed first, in one command when the score changes
  -- (ZADD XX CH answers 1), else a ZSCORE tells a member polled at this very ms from none.
  local present = redis.call('ZADD', K_WAITING, 'XX', 'CH', fmt(NOW), m) == 1 or redis.call('ZSCORE', K_WAITING, m)
  if present then
    cursor = admission_step(tail, cursor, paused, max_active, max_new)
    if DRAWN_NOW[m] then outcome, claimed = settle_drawn() else outcome = WAITING end
  else
    outcome, claimed = settle()
    cursor = admission_step(tail, cursor, paused, max_active, max_new)
    if not outcome then outcome = UNKNOWN end
  end
else
  cursor = admission_step(tail, cursor, paused, max_active, max_new)
  if capacity then claimed = take_slot(ticket, tail, cursor, paused, max_active, max_new, waited) end
  if claimed == 1 then
    outcome = DRAWN
  elseif ticket <= cursor and ticket <= tail then
    outcome = capacity and FRONT or DRAWN
  elseif ticket <= tail then
    outcome = WAITING
  else
    outcome = UNKNOWN
  end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
state[__STATE_LENGTH__ + 1] = outcome
state[__STATE_LENGTH__ + 2] = claimed
flush_ctl()
return state
