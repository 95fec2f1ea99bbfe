--- The generation (see the header): read with the controls' HMGET every policy script already runs,
--- so it costs no command of its own; written once, by the first run that finds it absent (the
--- queue's state was lost, or never existed), which also restores the controls the caller's POP
--- remembers (RESTORE, see prelude). A stats run (GEN_READ_ONLY) reports 0 instead of writing.
--- The value mixes the caller's seed and time, so two generations differ even when seed is 0.
--- foreign_gen(i): ARGV[i] carries a token's generation ('' or 0 = a token from before generations,
--- taken as current) and it is not this one: the ticket number in that token means nothing here.
--- foreign_member: the slot member of such a token's holder, distinct from every ticket of this
--- generation (tickets are plain numbers), so the holder is counted without taking anybody's slot.

local GEN, GEN_READ_ONLY, GEN_CREATED = 0, false, false
-- A generation made of SEED and NOW, never `avoid`.
local function fresh_gen(avoid)
  local g = ((SEED + NOW) % __MAX_SEED__) + 1
  if g == avoid then g = g % __MAX_SEED__ + 1 end
  return g
end
local function ensure_gen(v)
  local g = tonumber(v or nil)
  if g then return g end
  if GEN_READ_ONLY then return 0 end
  g = fresh_gen(0)
  set_ctl('gen', fmt(g))
  GEN_CREATED = true
  -- The caller's POP knew this queue: the state was lost, not new. Its switch and pause are back in
  -- force from this run on, and `restored` says when and what, for the console and the metrics.
  if RESTORE then
    local what = {}
    if RESTORE.switch ~= '' then
      set_ctl('switch', RESTORE.switch)
      what[#what + 1] = RESTORE.switch
    end
    if RESTORE.paused then
      set_ctl('paused', '1')
      what[#what + 1] = 'paused'
    end
    set_ctl('restored', fmt(NOW) .. ':' .. table.concat(what, ','))
  end
  return g
end
local function foreign_gen(i)
  local g = tonumber(ARGV[i] or '')
  return g ~= nil and g > 0 and g ~= GEN
end
local function foreign_member(ticket, i)
  return fmt(ticket) .. '@g' .. fmt(tonumber(ARGV[i]))
end
-- #include recovery
