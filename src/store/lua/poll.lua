#!lua flags=allow-key-locking
--- Run admission (capacity: expire and call or draw into free room; rate: the period step). ARGV 12: adaptive admission's settings and the POP's report ('' = none; see controller). Returns the state.
-- wr poll: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, adaptive; returns {state...}
-- #include policy_header
defer_ctl()
ac_take(12)
-- #include read_queue

prologue(tail)
cursor = admission_step(tail, cursor, paused, max_active, max_new)
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
flush_ctl()
return state
