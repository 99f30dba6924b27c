-- @include latest-due
-- @include move-entries
-- @include new-bucket

-- A name for a new bucket that will hold list[first..last]. Splitting a
-- bucket can leave a part due only at the next bucket's earliest due, joining
-- the group that starts there. A new name sorts last, and only the last of a
-- group may hold later entries: when the group's last one does, its entries
-- move to the new name, and the part takes the old one, emptied.
local function name_for_part(index, list, first, last)
  local lo = list[first][1]
  local name, newest = new_bucket(index, lo)
  if list[last][1] ~= lo or not newest or latest_due(index, newest) == lo then return name end
  move_entries(index, newest, name)
  redis.call('ZADD', index, lo, name)
  return newest
end
