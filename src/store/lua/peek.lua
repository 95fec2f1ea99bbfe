#!lua flags=allow-key-locking
--- Read tail and cursor, writing nothing (a script rather than MGET so the store needs nothing from
--- the client but EVALSHA/EVAL). KEYS: tail, ctl (the cursor is its field). Returns {tail, cursor}.
-- wr peek: KEYS tail, ctl; returns {tail, cursor}
-- #include read_int

local cursor = redis.call('HGET', KEYS[2], 'cursor')
if cursor and not tonumber(cursor) then error('wr: field cursor of ' .. KEYS[2] .. ' does not hold a number') end
return {read_int(KEYS[1]) or 0, tonumber(cursor) or 0}
