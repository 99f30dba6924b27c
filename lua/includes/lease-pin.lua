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

-- After leases were removed: once only the pin is left, the set goes (no
-- empty queue leaves a key behind). The pin sorts last, so it is first only
-- when it is alone.
local function lease_unpin_if_idle(in_flight_key)
  if redis.call('ZRANGE', in_flight_key, 0, 0)[1] == LEASE_PIN then
    redis.call('ZREM', in_flight_key, LEASE_PIN)
  end
end

-- Removes `id`'s lease, if it has one; true when it had.
local function lease_remove(in_flight_key, id)
  if redis.call('ZREM', in_flight_key, id) == 0 then return false end
  lease_unpin_if_idle(in_flight_key)
  return true
end

-- Takes the leases of `ids` (all in flight, in the order they were claimed)
-- and puts the events back at the head of the ready list in that order, so
-- they keep their turn. No attempt is spent: the attempt in flight lives only
-- in the lease (includes/lease.lua).
local function lease_give_back(in_flight_key, ready_key, ids)
  redis.call('ZREM', in_flight_key, unpack(ids))
  lease_unpin_if_idle(in_flight_key)
  local reversed = {}
  for i = #ids, 1, -1 do reversed[#reversed + 1] = ids[i] end
  redis.call('LPUSH', ready_key, unpack(reversed))
end
