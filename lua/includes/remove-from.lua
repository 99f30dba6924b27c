-- @include bucket-key
-- @include reindex

-- Removes `id` from the first of `buckets` (names, each followed by its index score) holding it.
local function remove_from(index, buckets, id)
  for i = 1, #buckets, 2 do
    local bucket = buckets[i]
    if redis.call('ZREM', bucket_key(index, bucket), id) == 1 then
      reindex(index, bucket, buckets[i + 1])
      return true
    end
  end
  return false
end
