--- Random method: the generator (Park–Miller minimal standard from ARGV seed; every step is exact in
--- doubles, and createDrawRng in TS does the same arithmetic) and the draw. draw_tickets draws up to
--- n of the present visitors (prologue removed the others) by rank in ZSET order: each leaves the
--- draw, gets a reservation and an admission entry as a FIFO call does, and the cursor counts it.

local rng_state = (SEED % 2147483646) + 1
local function next_rank(n)
  rng_state = (rng_state * 16807) % 2147483647
  local r = math.floor(rng_state / 2147483647 * n)
  if r >= n then r = n - 1 end
  return r
end
local function draw_tickets(cursor, n)
  local present = redis.call('ZCARD', K_WAITING)
  local k = math.min(n, present)
  if k < 1 then return cursor end
  for _ = 1, k do
    local r = fmt(next_rank(present))
    local m = redis.call('ZRANGE', K_WAITING, r, r)[1]
    redis.call('ZREM', K_WAITING, m)
    redis.call('ZADD', K_RESERVED, fmt(NOW + RESERVATION_MS), m)
    redis.call('ZADD', K_ADMITS, fmt(NOW), m)
    present = present - 1
  end
  set_ctl('cursor', fmt(cursor + k))
  return cursor + k
end
