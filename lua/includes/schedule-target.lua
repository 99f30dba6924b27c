-- The bucket that takes due time `due` (nil: a new one), its earliest due,
-- and whether `due` is earlier than the whole schedule.
local function schedule_target(index, due)
  local below = redis.call('ZRANGE', index, due, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
  if below[1] then return below[1], tonumber(below[2]), false end
  -- Earlier than every bucket: the first takes it, unless it shares its
  -- earliest due with others (moving its start would leave it overlapping them).
  local first_two = redis.call('ZRANGE', index, 0, 1, 'WITHSCORES')
  if not first_two[1] then return nil, nil, true end
  local first = tonumber(first_two[2])
  if first_two[3] and tonumber(first_two[4]) == first then return nil, nil, true end
  return first_two[1], first, true
end
