--- Events and presence (see the header). read_event: the pre-queue frozen for this start (0, 0 when
--- none is) and the epoch. prologue: every writing script but touch runs it first, with the tail
--- before its own ticket: the first run at or after the start freezes the pre-queue, and in random
--- mode the visitors whose last poll is presenceMs old leave the draw.

local function read_event()
  local c = redis.call('HMGET', K_CTL, 'ev_start', 'ev_size', 'ev_seed', 'epoch')
  local size, seed = 0, 0
  if EVENT_START > 0 and tonumber(c[1]) == EVENT_START then
    size, seed = tonumber(c[2]) or 0, tonumber(c[3]) or 0
  end
  return size, seed, tonumber(c[4]) or 0
end
local function prologue(tail_before)
  if EVENT_START > 0 and NOW >= EVENT_START and tonumber(redis.call('HGET', K_CTL, 'ev_start')) ~= EVENT_START then
    redis.call('HSET', K_CTL, 'ev_start', fmt(EVENT_START), 'ev_size', fmt(tail_before), 'ev_seed', fmt(SEED))
  end
  if RANDOM then redis.call('ZREMRANGEBYSCORE', K_WAITING, '-inf', fmt(NOW - PRESENCE_MS)) end
end
