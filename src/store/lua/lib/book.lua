--- The book (capacity mode and the random method; see Book in the header): the counts their
--- admission needs, kept in ctl so that the HMGET every run makes reads them and the run's one HSET
--- writes them, instead of counting sorted sets on every run. `seat` = `<slots>:<lapse_r>:<lapse_a>`:
--- the stored slots and reservations, and per set (reserved, active) a time at or before the earliest
--- expiry in it ('' = none stored), so that before it nothing there can have lapsed and no expiry
--- command runs for that set. `w1`, `w5`, one per window
--- (60 s, 300 s) = `<edge>:<count>:<floor>:<t1,t2,...>`: count = arrivals after the window's edge
--- plus every stored reservation (a live reservation counts once, in both windows, until its claim
--- turns it into an arrival at the claim: the count does not move, so a claim writes nothing); the
--- listed times are arrivals known exactly (at most BOOK_LIST), and every arrival not listed is at or
--- after floor; edge: every arrival at or before it has been taken out. A run takes out the listed
--- arrivals that left the window for free; it reads the set again (refill) only when an unlisted one
--- may have left (floor at or before the window's edge) or its clock is behind edge + window.
--- Arrivals live in the active set at negative scores (-1 - arrival ms; slots are at their expiry, >=
--- 0), member `<ticket>:<waited>` (`<ticket>@<ms>[#k]:<waited>` for a slot taken directly), so a
--- slot and its arrival are written by one ZADD.

local BOOK_LIST = 16
local BOOK
local BOOK_DIRTY, BOOK_READY = false, false
-- The score of an arrival at t, and the score bound of arrivals after the window edge e.
local function arrival_score(t) return -1 - t end
local function after_edge(e) return '(' .. fmt(math.min(-1 - e, 0)) end
local function parse_window(v, width)
  local edge, count, floor, list = string.match(v or '', '^(%-?%d+):(%-?%d+):(%-?%d+):([%d,]*)$')
  if not edge then return nil end
  local w = {width = width, edge = tonumber(edge), count = tonumber(count), floor = tonumber(floor), list = {}}
  for t in string.gmatch(list, '%d+') do w.list[#w.list + 1] = tonumber(t) end
  return w
end
local function format_window(w)
  local list = {}
  for i, t in ipairs(w.list) do list[i] = fmt(t) end
  return fmt(w.edge) .. ':' .. fmt(w.count) .. ':' .. fmt(w.floor) .. ':' .. table.concat(list, ',')
end
-- The book as ctl holds it, or nil (never written, dropped, or lost with ctl).
local function load_book()
  if BOOK ~= nil then return BOOK or nil end
  local slots, lapse_r, lapse_a = string.match(ctl().seat or '', '^(%-?%d+):(%d*):(%d*)$')
  local w1, w5 = parse_window(ctl().w1, MINUTE_MS), parse_window(ctl().w5, KEEP_MS)
  if not slots or not w1 or not w5 then
    BOOK = false
    return nil
  end
  BOOK = {slots = tonumber(slots), lapse = {tonumber(lapse_r), tonumber(lapse_a)}, w = {w1, w5}}
  return BOOK
end
save_book = function()
  save_presence()
  if not BOOK_DIRTY or not BOOK then return end
  BOOK_DIRTY = false
  local lapse = {}
  for i = 1, 2 do lapse[i] = BOOK.lapse[i] and fmt(BOOK.lapse[i]) or '' end
  set_ctl('seat', fmt(BOOK.slots) .. ':' .. lapse[1] .. ':' .. lapse[2], 'w1', format_window(BOOK.w[1]), 'w5', format_window(BOOK.w[2]))
end
-- Rate FIFO keeps no book (its reservations move without it): a book left from an earlier mode is
-- dropped, and rebuilt when a later run needs it.
local function drop_book()
  if ctl().seat or ctl().w1 or ctl().w5 then del_ctl('seat', 'w1', 'w5') end
  BOOK = false
end
-- The sets the lapse bounds are kept for, in the order of `seat`.
local RESERVED_SET, ACTIVE_SET = 1, 2
-- A reservation (RESERVED_SET) or slot (ACTIVE_SET) stored with this expiry: the set's bound follows
-- it down.
local function book_expiry(set, x)
  if load_book() and (not BOOK.lapse[set] or x < BOOK.lapse[set]) then
    BOOK.lapse[set] = x
    BOOK_DIRTY = true
  end
end
local function book_slots(n)
  if load_book() and n ~= 0 then
    BOOK.slots = BOOK.slots + n
    -- Nothing stored: nothing can lapse.
    if BOOK.slots <= 0 then BOOK.lapse = {} end
    BOOK_DIRTY = true
  end
end
-- n reservations stored (negative: removed unclaimed): slots and both windows' counts.
local function book_reservations(n)
  if not load_book() or n == 0 then return end
  book_slots(n)
  for _, w in ipairs(BOOK.w) do w.count = w.count + n end
end
-- An arrival at NOW; `from_reservation`: a reservation's claim (its count stays), else a new one.
local function book_arrival(from_reservation)
  if not load_book() then return end
  for _, w in ipairs(BOOK.w) do
    if not from_reservation then
      w.count = w.count + 1
      BOOK_DIRTY = true
      if #w.list < BOOK_LIST then
        local i = #w.list + 1
        while i > 1 and w.list[i - 1] > NOW do i = i - 1 end
        table.insert(w.list, i, NOW)
      elseif NOW < w.floor then
        w.floor = NOW
      end
    elseif BOOK_DIRTY and #w.list < BOOK_LIST then
      -- The run writes the book anyway: the arrival is listed (a claim that writes nothing leaves
      -- it unlisted, at or after floor).
      local i = #w.list + 1
      while i > 1 and w.list[i - 1] > NOW do i = i - 1 end
      table.insert(w.list, i, NOW)
    elseif NOW < w.floor then
      -- A clock behind the one that set floor: floor follows it, so the count stays exact.
      w.floor = NOW
      BOOK_DIRTY = true
    end
  end
end
-- Reads a window again from the set (`reserved`: the live reservations). The listed arrivals are the
-- earliest after the edge; when all of them are, no arrival is unlisted and floor is now.
local function refill(w, reserved)
  local e = NOW - w.width
  local got = redis.call('ZREVRANGEBYSCORE', K_ACTIVE, after_edge(e), '-inf', 'WITHSCORES', 'LIMIT', 0, BOOK_LIST + 1)
  local list = {}
  for i = 2, math.min(#got, 2 * BOOK_LIST), 2 do list[#list + 1] = -1 - tonumber(got[i]) end
  local arrivals = #list
  w.floor = NOW
  if #got > 2 * BOOK_LIST then
    arrivals = redis.call('ZCOUNT', K_ACTIVE, '-inf', after_edge(e))
    w.floor = list[#list]
  end
  w.edge, w.count, w.list = e, arrivals + reserved, list
  BOOK_DIRTY = true
end
-- Takes out the listed arrivals that left each window, and says whether a window must be read again.
local function advance_windows()
  local stale = false
  for _, w in ipairs(BOOK.w) do
    local e = NOW - w.width
    local keep, left = {}, 0
    for _, t in ipairs(w.list) do
      if t > e then keep[#keep + 1] = t else left = left + 1 end
    end
    if left > 0 then
      w.list, w.count, w.edge = keep, w.count - left, math.max(w.edge, e)
      BOOK_DIRTY = true
    end
    if e < w.edge or (w.count > #w.list and w.floor <= e) then
      w.stale = true
      stale = true
    end
  end
  return stale
end
-- How many reservations this run removed as lapsed: random rate mode redraws as many (see redraw).
local lapsed_calls = 0
-- The earliest expiry stored in a set (nil: none).
local function find_lapse(set)
  local first
  if set == RESERVED_SET then
    first = redis.call('ZRANGE', K_RESERVED, 0, 0, 'WITHSCORES')
  else
    first = redis.call('ZRANGEBYSCORE', K_ACTIVE, 0, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  end
  return tonumber(first[2] or nil)
end
-- Whether something stored may have lapsed by now.
local function lapse_due(b)
  return (b.lapse[1] and NOW >= b.lapse[1]) or (b.lapse[2] and NOW >= b.lapse[2])
end
-- Reads again the windows that advance_windows found stale. Arrivals older than 300 s go from the
-- set when the 300-s window is read again (no count reads them).
local function refill_stale()
  local reserved
  for i, w in ipairs(BOOK.w) do
    if w.stale then
      reserved = reserved or redis.call('ZCARD', K_RESERVED)
      refill(w, reserved)
      if i == 2 then redis.call('ZREMRANGEBYSCORE', K_ACTIVE, fmt(-1 - (NOW - KEEP_MS)), -1) end
      w.stale = nil
    end
  end
end
-- The book built from the sets (a run that found none): every stored slot and reservation counted,
-- both windows read.
local function build_book()
  BOOK = {slots = redis.call('ZCARD', K_RESERVED) + redis.call('ZCOUNT', K_ACTIVE, 0, '+inf'), lapse = {find_lapse(RESERVED_SET), find_lapse(ACTIVE_SET)}, w = {}}
  for i, width in ipairs({MINUTE_MS, KEEP_MS}) do BOOK.w[i] = {width = width, edge = 0, count = 0, floor = 0, list = {}, stale = true} end
  BOOK_DIRTY = true
  refill_stale()
  return BOOK
end
-- A run that writes the generation (none was stored: the queue is new, or its state was lost)
-- and finds no book: whatever the sets still hold belongs to no generation now (a holder of the lost
-- one registers again, see touch), so they go, and the book starts empty, for one command.
local function start_book()
  if not GEN_CREATED or load_book() then return end
  redis.call('DEL', K_ACTIVE, K_RESERVED, K_WAITING)
  -- The waiting set went too: its count is written where the method keeps one (see presence).
  PRES = {n = 0, dirty = RANDOM or ctl().pres ~= false}
  BOOK = {slots = 0, lapse = {}, w = {}}
  for i, width in ipairs({MINUTE_MS, KEEP_MS}) do BOOK.w[i] = {width = width, edge = NOW - width, count = 0, floor = NOW, list = {}} end
  BOOK_DIRTY = true
end
-- Lapsed reservations, then lapsed slots, leave, and the set's bound is found again; each only once
-- its set's bound has come.
local function expire_lapsed()
  if BOOK.lapse[RESERVED_SET] and NOW >= BOOK.lapse[RESERVED_SET] then
    local reservations = redis.call('ZREMRANGEBYSCORE', K_RESERVED, '-inf', fmt(NOW))
    lapsed_calls = lapsed_calls + reservations
    total_add(2, reservations)
    book_reservations(-reservations)
    BOOK.lapse[RESERVED_SET] = find_lapse(RESERVED_SET)
    BOOK_DIRTY = true
  end
  if BOOK.lapse[ACTIVE_SET] and NOW >= BOOK.lapse[ACTIVE_SET] then
    book_slots(-redis.call('ZREMRANGEBYSCORE', K_ACTIVE, 0, fmt(NOW)))
    BOOK.lapse[ACTIVE_SET] = find_lapse(ACTIVE_SET)
    BOOK_DIRTY = true
  end
end
-- A writing run's book, ready for admission: built from the sets when absent, lapsed entries out,
-- both windows exact at now.
local function book_ready()
  if not load_book() then build_book() end
  expire_lapsed()
  if advance_windows() then refill_stale() end
  BOOK_READY = true
  return BOOK
end
-- Live slots and reservations, live reservations, and arrivals + live reservations over 60 s and
-- 300 s, counted by score (a run that may not write the book, when ctl's cannot answer).
local function count_by_score()
  local reserved = redis.call('ZCOUNT', K_RESERVED, '(' .. fmt(NOW), '+inf')
  local slots = redis.call('ZCOUNT', K_ACTIVE, '(' .. fmt(NOW), '+inf') + reserved
  local minute = redis.call('ZCOUNT', K_ACTIVE, '-inf', after_edge(NOW - MINUTE_MS)) + reserved
  local five = redis.call('ZCOUNT', K_ACTIVE, '-inf', after_edge(NOW - KEEP_MS)) + reserved
  return slots, minute, five
end
-- The figures {slots, arrivals over 60 s, over 300 s} without expiring anything: the book's when it
-- answers exactly at now (nothing can have lapsed; a writing run reads a stale window again, builds
-- an absent book), else counted by score.
local function book_figures()
  if not BOOK_READY then
    local b = load_book()
    if not b and not GEN_READ_ONLY then b = build_book() end
    if not b then return count_by_score() end
    local stale = advance_windows()
    if stale and not GEN_READ_ONLY then
      refill_stale()
      stale = false
    end
    if stale or lapse_due(b) then return count_by_score() end
  end
  return BOOK.slots, math.max(0, BOOK.w[1].count), math.max(0, BOOK.w[2].count)
end
