--- A run that finds its key in the key's slot (see idempotent_slot) writes nothing (but what its
--- reads owe, see flush_ctl) and answers the current state with the admitted count recorded by the
--- run that applied it, then replayed = 1 and the count that run was asked for (0 for an entry
--- written before the count was recorded); otherwise the run admits and records both. A retry of a
--- timed-out admit (or a late arrival of the first attempt after its retry ran) therefore admits
--- once, and the caller can tell a retry from a key used again for another count. The slot's other
--- live entries are kept for the record.

local idem_kept = {}
if IDEM_FIELD then
  for key, done, until_ms, asked in string.gmatch(ctl()[IDEM_FIELD] or '', '([^=;]+)=(%d+)@(%d+)#?(%d*)') do
    if tonumber(until_ms) > NOW then
      if key == IDEM_KEY then
        local state = read_state(tail, cursor, paused, max_active, max_new)
        state[__STATE_LENGTH__ + 1] = tonumber(done)
        state[__STATE_LENGTH__ + 2] = 1
        state[__STATE_LENGTH__ + 3] = tonumber(asked) or 0
        flush_ctl()
        return state
      end
      idem_kept[#idem_kept + 1] = key .. '=' .. done .. '@' .. until_ms .. (asked ~= '' and ('#' .. asked) or '')
    end
  end
end
