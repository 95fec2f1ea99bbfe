
if K_IDEM then redis.call('SET', K_IDEM, fmt(state[__STATE_LENGTH__ + 1]), 'PX', __IDEMPOTENCY_MS__) end
state[__STATE_LENGTH__ + 2] = 0
