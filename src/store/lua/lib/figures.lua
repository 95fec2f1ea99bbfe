--- Figures (see the header): capacity mode and random count arrivals and live reservations from the
--- book (book.lua); rate FIFO counts calls from ctl's call buckets. record_history: the minute's
--- first writing run keeps its state and the sale's totals in the record (see the header).

local function count_after(key, min_exclusive)
  return redis.call('ZCOUNT', key, '(' .. fmt(min_exclusive), '+inf')
end
-- Rate FIFO: the tickets called in the last 60 s and 300 s less the calls that lapsed unclaimed,
-- from the call buckets read with ctl (no command): a bucket counts while any of it is in the
-- window, and only tickets that exist and are still called (at most min(tail, cursor)), so a call
-- made before its ticket existed counts once somebody holds that ticket.
local function called_counts(tail, cursor)
  local limit = math.min(tail, cursor)
  local minute, five = 0, 0
  local c = ctl()
  for i = 0, CALL_SLOTS - 1 do
    local b, from, to, lapsed = string.match(c['c' .. i] or '', '^(%d+):(%d+):(%d+):(%d+)$')
    b = tonumber(b)
    if b and b + CALL_BUCKET_MS > NOW - KEEP_MS then
      local n = math.max(0, math.min(tonumber(to), limit) - tonumber(from) + 1) - tonumber(lapsed)
      five = five + n
      if b + CALL_BUCKET_MS > NOW - MINUTE_MS then minute = minute + n end
    end
  end
  -- A lapse can be counted in the window after its call has left it.
  return math.max(0, minute), math.max(0, five)
end
-- {tail, cursor, paused, max_active, max_new_per_minute, active, admitted_1m, admitted_5m,
--  event_size, event_seed, waiting, epoch, generation, holes}. Capacity mode and random: the figures of the
-- book (see book_figures).
local function read_state(tail, cursor, paused, max_active, max_new)
  local slots, minute, five = 0, 0, 0
  if RANDOM or max_active > 0 or max_new > 0 then
    slots, minute, five = book_figures()
  else
    -- Rate FIFO holds no slots (an admitted visitor's token needs nothing from the store), and
    -- counts its calls from ctl.
    minute, five = called_counts(tail, cursor)
  end
  local ev_size, ev_seed, epoch = read_event()
  local waiting = 0
  if RANDOM then waiting = present_count() end
  -- The third field is the controls' mode: 0 normal, 1 paused by the operator, 2 switched to hold,
  -- 3 switched open, 4 paused by a recovery window alone (see RECOVERY).
  local mode = SWITCH == 'open' and 3 or SWITCH == 'hold' and 2 or (OPERATOR_PAUSED and 1) or (paused and 4 or 0)
  -- The last field, a string: the reported holes above the cursor (see holes_text).
  return {tail, cursor, mode, max_active, max_new, slots, minute, five, ev_size, ev_seed, waiting, epoch, GEN, holes_text(cursor)}
end
CTL_FIELDS[#CTL_FIELDS + 1] = 'ps'
-- A store that forgets one key (an evicting database drops whole keys, chosen at random) can take
-- `active` or `reserved` and leave ctl: the book would count their slots and reservations for
-- ever (nothing stored lapses), and max_active would hold the room shut. So a minute's point that
-- finds the room full, somebody waiting and the cursor where the last point left it (ctl `ps`)
-- counts the sets again (two commands, only then) and puts right the book, its windows and the
-- state. A full room whose holders simply stay pays the two commands a minute while it stays.
local function recount_if_stuck(state, waiting)
  local stuck = state[4] > 0 and state[6] >= state[4] and waiting > 0 and ctl().ps == fmt(state[2])
  set_ctl('ps', fmt(state[2]))
  if not stuck or GEN_READ_ONLY or not load_book() then return end
  local stored = redis.call('ZCARD', K_RESERVED) + redis.call('ZCOUNT', K_ACTIVE, 0, '+inf')
  if stored == BOOK.slots then return end
  book_slots(stored - BOOK.slots)
  -- The windows counted the lost reservations (and a lost set's arrivals): read both again.
  for _, w in ipairs(BOOK.w) do w.stale = true end
  refill_stale()
  state[6], state[7], state[8] = BOOK.slots, math.max(0, BOOK.w[1].count), math.max(0, BOOK.w[2].count)
end
local function record_history(state)
  local minute = math.floor(NOW / MINUTE_MS) * MINUTE_MS
  -- ctl `hist` marks the minute already recorded: read with the controls, so the minute's other
  -- runs pay nothing for the history. The point goes to ctl's slot of its minute (seven days of
  -- slots, reused round-robin; a read keeps the points of its span), in the run's one HSET.
  if tonumber(ctl().hist) == minute then return end
  local waiting = state[11]
  -- FIFO: the numbers not yet called, less the holes among them (nobody holds those).
  if not RANDOM then waiting = math.max(0, state[1] - state[2] - holes_above(state[2])) end
  recount_if_stuck(state, waiting)
  -- Capacity mode lets visitors in where no ctl field is written (a claimed reservation): their
  -- arrivals, with their waits, are kept 300 s in the active set, and the minute's point adds those
  -- since the last point to the totals (one ZRANGEBYSCORE a minute). Every other arrival counts
  -- itself in the run that writes it (a walk-in, a collected draw: marked `w`), so rate mode folds
  -- only once after capacity mode wrote reservations (ctl `ru` '1', see mark_uncounted; or absent
  -- beside `rf`, as a release before it left them: arrivals after `rf` may be uncounted; '0': none).
  local capacity_now = state[4] > 0 or state[5] > 0
  local ru = ctl().ru
  if capacity_now or ru == '1' or (ctl().rf and not ru) then
    fold_arrivals(totals(), tonumber(ctl().rf) or 0, NOW)
    TOT_DIRTY = true
    set_ctl('rf', fmt(NOW), 'ru', capacity_now and '1' or '0')
  end
  local member = {fmt(minute), fmt(state[1]), fmt(state[2]), fmt(waiting), fmt(state[6]), fmt(state[7]), fmt(state[12]), fmt(state[3]), format_totals(totals())}
  local slot = 'h' .. fmt(math.floor(NOW / MINUTE_MS) % __RECORD_SLOTS__)
  set_ctl('hist', fmt(minute), slot, table.concat(member, ':'))
end
