--- Rate mode: the period step (see Claims in the header). The first call of each period calls the next count tickets, never
--- moving the cursor more than count past the tail (no banking); in random mode it draws
--- min(count, present) instead. Paused or before the event's start: nothing moves and the period is
--- not used up. FIFO: the existing tickets a step calls get a reservation (their claim deadline,
--- see call_tickets), except `walk_in`, the join's own ticket, which is claimed at the join;
--- tickets called before they exist walk in at their join (see JOIN). The step also trims the
--- 300-s sets once per period, so claims need not.
---
--- call_tickets: reserve from..to (ZADD per 500) and move the cursor. `call_entries` (capacity,
--- random): the reservations go into the book (see book.lua), each counted until its claim turns it
--- into an arrival or it lapses. Rate FIFO counts calls in its call buckets instead.
---
--- replace_lapsed (rate FIFO): called tickets whose claim deadline passed unclaimed give their
--- admissions to the next waiting tickets at once (one ZCOUNT when none lapsed). Never past the
--- tail: a lapsed call's admission is spent on a ticket that exists or dropped, never banked. Paused
--- or before the start: left stored (figures ignore them by score) until admission may run.

local function reserve_tickets(from, to, call_entries)
  local reserve = {}
  for t = from, to do
    reserve[#reserve + 1] = fmt(NOW + RESERVATION_MS)
    reserve[#reserve + 1] = fmt(t)
    if #reserve >= 1000 or t == to then
      redis.call('ZADD', K_RESERVED, unpack(reserve))
      reserve = {}
    end
  end
  if call_entries and to >= from then
    book_reservations(to - from + 1)
    book_expiry(RESERVED_SET, NOW + RESERVATION_MS)
  end
end
-- Rate FIFO: the calls from..to (none when from > to) made now and the calls that lapsed
-- unclaimed now, as the ctl field of this bucket and its value `<bucket start>:<first called>:<last
-- called>:<lapsed>` (calls only move the cursor up, so a bucket's calls are one range). The figures
-- count them (see called_counts); two values, so it goes last in a set_ctl call.
local function calls_entry(from, to, lapsed)
  local bucket = math.floor(NOW / CALL_BUCKET_MS) * CALL_BUCKET_MS
  local field = 'c' .. fmt(math.floor(NOW / CALL_BUCKET_MS) % CALL_SLOTS)
  local b, f, t, l = string.match(ctl()[field] or '', '^(%d+):(%d+):(%d+):(%d+)$')
  if tonumber(b) == bucket then
    f, t = tonumber(f), tonumber(t)
    if f <= t then
      if from <= to then from = math.min(from, f) else from, to = f, t end
    end
    lapsed = lapsed + tonumber(l)
  end
  return field, fmt(bucket) .. ':' .. fmt(from) .. ':' .. fmt(to) .. ':' .. fmt(lapsed)
end
local function call_tickets(from, to, call_entries)
  reserve_tickets(from, to, call_entries)
  if call_entries then set_ctl('cursor', fmt(to)) else set_ctl('cursor', fmt(to), calls_entry(from, to, 0)) end
end
local function replace_lapsed(tail, cursor, paused)
  if paused or not OPEN then return cursor end
  -- One command whether or not any lapsed: the removal answers how many it removed.
  local lapsed = redis.call('ZREMRANGEBYSCORE', K_RESERVED, '-inf', fmt(NOW))
  if lapsed == 0 then return cursor end
  local n = math.min(lapsed, tail - cursor)
  -- The lapsed calls are taken out of the figures, and the replacements counted, in one write.
  if n < 1 then
    set_ctl(calls_entry(cursor + 1, cursor, lapsed))
    return cursor
  end
  reserve_tickets(cursor + 1, cursor + n, false)
  set_ctl('cursor', fmt(cursor + n), calls_entry(cursor + 1, cursor + n, lapsed))
  return cursor + n
end
local function auto_admit(tail, cursor, paused, walk_in)
  if paused or AUTO_COUNT <= 0 or not OPEN then return cursor end
  local start = math.floor(NOW / PERIOD_MS) * PERIOD_MS
  local last = ctl_int('period')
  if last ~= nil and start <= last then return cursor end
  if RANDOM then
    set_ctl('period', fmt(start))
    return draw_tickets(cursor, AUTO_COUNT)
  end
  local target = math.min(cursor + AUTO_COUNT, tail + AUTO_COUNT)
  if target <= cursor then
    set_ctl('period', fmt(start))
    return cursor
  end
  local last_reserved = math.min(target, tail)
  if walk_in and last_reserved == walk_in then last_reserved = walk_in - 1 end
  if last_reserved > cursor then reserve_tickets(cursor + 1, last_reserved, false) end
  -- The period, the cursor and the calls in one write.
  set_ctl('period', fmt(start), 'cursor', fmt(target), calls_entry(cursor + 1, target, 0))
  return target
end
