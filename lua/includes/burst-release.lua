-- @include burst-keys

-- The events of `ids` just settled (handled in every group, or dead-lettered
-- while no named group holds them): each trailing payload a leading debounce
-- held for one of them (includes/enqueue-policy.lua) is stored now as a new
-- event, due when its quiet period ends (at once when that has passed), in
-- the queue's side schedule, which dispatch-due.lua drains like the buckets.
-- `meta` is the type's meta hash, where bodies live. Returns the ids released.
local function burst_release(meta, ids)
  local bursts, burst_ends = burst_keys(meta)
  local records = redis.call('HMGET', bursts, unpack(ids))
  local side_schedule = string.sub(meta, 1, -3) .. ':s'
  local released = {}
  for k, id in ipairs(ids) do
    local quiet_end, burst, held_due, held = string.match(records[k] or '', '^(%d+)|(%-?%d+|%d+)|(%d*)|(.*)$')
    if held and held ~= '' and held_due ~= '' then
      redis.call('HSET', meta, id, '0|' .. held_due .. '|' .. held)
      redis.call('ZADD', side_schedule, held_due, id)
      redis.call('HSET', bursts, id, quiet_end .. '|' .. burst .. '||')
      redis.call('ZADD', burst_ends, quiet_end, id)
      released[#released + 1] = id
    end
  end
  return released
end
