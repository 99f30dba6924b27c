-- @include lease-heartbeat-drop
-- @include lease-unpin-if-idle

-- Takes the leases of `ids` (all in flight, in the order they were claimed)
-- and puts the events back at the head of the ready list in that order, so
-- they keep their turn. No attempt is spent: the attempt in flight lives only
-- in the lease (includes/lease-constants.lua).
local function lease_give_back(in_flight_key, ready_key, ids)
  if #ids == 0 then return end
  local scores = redis.call('ZMSCORE', in_flight_key, unpack(ids))
  redis.call('ZREM', in_flight_key, unpack(ids))
  lease_heartbeat_drop(in_flight_key, scores)
  lease_unpin_if_idle(in_flight_key)
  local reversed = {}
  for i = #ids, 1, -1 do reversed[#reversed + 1] = ids[i] end
  redis.call('LPUSH', ready_key, unpack(reversed))
end
