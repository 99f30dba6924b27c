-- @include bucket-key

local function latest_due(index, bucket)
  return tonumber(redis.call('ZRANGE', bucket_key(index, bucket), -1, -1, 'WITHSCORES')[2])
end
