-- Transition: SCHEDULED | READY -> SCHEDULED at a new due time, keeping the
-- payload, context and attempts (reschedule and run-now of the inspection API).
-- READY includes an event left for a reader of a newer class version
-- (includes/newer-key.lua): due again, it goes to whichever reader claims it.
-- An event in flight or dead is left as it is: rescheduling does not apply.
-- KEYS[1] meta: meta hash      (id -> envelope)
-- KEYS[2] schedule: schedule index (bucket -> earliest due ms; see includes/schedule-buckets-constants.lua)
-- KEYS[3] ready: ready list
-- KEYS[4] legacySchedule: legacy schedule zset (id -> due ms), written by 0.1; only emptied
-- KEYS[5] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] wake_channel (string): wake channel
-- ARGV[2] wake_tag (string): wake message (the type's key tag)
-- ARGV[3] id (string): the event's id
-- ARGV[4] due_spec (string): new due: '+<ms from Redis now>' or '<absolute ms>'
-- REPLY (number): the new due ms, or -1 when the event is not stored, or is in flight or dead.
-- The arguments by name, as this header declares them (written by scripts/lua-contract.mjs):
local wake_channel, wake_tag, id, due_spec = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local function envelope_make(attempt, due, body)
  return attempt .. '|' .. due .. '|' .. body
end
-- A stored event is "<attempt>|<due ms>|<body json>": the two numbers that
-- scripts change sit in front so a transition never has to parse the JSON.
-- A value without a valid header (corrupted by hand) parses as attempt 0 with
-- the whole value as body: it is then claimed, fails to decode and is
-- dead-lettered, instead of making every script that touches it fail.
local function envelope_parse(value)
  local attempt, due, body = string.match(value, '^(%d+)|(%d+)|(.*)$')
  if not attempt then return 0, '0', value end
  return tonumber(attempt), due, body
end
-- A queue's keyed state (fairness per key, HandlerOptions.key and perKey),
-- in its slot, named after its meta key:
--   <queue>:kid        hash: id -> its key, for events sorted by key and not done
--   <queue>:kq:<key>   list: ready ids of the key, oldest first
--   <queue>:ring       list: keys with ready ids, in turn (round robin)
--   <queue>:kw         hash: key -> how many of its ids are ready
--   <queue>:kf:<key>   sorted set: id -> lease expiry (ms), its calls running
--   <queue>:kr:<key>   sorted set: when its calls of the last `kper` ms started
local function keyed_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return { id_key = own .. ':kid', list = own .. ':kq:', ring = own .. ':ring', waiting = own .. ':kw', running = own .. ':kf:', rate = own .. ':kr:' }
end

-- Takes `id` out of its key's ready ids, if it waits there (cancel, replace,
-- reschedule, a move); returns true when it did. An emptied key leaves the ring.
local function keyed_remove(meta_key, id)
  local k = keyed_keys(meta_key)
  local key = redis.call('HGET', k.id_key, id)
  if not key then return false end
  -- Not waiting (it runs): its key stays known, so its end frees the key's room.
  if redis.call('LREM', k.list .. key, 1, id) == 0 then return false end
  redis.call('HDEL', k.id_key, id)
  if redis.call('HINCRBY', k.waiting, key, -1) <= 0 then
    redis.call('HDEL', k.waiting, key)
    redis.call('LREM', k.ring, 0, key)
  end
  return true
end
-- A queue's flow state, in its slot, named after its meta key as
-- includes/group-keys.lua names a group's keys:
--   <queue>:fc   hash, read whole by every claim in one call:
--                max, per (ms), conc: the limits the handlers' instances
--                  registered last (src/redis/flow-limits.ts);
--                hold: until when (ms) nothing is claimed (a handler said its
--                  provider rate-limited it, lua/rate-limited.lua);
--                thr: '1' once a claim found no room under conc (the next
--                  result that frees room wakes the instances);
--                v: '1' while readers left events for a newer class version
--                  (includes/newer-key.lua);
--                kmax, kper, kconc: each key's limits (HandlerOptions.perKey);
--                keyed: '1' while the handler registered last sorts events by
--                  key (HandlerOptions.key): claims take from the keys in turn;
--                kc: '1' while sorted ids wait (includes/keyed-keys.lua);
--                ks: '1' once ids were sorted by key: results release their keys;
--                kseen: when (ms) a reader that sorts by key last claimed: while
--                  that is recent, readers that do not sort leave the ready
--                  list to it (lua/complete-and-claim.lua);
--                mv: until when (ms) nothing is claimed because the type's
--                  partitions are changing (src/redis/move-pause.ts): the
--                  queues of the setting moved from are paused, and those of
--                  the setting moved to wait until the others' calls and rate
--                  windows are over, so that the limits hold across both;
--                mvs: when (ms) this queue was first paused for a move;
--                rq: '1' while the queue's priority set holds events
--                  (includes/priority-keys.lua): a claim looks there only then;
--                rp: '1' once a handler reported progress or log lines here
--                  (lua/report-calls.lua, since 0.6): successes drop them;
--                bq: '1' once an event with its own dedupe window, or a
--                  leading debounce, was enqueued here (includes/enqueue-policy.lua,
--                  since 0.6): completions read those windows and release
--                  held trailing payloads (includes/burst-release.lua)
--                up: '1' once a child was linked to a parent here (lua/flow-link.lua,
--                  since 0.6): settling an event looks for its link
--                fp: '1' once a parent waited here (lua/flow-park.lua, since
--                  0.6): a handled event drops its flow record
--   <queue>:rl   sorted set: when each call of the last `per` ms started
--                (ms; members unique per claim)
local function limit_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return own .. ':fc', own .. ':rl'
end

-- The fields of the flow hash, as one HMGET reads them (complete-and-claim.lua),
-- and each one's place in its reply: scripts read `flow[FLOW_THR]`, never a
-- number (test/embedded-lua.test.ts checks that the two lists agree). Locals,
-- not a table of names: reading one costs nothing more than a number.
local FLOW_FIELDS = { 'max', 'per', 'conc', 'hold', 'thr', 'v', 'kmax', 'kper', 'kconc', 'keyed', 'kc', 'ks', 'kseen', 'mv', 'rq', 'rp', 'bq', 'up', 'fp' }
local FLOW_MAX, FLOW_PER, FLOW_CONC, FLOW_HOLD, FLOW_THR, FLOW_V, FLOW_KMAX = 1, 2, 3, 4, 5, 6, 7
local FLOW_KPER, FLOW_KCONC, FLOW_KEYED, FLOW_KC, FLOW_KS, FLOW_KSEEN, FLOW_MV = 8, 9, 10, 11, 12, 13, 14
local FLOW_RQ, FLOW_RP, FLOW_BQ, FLOW_UP, FLOW_FP = 15, 16, 17, 18, 19
-- Where a queue keeps the events its readers left for a newer class version:
-- a hash <queue>:v, version -> when a reader last took from it (or one was
-- first left), and a list <queue>:v:<version> of ids per version, oldest
-- first. Named after the queue's meta key, as includes/group-keys.lua names a
-- group's keys, so every script that may touch it finds it in the same slot.
local function newer_key(meta_key)
  return string.sub(meta_key, 1, -3) .. ':v'
end

-- Takes `id` out of the events waiting for a reader of a newer version (it
-- is cancelled, replaced, rescheduled or moved); an emptied list leaves the
-- hash, and the last one the queue's flow hash. Every list is looked at, not
-- only the one its body's version names: upgradeStored may have rewritten
-- its body since it was left there. Returns true when it was there.
local function newer_remove(meta_key, id)
  local newer = newer_key(meta_key)
  for _, version in ipairs(redis.call('HKEYS', newer)) do
    local list = newer .. ':' .. version
    if redis.call('LREM', list, 1, id) == 1 then
      if redis.call('LLEN', list) == 0 then
        redis.call('HDEL', newer, version)
        if redis.call('EXISTS', newer) == 0 then redis.call('HDEL', (limit_keys(meta_key)), 'v') end
      end
      return true
    end
  end
  return false
end
-- READY events with a priority (enqueue's `priority` above 0, since 0.6;
-- src/core/body-extras.ts) wait beside the ready list, which holds those of
-- priority 0, the best. Named after the queue's meta key, as
-- includes/group-keys.lua names a group's keys:
--   <queue>:rq  sorted set, id -> priority * 2^33 + a sequence number, so a
--               claim takes the best priority first and, within one, in the
--               order they became ready;
--   <queue>:ra  sorted set, id -> due ms: those due longer ago than the
--               handler's priorityAgingMs are served first (no starvation);
--   <queue>:rs  the sequence, from 1 again each time the set empties;
-- and the queue's flow hash (includes/limit-keys.lua) has rq = '1' while
-- the set holds events, so a claim, which reads that hash anyway, looks
-- at the set only then.
-- The type's <type>:pq (after its shared meta key) is set by the first
-- enqueue with a priority: until then nothing reads a body's priority.
local function priority_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return { queue = own .. ':rq', aging = own .. ':ra', seq = own .. ':rs', flow = own .. ':fc' }
end

-- Takes `id` out of the priority set, if it is there; true when it was.
local function priority_remove(meta_key, id)
  local pk = priority_keys(meta_key)
  if redis.call('ZREM', pk.queue, id) == 0 then return false end
  redis.call('ZREM', pk.aging, id)
  if redis.call('EXISTS', pk.queue) == 0 then
    redis.call('DEL', pk.seq)
    redis.call('HDEL', pk.flow, 'rq')
  end
  return true
end
-- Every instance reads one clock, Redis's, so skewed hosts neither fire early
-- nor late relative to each other.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function bucket_key(index, bucket)
  return index .. ':' .. bucket
end
-- (bucket-key: included above)

local function latest_due(index, bucket)
  return tonumber(redis.call('ZRANGE', bucket_key(index, bucket), -1, -1, 'WITHSCORES')[2])
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
-- (bucket-key: included above)

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
-- (latest-due: included above)
-- (bucket-key: included above)

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
-- (new-bucket: included above)

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
-- (new-bucket: included above)
-- (put: included above)

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
-- (bucket-key: included above)
-- (bucket-key: included above)
-- (latest-due: included above)
-- (move-entries: included above)
-- (new-bucket: included above)

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

local value = redis.call('HGET', KEYS[1], id)
if not value then return -1 end
local attempt, due, body = envelope_parse(value)
-- Its bucket is found from the due time in its envelope, as cancel.lua does.
if not schedule_remove(KEYS[2], id, due)
  and redis.call('ZREM', KEYS[4], id) == 0
  and redis.call('LREM', KEYS[3], 1, id) == 0
  and not priority_remove(KEYS[1], id)
  and not keyed_remove(KEYS[1], id)
  and not newer_remove(KEYS[1], id) then
  return -1
end

local spec, new_due = due_spec, nil
if string.byte(spec, 1) == 43 then -- '+': relative to Redis's now
  new_due = now_ms() + tonumber(string.sub(spec, 2))
else
  new_due = tonumber(spec)
end
redis.call('HSET', KEYS[1], id, envelope_make(attempt, new_due, body))
-- Dispatchers sleep until the earliest due time they know: tell them when it moved earlier.
if schedule_add(KEYS[2], { { new_due, id } }) then
  redis.call('PUBLISH', wake_channel, wake_tag .. '|' .. new_due)
end
return new_due
