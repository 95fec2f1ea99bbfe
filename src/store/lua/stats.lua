#!lua flags=allow-key-locking
--- Read the figures, writing nothing. Returns the state, then reserved (live reservations), and the
--- sum (ms) and count of the waits recorded in the last 300 s.
-- wr stats: KEYS tail, active, reserved, admits, waits, ctl, waiting, history; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms; returns {state..., reserved, wait_sum_ms, wait_count}
-- #include policy_header

GEN_READ_ONLY = true
-- #include read_queue

local state = read_state(tail, cursor, paused, max_active, max_new)
state[14] = count_after(K_RESERVED, NOW)
local sum, n = 0, 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', K_WAITS, '(' .. fmt(NOW - KEEP_MS), '+inf')) do
  local waited = tonumber(string.match(m, ':(%d+)$'))
  if waited then
    sum = sum + waited
    n = n + 1
  end
end
state[15] = sum
state[16] = n
return state
