-- Drops the heartbeat entries (includes/lease-heartbeat.lua) of leases that
-- end otherwise than by lapsing: a retry, a dead letter, a snooze, a give-back,
-- a cancel or an expiry. `scores` are their in-flight scores, which name their
-- claims. The heartbeat set is named after the in-flight set (<queue>:f ->
-- <queue>:hl), in its slot; without heartbeats it does not exist, and this
-- costs one EXISTS.
local function lease_heartbeat_drop(in_flight_key, ids, scores)
  local key = string.sub(in_flight_key, 1, -3) .. ':hl'
  if redis.call('EXISTS', key) == 0 then return end
  local members = {}
  for k, id in ipairs(ids) do
    local score = tonumber(scores[k])
    if score then members[#members + 1] = string.format('%.0f', score - score % 2) .. ':' .. id end
  end
  if #members > 0 then redis.call('ZREM', key, unpack(members)) end
end
