--- GET as a number; nil when the key is absent. A key holding something else is a loud error rather
--- than a silent 0, since it means something other than this store wrote it.

local function read_int(key)
  local v = redis.call('GET', key)
  if not v then return nil end
  local n = tonumber(v)
  if not n then error('wr: key ' .. key .. ' does not hold a number') end
  return n
end
