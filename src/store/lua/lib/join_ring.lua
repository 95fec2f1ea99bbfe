--- Joins (see the header): ctl's join ring remembers which ticket each recent join key was given.
--- Slot `j<the key's first __JOIN_SLOT_DIGITS__ hex digits>` holds `<key>:<ticket>:<ms>:<epoch>:
--- <generation>:<claimed>[:<block's last number>]`, written with the run's other ctl fields and read with them (the slot of
--- this run's key joins the HMGET), so the ring costs no command. A later key in the same slot
--- overwrites it: that retry then takes a new ticket, as a join without a key does.

local JOIN_KEY = ARGV[16] or ''
local JOIN_FIELD
if JOIN_KEY ~= '' then
  if #JOIN_KEY ~= 16 or not string.match(JOIN_KEY, '^[0-9a-f]+$') then
    error('wr: ARGV[16] must be a join key of 16 lower-case hex digits')
  end
  JOIN_FIELD = 'j' .. fmt(tonumber(string.sub(JOIN_KEY, 1, __JOIN_SLOT_DIGITS__), 16))
  CTL_FIELDS[#CTL_FIELDS + 1] = JOIN_FIELD
end
-- The ring's entry for this run's key when it stands for a ticket of this life of the queue (the
-- same epoch and generation, recorded less than JOIN_KEEP_MS ago): {ticket, claimed, block's last
-- number or 0}; else nil.
local function join_replay()
  if not JOIN_FIELD then return nil end
  local key, t, at, epoch, gen, claimed, last = string.match(ctl()[JOIN_FIELD] or '', '^(%x+):(%d+):(%d+):(%d+):(%d+):([01]):?(%d*)$')
  if key ~= JOIN_KEY then return nil end
  if math.abs(NOW - tonumber(at)) >= __JOIN_KEEP_MS__ then return nil end
  if tonumber(epoch) ~= (tonumber(ctl().epoch) or 0) or tonumber(gen) ~= GEN then return nil end
  return {tonumber(t), claimed == '1', tonumber(last) or 0}
end
local function join_record(ticket, claimed, last)
  if not JOIN_FIELD then return end
  local entry = {JOIN_KEY, fmt(ticket), fmt(NOW), fmt(tonumber(ctl().epoch) or 0), fmt(GEN), fmt(claimed)}
  if last > 0 then entry[#entry + 1] = fmt(last) end
  set_ctl(JOIN_FIELD, table.concat(entry, ':'))
end
-- A retry: its ticket again, nothing taken anew. A ticket claimed at its join stays claimed (rate
-- mode: its admission was counted then; capacity mode: its slot is renewed, or taken again if room
-- allows after it lapsed); one that was not is where it stands now (the caller settles it as any
-- waiting ticket); random: its presence in the draw is renewed.
local function replay_join(entry, paused, max_active, max_new)
  local ticket, claimed = entry[1], 0
  local tail, cursor = ctl_int('tail') or 0, ctl_int('cursor') or 0
  prologue(tail)
  if entry[2] then
    if max_active > 0 or max_new > 0 then
      expire()
      claimed = take_slot(ticket, tail, cursor, paused, max_active, max_new, 0)
    else
      claimed = 1
    end
  elseif RANDOM then
    redis.call('ZADD', K_WAITING, 'XX', fmt(NOW), fmt(ticket))
  end
  local state = read_state(tail, cursor, paused, max_active, max_new)
  state[__STATE_LENGTH__ + 1] = ticket
  state[__STATE_LENGTH__ + 2] = claimed
  state[__STATE_LENGTH__ + 3] = 1
  if entry[3] > 0 then state[__STATE_LENGTH__ + 4] = entry[3] end
  flush_ctl()
  return state
end
