-- Heartbeat leases (since 0.6, HandlerOptions.heartbeatMs). A claim made with
-- heartbeats writes one entry in the queue's heartbeat set for all the leases
-- it wrote: member '<claim identity>' (the not-started score every lease of the
-- claim shares, includes/lease-constants.lua), scored by when it lapses unless
-- the instance renews it (lua/renew-leases.lua). One entry per claim, not per
-- event: a claim of 32 costs one write. The in-flight scores are never changed
-- by a renewal, so they stay the claims' fences; their expiry (timeout + grace)
-- stays the hard bound. A lapsed entry ends the leases that still carry its
-- identity (score identity or identity + 1): none, once they all ended
-- otherwise (a success, a retry, a cancel, a 0.5 instance's script), and then
-- it is only dropped.
-- @include lease-constants
-- @include lease-heartbeat-leases

-- The in-flight leases whose claim's heartbeat lapsed by `now` and whose hard
-- expiry has not come (those the caller takes as expired anyway), at most
-- `limit`, as {id, in-flight score} pairs. Every lapsed entry looked at is
-- removed; one whose claim has more leases than fit is put back, lapsed, for
-- the next call. Ten entries looked at, at most.
local function heartbeat_lapsed(heartbeats_key, in_flight_key, now, limit)
  local ended = {}
  local hard = now * 1000 + 999
  local lapsed = redis.call('ZRANGE', heartbeats_key, '-inf', now, 'BYSCORE', 'LIMIT', 0, 10)
  for _, identity in ipairs(lapsed) do
    redis.call('ZREM', heartbeats_key, identity)
    local value = tonumber(identity)
    -- Past its hard expiry, the caller's look at expired leases takes them.
    if value and value >= SCALED_LEASE_FROM and value > hard then
      local room = limit - #ended / 2
      if room <= 0 then
        redis.call('ZADD', heartbeats_key, now, identity)
      else
        local leases = heartbeat_leases(in_flight_key, identity, room + 1)
        for i = 1, math.min(#leases, 2 * room), 2 do
          ended[#ended + 1] = leases[i]
          ended[#ended + 1] = leases[i + 1]
        end
        if #leases > 2 * room then redis.call('ZADD', heartbeats_key, now, identity) end
      end
    end
  end
  return ended
end
