-- The leases of the claim `identity` (includes/lease-heartbeat.lua): those of
-- its not-started and its started score, at most `most`, as {id, score, ...}.
local function heartbeat_leases(in_flight_key, identity, most)
  return redis.call('ZRANGE', in_flight_key, identity, string.format('%.0f', tonumber(identity) + 1), 'BYSCORE', 'LIMIT', 0, most, 'WITHSCORES')
end
