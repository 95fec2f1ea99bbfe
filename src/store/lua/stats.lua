#!lua flags=allow-key-locking
--- Read the figures, writing nothing. Returns the state, then reserved (live reservations), and the
--- sum (ms) and count of the waits recorded in the last 300 s, the adaptive controller's fields
--- (one string), the lost-state mark (`restored`, one string), the period quota in effect, the
--- sale's totals (one string, as ctl `rt`, with the arrivals since the last point added; see
--- record_history); with ARGV 12 '1', the history members.
-- wr stats: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, with_history; returns {state..., reserved, wait_sum_ms, wait_count, adaptive, restored, admit_per_period, totals, history member...}
-- #include policy_header
-- #include history_read

GEN_READ_ONLY = true
-- ARGV 12 '1': the history's minute slots are read with the controls, in the one HMGET.
local WITH_HISTORY = ARGV[12] == '1'
if WITH_HISTORY then
  for _, f in ipairs(HISTORY_FIELDS) do CTL_FIELDS[#CTL_FIELDS + 1] = f end
end
-- #include read_queue

local state = read_state(tail, cursor, paused, max_active, max_new)
-- Rate FIFO writes no reservations: its calls neither claimed nor lapsed yet.
if capacity or RANDOM then state[__STATE_LENGTH__ + 1] = count_after(K_RESERVED, NOW) else state[__STATE_LENGTH__ + 1] = outstanding_calls(tail, cursor) end
local sum, n = 0, 0
-- Waits are recorded with each arrival (where a slot is claimed or a draw collected, see Book):
-- rate FIFO has none to read.
local waits = {}
-- The arrivals since the last point (from ctl `rf`) are not in the totals yet: added to the copy read.
local t = parse_totals(ctl().rt or nil)
local folded = tonumber(ctl().rf) or 0
if capacity or RANDOM then waits = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', -1, 'WITHSCORES') end
for i = 1, #waits, 2 do
  local waited = tonumber(string.match(waits[i], ':(%d+)$'))
  local at = -1 - tonumber(waits[i + 1])
  if waited and at > NOW - KEEP_MS then
    sum = sum + waited
    n = n + 1
  end
  if waited and at >= folded and unfolded_wait(waits[i]) then count_wait(t, waited) end
end
state[__STATE_LENGTH__ + 2] = sum
state[__STATE_LENGTH__ + 3] = n
-- The adaptive controller as read_controls found it (see parseAdaptiveStatus).
local c = ctl()
state[__STATE_LENGTH__ + 4] = table.concat({AC_KNOB, AC_VALUE and fmt(AC_VALUE) or '', c.ac_cfg or '', c.ac_on or '', c.ac_pin or '', c.ac_sig or '', c.ac_log or ''}, '|')
-- When this generation began from a lost state that a POP knew: `<ms>:<what was restored>` ('' = never).
state[__STATE_LENGTH__ + 5] = c.restored or ''
-- Rate mode's period quota in effect (a runtime override, else the configured one; see read_controls).
state[__STATE_LENGTH__ + 6] = AUTO_COUNT
state[__STATE_LENGTH__ + 7] = format_totals(t)
-- ARGV 12 '1': the last hour's history points follow, as the history script returns them (strings),
-- so the admin panel reads its figures and its chart in one run.
if WITH_HISTORY then
  local values = {}
  for i, f in ipairs(HISTORY_FIELDS) do values[i] = ctl()[f] end
  for _, m in ipairs(read_history(K_CTL, HISTORY_FIELDS, NOW, values, c.epoch)) do state[#state + 1] = m end
end
return state
