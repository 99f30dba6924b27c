-- @include bucket-key
-- @include latest-due
-- @include move-entries
-- @include new-bucket

-- After `bucket`, indexed at `was`, lost entries: indexes it at its new
-- earliest due, or drops it when empty. A bucket whose earliest due moved
-- onto another bucket's holds only entries due then (it held nothing later
-- than that start). If it now sorts last there while the bucket that was last
-- holds later entries, the two swap entries: only the last may hold those.
local function reindex(index, bucket, was)
  local head = redis.call('ZRANGE', bucket_key(index, bucket), 0, 0, 'WITHSCORES')
  if not head[1] then
    redis.call('ZREM', index, bucket)
    return
  end
  local lo = tonumber(head[2])
  if lo == tonumber(was) then return end
  local last = redis.call('ZRANGE', index, lo, lo, 'BYSCORE', 'REV', 'LIMIT', 0, 1)[1]
  redis.call('ZADD', index, lo, bucket)
  if not last or latest_due(index, last) == lo then return end
  if redis.call('ZRANGE', index, lo, lo, 'BYSCORE', 'REV', 'LIMIT', 0, 1)[1] ~= bucket then return end
  local parked = new_bucket(index, lo)
  move_entries(index, bucket, parked)
  move_entries(index, last, bucket)
  move_entries(index, parked, last)
end
