#!lua flags=allow-key-locking
--- Empty the line (see the header): the waiting are let go, the seated stay. The tail stays (ticket
--- numbers are never handed out twice) and the cursor moves to it; held slots (K_ACTIVE) stay and
--- keep counting until they lapse, since their holders' access tokens still pass; reservations,
--- figures, the draw and the period go; ctl loses the event's frozen pre-queue and gets epoch = now;
--- the controls, the generation, the sale's record and its totals stay (the record's points carry
--- their epoch, so the hour's history starts again). Nothing is admitted.
--- ARGV 12: the epoch the caller saw ('' = any). When it is given and is not the current epoch,
--- nothing is written (the reset it asked for happened already, or somebody else reset since), so a
--- retried reset applies once. Returns the state, then applied (0/1).
-- wr reset: KEYS active, reserved, admits, waits, ctl, waiting; ARGV now_ms, auto_count, period_ms, max_active, max_new_per_minute, session_ms, reservation_ms, event_start_ms, seed, method, presence_ms, expected_epoch; returns {state..., applied}
-- #include policy_header

local expected = ARGV[12] or ''
if expected ~= '' then arg_int(12, 0) end
local epoch = tonumber(ctl().epoch) or 0
local applied = 0
if expected == '' or tonumber(expected) == epoch then
  local tail = ctl_int('tail') or 0
  -- The arrivals not yet in the sale's totals (see record_history) are added before they go.
  local t = totals()
  fold_arrivals(t, tonumber(ctl().rf) or 0, NOW + 1)
  redis.call('DEL', K_RESERVED, K_ADMITS, K_WAITS, K_WAITING)
  if tail > 0 then set_ctl('cursor', fmt(tail)) else del_ctl('cursor') end
  -- Lapsed slots go, and every arrival (at negative scores, see Book) with them; the book is
  -- built again from what stays by the next run that needs it.
  redis.call('ZREMRANGEBYSCORE', K_ACTIVE, '-inf', fmt(NOW))
  del_ctl('ev_start', 'ev_size', 'ev_seed', 'hist', 'period', 'seat', 'w1', 'w5', 'lp', 'rw', 'rc', 'rp', 'ra', 'rl', 'rq', 'bh', unpack(CALL_FIELDS))
  set_ctl('epoch', fmt(NOW), 'pres', '0:', 'rt', format_totals(t), 'rf', fmt(NOW + 1), 'ru', '0')
  PRES = {n = 0}
  applied = 1
end
-- #include read_queue

local state = read_state(tail, cursor, paused, max_active, max_new)
state[__STATE_LENGTH__ + 1] = applied
return state
