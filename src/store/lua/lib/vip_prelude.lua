--- The VIP scripts' one key and their time, from KEYS[1] and ARGV 1 (validated again, as in PRELUDE).

local K_VIP = KEYS[1]
local function fmt(n) return string.format('%.0f', n) end
local function arg_int(i, min, max)
  local n = tonumber(ARGV[i])
  if not n or n ~= math.floor(n) or n < min or n > max then
    error('wr: ARGV[' .. i .. '] must be an integer from ' .. fmt(min) .. ' to ' .. fmt(max))
  end
  return n
end
local NOW = arg_int(1, 0, 9007199254740991)
