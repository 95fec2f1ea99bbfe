#!lua flags=allow-key-locking
--- Capacity mode: the ticket takes its slot (see take_slot; random: only through its live
--- reservation), then admission runs. Rate mode, FIFO: claimed when the cursor has passed the
--- ticket and the rate window has room (see Rate window in the header; its holder otherwise claims
--- again on its next poll), counted once; random: when the ticket holds a live reservation (it is not collected: that is
--- draw's job). ARGV 12 ticket, 13 waited ms, 14 the token's generation ('' = none; one of another
--- generation is refused, see Generations). Returns the state, then claimed (0/1).
-- wr claim: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, ticket, waited_ms, generation; returns {state..., claimed}
-- #include policy_header
defer_ctl()
-- #include read_queue

local ticket = arg_int(12, 1)
local waited = arg_int(13, 0)
-- #include refuse_foreign(0)
prologue(tail)
local claimed = 0
if SWITCH == 'hold' then
  -- Switched to hold: a called ticket waits with the rest.
  claimed = 0
elseif capacity then
  expire()
  claimed = take_slot(ticket, tail, cursor, paused, max_active, max_new, waited)
  cursor = advance(tail, cursor, paused, max_active, max_new)
elseif RANDOM then
  local score = redis.call('ZSCORE', K_RESERVED, fmt(ticket))
  if score and tonumber(score) > NOW then claimed = 1 end
else
  -- Called: let in if the rate window has room (see rate_gate), counted there and in the claimed
  -- bitmap, written with the run's one HSET. A late holder (its call lapsed and was handed on) is
  -- let in the same way: its turn came, and the window keeps it within the rate. Otherwise it
  -- stays called and claims again on its next poll.
  if ticket <= cursor then claimed = rate_gate(ticket, waited) end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
state[__STATE_LENGTH__ + 1] = claimed
flush_ctl()
return state
