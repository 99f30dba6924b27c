-- @include remove-from

-- Unschedules `id`, due at `due` (from its envelope): it is in a bucket
-- starting at `due` or at the greatest earliest due below it, newest first
-- being likelier. Returns false when it was not scheduled.
local function schedule_remove(index, id, due)
  if remove_from(index, redis.call('ZRANGE', index, due, due, 'BYSCORE', 'REV', 'WITHSCORES'), id) then return true end
  local below = redis.call('ZRANGE', index, '(' .. due, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
  if below[1] and remove_from(index, redis.call('ZRANGE', index, below[2], below[2], 'BYSCORE', 'REV', 'WITHSCORES'), id) then return true end
  -- An envelope corrupted by hand reads as due 0: its entry may be anywhere.
  return tonumber(due) == 0 and remove_from(index, redis.call('ZRANGE', index, 0, -1, 'WITHSCORES'), id)
end
