#!lua flags=allow-key-locking
--- Capacity mode: the ticket takes its slot (see take_slot; random: only through its live
--- reservation), then admission runs. Rate mode, FIFO: lapsed calls are replaced first (no period
--- step), then claimed when the cursor has passed the ticket, its arrival counted once (see Claims
--- in the header); random: when the ticket holds a live reservation (it is not collected: that is
--- draw's job). ARGV 12 ticket, 13 waited ms, 14 the token's generation ('' = none; one of another
--- generation is refused, see Generations). Returns the state, then claimed (0/1).
-- wr claim: KEYS tail, active, reserved, admits, waits, ctl, waiting, history; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, ticket, waited_ms, generation; returns {state..., claimed}
-- #include policy_header
-- #include read_queue

local ticket = arg_int(12, 1)
local waited = arg_int(13, 0)
-- #include refuse_foreign(0)
prologue(tail)
local claimed = 0
if capacity then
  expire()
  claimed = take_slot(ticket, tail, cursor, paused, max_active, max_new, waited)
  cursor = advance(tail, cursor, paused, max_active, max_new)
elseif RANDOM then
  local score = redis.call('ZSCORE', K_RESERVED, fmt(ticket))
  if score and tonumber(score) > NOW then claimed = 1 end
else
  cursor = replace_lapsed(tail, cursor, paused)
  if ticket <= cursor then
    claimed = 1
    -- The arrival is counted once per ticket: a live reservation becomes a claim; a ticket with no
    -- entry (its reservation lapsed, it was replaced, and the holder came back late) is admitted
    -- and counted now; one already counted (a second tab, a walk-in) is not counted again.
    local m = fmt(ticket)
    if redis.call('ZREM', K_RESERVED, m) == 1 or not redis.call('ZSCORE', K_ADMITS, m) then
      redis.call('ZADD', K_ADMITS, fmt(NOW), m)
    end
  end
end
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
state[14] = claimed
return state
