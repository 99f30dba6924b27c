-- @include lease-pin-constants

-- After leases were removed: once only the pin is left, the set goes (no
-- empty queue leaves a key behind). The pin sorts last, so it is first only
-- when it is alone.
local function lease_unpin_if_idle(in_flight_key)
  if redis.call('ZRANGE', in_flight_key, 0, 0)[1] == LEASE_PIN then
    redis.call('ZREM', in_flight_key, LEASE_PIN)
  end
end
