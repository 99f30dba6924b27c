-- @include lease-unpin-if-idle

-- Removes `id`'s lease, if it has one; true when it had.
local function lease_remove(in_flight_key, id)
  if redis.call('ZREM', in_flight_key, id) == 0 then return false end
  lease_unpin_if_idle(in_flight_key)
  return true
end
