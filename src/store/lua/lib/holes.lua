--- Ticket blocks' holes (see Blocks in the header): numbers a caller took in a block and will never
--- hand out. ctl `bh` = `<epoch>:<generation>:<from>-<to>,...`, ascending, at most
--- __MAX_STORED_HOLE_RANGES__ ranges, read with the controls and written with the run's other ctl
--- fields, so holes cost no command. A value of another epoch or generation is void (a reset or a
--- lost state took its numbers with it). FIFO only: the random method stores every ticket in its
--- draw and never reads them.
---
--- pass_holes(cursor, n, limit): the number up to which the cursor moves to pass n numbers that are
--- not holes, never past limit, and the holes right after them too (so the cursor does not stop
--- below a run of nobody's numbers); also how many holes it passed and which (spans). take_holes
--- drops the stored holes at or below where the cursor went.

CTL_FIELDS[#CTL_FIELDS + 1] = 'bh'
local HOLES
local function hole_ranges(v)
  local r = {}
  for a, b in string.gmatch(v or '', '(%d+)%-(%d+)') do r[#r + 1] = {tonumber(a), tonumber(b)} end
  return r
end
local function holes()
  if HOLES then return HOLES end
  HOLES = {}
  if RANDOM then return HOLES end
  local e, g, list = string.match(ctl().bh or '', '^(%d+):(%d+):(.*)$')
  if e and tonumber(e) == (tonumber(ctl().epoch) or 0) and tonumber(g) == GEN then HOLES = hole_ranges(list) end
  return HOLES
end
local function save_holes()
  local out = {}
  for i, x in ipairs(HOLES) do out[i] = fmt(x[1]) .. '-' .. fmt(x[2]) end
  set_ctl('bh', #out > 0 and (fmt(tonumber(ctl().epoch) or 0) .. ':' .. fmt(GEN) .. ':' .. table.concat(out, ',')) or '')
end
-- The holes above cursor: how many numbers of tail - cursor nobody holds.
local function holes_above(cursor)
  local n = 0
  for _, x in ipairs(holes()) do
    if x[2] > cursor then n = n + x[2] - math.max(x[1], cursor + 1) + 1 end
  end
  return n
end
-- The holes above cursor as the state reports them, `<from>-<to>,...` ascending ('' for none): the
-- edge subtracts them from a visitor's people ahead and from the line's waiting count. Read with
-- the controls, so they cost no command.
local function holes_text(cursor)
  local out = {}
  for _, x in ipairs(holes()) do
    if x[2] > cursor then out[#out + 1] = fmt(math.max(x[1], cursor + 1)) .. '-' .. fmt(x[2]) end
  end
  return table.concat(out, ',')
end
local function pass_holes(cursor, n, limit)
  local target, left, passed, spans = cursor, n, 0, {}
  for _, x in ipairs(holes()) do
    if x[2] > target then
      local a = math.max(x[1], target + 1)
      if a > limit or left < a - target - 1 then break end
      left = left - (a - target - 1)
      local b = math.min(x[2], limit)
      spans[#spans + 1] = {a, b}
      passed = passed + b - a + 1
      target = b
      if b < x[2] then return target, passed, spans end
    end
  end
  return math.min(target + left, limit), passed, spans
end
local function take_holes(cursor)
  local h = holes()
  if #h == 0 or h[1][1] > cursor then return end
  local kept = {}
  for _, x in ipairs(h) do
    if x[2] > cursor then kept[#kept + 1] = {math.max(x[1], cursor + 1), x[2]} end
  end
  HOLES = kept
  save_holes()
end
-- A join's report (ARGV `<epoch>:<generation>:<ranges>`): the ranges of this epoch and generation,
-- above the cursor (a hole already called is left to lapse, as an unreported one does) and at or
-- below the tail before this join's own numbers, merged into the stored ones.
local function add_holes(arg, cursor, tail)
  if RANDOM or arg == '' then return end
  local e, g, list = string.match(arg, '^(%d+):(%d+):([%d%-,]+)$')
  if not e then error('wr: the holes argument must be <epoch>:<generation>:<from>-<to>,...') end
  if tonumber(e) ~= (tonumber(ctl().epoch) or 0) or tonumber(g) ~= GEN then return end
  -- An event's pre-queue (tickets 1..ev_size) is called by place, shuffled or not, so its numbers
  -- say nothing about places: its holes are left to lapse, and so is every hole reported before the
  -- pre-queue is frozen (every number taken until then is in it).
  local low = cursor
  if EVENT_START > 0 then
    if not OPEN or tonumber(ctl().ev_start or nil) ~= EVENT_START then return end
    low = math.max(cursor, (read_event()))
  end
  local all = {}
  for _, x in ipairs(holes()) do all[#all + 1] = x end
  for _, x in ipairs(hole_ranges(list)) do
    local a, b = math.max(x[1], low + 1), math.min(x[2], tail)
    if a <= b then all[#all + 1] = {a, b} end
  end
  table.sort(all, function(p, q) return p[1] < q[1] end)
  local merged = {}
  for _, x in ipairs(all) do
    local last = merged[#merged]
    if last and x[1] <= last[2] + 1 then
      last[2] = math.max(last[2], x[2])
    elseif #merged < __MAX_STORED_HOLE_RANGES__ then
      merged[#merged + 1] = {x[1], x[2]}
    end
  end
  HOLES = merged
  save_holes()
end
