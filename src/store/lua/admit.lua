#!lua flags=allow-key-locking
--- The operator's or origin's explicit admission (0 before the event's start). FIFO: the cursor
--- moves by up to count, never past the tail; random: min(count, present) visitors are drawn.
--- Each ticket called gets a reservation (capacity mode and random: and an admission entry), even
--- beyond the thresholds (explicit admits are the operator's decision; automatic admission then
--- waits until the usage is back under them). Random rate mode first draws again for draws that
--- lapsed, not counted in `admitted`; rate FIFO leaves lapsed calls to the poll. Works while paused,
--- not while the switch holds everyone.
--- ARGV 12 count (>= 1; 0 with a key: a replay check that lets nobody in, and records the key with
--- 0 when it was not used), 13 the idempotency key ('' = none; see idempotent_slot). Returns the
--- state, then admitted, replayed (0/1) and the count the key was first used with.
-- wr admit: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, count, idempotency_key; returns {state..., admitted, replayed, asked}
-- #include policy_header
-- #include idempotent_slot
defer_ctl()
-- #include read_queue

local count = arg_int(12, IDEM_KEY ~= '' and 0 or 1)
-- #include idempotent_replay
prologue(tail)
if capacity or RANDOM then expire() end
local admitted = 0
-- A keyed count of 0 (a replay check) lets nobody in; switched to hold, nobody new gets in, an
-- explicit admit included.
if count == 0 or SWITCH == 'hold' then
  admitted = 0
elseif OPEN and RANDOM then
  if not capacity then cursor = redraw(cursor, paused) end
  local before = cursor
  OPERATOR_DRAW = true
  cursor = draw_tickets(cursor, count)
  OPERATOR_DRAW = false
  admitted = cursor - before
  if capacity and admitted > 0 then mark_uncounted() end
elseif OPEN then
  -- count real visitors: holes are passed over (see holes.lua), never past the tail.
  local target, passed, spans = pass_holes(cursor, count, tail)
  if target > cursor then
    call_tickets(cursor + 1, target, capacity, spans, passed)
    if capacity then mark_uncounted() end
    admitted = target - cursor - passed
    cursor = target
  end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
state[__STATE_LENGTH__ + 1] = admitted
-- #include idempotent_record
flush_ctl()
return state
