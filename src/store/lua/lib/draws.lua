--- Random method: the generator (Park–Miller minimal standard from ARGV seed; every step is exact in
--- doubles, and createDrawRng in TS does the same arithmetic) and the draw. draw_tickets draws up to
--- n of the present visitors (prologue removed the others) by rank in ZSET order, the joining visitor
--- (JOINER, see join) last: each leaves the draw and gets a reservation as a FIFO call does, and the
--- cursor counts it. The joiner was never stored, so if drawn it gets no reservation: the join
--- collects it at once (see enter_drawn).

local rng_state = (SEED % 2147483646) + 1
local function next_rank(n)
  rng_state = (rng_state * 16807) % 2147483647
  local r = math.floor(rng_state / 2147483647 * n)
  if r >= n then r = n - 1 end
  return r
end
-- Drawn ranks this close together are read by one ZRANGE (at most this many members in its reply).
local RANK_SPAN = 16
-- The members this run drew (a poll then settles its own ticket without looking it up).
local DRAWN_NOW = {}
-- The joining visitor's member while it is in the draw without being stored (nil otherwise).
local JOINER
-- The operator's draws (an explicit admit), whose collection the rate window does not hold back
-- (see window_room), are reserved half a ms short of the deadline: a score ending in .5, live and
-- lapsing at the same whole ms as any other.
local OPERATOR_DRAW = false
local function draw_tickets(cursor, n)
  -- After the prologue every stored member is present.
  local stored = presence().n
  local present = stored + (JOINER and 1 or 0)
  local k = math.min(n, present)
  if k < 1 then return cursor end
  -- Each rank is among the visitors not drawn yet; `taken` (ascending) maps it to its index in the
  -- set as it stands (the joiner's is `stored`), so the draws are read, leave the set and enter
  -- reserved with one command per run of nearby ranks, one ZREM and one ZADD.
  local taken = {}
  for _ = 1, k do
    local i = next_rank(present)
    local at = 1
    while taken[at] and taken[at] <= i do
      i = i + 1
      at = at + 1
    end
    table.insert(taken, at, i)
    present = present - 1
  end
  local members, reserve = {}, {}
  local j = 1
  while j <= #taken and taken[j] < stored do
    local first, last = taken[j], taken[j]
    local e = j
    while taken[e + 1] and taken[e + 1] < stored and taken[e + 1] - first < RANK_SPAN do
      e = e + 1
      last = taken[e]
    end
    local run = redis.call('ZRANGE', K_WAITING, first, last)
    for x = j, e do
      local m = run[taken[x] - first + 1]
      if not m then
        -- The set holds fewer than ctl's count says: a store that forgot the key (an evicting
        -- database) while ctl stayed. The count is read from the set (one command, only then), and
        -- the draw starts again on it: nothing was written yet.
        for _, d in ipairs(members) do DRAWN_NOW[d] = nil end
        presence_add(redis.call('ZCARD', K_WAITING) - stored)
        return draw_tickets(cursor, n)
      end
      members[#members + 1] = m
      DRAWN_NOW[m] = true
      reserve[#reserve + 1] = OPERATOR_DRAW and fmt(NOW + RESERVATION_MS - 1) .. '.5' or fmt(NOW + RESERVATION_MS)
      reserve[#reserve + 1] = m
    end
    j = e + 1
  end
  if JOINER and taken[#taken] == stored then
    DRAWN_NOW[JOINER] = true
    JOINER = nil
  end
  if #members > 0 then
    redis.call('ZREM', K_WAITING, unpack(members))
    redis.call('ZADD', K_RESERVED, unpack(reserve))
    presence_add(-#members)
    book_reservations(#members)
    book_expiry(RESERVED_SET, NOW + RESERVATION_MS)
  end
  set_ctl('cursor', fmt(cursor + k))
  return cursor + k
end
