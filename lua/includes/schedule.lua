-- The schedule of a type (state SCHEDULED) is split into buckets: sorted sets
-- id -> due small enough for Redis's compact listpack encoding (about 20 bytes
-- an entry, against about 110 in a skiplist), and an index sorted set
-- bucket name -> earliest due in that bucket. Bucket keys are the index key
-- plus ':<name>', in the index's hash slot; no counter key outlives the schedule.
--
-- Invariants, kept by the functions below:
--   * an index score is exactly the earliest due of its bucket, so the index
--     head is the next due time and only buckets holding something due are read;
--   * a bucket holds nothing later than the next greater earliest due in the
--     index: buckets hold disjoint ranges of due times, except that buckets
--     sharing an earliest due (more events due in one millisecond than a
--     bucket holds) may overlap each other. So an event due at t is in a bucket
--     starting at t or in one starting at the greatest earliest due below t,
--     and finding it needs the index alone;
--   * of buckets sharing an earliest due, only the last by name holds anything
--     due later than that. Adding to such a group goes to that bucket without
--     looking at the others, and when a bucket starts between its entries, the
--     others hold nothing past that start.

-- Half of Redis's default zset-max-listpack-entries (128): adding a member
-- scans the listpack for it first, so smaller buckets cost less per event,
-- for ~2 more bytes an event (a bucket key per 64 events, not per 128).
-- A bucket filled by 0.3.0 may hold up to 128; nothing here needs a bucket
-- to be at most BUCKET_MAX.
local BUCKET_MAX = 64
local BUCKET_FILL = 48 -- most entries a bucket keeps after a split: room to grow

local function bucket_key(index, bucket)
  return index .. ':' .. bucket
end

-- A free name for a new bucket starting at `lo`, sorting after every bucket
-- that starts there.
local function new_bucket(index, lo)
  local last = redis.call('ZRANGE', index, lo, lo, 'BYSCORE', 'REV', 'LIMIT', 0, 1)[1]
  local name = tostring(lo)
  if last then
    local base, n = string.match(last, '^(.*)~(%d+)$')
    name = base and (base .. '~' .. string.format('%09d', tonumber(n) + 1)) or (last .. '~000000001')
  end
  -- Taken by a bucket whose earliest due has changed since it was named.
  while redis.call('ZSCORE', index, name) do name = name .. '~000000001' end
  return name, last
end

local function latest_due(index, bucket)
  return tonumber(redis.call('ZRANGE', bucket_key(index, bucket), -1, -1, 'WITHSCORES')[2])
end

-- The bucket that takes due time `due` (nil: a new one), its earliest due,
-- and whether `due` is earlier than the whole schedule.
local function schedule_target(index, due)
  local below = redis.call('ZRANGE', index, due, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
  if below[1] then return below[1], tonumber(below[2]), false end
  -- Earlier than every bucket: the first takes it, unless it shares its
  -- earliest due with others (moving its start would leave it overlapping them).
  local first_two = redis.call('ZRANGE', index, 0, 1, 'WITHSCORES')
  if not first_two[1] then return nil, nil, true end
  local first = tonumber(first_two[2])
  if first_two[3] and tonumber(first_two[4]) == first then return nil, nil, true end
  return first_two[1], first, true
end

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

-- Schedules entries (a list of {due, id} of ids not scheduled yet), in as few
-- calls as their due times allow: entries bound for one bucket go in one ZADD.
-- Returns true when the schedule's earliest due time moved earlier.
--
-- Entries spread over many buckets (due times drawn at random) make one run
-- per bucket. The bucket starts within the entries' range are read once, not
-- twice per run, and each run goes to the last bucket starting at or before
-- it, up to the next start. Only opening buckets changes which bucket that
-- is (a new part can join the group at the next start), so after a run that
-- opened buckets the index is read again.
local function schedule_add(index, entries)
  local sorted = true
  for k = 2, #entries do
    if entries[k][1] < entries[k - 1][1] then sorted = false break end
  end
  if not sorted then table.sort(entries, function(a, b) return a[1] < b[1] end) end
  local n = #entries
  local from, earlier = 1, false
  local bucket, lo, starts, s
  while from <= n do
    local due = entries[from][1]
    if not starts then
      local earliest
      bucket, lo, earliest = schedule_target(index, due)
      earlier = earlier or earliest
      starts = from < n and redis.call('ZRANGE', index, '(' .. string.format('%d', due), string.format('%d', entries[n][1]), 'BYSCORE', 'WITHSCORES') or {}
      s = 1
    end
    while s <= #starts and tonumber(starts[s + 1]) <= due do
      bucket, lo = starts[s], tonumber(starts[s + 1])
      s = s + 2
    end
    local limit = s <= #starts and tonumber(starts[s + 1]) or nil
    local to = from
    while to < n and (not limit or entries[to + 1][1] < limit) do to = to + 1 end
    if schedule_fill(index, bucket, lo, entries, from, to) then starts = nil end
    from = to + 1
  end
  return earlier
end

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

-- Unschedules `id`, due at `due` (from its envelope): it is in a bucket
-- starting at `due` or at the greatest earliest due below it, newest first
-- being likelier. Returns false when it was not scheduled.
local function schedule_remove(index, id, due)
  if remove_from(index, redis.call('ZRANGE', index, due, due, 'BYSCORE', 'REV', 'WITHSCORES'), id) then return true end
  local below = redis.call('ZRANGE', index, '(' .. due, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
  if below[1] and remove_from(index, redis.call('ZRANGE', index, below[2], below[2], 'BYSCORE', 'REV', 'WITHSCORES'), id) then return true end
  -- An envelope corrupted by hand reads as due 0: its entry may be anywhere.
  return tonumber(due) == 0 and remove_from(index, redis.call('ZRANGE', index, 0, -1, 'WITHSCORES'), id)
end

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
