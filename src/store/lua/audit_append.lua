#!lua flags=allow-key-locking
--- Append one entry to the queue's audit trail (who changed what), newest first: the list keeps
--- the newest __AUDIT_MAX_ENTRIES__ entries and lives __AUDIT_KEEP_MS__ ms past its last change.
--- Not a key of the queue's policy scripts: a reset leaves it, and no visitor's call touches it.
--- ARGV entry (1 to __AUDIT_ENTRY_MAX_BYTES__ bytes, opaque to the store). Returns the length kept.
-- wr audit_append: KEYS audit; ARGV entry; returns length
if #KEYS ~= 1 then error('wr: audit_append takes one key') end
local K_AUDIT = KEYS[1]
local entry = ARGV[1]
if type(entry) ~= 'string' or #entry < 1 or #entry > __AUDIT_ENTRY_MAX_BYTES__ then
  error('wr: an audit entry is 1 to ' .. __AUDIT_ENTRY_MAX_BYTES__ .. ' bytes')
end
local length = redis.call('LPUSH', K_AUDIT, entry)
if length > __AUDIT_MAX_ENTRIES__ then
  redis.call('LTRIM', K_AUDIT, 0, __AUDIT_MAX_ENTRIES__ - 1)
  length = __AUDIT_MAX_ENTRIES__
end
redis.call('PEXPIRE', K_AUDIT, __AUDIT_KEEP_MS__)
return length
