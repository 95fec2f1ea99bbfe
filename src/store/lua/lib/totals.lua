--- The sale's running totals, ctl `rt` (see the header of scripts.ts): admitted, lapsed calls,
--- switch changes, the waits of those let in (sum, max, and a histogram over __WAIT_BOUNDS__ ms,
--- then above the last), tickets refused at the edge by reason and store errors (carried in by a
--- join, see take_tally). Read with the controls; written by save_totals in the run's one HSET, and
--- only by runs that write ctl anyway (an admission, a lapse, a join's ticket, a minute's point), so
--- the totals cost no command.

CTL_FIELDS[#CTL_FIELDS + 1] = 'rt'
CTL_FIELDS[#CTL_FIELDS + 1] = 'rf'
CTL_FIELDS[#CTL_FIELDS + 1] = 'ru'
local WAIT_BOUNDS = {__WAIT_BOUNDS__}
-- admitted, lapsed, switches, wait sum, wait max (1..5), the buckets (6..5 + #WAIT_BOUNDS + 1), the
-- refusals by reason and the store errors (the last __TALLY_LENGTH__).
local TOT_LENGTH = __TOTALS_LENGTH__
local TOT
local TOT_DIRTY = false
local function parse_totals(v)
  local t = {}
  for n in string.gmatch(v or '', '[^:]+') do t[#t + 1] = tonumber(n) end
  if #t == 0 then
    for i = 1, TOT_LENGTH do t[i] = 0 end
  elseif #t ~= TOT_LENGTH then
    error('wr: field rt of ' .. K_CTL .. ' does not hold the totals')
  end
  return t
end
local function totals()
  if not TOT then TOT = parse_totals(ctl().rt or nil) end
  return TOT
end
local function count_wait(t, waited)
  t[1] = t[1] + 1
  t[4] = t[4] + waited
  if waited > t[5] then t[5] = waited end
  local b = #WAIT_BOUNDS + 1
  for i, bound in ipairs(WAIT_BOUNDS) do
    if waited <= bound then
      b = i
      break
    end
  end
  t[5 + b] = t[5 + b] + 1
end
-- A visitor let in now after waiting `waited` ms.
local function total_admit(waited)
  count_wait(totals(), waited)
  TOT_DIRTY = true
end
local function total_add(i, n)
  if n == 0 then return end
  local t = totals()
  t[i] = t[i] + n
  TOT_DIRTY = true
end
local function format_totals(t)
  local out = {}
  for i, v in ipairs(t) do out[i] = fmt(v) end
  return table.concat(out, ':')
end
save_totals = function()
  if not TOT_DIRTY then return end
  TOT_DIRTY = false
  set_ctl('rt', format_totals(TOT))
end
-- An arrival not counted yet: one marked `w` (a walk-in, a collected draw) was counted by the run
-- that wrote it.
local function unfolded_wait(m)
  if string.match(m, '^%d+w:') then return nil end
  return tonumber(string.match(m, ':(%d+)$'))
end
-- A capacity-mode run that wrote reservations (it writes ctl anyway): their claims will add
-- arrivals no run counts, so the minute's points fold again, whatever the mode then (ctl `ru`, see
-- record_history).
local function mark_uncounted()
  if ctl().ru ~= '1' then set_ctl('ru', '1') end
end
-- The arrivals (with their waits) recorded from `from` up to, not including, `to` ms and not
-- counted yet, added to `t`; one ZRANGEBYSCORE (see record_history).
local function fold_arrivals(t, from, to)
  local members = redis.call('ZRANGEBYSCORE', K_ACTIVE, '(' .. fmt(-1 - to), fmt(-1 - from))
  for _, m in ipairs(members) do
    local waited = unfolded_wait(m)
    if waited then count_wait(t, waited) end
  end
end
-- A join's ARGV i: the refusals and store errors its instance counted since its last join that
-- took a ticket (`rt:<n>:...`, __TALLY_LENGTH__ counts; '' = none), added to the totals.
local function take_tally(i)
  local arg = ARGV[i] or ''
  if arg == '' then return end
  local counts = {}
  for n in string.gmatch(string.sub(arg, 4), '[^:]+') do counts[#counts + 1] = tonumber(n) end
  if string.sub(arg, 1, 3) ~= 'rt:' or #counts ~= __TALLY_LENGTH__ then error('wr: ARGV[' .. i .. '] must be rt: and ' .. __TALLY_LENGTH__ .. ' counts') end
  for k, n in ipairs(counts) do
    if n ~= math.floor(n) or n < 0 or n > 1000000000 then error('wr: ARGV[' .. i .. '] counts must be integers from 0 to 1000000000') end
    total_add(TOT_LENGTH - __TALLY_LENGTH__ + k, n)
  end
end
