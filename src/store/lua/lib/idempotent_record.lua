
if IDEM_FIELD then
  local keep = {}
  for i = math.max(1, #idem_kept - __IDEMPOTENCY_SLOT_KEEP__ + 2), #idem_kept do keep[#keep + 1] = idem_kept[i] end
  keep[#keep + 1] = IDEM_KEY .. '=' .. fmt(state[__STATE_LENGTH__ + 1]) .. '@' .. fmt(NOW + __IDEMPOTENCY_MS__) .. '#' .. fmt(count)
  set_ctl(IDEM_FIELD, table.concat(keep, ';'))
end
state[__STATE_LENGTH__ + 2] = 0
state[__STATE_LENGTH__ + 3] = count
