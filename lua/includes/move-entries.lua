-- @include bucket-key

-- The entries of bucket `from`, moved to bucket `to` (empty).
local function move_entries(index, from, to)
  local from_key = bucket_key(index, from)
  local flat = redis.call('ZRANGE', from_key, 0, -1, 'WITHSCORES')
  local args = {}
  for i = #flat - 1, 1, -2 do -- latest first, as put() does
    args[#args + 1] = flat[i + 1]
    args[#args + 1] = flat[i]
  end
  redis.call('ZREMRANGEBYRANK', from_key, 0, -1)
  redis.call('ZADD', bucket_key(index, to), unpack(args))
end
