-- @include bucket-key

-- Adds list[from..to] to a bucket. Redis finds a listpack entry's place by
-- scanning from the front, so the latest go first: into a new bucket, each
-- insertion then stops at once.
local function put(index, bucket, list, from, to)
  local args = {}
  local due, printed
  for k = to, from, -1 do
    -- Redis would print each number; entries mostly share a due time.
    if list[k][1] ~= due then
      due = list[k][1]
      printed = tostring(due)
    end
    args[#args + 1] = printed
    args[#args + 1] = list[k][2]
  end
  redis.call('ZADD', bucket_key(index, bucket), unpack(args))
end
