#!lua flags=allow-key-locking
--- The sale's record, writing nothing: the points (strings, see the header) of the minutes from
--- ARGV 2 (a minute start) for ARGV 3 minutes (1 .. __RECORD_READ_MINUTES__), whose minute is
--- > now - RECORD_MS, oldest first, resets included (each point carries its epoch). One HMGET a
--- day of minutes (DAY_FIELDS, well under Lua's unpack limit): seven for all the record keeps.
-- wr record: KEYS ctl; ARGV now_ms, from_ms, minutes; returns {point...}
local K_CTL = KEYS[1]
local function int(i, max)
  local n = tonumber(ARGV[i])
  if not n or n ~= math.floor(n) or n < 0 or n > max then
    error('wr: ARGV[' .. i .. '] must be an integer from 0 to ' .. string.format('%.0f', max))
  end
  return n
end
local NOW = int(1, 9007199254740991)
local FROM = int(2, 9007199254740991)
local MINUTES = int(3, __RECORD_READ_MINUTES__)
if FROM % __MINUTE_MS__ ~= 0 then error('wr: ARGV[2] must be a minute start') end
if MINUTES < 1 then error('wr: ARGV[3] must be at least 1') end
local DAY_FIELDS = 1440
local values = {}
for first = 0, MINUTES - 1, DAY_FIELDS do
  local fields = {}
  for i = first, math.min(first + DAY_FIELDS, MINUTES) - 1 do fields[#fields + 1] = 'h' .. string.format('%.0f', (FROM / __MINUTE_MS__ + i) % __RECORD_SLOTS__) end
  local got = redis.call('HMGET', K_CTL, unpack(fields))
  for i = 1, #fields do values[first + i] = got[i] end
end
local points = {}
for i = 1, MINUTES do
  local m = values[i]
  local minute = m and tonumber(string.match(m, '^(%d+):'))
  if minute and minute == FROM + (i - 1) * __MINUTE_MS__ and minute > NOW - __RECORD_MS__ then points[#points + 1] = m end
end
return points
