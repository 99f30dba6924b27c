-- The in-flight zset holds one member besides the leases while any lease is
-- there: the pin. It is longer than the 64 bytes a listpack-encoded sorted set
-- may hold in a member (zset-max-listpack-value), so the set is created as a
-- skiplist and stays one. In a listpack, every ZADD, ZMSCORE and ZREM scans
-- the set for each member it names: a claim of 32 leases spent ~17 µs in its
-- ZADD against ~10 with the pin (measured with the benchmarks). Its first
-- byte, 0xFF, never occurs in UTF-8, so no event id can be the pin; its score,
-- 2^53, is above every lease's until the year 2255, so it is never due and
-- never the first lease to expire.
local LEASE_PIN = '\255pin: keeps this in-flight set a skiplist, not a listpack (docs/redis-layout.md)'

local LEASE_PIN_SCORE = '9007199254740992'
