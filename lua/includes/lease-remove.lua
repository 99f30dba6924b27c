-- @include lease-heartbeat-drop
-- @include lease-unpin-if-idle

-- Removes `id`'s lease, if it has one, and its heartbeat entry; true when it had.
local function lease_remove(in_flight_key, id)
  local score = redis.call('ZSCORE', in_flight_key, id)
  if not score then return false end
  redis.call('ZREM', in_flight_key, id)
  lease_heartbeat_drop(in_flight_key, { score })
  lease_unpin_if_idle(in_flight_key)
  return true
end
