
local tail = read_int(K_TAIL) or 0
local cursor = read_int(K_CURSOR) or 0
local paused, max_active, max_new = read_controls()
local capacity = max_active > 0 or max_new > 0
