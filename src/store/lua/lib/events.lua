--- Events and presence (see the header). read_event: the pre-queue frozen for this start (0, 0 when
--- none is) and the epoch. prologue: every writing script but touch runs it first, with the tail
--- before its own ticket: the first run at or after the start freezes the pre-queue, and in random
--- mode the visitors whose last poll is presenceMs old leave the draw. Presence is kept in ctl
--- `pres` = `<stored>:<bound>`: how many members the waiting set holds, and a score at or before the
--- lowest of them ('' = none), so that until bound + presenceMs nobody can have lapsed: no command
--- removes or counts them (see present_count), and a join or a draw updates both in the run's HSET.

local function read_event()
  local c = ctl()
  local size, seed = 0, 0
  if EVENT_START > 0 and tonumber(c.ev_start or nil) == EVENT_START then
    size, seed = tonumber(c.ev_size or nil) or 0, tonumber(c.ev_seed or nil) or 0
  end
  return size, seed, tonumber(c.epoch or nil) or 0
end
local PRES
-- The waiting set's count and bound (see above): ctl's, else read from the set (a run that may not
-- write counts the present instead).
local function presence()
  if PRES then return PRES end
  local n, bound = string.match(ctl().pres or '', '^(%d+):(%d*)$')
  if n then
    PRES = {n = tonumber(n), bound = tonumber(bound)}
  elseif GEN_READ_ONLY then
    PRES = {n = redis.call('ZCOUNT', K_WAITING, '(' .. fmt(NOW - PRESENCE_MS), '+inf'), counted = true}
  else
    local first = redis.call('ZRANGE', K_WAITING, 0, 0, 'WITHSCORES')
    PRES = {n = redis.call('ZCARD', K_WAITING), bound = tonumber(first[2] or nil), dirty = true}
  end
  return PRES
end
local function save_presence()
  if PRES and PRES.dirty then
    PRES.dirty = false
    set_ctl('pres', fmt(PRES.n) .. ':' .. (PRES.bound and fmt(PRES.bound) or ''))
  end
end
-- n members joined the draw now (negative: n left it, drawn).
local function presence_add(n)
  local p = presence()
  p.n = p.n + n
  if n > 0 and (not p.bound or NOW < p.bound) then p.bound = NOW end
  -- Nobody stored: nobody can lapse.
  if p.n <= 0 then p.bound = nil end
  p.dirty = true
end
-- The visitors present now: the stored count while nobody can have lapsed, else counted by score.
local function present_count()
  local p = presence()
  if not p.counted and p.bound and NOW - PRESENCE_MS >= p.bound then
    return redis.call('ZCOUNT', K_WAITING, '(' .. fmt(NOW - PRESENCE_MS), '+inf')
  end
  return p.n
end
local function prologue(tail_before)
  if EVENT_START > 0 and NOW >= EVENT_START and tonumber(ctl().ev_start or nil) ~= EVENT_START then
    set_ctl('ev_start', fmt(EVENT_START), 'ev_size', fmt(tail_before), 'ev_seed', fmt(SEED))
  end
  if not RANDOM then return end
  local p = presence()
  if p.bound and NOW - PRESENCE_MS >= p.bound then
    p.n = p.n - redis.call('ZREMRANGEBYSCORE', K_WAITING, '-inf', fmt(NOW - PRESENCE_MS))
    local first = redis.call('ZRANGE', K_WAITING, 0, 0, 'WITHSCORES')
    p.bound = tonumber(first[2] or nil)
    p.dirty = true
  end
end
