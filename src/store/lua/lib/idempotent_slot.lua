--- Explicit admits may carry an idempotency key, ARGV 13 ('' = none). ctl's idempotency ring
--- remembers the keys of the last IDEMPOTENCY_MS: slot `i<h>`, h a hash of the key (h * 31 + each
--- byte, mod IDEMPOTENCY_SLOTS), holds at most IDEMPOTENCY_SLOT_KEEP entries
--- `<key>=<admitted>@<until ms>#<count asked>`, newest last, joined by ';'. The key's slot joins the controls'
--- HMGET and is written with the cursor in the run's one HSET, so a key costs no command of its own
--- and a run reads one slot, never every key. Must run before ctl() is first read.

local IDEM_KEY = ARGV[13] or ''
local IDEM_FIELD
if IDEM_KEY ~= '' then
  if #IDEM_KEY > 64 or not string.match(IDEM_KEY, '^[%w_.:-]+$') then
    error('wr: ARGV[13] must be an idempotency key')
  end
  local h = 0
  for i = 1, #IDEM_KEY do h = (h * 31 + string.byte(IDEM_KEY, i)) % __IDEMPOTENCY_SLOTS__ end
  IDEM_FIELD = 'i' .. fmt(h)
  CTL_FIELDS[#CTL_FIELDS + 1] = IDEM_FIELD
end
