#!lua flags=allow-key-locking
--- Create a VIP code unless its key exists (in any state, even used up or expired): `left` = uses,
--- `exp` = expiry when there is one, and the TTL documented in the header. ARGV now_ms, uses
--- (1..VIP_MAX_USES), expires_at_ms ('' = none, else > now). Returns {created}.
-- wr create_vip: KEYS vip; ARGV now_ms, uses, expires_at_ms ('' = none); returns {created}
-- #include vip_prelude

local uses = arg_int(2, 1, __VIP_MAX_USES__)
local exp = nil
if ARGV[3] ~= '' then exp = arg_int(3, NOW + 1, 9007199254740991) end
if redis.call('EXISTS', K_VIP) == 1 then return {0} end
if exp then
  redis.call('HSET', K_VIP, 'left', fmt(uses), 'exp', fmt(exp))
  redis.call('PEXPIRE', K_VIP, fmt(exp - NOW + __VIP_KEEP_EXPIRED_MS__))
else
  redis.call('HSET', K_VIP, 'left', fmt(uses))
  redis.call('PEXPIRE', K_VIP, fmt(__VIP_TTL_MS__))
end
return {1}
