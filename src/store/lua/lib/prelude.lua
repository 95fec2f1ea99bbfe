--- Every key bound once from KEYS (the tail, the cursor, the period and the calls of the last five
--- minutes are fields of ctl, read with the controls), and the policy from ARGV 1..11 (validated again: the TS side
--- checks first, this only keeps a foreign caller from corrupting state). '%.0f' prints any integer
--- below 2^53 exactly and never in exponent form.

local K_ACTIVE, K_RESERVED, K_ADMITS, K_WAITS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_CTL, K_WAITING = KEYS[5], KEYS[6]
local MINUTE_MS, KEEP_MS = __MINUTE_MS__, __KEEP_MS__
local CALL_BUCKET_MS, CALL_SLOTS = __CALL_BUCKET_MS__, __CALL_SLOTS__
local function fmt(n) return string.format('%.0f', n) end
local function arg_int(i, min, max)
  max = max or 9007199254740991
  local n = tonumber(ARGV[i])
  if not n or n ~= math.floor(n) or n < min or n > max then
    error('wr: ARGV[' .. i .. '] must be an integer from ' .. fmt(min) .. ' to ' .. fmt(max))
  end
  return n
end
local NOW = arg_int(1, 0)
local AUTO_COUNT = arg_int(2, 0)
local PERIOD_MS = arg_int(3, 0)
local CFG_MAX_ACTIVE = arg_int(4, 0)
local CFG_MAX_NEW = arg_int(5, 0)
local SESSION_MS = arg_int(6, 1)
local RESERVATION_MS = arg_int(7, 1)
local EVENT_START = arg_int(8, 0)
local SEED = arg_int(9, 0, __MAX_SEED__)
local RANDOM = arg_int(10, 0, 1) == 1
local PRESENCE_MS = arg_int(11, RANDOM and 1 or 0)
if AUTO_COUNT > 0 and PERIOD_MS < 1 then error('wr: ARGV[3] must be >= 1 when ARGV[2] > 0') end
-- Admission may run: no event, or its start has come.
local OPEN = EVENT_START == 0 or NOW >= EVENT_START
-- The controls the caller's POP last saw (see Restore in the header): the last argument, when it is
-- `rc:<switch>:<paused>` (switch '', 'open' or 'hold'; paused '0' or '1'). Applied only by the run
-- that finds the state absent (ensure_gen): a store that forgot them learns them again at once.
local RESTORE
if #ARGV > 11 and string.sub(ARGV[#ARGV], 1, 3) == 'rc:' then
  local sw, p = string.match(ARGV[#ARGV], '^rc:(%l*):([01])$')
  if not sw or (sw ~= '' and sw ~= 'open' and sw ~= 'hold') then error('wr: the last ARGV must be rc:<switch>:<0|1>') end
  RESTORE = {switch = sw, paused = p == '1'}
end

local function read_override(v, configured)
  if not v then return configured end
  local n = tonumber(v)
  if not n then error('wr: key ' .. K_CTL .. ' holds a non-numeric threshold') end
  return n
end

-- The ctl hash, read once per run with one HMGET of every field a script needs (CTL_FIELDS), so
-- the controls, the generation, the event's frozen pre-queue, the epoch and the history mark cost
-- one command together. A run that writes one of these fields updates CTL too (set_ctl).
local CTL_FIELDS = {'paused', 'switch', 'max_active', 'max_new_per_minute', 'admit_per_period', 'gen', 'restored', 'recover_until', 'ev_start', 'ev_size', 'ev_seed', 'epoch', 'hist', 'tail', 'cursor', 'period', 'seat', 'w1', 'w5', 'pres'}
-- Rate FIFO: the tickets called in each CALL_BUCKET_MS bucket of the last five minutes, one field
-- per bucket, reused round-robin (see calls_entry and called_counts).
local CALL_FIELDS = {}
for i = 0, CALL_SLOTS - 1 do
  CALL_FIELDS[#CALL_FIELDS + 1] = 'c' .. i
  CTL_FIELDS[#CTL_FIELDS + 1] = 'c' .. i
end
-- The record's slots of the last hour's minutes (see record_history): written, read with the
-- controls only by the admin panel's stats.
local HISTORY_FIELDS = {}
for i = __HISTORY_SLOTS__ - 1, 0, -1 do
  HISTORY_FIELDS[#HISTORY_FIELDS + 1] = 'h' .. fmt((math.floor(NOW / MINUTE_MS) - i) % __RECORD_SLOTS__)
end
local CTL
local function ctl()
  if not CTL then
    CTL = {}
    local v = redis.call('HMGET', K_CTL, unpack(CTL_FIELDS))
    for i, name in ipairs(CTL_FIELDS) do CTL[name] = v[i] or false end
  end
  return CTL
end
-- Writes to ctl, with CTL kept in step (a pair list: name, value, ...). A script that called
-- defer_ctl() collects them and writes them all with one HSET in flush_ctl(), which it calls before
-- every return: the step, the generation, the history mark and an admit's record cost one command.
local PENDING
-- Writes the book's fields when the run changed them (see book.lua), with the run's other fields.
local save_book
-- Writes the sale's totals when the run changed them (see totals.lua).
local save_totals
local function set_ctl(...)
  local pairs_ = {...}
  local c = ctl()
  for i = 1, #pairs_, 2 do c[pairs_[i]] = pairs_[i + 1] end
  if PENDING then
    for i = 1, #pairs_ do PENDING[#PENDING + 1] = pairs_[i] end
  else
    redis.call('HSET', K_CTL, unpack(pairs_))
  end
end
local function defer_ctl() PENDING = PENDING or {} end
local function flush_ctl()
  if save_book then save_book() end
  if save_totals then save_totals() end
  if PENDING and #PENDING > 0 then redis.call('HSET', K_CTL, unpack(PENDING)) end
  PENDING = nil
end
-- A numeric ctl field (cursor, period) as a number, nil when absent; anything else is a loud error.
local function ctl_int(name)
  local v = ctl()[name]
  if not v then return nil end
  local n = tonumber(v)
  if not n then error('wr: field ' .. name .. ' of ' .. K_CTL .. ' does not hold a number') end
  return n
end
local function del_ctl(...)
  redis.call('HDEL', K_CTL, ...)
  if CTL then
    for _, name in ipairs({...}) do CTL[name] = false end
  end
end
-- #include generation
-- #include controller

-- The emergency switch: '' (normal), 'open' (the room steps aside: joins take no ticket, and the
-- edge lets everyone through) or 'hold' (nobody new gets in: as paused, and neither an explicit
-- admit nor a claim lets anyone in). Set by read_controls.
local SWITCH = ''

-- Paused by the operator (ctl `paused`), as opposed to paused by the switch or a recovery window:
-- read_state reports the difference, so that a POP remembers only the operator's pause (Restore).
local OPERATOR_PAUSED = false

-- paused, effective max active, effective max new per minute; sets GEN (see GENERATION) and
-- SWITCH. Paused also while recovering (see RECOVERY) and while the switch holds everyone.
local function read_controls()
  local c = ctl()
  GEN = ensure_gen(c.gen)
  SWITCH = c.switch or ''
  OPERATOR_PAUSED = c.paused == '1'
  local max_active, max_new = read_override(c.max_active or nil, CFG_MAX_ACTIVE), read_override(c.max_new_per_minute or nil, CFG_MAX_NEW)
  -- Rate mode's period quota, set at runtime like the thresholds (ctl `admit_per_period`).
  AUTO_COUNT = read_override(c.admit_per_period or nil, AUTO_COUNT)
  local paused = OPERATOR_PAUSED or SWITCH == 'hold' or recovering(tonumber(c.recover_until) or 0, max_active, max_new)
  -- Adaptive admission: the learned (or pinned) value stands in for the knob of the mode.
  local frozen = paused or SWITCH ~= '' or not OPEN or GEN_READ_ONLY
  local waiting = (tonumber(c.tail) or 0) > (tonumber(c.cursor) or 0)
  if max_active > 0 then
    AC_KNOB, AC_VALUE = 'a', ac_value(max_active, frozen, waiting)
    max_active = AC_VALUE or max_active
  elseif max_new > 0 then
    AC_KNOB, AC_VALUE = 'n', ac_value(max_new, frozen, waiting)
    max_new = AC_VALUE or max_new
  elseif AUTO_COUNT > 0 then
    AC_KNOB, AC_VALUE = 'r', ac_value(AUTO_COUNT, frozen, waiting)
    AUTO_COUNT = AC_VALUE or AUTO_COUNT
  end
  return paused, max_active, max_new
end
