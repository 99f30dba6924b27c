-- @include name-for-part
-- @include new-bucket
-- @include put

-- Stores list[from..to] in new buckets of at most `size` entries; with
-- `keep` (a split), the first of them is bucket `keep`, emptied by the caller.
-- Appends need no name_for_part: they go to the last bucket of a group.
local function put_in_new_buckets(index, list, from, to, size, keep)
  local parts = math.ceil((to - from + 1) / size)
  size = math.ceil((to - from + 1) / parts)
  for p = 0, parts - 1 do
    local first = from + p * size
    local last = math.min(to, first + size - 1)
    local name = (p == 0 and keep) or (keep and name_for_part(index, list, first, last)) or new_bucket(index, list[first][1])
    put(index, name, list, first, last)
    redis.call('ZADD', index, list[first][1], name)
  end
end
