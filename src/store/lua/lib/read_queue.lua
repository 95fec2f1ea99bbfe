
local tail = ctl_int('tail') or 0
local cursor = ctl_int('cursor') or 0
local paused, max_active, max_new = read_controls()
local capacity = max_active > 0 or max_new > 0
if not (capacity or RANDOM) and not GEN_READ_ONLY then drop_book() else start_book() end
