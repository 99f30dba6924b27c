-- @include lease-constants
-- @include lease-expiry
-- @include lease-is-scaled
-- @include lease-pin-constants

-- Earliest moment the type's dispatcher must look again: head of the schedule
-- or the first lease to expire; -1 when neither holds anything.
-- The schedule index's scores are its buckets' earliest due times, so its
-- head is the schedule's. 0.2 leases sort before every scaled one, so when
-- the head is one of them the first scaled lease is read too.
local function next_due(schedule_index, in_flight_key)
  local s = redis.call('ZRANGE', schedule_index, 0, 0, 'WITHSCORES')
  local l = redis.call('ZRANGE', in_flight_key, 0, 0, 'WITHSCORES')
  local best = -1
  if s[2] then best = tonumber(s[2]) end
  local function consider(at)
    if best < 0 or at < best then best = at end
  end
  if l[2] and l[1] ~= LEASE_PIN then
    local head = tonumber(l[2])
    consider(lease_expiry(head))
    if not lease_is_scaled(head) then
      local scaled = redis.call('ZRANGE', in_flight_key, SCALED_LEASE_FROM, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
      if scaled[2] then consider(lease_expiry(tonumber(scaled[2]))) end
    end
  end
  return best
end
