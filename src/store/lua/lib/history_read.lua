--- The last hour's history points from ctl's minute slots (`h0`..`h59`, see record_history),
--- oldest first: the slots whose minute is > now - HISTORY_MS, read with one HMGET (or given as
--- `values`, in slot order, when the caller read them with its own).

local function read_history(key, now, values)
  if not values then
    local fields = {}
    for i = 0, __HISTORY_SLOTS__ - 1 do fields[#fields + 1] = 'h' .. i end
    values = redis.call('HMGET', key, unpack(fields))
  end
  local points, minutes = {}, {}
  for i = 1, __HISTORY_SLOTS__ do
    local m = values[i]
    local minute = m and tonumber(string.match(m, '^(%d+):'))
    if minute and minute > now - __HISTORY_MS__ then
      points[#points + 1] = m
      minutes[m] = minute
    end
  end
  table.sort(points, function(a, b) return minutes[a] < minutes[b] end)
  return points
end
