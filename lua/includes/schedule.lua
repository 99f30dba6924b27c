-- The schedule of a type (state SCHEDULED) is split into buckets: sorted sets
-- id -> due small enough for Redis's compact listpack encoding (about 20 bytes
-- an entry, against about 110 in a skiplist), and an index sorted set
-- bucket name -> earliest due in that bucket. Bucket keys are the index key
-- plus ':<name>', in the index's hash slot. A name is the due time the bucket
-- started with, suffixed '.<k>' when taken: no counter key outlives the schedule.
--
-- Invariants, kept by the functions below:
--   * an index score is exactly the earliest due of its bucket, so the index
--     head is the next due time and only buckets holding something due are read;
--   * ordered by (earliest, latest due), each bucket's latest due is at most
--     the next bucket's earliest: buckets hold disjoint ranges of due times, so
--     the index alone says which bucket holds or takes a due time. Buckets may
--     share an earliest due (many events due in one millisecond); all but one
--     of them then hold nothing but that due time.
-- Nothing relies on the order of buckets that share an earliest due.

local BUCKET_MAX = 128 -- Redis's default zset-max-listpack-entries
local BUCKET_FILL = 96 -- most entries a bucket keeps after a split: room to grow

local function bucket_key(index, bucket)
  return index .. ':' .. bucket
end

local function new_bucket(index, due, k)
  local name = k == 0 and tostring(due) or (due .. '.' .. k)
  while redis.call('ZSCORE', index, name) do
    k = k + 1
    name = due .. '.' .. k
  end
  return name
end

local function latest_due(index, bucket)
  return tonumber(redis.call('ZRANGE', bucket_key(index, bucket), -1, -1, 'WITHSCORES')[2])
end

-- Of buckets that share the earliest due `lo`, the one holding later due
-- times too, else any (want_pure: one holding only `lo`, else nil).
local function among_ties(index, lo, want_pure)
  local ties = redis.call('ZRANGE', index, lo, lo, 'BYSCORE')
  for _, bucket in ipairs(ties) do
    local pure = latest_due(index, bucket) == lo
    if pure == want_pure then return bucket end
  end
  if want_pure then return nil end
  return ties[#ties]
end

-- The bucket that takes due time `due`, its earliest due, and the due time
-- from which on entries belong to a later bucket (nil: none).
local function schedule_target(index, due)
  local below = redis.call('ZRANGE', index, due, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 2, 'WITHSCORES')
  local above = redis.call('ZRANGE', index, '(' .. due, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
  if below[1] then
    local lo = tonumber(below[2])
    local bucket = below[1]
    if below[4] and tonumber(below[4]) == lo then bucket = among_ties(index, lo, false) end
    return bucket, lo, tonumber(above[2])
  end
  if not above[1] then return nil, nil, nil end
  -- Earlier than every bucket: the first takes it if that keeps ranges
  -- disjoint, that is when it is the only one starting there or holds only its start.
  local first = tonumber(above[2])
  local next_two = redis.call('ZRANGE', index, 0, 1, 'WITHSCORES')
  if not next_two[3] or tonumber(next_two[4]) ~= first then return above[1], first, first end
  local pure = among_ties(index, first, true)
  if pure then return pure, first, first end
  return nil, nil, first
end

-- Stores entries[from..to] ({due, id}, ascending by due) in `bucket`
-- (nil: a new bucket), splitting it when it would outgrow the listpack encoding.
local function schedule_fill(index, bucket, lo, entries, from, to)
  local count = to - from + 1
  local key = bucket and bucket_key(index, bucket)
  local held = key and redis.call('ZCARD', key) or 0
  if held + count <= BUCKET_MAX then
    if not bucket then
      bucket = new_bucket(index, entries[from][1], 0)
      key = bucket_key(index, bucket)
    end
    local args = {}
    for k = from, to do
      args[#args + 1] = entries[k][1]
      args[#args + 1] = entries[k][2]
    end
    redis.call('ZADD', key, unpack(args))
    if not lo or entries[from][1] < lo then redis.call('ZADD', index, entries[from][1], bucket) end
    return
  end
  -- Rewrite the bucket as several: a sorted set that grew past the limit
  -- would stay a skiplist even after shrinking, so it must never grow past it.
  local merged = {}
  if held > 0 then
    local old = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    redis.call('ZREMRANGEBYRANK', key, 0, -1)
    local k = from
    for o = 1, #old, 2 do
      local old_due = tonumber(old[o + 1])
      while k <= to and entries[k][1] < old_due do
        merged[#merged + 1] = entries[k]
        k = k + 1
      end
      merged[#merged + 1] = { old_due, old[o] }
    end
    for r = k, to do merged[#merged + 1] = entries[r] end
  else
    for k = from, to do merged[#merged + 1] = entries[k] end
  end
  local parts = math.ceil(#merged / BUCKET_FILL)
  local size = math.ceil(#merged / parts)
  for p = 0, parts - 1 do
    local name = (p == 0 and bucket) or new_bucket(index, merged[p * size + 1][1], p)
    local args = {}
    for k = p * size + 1, math.min(#merged, (p + 1) * size) do
      args[#args + 1] = merged[k][1]
      args[#args + 1] = merged[k][2]
    end
    redis.call('ZADD', bucket_key(index, name), unpack(args))
    redis.call('ZADD', index, args[1], name)
  end
end

-- Schedules entries (a list of {due, id} of ids not scheduled yet), in as few
-- calls as their due times allow: entries bound for one bucket go in one ZADD.
local function schedule_add(index, entries)
  local sorted = true
  for k = 2, #entries do
    if entries[k][1] < entries[k - 1][1] then sorted = false break end
  end
  if not sorted then table.sort(entries, function(a, b) return a[1] < b[1] end) end
  local from = 1
  while from <= #entries do
    local bucket, lo, limit = schedule_target(index, entries[from][1])
    local to = from
    while to < #entries and (not limit or entries[to + 1][1] < limit) do to = to + 1 end
    schedule_fill(index, bucket, lo, entries, from, to)
    from = to + 1
  end
end

-- Buckets whose range may hold due time `due`: those starting at it, and
-- those starting at the latest earliest-due below it.
local function schedule_remove(index, id, due)
  local below = redis.call('ZRANGE', index, '(' .. due, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
  for _, bucket in ipairs(redis.call('ZRANGE', index, below[2] or due, due, 'BYSCORE')) do
    local key = bucket_key(index, bucket)
    if redis.call('ZREM', key, id) == 1 then
      local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      if head[1] then redis.call('ZADD', index, head[2], bucket) else redis.call('ZREM', index, bucket) end
      return true
    end
  end
  return false
end

-- Removes and returns up to `limit` ids due at `now`, earliest buckets first.
local function schedule_take_due(index, now, limit)
  local taken = {}
  while limit > 0 do
    local buckets = redis.call('ZRANGE', index, '-inf', now, 'BYSCORE', 'LIMIT', 0, 16)
    if #buckets == 0 then break end
    for _, bucket in ipairs(buckets) do
      local key = bucket_key(index, bucket)
      local ids = redis.call('ZRANGE', key, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
      -- Due entries are the bucket's first ones.
      if #ids > 0 then redis.call('ZREMRANGEBYRANK', key, 0, #ids - 1) end
      local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      if head[1] then redis.call('ZADD', index, head[2], bucket) else redis.call('ZREM', index, bucket) end
      for _, id in ipairs(ids) do taken[#taken + 1] = id end
      limit = limit - #ids
      if limit <= 0 then break end
    end
  end
  return taken
end

-- Earliest due in the schedule, or nil.
local function schedule_head(index)
  return tonumber(redis.call('ZRANGE', index, 0, 0, 'WITHSCORES')[2])
end
