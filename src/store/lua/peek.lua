#!lua flags=allow-key-locking
--- Read tail and cursor, writing nothing (a script rather than MGET so the store needs nothing from
--- the client but EVALSHA/EVAL). KEYS: tail, cursor. Returns {tail, cursor}.
-- wr peek: KEYS tail, cursor; returns {tail, cursor}
-- #include read_int

return {read_int(KEYS[1]) or 0, read_int(KEYS[2]) or 0}
