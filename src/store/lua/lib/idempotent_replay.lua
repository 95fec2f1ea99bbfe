--- Explicit admits may carry an idempotency key, ARGV 13 ('' = none). ctl's `idem` field keeps the
--- keys of the last IDEMPOTENCY_MS, at most IDEMPOTENCY_KEEP of them, newest last, as
--- `<key>=<admitted>@<until ms>` joined by ';': read with the controls and written with the cursor
--- in the run's one HSET, so a key costs no command of its own. A run that finds its key writes
--- nothing (but what its reads owe, see flush_ctl) and answers the current state with the admitted
--- count recorded by the run that applied it, then replayed = 1; otherwise the run admits and
--- records its count. A retry of a timed-out admit (or a late arrival of the first attempt after its
--- retry ran) therefore admits once.

local IDEM_KEY = ARGV[13] or ''
if IDEM_KEY ~= '' and (#IDEM_KEY > 64 or not string.match(IDEM_KEY, '^[%w_.:-]+$')) then
  error('wr: ARGV[13] must be an idempotency key')
end
local idem_kept = {}
for key, done, until_ms in string.gmatch(ctl().idem or '', '([^=;]+)=(%d+)@(%d+)') do
  if tonumber(until_ms) > NOW then idem_kept[#idem_kept + 1] = key .. '=' .. done .. '@' .. until_ms end
  if key == IDEM_KEY and tonumber(until_ms) > NOW then
    local state = read_state(tail, cursor, paused, max_active, max_new)
    state[__STATE_LENGTH__ + 1] = tonumber(done)
    state[__STATE_LENGTH__ + 2] = 1
    flush_ctl()
    return state
  end
end
