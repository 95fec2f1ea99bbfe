--- Adaptive admission (src/store/adaptive.ts documents the ctl fields; adaptiveValue there is this
--- file's twin for the in-memory store). ac_take: join and poll carry the settings and their POP's
--- report; the settings are kept in ac_cfg, the report goes to its slot when the slot's last one is
--- __AC_STEP_MS__ ms old (or another POP's), in the run's one HSET. ac_value: the value in effect for
--- the knob, and at most once per __AC_STEP_MS__ ms a step over the fresh reports made after the
--- last move could show in them, the answers of disjoint windows gathered since that move (ac_ev):
--- no move either way on fewer than __AC_MIN_REQUESTS__ answers. Down, in proportion to how far
--- errors or slow answers are over their share (see ac_keep), to at least __AC_GENTLE_KEEP__ of
--- itself once it has found a boundary, unless the load is
--- already falling by more than a tenth since the last step; the value cut from is the boundary
--- (ac_top). Up while tickets wait and the load is not still rising by that much: a step (two when
--- nothing failed or was slow) while no boundary is known, else half the way to just under it, and
--- to it, then 1, 3, 7 ... above it, each after __AC_PLATEAU_MS__ ms without a move and only with
--- headroom (__AC_PROBE_HEADROOM__); a try at or above the boundary without headroom goes back one.
--- Where one more is over a tenth of the value, a retry of the boundary after climbs and tries failed
--- twice or more (ac_fail) waits 2, then 4 holds, until a try at or above the boundary holds.

for _, f in ipairs({'ac_cfg', 'ac_on', 'ac_val', 'ac_pin', 'ac_at', 'ac_move', 'ac_sig', 'ac_log', 'ac_top', 'ac_ev', 'ac_fail'}) do CTL_FIELDS[#CTL_FIELDS + 1] = f end
for i = 0, __AC_SLOTS__ - 1 do CTL_FIELDS[#CTL_FIELDS + 1] = 'o' .. i end
local function ac_slot(pop)
  local h = 5381
  for i = 1, #pop do h = (h * 33 + string.byte(pop, i)) % 4294967296 end
  return h % __AC_SLOTS__
end
local function ac_settings(cfg)
  local on, mn, mx, ep, sp = string.match(cfg or '', '^([01]):(%d+):(%d+):(%d+):(%d+)$')
  if not on then return nil end
  return {on = on == '1', min = tonumber(mn), max = tonumber(mx), err = tonumber(ep), slow = tonumber(sp)}
end
local function ac_take(i)
  local arg = ARGV[i] or ''
  if arg == '' then return end
  local cfg, report = string.match(arg, '^([^|]*)(.*)$')
  local s = ac_settings(cfg)
  if not s or s.min < 1 or s.max < s.min or s.err > 100 or s.slow > 100 then error('wr: ARGV[' .. i .. '] must be adaptive settings') end
  if ctl().ac_cfg ~= cfg then set_ctl('ac_cfg', cfg) end
  if report == '' then return end
  local pop, rq, er, sl = string.match(report, '^|([%w_.-]+):(%d+):(%d+):(%d+)$')
  if not pop or #pop > 32 then error('wr: ARGV[' .. i .. '] must end with a report pop:requests:errors:slow') end
  local field = 'o' .. ac_slot(pop)
  local held = ctl()[field] or ''
  local at = tonumber(string.match(held, '^[^:]+:(%d+):'))
  if not at or string.sub(held, 1, #pop + 1) ~= pop .. ':' or at <= NOW - __AC_STEP_MS__ then
    set_ctl(field, table.concat({pop, fmt(NOW), rq, er, sl}, ':'))
  end
end
local function ac_move(from, to, reason)
  local kept = {}
  for e in string.gmatch(ctl().ac_log or '', '[^;]+') do kept[#kept + 1] = e end
  local out = {}
  for j = math.max(1, #kept - __ADAPTIVE_LOG__ + 2), #kept do out[#out + 1] = kept[j] end
  out[#out + 1] = table.concat({fmt(NOW), fmt(from), fmt(to), reason}, ':')
  set_ctl('ac_val', fmt(to), 'ac_move', fmt(NOW), 'ac_log', table.concat(out, ';'), 'ac_ev', '')
end
-- On: switched on from the console, or on in the settings and not switched off.
local function ac_enabled(c, s) return c.ac_on == '1' or (c.ac_on ~= '0' and s.on) end
-- Pins the value at v, or releases the pin (v nil; nothing when none is held): each a move in the log.
local function ac_pin_at(v)
  local held = tonumber(ctl().ac_pin)
  if v then
    ac_move(held or tonumber(ctl().ac_val) or 0, v, 'p')
    -- The operator's value: the boundary learned before it no longer says where the site's is.
    set_ctl('ac_pin', fmt(v), 'ac_top', '', 'ac_fail', '')
  elseif held then
    ac_move(held, held, 'u')
    del_ctl('ac_pin')
  end
end
-- How much of the value a cut keeps: 1 - (r - 1) / __AC_CUT_SPAN__ within [__AC_CUT_KEEP_MIN__,
-- __AC_CUT_KEEP_MAX__], r the worse signal over its target (cutKeep in adaptive.ts: the same arithmetic).
local function ac_over(n, target, rq)
  if n == 0 then return 0 end
  if target == 0 then return math.huge end
  return (n * 100) / (target * rq)
end
local function ac_keep(rq, er, sl, s)
  local r = math.max(ac_over(er, s.err, rq), ac_over(sl, s.slow, rq))
  return math.max(__AC_CUT_KEEP_MIN__, math.min(__AC_CUT_KEEP_MAX__, 1 - (r - 1) / __AC_CUT_SPAN__))
end
-- The value in effect, or nil when the controller is off (the knob's own value `base` stands).
-- frozen: no step (paused, switched, before the start, a read-only run); waiting: tickets wait.
local function ac_value(base, frozen, waiting)
  local c = ctl()
  local s = ac_settings(c.ac_cfg)
  if not s then return nil end
  if not ac_enabled(c, s) then return nil end
  if c.ac_pin then return tonumber(c.ac_pin) end
  local value = math.min(s.max, math.max(s.min, tonumber(c.ac_val) or base))
  if frozen or NOW - (tonumber(c.ac_at) or 0) < __AC_STEP_MS__ then return value end
  local moved = tonumber(c.ac_move) or 0
  local since = moved + __AC_WINDOW_MS__
  local rq, er, sl, pops = 0, 0, 0, 0
  for j = 0, __AC_SLOTS__ - 1 do
    local at, a, b, d = string.match(c['o' .. j] or '', '^[^:]+:(%d+):(%d+):(%d+):(%d+)$')
    at = tonumber(at)
    if at and at >= since and at > NOW - __AC_WINDOW_MS__ then
      rq, er, sl, pops = rq + tonumber(a), er + tonumber(b), sl + tonumber(d), pops + 1
    end
  end
  if pops == 0 then return value end
  -- The answers since the last move: this window's, added to those of earlier windows it does not
  -- overlap (a report counts the window before it; an overlapping one would count answers twice),
  -- until they are enough to decide on.
  local ev_at, e_rq, e_er, e_sl = string.match(c.ac_ev or '', '^(%d+):(%d+):(%d+):(%d+)$')
  ev_at = tonumber(ev_at)
  if not ev_at or tonumber(e_rq) >= __AC_MIN_REQUESTS__ then
    ev_at, e_rq, e_er, e_sl = NOW, rq, er, sl
  elseif ev_at <= NOW - __AC_WINDOW_MS__ then
    ev_at, e_rq, e_er, e_sl = NOW, tonumber(e_rq) + rq, tonumber(e_er) + er, tonumber(e_sl) + sl
  else
    e_rq, e_er, e_sl = tonumber(e_rq), tonumber(e_er), tonumber(e_sl)
  end
  -- The load against the last step's: while it still moves by more than a tenth, wait for it to
  -- settle before raising into a rise or cutting into a fall (a move shows only as sessions turn over).
  local before = tonumber(string.match(c.ac_sig or '', '^%d+:(%d+):'))
  -- A change counts when it is over a tenth and over what chance moves a count by (twice its
  -- square root): small counts jump by more than a tenth from one window to the next on their own.
  local function moves(d) return d * 10 > before and d * d > 4 * before end
  local rising = before and moves(rq - before)
  local falling = before and moves(before - rq)
  set_ctl('ac_at', fmt(NOW), 'ac_sig', table.concat({fmt(NOW), fmt(rq), fmt(er), fmt(sl), fmt(pops)}, ':'),
    'ac_ev', table.concat({fmt(ev_at), fmt(e_rq), fmt(e_er), fmt(e_sl)}, ':'))
  local to, reason = value, nil
  local over_err, over_slow = er * 100 > s.err * rq, sl * 100 > s.slow * rq
  local ev_err, ev_slow = e_er * 100 > s.err * e_rq, e_sl * 100 > s.slow * e_rq
  -- Headroom: the answers since the last move use at most 1 / __AC_PROBE_HEADROOM__ of each target.
  local roomy_err = e_er * 100 * __AC_PROBE_HEADROOM__ <= s.err * e_rq
  local roomy = roomy_err and e_sl * 100 * __AC_PROBE_HEADROOM__ <= s.slow * e_rq
  local top = tonumber(c.ac_top or '')
  local fails = tonumber(c.ac_fail or '') or 0
  local step = math.max(1, math.ceil((s.max - s.min) / __AC_STEPS__))
  local hard = (rq >= __AC_MIN_REQUESTS__ and (over_err or over_slow)) or (e_rq >= __AC_MIN_REQUESTS__ and (ev_err or ev_slow))
  -- At or above the boundary (a try): without headroom it steps back at once, within target as it
  -- may be, rather than wait for the try's load to take the origin over its target.
  local soft = top and value >= top and e_rq >= __AC_MIN_REQUESTS__ and not roomy
  if falling and (over_err or over_slow or soft) then
    -- Over target (or a try without headroom), but the load is already coming down: let it.
  elseif hard or soft then
    local keep = rq >= __AC_MIN_REQUESTS__ and (over_err or over_slow) and ac_keep(rq, er, sl, s) or ac_keep(e_rq, e_er, e_sl, s)
    -- Near a boundary found before, a small cut finds it again; a site that lost more capacity
    -- than that is followed by the next cuts, a window apart (0.7, 0.49, 0.34 of the value).
    if top then keep = math.max(keep, __AC_GENTLE_KEEP__) end
    -- A try without headroom but within target is undone by one, the least step back.
    to = hard and math.max(s.min, math.min(value - 1, math.floor(value * keep + 0.5))) or math.max(s.min, value - 1)
    reason = (over_err or ev_err or (not hard and not roomy_err)) and 'e' or 's'
    -- A try (at or above the boundary) or a climb that failed: counted, for the next try's hold.
    local tried = top and (value >= top or string.sub(c.ac_log or '', -1) == 'h')
    if to ~= value then set_ctl('ac_top', fmt(value), 'ac_fail', fmt(tried and fails + 1 or fails)) end
  elseif waiting and not rising and e_rq >= __AC_MIN_REQUESTS__ and not over_err and not over_slow and not ev_err and not ev_slow then
    if not top then
      -- No boundary yet: a step, two when nothing failed and nothing was slow (no sign of a limit).
      to = value + ((e_er == 0 and e_sl == 0) and 2 or 1) * step
    elseif not roomy or NOW - moved < __AC_PLATEAU_MS__ then
      -- Near a boundary found before, it climbs only once its last move has been held long enough
      -- for the load to show it, and only with headroom: within target but using more than
      -- 1 / __AC_PROBE_HEADROOM__ of it, a site this near its limit would go over with more.
    elseif value < top - 1 then
      -- Half the way to just under the boundary: the moves shrink as it comes near.
      to = math.min(top - 1, value + math.min(step, math.max(1, math.floor((top - value) / 2))))
    else
      -- At the boundary (just under it, or above it while the site stays healthy: it has grown):
      -- on, twice as far above it at each try. Trying again the boundary itself after tries there
      -- failed twice or more in a row, when one more is over a tenth of the value, waits 2, then 4
      -- holds (AC_TRY_BACKOFF in adaptive.ts).
      local up = math.min(step, math.max(1, value - top + 1))
      if value >= top or up * 10 <= value or fails < 2 or NOW - moved >= __AC_PLATEAU_MS__ * 2 ^ math.min(fails - 1, __AC_TRY_BACKOFF__) then to = value + up end
    end
    to, reason = math.min(s.max, to), 'h'
  end
  if reason and to ~= value then
    -- A try that held: the site takes the boundary, the tries start over at one hold.
    if reason == 'h' and top and value >= top and fails > 0 then set_ctl('ac_fail', '0') end
    ac_move(value, to, reason)
  end
  return to
end
-- The knob the controller moves ('a' max active, 'n' max new per minute, 'r' the count per period,
-- '' none) and the value in effect (nil: off), as read_controls found them, for stats.
local AC_KNOB, AC_VALUE = '', nil
