--- Recovery (see the header): RECOVER_MS > 0 when this run brings the first evidence that a state
--- was lost (join's ARGV 12). The first such run of a generation opens the window (recover_until in
--- ctl, read with the controls' HMGET); while it is open, capacity mode admits nobody new, as if
--- paused, so the holders of the lost state can register their slots again before any room is given;
--- rate mode counts its rate window full as of the opening run, so nobody is let in for a period.
--- RECOVER_IF_NEW_MS > 0 (join's ARGV 13 'new'): the caller's POP has served this queue's state
--- before, so a state this run finds absent was lost, not new: the window opens in the same run
--- that creates the generation, before any newcomer can walk in.

local RECOVER_MS, RECOVER_IF_NEW_MS = 0, 0
-- A count above any period's quota (the console's limit is 1,000,000).
local RATE_WINDOW_FULL = 1000000000
local function recovering(recover_until, max_active, max_new)
  if RECOVER_IF_NEW_MS > 0 and GEN_CREATED then RECOVER_MS = RECOVER_IF_NEW_MS end
  if RECOVER_MS > 0 and recover_until == 0 and not GEN_READ_ONLY then
    recover_until = NOW + RECOVER_MS
    set_ctl('recover_until', fmt(recover_until))
    -- Rate mode: what the lost state let in during its last period is gone with it, so the rate
    -- window counts as full from now (RATE_WINDOW_FULL, one entry) and the next admission waits a
    -- period, as it would have had the lost window been full.
    if max_active <= 0 and max_new <= 0 then set_ctl('rw', fmt(NOW) .. ':' .. fmt(RATE_WINDOW_FULL)) end
  end
  return NOW < recover_until and (max_active > 0 or max_new > 0)
end
