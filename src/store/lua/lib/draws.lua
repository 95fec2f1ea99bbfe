--- Random method: the generator (Park–Miller minimal standard from ARGV seed; every step is exact in
--- doubles, and createDrawRng in TS does the same arithmetic) and the draw. draw_tickets draws up to
--- n of the present visitors (prologue removed the others) by rank in ZSET order: each leaves the
--- draw and gets a reservation as a FIFO call does, and the cursor counts it.

local rng_state = (SEED % 2147483646) + 1
local function next_rank(n)
  rng_state = (rng_state * 16807) % 2147483647
  local r = math.floor(rng_state / 2147483647 * n)
  if r >= n then r = n - 1 end
  return r
end
-- The members this run drew (a poll then settles its own ticket without looking it up).
local DRAWN_NOW = {}
local function draw_tickets(cursor, n)
  -- After the prologue every stored member is present.
  local present = presence().n
  local k = math.min(n, present)
  if k < 1 then return cursor end
  -- Each rank is among the visitors not drawn yet; `taken` (ascending) maps it to its index in the
  -- set as it stands, so the draws leave the set and enter reserved in one command each.
  local taken, members, reserve = {}, {}, {}
  for _ = 1, k do
    local i = next_rank(present)
    local at = 1
    while taken[at] and taken[at] <= i do
      i = i + 1
      at = at + 1
    end
    table.insert(taken, at, i)
    local m = redis.call('ZRANGE', K_WAITING, i, i)[1]
    members[#members + 1] = m
    DRAWN_NOW[m] = true
    reserve[#reserve + 1] = fmt(NOW + RESERVATION_MS)
    reserve[#reserve + 1] = m
    present = present - 1
  end
  redis.call('ZREM', K_WAITING, unpack(members))
  redis.call('ZADD', K_RESERVED, unpack(reserve))
  presence_add(-k)
  book_reservations(k)
  book_expiry(RESERVED_SET, NOW + RESERVATION_MS)
  set_ctl('cursor', fmt(cursor + k))
  return cursor + k
end
