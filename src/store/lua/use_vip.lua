#!lua flags=allow-key-locking
--- Spend one use of a VIP code. Checked in this order: no key → unknown (1); now >= expiry → expired
--- (2); no use left → used up (3); else one use is taken (the key and its TTL stay, at 0 when it was
--- the last). ARGV now_ms. Returns {status, remaining}: status 0 with the uses left after this one,
--- or a refusal's status (VIP_REFUSALS) with 0.
-- wr use_vip: KEYS vip; ARGV now_ms; returns {status, remaining}
-- #include vip_prelude

local v = redis.call('HMGET', K_VIP, 'left', 'exp')
if not v[1] then return {1, 0} end
local left, exp = tonumber(v[1]), v[2] and tonumber(v[2])
if not left or (v[2] and not exp) then error('wr: key ' .. K_VIP .. ' is not a VIP code') end
if exp and NOW >= exp then return {2, 0} end
if left < 1 then return {3, 0} end
return {0, redis.call('HINCRBY', K_VIP, 'left', -1)}
