--- Capacity mode. expire: lapsed slots leave; lapsed reservations leave and take their admission
--- entry with them (the slot and the per-minute budget come back); history older than 300 s goes.
--- free_slots: room under both thresholds (math.huge for an unlimited one); under the per-minute
--- limit that is the limit - claims of the last 60 s - live reservations. advance: unless paused or
--- before the event's start, call the next tickets into the room (random: draw them), each with a
--- reservation and an admission entry at now. Random rate mode expires reservations the same way.

local function zrem_many(key, members)
  for i = 1, #members, 500 do
    redis.call('ZREM', key, unpack(members, i, math.min(i + 499, #members)))
  end
end
-- How many reservations this run's expire() removed: random rate mode redraws as many (see redraw).
local lapsed_calls = 0
-- keep_old: leave the trims of admits and waits to a later run (a join: the trims are bookkeeping,
-- the figures count by score).
local function expire(keep_old)
  local lapsed = redis.call('ZRANGEBYSCORE', K_RESERVED, '-inf', fmt(NOW))
  lapsed_calls = lapsed_calls + #lapsed
  if #lapsed > 0 then
    redis.call('ZREMRANGEBYSCORE', K_RESERVED, '-inf', fmt(NOW))
    zrem_many(K_ADMITS, lapsed)
  end
  redis.call('ZREMRANGEBYSCORE', K_ACTIVE, '-inf', fmt(NOW))
  if keep_old then return end
  trim(K_ADMITS)
  trim(K_WAITS)
end
local function free_slots(max_active, max_new)
  local free = math.huge
  if max_active > 0 then
    free = max_active - redis.call('ZCARD', K_ACTIVE) - redis.call('ZCARD', K_RESERVED)
  end
  if max_new > 0 then
    local minute = admitted_counts()
    free = math.min(free, max_new - minute)
  end
  return free
end
local function advance(tail, cursor, paused, max_active, max_new)
  if paused or not OPEN then return cursor end
  if RANDOM then return draw_tickets(cursor, free_slots(max_active, max_new)) end
  local n = math.min(tail - cursor, free_slots(max_active, max_new))
  if n < 1 then return cursor end
  call_tickets(cursor + 1, cursor + n, true)
  return cursor + n
end
-- Random rate mode: the draws that lapsed uncollected in this run are drawn again among the present
-- visitors, so an admission goes to someone who shows up (paused or before the start: dropped).
local function redraw(cursor, paused)
  local n = lapsed_calls
  lapsed_calls = 0
  if paused or not OPEN or n < 1 then return cursor end
  return draw_tickets(cursor, n)
end
local function admission_step(tail, cursor, paused, max_active, max_new)
  if max_active > 0 or max_new > 0 then
    expire()
    return advance(tail, cursor, paused, max_active, max_new)
  end
  if RANDOM then
    expire()
    cursor = redraw(cursor, paused)
  else
    cursor = replace_lapsed(tail, cursor, paused)
  end
  return auto_admit(tail, cursor, paused, nil)
end
-- A ticket takes its slot: renew a slot it holds, claim its live reservation (its admission entry is
-- moved to now, the arrival: the live reservation it was counted as becomes a claim counted from
-- now, so the figures do not move), or (FIFO, the event started, called, not paused, room under both
-- thresholds) take a slot directly with an admission of its own. Runs after expire(), so whatever is
-- stored is live.
local function take_slot(ticket, tail, cursor, paused, max_active, max_new, waited)
  local m = fmt(ticket)
  if redis.call('ZSCORE', K_ACTIVE, m) then
    redis.call('ZADD', K_ACTIVE, fmt(NOW + SESSION_MS), m)
    return 1
  end
  if redis.call('ZSCORE', K_RESERVED, m) then
    redis.call('ZREM', K_RESERVED, m)
    redis.call('ZADD', K_ADMITS, fmt(NOW), m)
  else
    if RANDOM or not OPEN or ticket > cursor or ticket > tail or paused or free_slots(max_active, max_new) < 1 then return 0 end
    local member = m .. '@' .. fmt(NOW)
    local k = 0
    while redis.call('ZSCORE', K_ADMITS, member) do
      k = k + 1
      member = m .. '@' .. fmt(NOW) .. '#' .. k
    end
    redis.call('ZADD', K_ADMITS, fmt(NOW), member)
  end
  redis.call('ZADD', K_ACTIVE, fmt(NOW + SESSION_MS), m)
  redis.call('ZADD', K_WAITS, fmt(NOW), m .. ':' .. fmt(waited))
  return 1
end
-- Random rate mode: the holder of a live reservation collects it. The reservation goes, its
-- admission entry is re-timed to now (the arrival) and the wait is recorded; the ticket left the draw
-- when it was drawn, so it is never admitted again.
local function collect(ticket, waited)
  local m = fmt(ticket)
  redis.call('ZREM', K_RESERVED, m)
  redis.call('ZADD', K_ADMITS, fmt(NOW), m)
  redis.call('ZADD', K_WAITS, fmt(NOW), m .. ':' .. fmt(waited))
end
-- FIFO capacity mode, a join with nobody waiting ahead (its ticket is the next to call): it walks in
-- when both thresholds leave room, straight to its slot (no reservation written and claimed in the
-- same run), with its arrival and its wait of 0. Counts what read_state would (every stored slot
-- and reservation is live after expire), so the run counts the figures once. Returns claimed (0/1)
-- and the figures {active, admitted_1m, admitted_5m} after it.
local function walk_in(ticket, max_active, max_new)
  expire(true)
  local slots = redis.call('ZCARD', K_ACTIVE) + redis.call('ZCARD', K_RESERVED)
  local minute, five = admitted_counts()
  local free = math.huge
  if max_active > 0 then free = max_active - slots end
  if max_new > 0 then free = math.min(free, max_new - minute) end
  if free < 1 then return 0, {slots, minute, five} end
  local m = fmt(ticket)
  redis.call('ZADD', K_ADMITS, fmt(NOW), m)
  redis.call('ZADD', K_ACTIVE, fmt(NOW + SESSION_MS), m)
  redis.call('ZADD', K_WAITS, fmt(NOW), m .. ':0')
  set_ctl('cursor', m)
  return 1, {slots + 1, minute + 1, five + 1}
end
