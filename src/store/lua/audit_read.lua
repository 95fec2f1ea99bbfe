#!lua flags=allow-key-locking
--- Read the newest entries of the queue's audit trail, newest first, writing nothing. ARGV limit
--- (1 to __AUDIT_MAX_ENTRIES__). Returns the entries as stored.
-- wr audit_read: KEYS audit; ARGV limit; returns {entry...}
if #KEYS ~= 1 then error('wr: audit_read takes one key') end
local K_AUDIT = KEYS[1]
local limit = tonumber(ARGV[1])
if not limit or limit ~= math.floor(limit) or limit < 1 or limit > __AUDIT_MAX_ENTRIES__ then
  error('wr: audit_read takes a limit of 1 to ' .. __AUDIT_MAX_ENTRIES__)
end
return redis.call('LRANGE', K_AUDIT, 0, limit - 1)
