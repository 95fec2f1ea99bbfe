#!lua flags=allow-key-locking
--- Create VIP codes, one per key (a batch: up to __VIP_MAX_BATCH__ keys, so one call makes all of
--- an operator's request), each unless its key exists (in any state, even used up or expired):
--- `left` = uses, `exp` = expiry when there is one, and the TTL documented in the header. ARGV
--- now_ms, uses (1..VIP_MAX_USES), expires_at_ms ('' = none, else > now). Returns {created...},
--- one flag per key in order.
-- wr create_vip: KEYS vip...; ARGV now_ms, uses, expires_at_ms ('' = none); returns {created...}
-- #include vip_prelude

local uses = arg_int(2, 1, __VIP_MAX_USES__)
local exp = nil
if ARGV[3] ~= '' then exp = arg_int(3, NOW + 1, 9007199254740991) end
if #KEYS < 1 or #KEYS > __VIP_MAX_BATCH__ then error('wr: create_vip takes 1 to ' .. __VIP_MAX_BATCH__ .. ' keys') end
local created = {}
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then
    created[i] = 0
  elseif exp then
    redis.call('HSET', key, 'left', fmt(uses), 'exp', fmt(exp))
    redis.call('PEXPIRE', key, fmt(exp - NOW + __VIP_KEEP_EXPIRED_MS__))
    created[i] = 1
  else
    redis.call('HSET', key, 'left', fmt(uses))
    redis.call('PEXPIRE', key, fmt(__VIP_TTL_MS__))
    created[i] = 1
  end
end
return created
