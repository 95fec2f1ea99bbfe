#!lua flags=allow-key-locking
--- Read tail and cursor, and ticket blocks' reported holes above the cursor, writing nothing (a
--- script rather than HMGET so the store needs nothing from the client but EVALSHA/EVAL). KEYS: ctl
--- (all are its fields). The holes are those of `bh` (see holes.lua) when it is of the stored epoch
--- and generation, as a state reports them ('' = none). Returns {tail, cursor, holes}.
-- wr peek: KEYS ctl; returns {tail, cursor, holes}
local v = redis.call('HMGET', KEYS[1], 'tail', 'cursor', 'bh', 'epoch', 'gen')
for i = 1, 2 do
  if v[i] and not tonumber(v[i]) then error('wr: a field of ' .. KEYS[1] .. ' does not hold a number') end
end
local cursor = tonumber(v[2]) or 0
local out = {}
local e, g, list = string.match(v[3] or '', '^(%d+):(%d+):(.*)$')
if e and tonumber(e) == (tonumber(v[4]) or 0) and tonumber(g) == tonumber(v[5]) then
  for a, b in string.gmatch(list, '(%d+)%-(%d+)') do
    a, b = tonumber(a), tonumber(b)
    if b > cursor then out[#out + 1] = string.format('%.0f-%.0f', math.max(a, cursor + 1), b) end
  end
end
return {tonumber(v[1]) or 0, cursor, table.concat(out, ',')}
