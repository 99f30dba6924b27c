-- @include bucket-key
-- @include latest-due
-- @include new-bucket
-- @include put
-- @include put-in-new-buckets
-- @include schedule-buckets-constants

-- Stores entries[from..to] ({due, id}, ascending by due) in `bucket` (nil: a
-- new bucket), whose earliest due is `lo`. A sorted set that grew past the
-- listpack limit would stay a skiplist even after shrinking, so a bucket
-- never grows past it: what does not fit goes to new buckets. Returns true
-- when it opened buckets.
local function schedule_fill(index, bucket, lo, entries, from, to)
  local held = bucket and redis.call('ZCARD', bucket_key(index, bucket)) or 0
  if held + to - from + 1 <= BUCKET_MAX then
    local opened = not bucket
    bucket = bucket or new_bucket(index, entries[from][1])
    put(index, bucket, entries, from, to)
    if not lo or entries[from][1] < lo then redis.call('ZADD', index, entries[from][1], bucket) end
    return opened
  end
  if held == 0 or entries[from][1] >= latest_due(index, bucket) then
    -- Appending, the usual case (one delay for many events): fill the bucket
    -- up and open new full ones after it; nothing is rewritten.
    local room = BUCKET_MAX - held
    if room > 0 and bucket then
      put(index, bucket, entries, from, from + room - 1)
      if not lo or entries[from][1] < lo then redis.call('ZADD', index, entries[from][1], bucket) end
      from = from + room
    end
    put_in_new_buckets(index, entries, from, to, BUCKET_MAX)
    return true
  end
  -- Inserting among its entries: rewrite the bucket as several, with room to grow.
  local key = bucket_key(index, bucket)
  local old = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  redis.call('ZREMRANGEBYRANK', key, 0, -1)
  local merged, k = {}, from
  for o = 1, #old, 2 do
    local old_due = tonumber(old[o + 1])
    while k <= to and entries[k][1] < old_due do
      merged[#merged + 1] = entries[k]
      k = k + 1
    end
    merged[#merged + 1] = { old_due, old[o] }
  end
  for r = k, to do merged[#merged + 1] = entries[r] end
  put_in_new_buckets(index, merged, 1, #merged, BUCKET_FILL, bucket)
  return true
end
