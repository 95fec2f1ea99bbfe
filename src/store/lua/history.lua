#!lua flags=allow-key-locking
--- The per-minute history of the last hour, oldest first, writing nothing: the points (strings, see
--- the header) whose minute is > now - HISTORY_MS, since the last reset. KEYS ctl; ARGV now_ms.
-- wr history: KEYS ctl; ARGV now_ms; returns {point...}
local K_CTL = KEYS[1]
local NOW = tonumber(ARGV[1])
if not NOW or NOW ~= math.floor(NOW) or NOW < 0 or NOW > 9007199254740991 then
  error('wr: ARGV[1] must be an integer from 0 to 9007199254740991')
end
local fields = {}
for i = __HISTORY_SLOTS__ - 1, 0, -1 do fields[#fields + 1] = 'h' .. string.format('%.0f', (math.floor(NOW / __MINUTE_MS__) - i) % __RECORD_SLOTS__) end
-- #include history_read

return read_history(K_CTL, fields, NOW)
