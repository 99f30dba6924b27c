-- A group is done with `ids` (handled, purged, or the group removed): counts
-- them down, and returns those no group holds any more, whose bodies can go.
local function groups_release(pending_key, ids)
  local finished = {}
  for _, id in ipairs(ids) do
    if redis.call('HINCRBY', pending_key, id, -1) <= 0 then
      redis.call('HDEL', pending_key, id)
      finished[#finished + 1] = id
    end
  end
  return finished
end
