#!lua flags=allow-key-locking
--- Capacity mode: grace 0 removes the ticket's slot and any reservation (an unclaimed reservation
--- also gives its admission back, as when it lapses) and calls the next tickets into the room;
--- grace > 0 shortens the slot (or reservation) to expire within the grace. Rate mode: 0, nothing
--- written but the prologue. ARGV 12 ticket, 13 grace ms, 14 the token's generation (another
--- generation's holder frees only its own member). Returns {held}: whether a live slot or
--- reservation was there.
-- wr leave: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, ticket, grace_ms, generation; returns {held}
-- #include policy_header
defer_ctl()
-- #include read_queue

local ticket = arg_int(12, 1)
local grace = arg_int(13, 0)
prologue(tail)
local function done(held)
  flush_ctl()
  return {held}
end
if not capacity then return done(0) end
local m = fmt(ticket)
if foreign_gen(14) then
  -- A holder from a lost generation leaves the slot registered for it (see touch), nobody else's.
  m = foreign_member(ticket, 14)
  if grace == 0 then
    local held = redis.call('ZREM', K_ACTIVE, m)
    book_slots(-held)
    return done(held)
  end
  local score = redis.call('ZSCORE', K_ACTIVE, m)
  if not score or tonumber(score) <= NOW then return done(0) end
  if tonumber(score) > NOW + grace then
    redis.call('ZADD', K_ACTIVE, fmt(NOW + grace), m)
    book_expiry(ACTIVE_SET, NOW + grace)
  end
  return done(1)
end
if grace == 0 then
  expire()
  local held = redis.call('ZREM', K_ACTIVE, m)
  book_slots(-held)
  if redis.call('ZREM', K_RESERVED, m) == 1 then
    book_reservations(-1)
    held = 1
  end
  advance(tail, cursor, paused, max_active, max_new)
  return done(held)
end
local held = 0
local until_ms = NOW + grace
for _, key in ipairs({K_ACTIVE, K_RESERVED}) do
  local score = redis.call('ZSCORE', key, m)
  if score and tonumber(score) > NOW then
    held = 1
    if tonumber(score) > until_ms then
      redis.call('ZADD', key, fmt(until_ms), m)
      book_expiry(key == K_RESERVED and RESERVED_SET or ACTIVE_SET, until_ms)
    end
  end
end
return done(held)
