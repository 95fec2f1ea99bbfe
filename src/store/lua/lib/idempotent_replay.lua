--- Explicit admits may carry an idempotency key: KEYS[9] (the key's own store key, under the queue's
--- hash tag). A run that finds it recorded writes nothing and answers the current state with the
--- admitted count recorded by the run that applied it, then replayed = 1; otherwise the run admits
--- and records its count there for IDEMPOTENCY_MS. A retry of a timed-out admit (or a late arrival
--- of the first attempt after its retry ran) therefore admits once.

local K_IDEM = KEYS[9]
if K_IDEM then
  local done = redis.call('GET', K_IDEM)
  if done then
    local state = read_state(tail, cursor, paused, max_active, max_new)
    state[__STATE_LENGTH__ + 1] = tonumber(done) or 0
    state[__STATE_LENGTH__ + 2] = 1
    return state
  end
end
