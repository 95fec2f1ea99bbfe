#!lua flags=allow-key-locking
--- Change runtime controls, then run admission with them (resuming or raising a threshold calls
--- tickets at once). ARGV 12 paused ('' keep, '0', '1'), 13 max active and 14 max new per minute
--- ('' keep, 'del' back to configured, integer >= 0 override), 15 the emergency switch ('' keep,
--- 'normal', 'open', 'hold'; see SWITCH), 16 adaptive admission ('' keep, 'on', 'off', 'config' back to
--- the configuration), 17 its pin ('' keep, 'del' release, integer >= 1 pin), 18 rate mode's period
--- quota ('' keep, 'del' back to configured, integer >= 0 override). Returns the state, then the
--- period quota in effect.
-- wr control: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, paused, max_active, max_new_per_minute, switch, adaptive, pin, admit_per_period; returns {state..., admit_per_period}
-- #include policy_header
defer_ctl()

local function check_threshold(i)
  local v = ARGV[i]
  if v ~= '' and v ~= 'del' then arg_int(i, 0) end
  return v
end
local p = ARGV[12]
if p ~= '' and p ~= '0' and p ~= '1' then error('wr: ARGV[12] must be empty, 0 or 1') end
local changes = {{'max_active', check_threshold(13)}, {'max_new_per_minute', check_threshold(14)}, {'admit_per_period', ARGV[18] and check_threshold(18) or ''}}
local sw = ARGV[15] or ''
if sw ~= '' and sw ~= 'normal' and sw ~= 'open' and sw ~= 'hold' then error('wr: ARGV[15] must be empty, normal, open or hold') end
prologue(ctl_int('tail') or 0)
-- A field already absent is not deleted again (an HDEL is billed like any command).
if p == '1' then set_ctl('paused', '1') elseif p == '0' and ctl().paused then del_ctl('paused') end
if sw ~= '' and sw ~= (ctl().switch or 'normal') then total_add(3, 1) end
if sw == 'normal' then
  if ctl().switch then del_ctl('switch') end
elseif sw ~= '' then
  set_ctl('switch', sw)
end
local ac, pin = ARGV[16] or '', ARGV[17] or ''
if ac ~= '' and ac ~= 'on' and ac ~= 'off' and ac ~= 'config' then error('wr: ARGV[16] must be empty, on, off or config') end
if pin ~= '' and pin ~= 'del' then arg_int(17, 1) end
if ac == 'on' then set_ctl('ac_on', '1') elseif ac == 'off' then set_ctl('ac_on', '0') elseif ac == 'config' and ctl().ac_on then del_ctl('ac_on') end
if pin == 'del' then ac_pin_at(nil) elseif pin ~= '' then ac_pin_at(tonumber(pin)) end
for _, c in ipairs(changes) do
  if c[2] == 'del' then
    if ctl()[c[1]] then del_ctl(c[1]) end
  elseif c[2] ~= '' then
    set_ctl(c[1], fmt(tonumber(c[2])))
  end
end
-- A threshold set by hand while the controller moves it pins it there; back to the configured value
-- releases the pin (see controller).
local s = ac_settings(ctl().ac_cfg)
if pin == '' and s and ac_enabled(ctl(), s) then
  local hand = changes[2][2]
  if read_override(ctl().max_active or nil, CFG_MAX_ACTIVE) > 0 or changes[1][2] ~= '' then hand = changes[1][2] end
  -- Rate mode (neither threshold in effect): the period quota is the knob.
  if read_override(ctl().max_active or nil, CFG_MAX_ACTIVE) == 0 and read_override(ctl().max_new_per_minute or nil, CFG_MAX_NEW) == 0 then hand = changes[3][2] end
  if hand == 'del' then ac_pin_at(nil) elseif hand ~= '' and tonumber(hand) > 0 then ac_pin_at(tonumber(hand)) end
end
-- #include read_queue

cursor = admission_step(tail, cursor, paused, max_active, max_new)
local state = read_state(tail, cursor, paused, max_active, max_new)
record_history(state)
flush_ctl()
state[#state + 1] = AUTO_COUNT
return state
