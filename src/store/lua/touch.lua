#!lua flags=allow-key-locking
--- Capacity mode: a live slot's expiry becomes min(now + session, until); a slot that is gone (or
--- whose new expiry is not in the future) answers 0 and no slot is ever created. Rate mode: 1.
--- Neither freezes an event nor lapses presence. ARGV 12 ticket, 13 until ms, 14 the token's
--- generation (another generation's holder is registered again, see Generations). Returns {held}.
-- wr touch: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, ticket, until_ms, generation; returns {held}
-- #include policy_header

local ticket = arg_int(12, 1)
local until_ms = arg_int(13, 0)
local paused, max_active, max_new = read_controls()
if not (max_active > 0 or max_new > 0) then return {1} end
defer_ctl()
start_book()
local m = fmt(ticket)
local expiry = math.min(NOW + SESSION_MS, until_ms)
local b = load_book()
if not foreign_gen(14) and b and not (b.lapse[ACTIVE_SET] and NOW >= b.lapse[ACTIVE_SET]) then
  -- No stored slot can have lapsed (see Book), so a stored one is live and the write itself says
  -- whether there is one: ZADD XX CH answers 1 when it changed the expiry, 0 when there is no slot
  -- or it had this expiry already (a ZSCORE tells the two apart).
  if redis.call('ZADD', K_ACTIVE, 'XX', 'CH', fmt(expiry), m) == 0 and not redis.call('ZSCORE', K_ACTIVE, m) then
    flush_ctl()
    return {0}
  end
  book_expiry(ACTIVE_SET, expiry)
  flush_ctl()
  if expiry > NOW then return {1} end
  return {0}
end
local score, created
if foreign_gen(14) then
  -- A holder from a lost generation: its slot is registered again, under a member of its own.
  m = foreign_member(ticket, 14)
  score = redis.call('ZSCORE', K_ACTIVE, m)
  created = not score
  score = score or fmt(NOW + 1)
else
  score = redis.call('ZSCORE', K_ACTIVE, m)
end
if not score or tonumber(score) <= NOW then return {0} end
redis.call('ZADD', K_ACTIVE, fmt(expiry), m)
-- The book (see book.lua): a slot registered again counts, and an earlier expiry moves the bound.
if created then book_slots(1) end
book_expiry(ACTIVE_SET, expiry)
flush_ctl()
if expiry > NOW then return {1} end
return {0}
