#!lua flags=allow-key-locking
--- Append one entry to the queue's audit trail (who changed what), newest first: the list keeps
--- the newest __AUDIT_MAX_ENTRIES__ entries and lives __AUDIT_KEEP_MS__ ms past its last change.
--- Not a key of the queue's policy scripts: a reset leaves it, and no visitor's call touches it.
--- A run of entries with one merge tag (the origin's admits of one minute) is one entry: the newest
--- of the run replaces the head, with #SUM# and #CALLS# in it standing for the run's added counts
--- and its length (kept in the merge key, `<tag> TAB <sum> TAB <calls>`); an entry without a tag
--- ends the run. So an origin that admits every second takes one entry a minute, not sixty.
--- ARGV entry (1 to __AUDIT_ENTRY_MAX_BYTES__ bytes, opaque to the store), tag ('' = none), add
--- (a whole number, what the entry adds to the run's sum). Returns {entries kept (0 when merged), merged 0|1}.
-- wr audit_append: KEYS audit, merge; ARGV entry, tag, add; returns {length, merged}
if #KEYS ~= 2 then error('wr: audit_append takes two keys') end
local K_AUDIT, K_MERGE = KEYS[1], KEYS[2]
local entry, tag, add = ARGV[1], ARGV[2], tonumber(ARGV[3])
if type(entry) ~= 'string' or #entry < 1 or #entry > __AUDIT_ENTRY_MAX_BYTES__ then
  error('wr: an audit entry is 1 to ' .. __AUDIT_ENTRY_MAX_BYTES__ .. ' bytes')
end
if type(tag) ~= 'string' or #tag > 64 or string.find(tag, '\t', 1, true) then error('wr: an audit merge tag is 0 to 64 bytes, no tab') end
if not add or add < 0 or add ~= math.floor(add) or add > 9007199254740991 then error('wr: an audit entry adds a whole number') end
if tag == '' then
  local length = redis.call('LPUSH', K_AUDIT, entry)
  redis.call('DEL', K_MERGE)
  if length > __AUDIT_MAX_ENTRIES__ then
    redis.call('LTRIM', K_AUDIT, 0, __AUDIT_MAX_ENTRIES__ - 1)
    length = __AUDIT_MAX_ENTRIES__
  end
  redis.call('PEXPIRE', K_AUDIT, __AUDIT_KEEP_MS__)
  return {length, 0}
end
local sum, calls, merged = add, 1, 0
local prev = redis.call('GET', K_MERGE)
if prev then
  local ptag, psum, pcalls = string.match(prev, '^(.*)\t(%d+)\t(%d+)$')
  if ptag == tag then
    sum, calls, merged = tonumber(psum) + add, tonumber(pcalls) + 1, 1
  end
end
local text = string.gsub(string.gsub(entry, '#SUM#', string.format('%d', sum)), '#CALLS#', string.format('%d', calls))
local length = 0
if merged == 1 then
  -- The run's entry is the head: any other entry since would have ended the run. Should the list
  -- be gone meanwhile (a flush), the entry starts a list again.
  local set = redis.pcall('LSET', K_AUDIT, 0, text)
  if type(set) == 'table' and set.err then merged = 0 end
end
if merged == 0 then
  length = redis.call('LPUSH', K_AUDIT, text)
  if length > __AUDIT_MAX_ENTRIES__ then
    redis.call('LTRIM', K_AUDIT, 0, __AUDIT_MAX_ENTRIES__ - 1)
    length = __AUDIT_MAX_ENTRIES__
  end
end
redis.call('SET', K_MERGE, tag .. '\t' .. string.format('%d', sum) .. '\t' .. string.format('%d', calls), 'PX', __AUDIT_KEEP_MS__)
redis.call('PEXPIRE', K_AUDIT, __AUDIT_KEEP_MS__)
return {length, merged}
