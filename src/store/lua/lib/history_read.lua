--- The last hour's history points from the record's slots of its minutes (HISTORY_FIELDS, see
--- record_history), oldest first: the points whose minute is > now - HISTORY_MS, recorded since
--- the last reset (their epoch is the current one), read with one HMGET (or given as `values`, in
--- the order of HISTORY_FIELDS, with the epoch, when the caller read them with its own).

local function read_history(key, fields, now, values, epoch)
  if not values then
    values = redis.call('HMGET', key, 'epoch', unpack(fields))
    epoch = table.remove(values, 1)
  end
  epoch = tonumber(epoch) or 0
  local points, minutes = {}, {}
  for i = 1, #fields do
    local m = values[i]
    local minute, at = nil, nil
    if m then minute, at = string.match(m, '^(%d+):%d+:%d+:%d+:%d+:%d+:?(%d*)') end
    minute = tonumber(minute)
    if minute and minute > now - __HISTORY_MS__ and (tonumber(at) or 0) == epoch then
      points[#points + 1] = m
      minutes[m] = minute
    end
  end
  table.sort(points, function(a, b) return minutes[a] < minutes[b] end)
  return points
end
