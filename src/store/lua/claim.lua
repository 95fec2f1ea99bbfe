#!lua flags=allow-key-locking
--- Capacity mode: the ticket takes its slot (see take_slot; random: only through its live
--- reservation), then admission runs. Rate mode, FIFO: lapsed calls are replaced first (no period
--- step), then claimed when the cursor has passed the ticket, its arrival counted once (see Claims
--- in the header); random: when the ticket holds a live reservation (it is not collected: that is
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
  -- The claim takes the call's reservation out, so it never lapses and is never handed on. A
  -- late holder (its call lapsed and was handed on) is let in all the same: its turn came. The
  -- figures count calls (see called_counts), so a claim writes nothing else; lapsed calls are the
  -- poll's to hand on.
  if ticket <= cursor then
    claimed = 1
    redis.call('ZREM', K_RESERVED, fmt(ticket))
  end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
state[14] = claimed
flush_ctl()
return state
