--- Capacity mode, over the book (see book.lua). expire: the book made ready (lapsed slots and
--- reservations leave once its lapse bound has come; the windows exact at now). free_slots: room
--- under both thresholds (math.huge for an unlimited one); under the per-minute limit that is the
--- limit - arrivals of the last 60 s - live reservations. advance: unless paused or before the
--- event's start, call the next tickets into the room (random: draw them), each with a reservation.
--- Random rate mode expires reservations the same way.

local function expire() book_ready() end
local function free_slots(max_active, max_new)
  local free = math.huge
  if max_active > 0 then free = max_active - BOOK.slots end
  if max_new > 0 then free = math.min(free, max_new - BOOK.w[1].count) end
  return free
end
local function call_into_room(tail, cursor, paused, max_active, max_new)
  if paused or not OPEN then return cursor end
  if RANDOM then return draw_tickets(cursor, free_slots(max_active, max_new)) end
  local free = free_slots(max_active, max_new)
  if free < 1 or cursor >= tail then return cursor end
  -- As many real tickets as there is room for: holes are passed over and take none (holes.lua).
  local target, passed, spans = pass_holes(cursor, free, tail)
  if target <= cursor then return cursor end
  call_tickets(cursor + 1, target, true, spans, passed)
  return target
end
local function advance(tail, cursor, paused, max_active, max_new)
  local moved = call_into_room(tail, cursor, paused, max_active, max_new)
  if moved > cursor then mark_uncounted() end
  return moved
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
    cursor = process_lapses(tail, cursor, paused)
  end
  return auto_admit(tail, cursor, paused)
end
-- A slot for m until now + session and its arrival at now, in one ZADD (see Book); `arrival`: the
-- arrival's member. Answers whether m held no slot before.
local function seat(m, arrival)
  local x = NOW + SESSION_MS
  book_expiry(ACTIVE_SET, x)
  return redis.call('ZADD', K_ACTIVE, fmt(x), m, fmt(arrival_score(NOW)), arrival) == 2
end
-- A ticket takes its slot: claim its live reservation (it becomes an arrival at now: the figures do
-- not move, see Book), renew a slot it holds, or (FIFO, the event started, called, not paused, room
-- under both thresholds) take a slot directly with an arrival of its own. Runs after expire(), so
-- whatever is stored is live.
local function take_slot(ticket, tail, cursor, paused, max_active, max_new, waited)
  local m = fmt(ticket)
  if redis.call('ZREM', K_RESERVED, m) == 1 then
    book_arrival(true)
    -- Held a slot as well (never by the rules above): one slot, not two.
    if not seat(m, m .. ':' .. fmt(waited)) then book_slots(-1) end
    return 1
  end
  if redis.call('ZSCORE', K_ACTIVE, m) then
    book_expiry(ACTIVE_SET, NOW + SESSION_MS)
    redis.call('ZADD', K_ACTIVE, fmt(NOW + SESSION_MS), m)
    return 1
  end
  if RANDOM or not OPEN or ticket > cursor or ticket > tail or paused or free_slots(max_active, max_new) < 1 then return 0 end
  local member = m .. '@' .. fmt(NOW)
  local k = 0
  while redis.call('ZSCORE', K_ACTIVE, member .. ':' .. fmt(waited)) do
    k = k + 1
    member = m .. '@' .. fmt(NOW) .. '#' .. k
  end
  seat(m, member .. ':' .. fmt(waited))
  book_slots(1)
  book_arrival(false)
  return 1
end
-- Random rate mode: the holder of a live reservation collects it. The reservation becomes its
-- arrival at now, with the wait; the ticket left the draw when it was drawn, so it is never admitted
-- again. `direct`: the joiner, drawn by its own join's step, holds no reservation (see draw_tickets):
-- it arrives as a new arrival does. Either run writes ctl anyway (the join its ticket, a draw's
-- collection the rate window, see window_take): the wait goes into the totals there, and the
-- arrival is marked `w` (see walk_in) so that no minute's point adds it again.
local function collect(ticket, waited, direct)
  if not direct then
    redis.call('ZREM', K_RESERVED, fmt(ticket))
    book_slots(-1)
  end
  redis.call('ZADD', K_ACTIVE, fmt(arrival_score(NOW)), fmt(ticket) .. 'w:' .. fmt(waited))
  book_arrival(not direct)
  total_admit(waited)
end
-- FIFO capacity mode, a join with nobody waiting ahead (its ticket is the next to call): it walks in
-- when both thresholds leave room, straight to its slot (no reservation written and claimed in the
-- same run), with its arrival and its wait of 0. Returns claimed (0/1).
local function walk_in(ticket, max_active, max_new)
  expire()
  if free_slots(max_active, max_new) < 1 then return 0 end
  local m = fmt(ticket)
  -- A walk-in's join writes ctl anyway: it counts itself in the totals, and its arrival is marked
  -- `w` so that the minute's point does not add it again (see fold_arrivals).
  seat(m, m .. 'w:0')
  book_slots(1)
  book_arrival(false)
  set_ctl('cursor', m)
  total_admit(0)
  return 1
end
