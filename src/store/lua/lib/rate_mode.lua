--- Rate mode: the period step (see Claims and Rate window in the header). The first call of each
--- period calls the next count tickets, never moving the cursor more than count past the tail (no
--- banking); in random mode it draws min(count, present) instead. Paused or before the event's
--- start: nothing moves and the period is not used up. Rate FIFO writes no reservation: a call is
--- the cursor passing the ticket, counted in ctl's call buckets (see calls_entry), and its claim is
--- checked against the rate window (see rate_gate).
---
--- call_tickets: move the cursor over from..to. `call_entries` (capacity, random): each call is a
--- reservation (ZADD per 500) that goes into the book (see book.lua), counted until its claim turns
--- it into an arrival or it lapses. Rate FIFO: an explicit admit's calls are remembered as the
--- operator's (ctl `ra`), whose claims the rate does not hold back.
---
--- process_lapses (rate FIFO): a call's claim deadline is RESERVATION_MS after it; once every call
--- of a call bucket is past it, the bucket's tickets not claimed (ctl `rc`) lapsed, and as many
--- next waiting tickets are called at once, never past the tail (a lapsed call's admission is spent
--- on a ticket that exists or dropped, never banked). Those calls only invite: the claims they lead
--- to pass the rate window like any other, so handing on never lets in more than the rate. A lapsed
--- operator's call is handed on as the operator's (an explicit admit of N lets in N who show up).
--- Paused or before the start: nothing is processed until admission may run.

-- `spans`: the holes among from..to (see holes.lua), which nobody holds: no reservation.
local function reserve_tickets(from, to, call_entries, spans)
  local reserve = {}
  local n, s = 0, 1
  spans = spans or {}
  for t = from, to do
    while spans[s] and spans[s][2] < t do s = s + 1 end
    if not (spans[s] and t >= spans[s][1]) then
      reserve[#reserve + 1] = fmt(NOW + RESERVATION_MS)
      reserve[#reserve + 1] = fmt(t)
      n = n + 1
    end
    if #reserve >= 1000 or (t == to and #reserve > 0) then
      redis.call('ZADD', K_RESERVED, unpack(reserve))
      reserve = {}
    end
  end
  if call_entries and n > 0 then
    book_reservations(n)
    book_expiry(RESERVED_SET, NOW + RESERVATION_MS)
  end
end
-- Rate FIFO's own fields of ctl, read with the controls (see Rate window in the header):
-- `rw` the admissions of the last period, `<last ms>:<count>` per PERIOD_MS/16 step, oldest first;
-- `rc` `<base>:<hex>` the tickets above the lapse frontier that claimed (bit i: ticket base + i),
-- `rp` the same for those that came to claim and found the window full (present: their call holds);
-- `lp` the lapse frontier (every call of a ticket at or below it was claimed or counted lapsed);
-- `ra` `<from>-<to>,...` the operator's calls not yet past the frontier; `rl` `<ticket>@<ms>,...`
-- the late claims let in within the last period (a late holder counted once per period); `rq`
-- `<ms>:<last called>,...` the runs that called above the frontier, oldest first (a run's calls
-- go from the previous run's last + 1 to its last).
for _, f in ipairs({'rw', 'rc', 'rp', 'lp', 'ra', 'rl', 'rq'}) do CTL_FIELDS[#CTL_FIELDS + 1] = f end
local RATE_LATE_KEEP, RATE_RUNS_KEEP = 32, 256

local function parse_ranges(v)
  local r = {}
  for a, b in string.gmatch(v or '', '(%d+)%-(%d+)') do r[#r + 1] = {tonumber(a), tonumber(b)} end
  return r
end
local function join_ranges(r)
  local out = {}
  for i, x in ipairs(r) do out[i] = fmt(x[1]) .. '-' .. fmt(x[2]) end
  return table.concat(out, ',')
end
local function operator_range(from, to)
  if from > to then return end
  local r = parse_ranges(ctl().ra)
  local last = r[#r]
  if last and last[2] + 1 == from then last[2] = to else r[#r + 1] = {from, to} end
  set_ctl('ra', join_ranges(r))
end
local function operator_called(ticket)
  for _, x in ipairs(parse_ranges(ctl().ra)) do
    if ticket >= x[1] and ticket <= x[2] then return true end
  end
  return false
end

-- The claimed (`rc`) and present (`rp`) bitmaps: base is a multiple of 8, hex two digits per 8
-- tickets.
local function read_claimed(field)
  field = field or 'rc'
  local base, hex = string.match(ctl()[field] or '', '^(%d+):(%x*)$')
  return {field = field, base = tonumber(base), hex = hex or ''}
end
local function claimed_bit(cl, t)
  if not cl.base or t < cl.base then return false end
  local i = t - cl.base
  local at = math.floor(i / 8) * 2 + 1
  if at + 1 > #cl.hex then return false end
  return math.floor(tonumber(string.sub(cl.hex, at, at + 1), 16) / 2 ^ (i % 8)) % 2 == 1
end
local function save_claimed(cl)
  local hex = string.gsub(cl.hex, '0+$', '')
  if #hex % 2 == 1 then hex = hex .. '0' end
  set_ctl(cl.field, fmt(cl.base) .. ':' .. hex)
end
-- Rate FIFO: the holes a run called (spans, see holes.lua) are marked claimed, so their calls never
-- lapse and hand an admission on: nobody was there to take it.
local function set_claimed_spans(cl, spans, floor_)
  if #spans == 0 then return end
  if not cl.base then cl.base = math.floor((floor_ + 1) / 8) * 8 end
  local from = math.max(spans[1][1], cl.base)
  local to = spans[#spans][2]
  if from > to then return end
  local first, last = math.floor((from - cl.base) / 8), math.floor((to - cl.base) / 8)
  if #cl.hex < (last + 1) * 2 then cl.hex = cl.hex .. string.rep('00', last + 1 - #cl.hex / 2) end
  local bytes, s = {}, 1
  for byte = first, last do
    local v = tonumber(string.sub(cl.hex, byte * 2 + 1, byte * 2 + 2), 16)
    for bit = 0, 7 do
      local t = cl.base + byte * 8 + bit
      while spans[s] and spans[s][2] < t do s = s + 1 end
      if spans[s] and t >= spans[s][1] and t >= from and math.floor(v / 2 ^ bit) % 2 == 0 then v = v + 2 ^ bit end
    end
    bytes[#bytes + 1] = string.format('%02x', v)
  end
  cl.hex = string.sub(cl.hex, 1, first * 2) .. table.concat(bytes) .. string.sub(cl.hex, (last + 1) * 2 + 1)
  save_claimed(cl)
end
local function set_claimed_bit(cl, t, floor_)
  if not cl.base then cl.base = math.floor((floor_ + 1) / 8) * 8 end
  if t < cl.base then return end
  local i = t - cl.base
  local at = math.floor(i / 8) * 2 + 1
  if #cl.hex < at + 1 then cl.hex = cl.hex .. string.rep('00', (at + 1 - #cl.hex) / 2) end
  local v = tonumber(string.sub(cl.hex, at, at + 1), 16)
  if math.floor(v / 2 ^ (i % 8)) % 2 == 0 then v = v + 2 ^ (i % 8) end
  cl.hex = string.sub(cl.hex, 1, at - 1) .. string.format('%02x', v) .. string.sub(cl.hex, at + 2)
  save_claimed(cl)
end

-- The rate window: admissions (claims and walk-ins) of the last PERIOD_MS, in steps of
-- PERIOD_MS/16, each counted until the last admission in it leaves the window (so the count is
-- never below the truth: the window can only be under-used, by at most one step).
local function window_log()
  local log = {}
  for last, n in string.gmatch(ctl().rw or '', '(%d+):(%d+)') do
    last = tonumber(last)
    if last > NOW - PERIOD_MS then log[#log + 1] = {last, tonumber(n)} end
  end
  return log
end
local function window_count(log)
  local n = 0
  for _, e in ipairs(log) do n = n + e[2] end
  return n
end
local function window_admit(log)
  local step = math.max(1, math.ceil(PERIOD_MS / 16))
  local e = log[#log]
  if e and (math.floor(e[1] / step) == math.floor(NOW / step) or NOW < e[1]) then
    e[1], e[2] = math.max(e[1], NOW), e[2] + 1
  else
    log[#log + 1] = {NOW, 1}
  end
  local out = {}
  for i, x in ipairs(log) do out[i] = fmt(x[1]) .. ':' .. fmt(x[2]) end
  set_ctl('rw', table.concat(out, ','))
end

-- Whether the rate lets ticket in now (rate FIFO; the caller checked it is called): a claim the
-- bitmap or the late list already holds is let in again, counted once; an operator's call is let in
-- whatever the window holds; any other only while the window holds fewer than the period's quota
-- (with no quota, automatic admission off, there is no rate to keep: a late holder is let in).
-- An admission is counted in the window (and the operator's too, so that automatic admission waits
-- until the window has room again, as capacity mode does). Writes only ctl.
local function rate_gate(ticket, waited)
  local cl = read_claimed()
  if claimed_bit(cl, ticket) then return 1 end
  local lp = ctl_int('lp') or 0
  local late = {}
  if ticket <= lp then
    for t, at in string.gmatch(ctl().rl or '', '(%d+)@(%d+)') do
      t, at = tonumber(t), tonumber(at)
      if at > NOW - PERIOD_MS then
        if t == ticket then return 1 end
        late[#late + 1] = fmt(t) .. '@' .. fmt(at)
      end
    end
  end
  local log = window_log()
  if AUTO_COUNT > 0 and not operator_called(ticket) and window_count(log) >= AUTO_COUNT then
    -- Its holder came: the call holds (it does not lapse) until the window lets it in.
    local present = read_claimed('rp')
    if ticket > lp and not claimed_bit(present, ticket) then set_claimed_bit(present, ticket, lp) end
    return 0
  end
  window_admit(log)
  -- Let in now: counted in the sale's totals, with its wait (a walk-in waited 0).
  total_admit(waited or 0)
  if ticket > lp or (cl.base and ticket >= cl.base) then
    set_claimed_bit(cl, ticket, lp)
  else
    late[#late + 1] = fmt(ticket) .. '@' .. fmt(NOW)
    while #late > RATE_LATE_KEEP do table.remove(late, 1) end
    set_ctl('rl', table.concat(late, ','))
  end
  return 1
end

-- Random rate mode: whether the rate window lets a drawn visitor be collected now (a draw's
-- reservation is its own record, taken out by the collection, so the window alone decides); a
-- collection is counted with window_take.
local function window_room()
  return AUTO_COUNT <= 0 or window_count(window_log()) < AUTO_COUNT
end
local function window_take() window_admit(window_log()) end

-- Rate FIFO: calls made but neither claimed nor lapsed yet (the stats' `reserved`).
local function outstanding_calls(tail, cursor)
  local cl = read_claimed()
  local present = read_claimed('rp')
  local n = 0
  for t = (ctl_int('lp') or 0) + 1, math.min(tail, cursor) do
    if not claimed_bit(cl, t) and not claimed_bit(present, t) then n = n + 1 end
  end
  return n
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
local function parse_runs()
  local r = {}
  for at, last in string.gmatch(ctl().rq or '', '(%d+):(%d+)') do r[#r + 1] = {tonumber(at), tonumber(last)} end
  return r
end
local function save_runs(r)
  local out = {}
  for i, x in ipairs(r) do out[i] = fmt(x[1]) .. ':' .. fmt(x[2]) end
  set_ctl('rq', table.concat(out, ','))
end
-- Rate FIFO: this run called from..to (their claim deadlines are RESERVATION_MS from now). Past
-- RATE_RUNS_KEEP runs, the two oldest merge under the later one (their calls lapse later, never
-- sooner). With no run pending, tickets between the frontier and `from` were called by no rate
-- FIFO run (capacity mode or the random method called them): the frontier passes them.
local function calls_run(from, to)
  local r = parse_runs()
  if #r == 0 and ctl_int('lp') and ctl_int('lp') < from - 1 then set_ctl('lp', fmt(from - 1)) end
  local last = r[#r]
  if last and last[1] == NOW then last[2] = math.max(last[2], to) else r[#r + 1] = {NOW, to} end
  if #r > RATE_RUNS_KEEP then
    r[2][2] = math.max(r[1][2], r[2][2])
    table.remove(r, 1)
  end
  save_runs(r)
end
-- Rate FIFO: the holes a run passed (spans, `passed` numbers) are marked claimed, and counted as
-- lapsed in the figures' bucket so that they are not counted as calls.
local function pass_spans(spans, passed)
  if #spans == 0 then return 0 end
  set_claimed_spans(read_claimed(), spans, ctl_int('lp') or 0)
  take_holes(spans[#spans][2])
  return passed
end
local function call_tickets(from, to, call_entries, spans, passed)
  spans = spans or {}
  if call_entries then
    reserve_tickets(from, to, true, spans)
    if #spans > 0 then take_holes(to) end
    set_ctl('cursor', fmt(to))
  else
    operator_range(from, to)
    calls_run(from, to)
    set_ctl('cursor', fmt(to), calls_entry(from, to, pass_spans(spans, passed or 0)))
  end
end

-- Rate FIFO: the calls whose claim deadline passed (RESERVATION_MS after the run that made them),
-- up to the tickets that exist: the unclaimed ones lapsed and are handed on. Moves the lapse
-- frontier and drops the bitmap below it. Costs no command.
local function process_lapses(tail, cursor, paused)
  if paused or not OPEN then return cursor end
  local limit = math.min(tail, cursor)
  -- No frontier yet (a new state, or one kept from before it existed): it starts at the tickets
  -- called so far, counting none of those calls lapsed.
  local lp = ctl_int('lp')
  if not lp then
    set_ctl('lp', fmt(limit))
    return cursor
  end
  if lp >= limit then return cursor end
  local runs = parse_runs()
  local frontier = lp
  local kept = {}
  for _, x in ipairs(runs) do
    if #kept == 0 and x[1] + RESERVATION_MS <= NOW then
      frontier = math.max(frontier, math.min(x[2], limit))
      if x[2] > frontier then kept[#kept + 1] = x end
    elseif x[2] > frontier then
      kept[#kept + 1] = x
    end
  end
  if frontier <= lp then return cursor end
  local cl, present = read_claimed(), read_claimed('rp')
  local ops = parse_ranges(ctl().ra)
  local lapsed, lapsed_op = 0, 0
  for t = lp + 1, frontier do
    if not claimed_bit(cl, t) and not claimed_bit(present, t) then
      lapsed = lapsed + 1
      for _, x in ipairs(ops) do
        if t >= x[1] and t <= x[2] then
          lapsed_op = lapsed_op + 1
          break
        end
      end
    end
  end
  -- The frontier moves; the bitmap keeps whole bytes from the one holding frontier + 1, and the
  -- operator's ranges what is above the frontier.
  local base = math.floor((frontier + 1) / 8) * 8
  for _, bits in ipairs({cl, present}) do
    if bits.base and base > bits.base then
      bits.hex = string.sub(bits.hex, (base - bits.base) / 4 + 1)
      bits.base = base
    end
    if bits.base then save_claimed(bits) end
  end
  save_runs(kept)
  local ops_kept = {}
  for _, x in ipairs(ops) do
    if x[2] > frontier then ops_kept[#ops_kept + 1] = {math.max(x[1], frontier + 1), x[2]} end
  end
  set_ctl('lp', fmt(frontier), 'ra', join_ranges(ops_kept))
  total_add(2, lapsed)
  if lapsed == 0 then return cursor end
  -- Handed on to as many real tickets, passing over holes (see holes.lua).
  local target, passed, spans = pass_holes(cursor, lapsed, tail)
  local n = target - cursor - passed
  if n < 1 then
    set_ctl(calls_entry(cursor + 1, cursor, lapsed))
    return cursor
  end
  -- The operator's lapsed calls are handed on as the operator's, first.
  local n_op = math.min(lapsed_op, n)
  if n_op > 0 then operator_range(cursor + 1, (pass_holes(cursor, n_op, tail))) end
  calls_run(cursor + 1, target)
  set_ctl('cursor', fmt(target), calls_entry(cursor + 1, target, lapsed + pass_spans(spans, passed)))
  return target
end
local function auto_admit(tail, cursor, paused)
  if paused or AUTO_COUNT <= 0 or not OPEN then return cursor end
  local start = math.floor(NOW / PERIOD_MS) * PERIOD_MS
  local last = ctl_int('period')
  if last ~= nil and start <= last then return cursor end
  if RANDOM then
    set_ctl('period', fmt(start))
    return draw_tickets(cursor, AUTO_COUNT)
  end
  -- The count's real tickets: holes are passed over (see holes.lua), and none lie past the tail.
  local target, passed, spans = pass_holes(cursor, AUTO_COUNT, tail + AUTO_COUNT)
  if target <= cursor then
    set_ctl('period', fmt(start))
    return cursor
  end
  -- The period, the cursor and the calls in one write.
  calls_run(cursor + 1, target)
  set_ctl('period', fmt(start), 'cursor', fmt(target), calls_entry(cursor + 1, target, pass_spans(spans, passed)))
  return target
end
