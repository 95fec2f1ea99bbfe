--- claim and draw, ARGV 14: a ticket of a lost generation is nobody's here (its number may be a new
--- visitor's). Answered read-only: the state, then `extras` (claim: claimed 0; draw: unknown, 0), so
--- the caller takes the visitor a new ticket.

if foreign_gen(14) then
  local state = read_state(tail, cursor, paused, max_active, max_new)
  for i, v in ipairs({__ARGS__}) do state[__STATE_LENGTH__ + i] = v end
  flush_ctl()
  return state
end
