--- Events and presence (see the header). read_event: the pre-queue frozen for this start (0, 0 when
--- none is) and the epoch. prologue: every writing script but touch runs it first, with the tail
--- before its own ticket: the first run at or after the start freezes the pre-queue, and in random
--- mode the visitors whose last poll is presenceMs old leave the draw.

local function read_event()
  local c = ctl()
  local size, seed = 0, 0
  if EVENT_START > 0 and tonumber(c.ev_start or nil) == EVENT_START then
    size, seed = tonumber(c.ev_size or nil) or 0, tonumber(c.ev_seed or nil) or 0
  end
  return size, seed, tonumber(c.epoch or nil) or 0
end
local function prologue(tail_before)
  if EVENT_START > 0 and NOW >= EVENT_START and tonumber(ctl().ev_start or nil) ~= EVENT_START then
    set_ctl('ev_start', fmt(EVENT_START), 'ev_size', fmt(tail_before), 'ev_seed', fmt(SEED))
  end
  if RANDOM then redis.call('ZREMRANGEBYSCORE', K_WAITING, '-inf', fmt(NOW - PRESENCE_MS)) end
end
