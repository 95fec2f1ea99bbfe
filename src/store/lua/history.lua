#!lua flags=allow-key-locking
--- The per-minute history of the last hour, oldest first, writing nothing: the members (strings, see
--- the header) whose minute is > now - HISTORY_MS. KEYS history; ARGV now_ms.
-- wr history: KEYS history; ARGV now_ms; returns {member...}
local K_HISTORY = KEYS[1]
local function fmt(n) return string.format('%.0f', n) end
local NOW = tonumber(ARGV[1])
if not NOW or NOW ~= math.floor(NOW) or NOW < 0 or NOW > 9007199254740991 then
  error('wr: ARGV[1] must be an integer from 0 to 9007199254740991')
end
return redis.call('ZRANGEBYSCORE', K_HISTORY, '(' .. fmt(NOW - __HISTORY_MS__), '+inf')
