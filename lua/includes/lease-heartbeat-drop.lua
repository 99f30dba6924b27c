-- @include lease-heartbeat-leases

-- After leases ended otherwise than by lapsing (a success, a retry, a dead
-- letter, a snooze, a give-back, a cancel, an expiry): the heartbeat entry of
-- each of their claims (includes/lease-heartbeat.lua) goes once no lease of
-- that claim is left. `scores` are their in-flight scores, which name their
-- claims. The heartbeat set is named after the in-flight set (<queue>:f ->
-- <queue>:hl), in its slot; without heartbeats it does not exist, and this
-- costs one EXISTS.
local function lease_heartbeat_drop(in_flight_key, scores)
  local key = string.sub(in_flight_key, 1, -3) .. ':hl'
  if redis.call('EXISTS', key) == 0 then return end
  local seen = {}
  for _, s in ipairs(scores) do
    local score = tonumber(s)
    if score then
      local identity = string.format('%.0f', score - score % 2)
      if not seen[identity] then
        seen[identity] = true
        if #heartbeat_leases(in_flight_key, identity, 1) == 0 then redis.call('ZREM', key, identity) end
      end
    end
  end
end
