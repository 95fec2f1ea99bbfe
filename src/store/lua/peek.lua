#!lua flags=allow-key-locking
--- Read tail and cursor, writing nothing (a script rather than HMGET so the store needs nothing from
--- the client but EVALSHA/EVAL). KEYS: ctl (both are its fields). Returns {tail, cursor}.
-- wr peek: KEYS ctl; returns {tail, cursor}
local v = redis.call('HMGET', KEYS[1], 'tail', 'cursor')
for i = 1, 2 do
  if v[i] and not tonumber(v[i]) then error('wr: a field of ' .. KEYS[1] .. ' does not hold a number') end
end
return {tonumber(v[1]) or 0, tonumber(v[2]) or 0}
