-- @include bucket-key
-- @include reindex

-- Removes and returns up to `limit` ids due at `now`, earliest buckets first.
local function schedule_take_due(index, now, limit)
  local taken = {}
  while limit > 0 do
    local buckets = redis.call('ZRANGE', index, '-inf', now, 'BYSCORE', 'LIMIT', 0, 16, 'WITHSCORES')
    if #buckets == 0 then break end
    for i = 1, #buckets, 2 do
      local bucket = buckets[i]
      local key = bucket_key(index, bucket)
      local ids = redis.call('ZRANGE', key, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
      -- Due entries are the bucket's first ones.
      if #ids > 0 then redis.call('ZREMRANGEBYRANK', key, 0, #ids - 1) end
      reindex(index, bucket, buckets[i + 1])
      for _, id in ipairs(ids) do taken[#taken + 1] = id end
      limit = limit - #ids
      if limit <= 0 then break end
    end
  end
  return taken
end
