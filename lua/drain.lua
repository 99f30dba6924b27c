-- Transition: READY -> (removed), and with `with_schedule` SCHEDULED ->
-- (removed), or with `retries_from` the default group's retries: one group's
-- waiting deliveries of a queue go, up to `most` a call (drain(), since 0.6;
-- call again until it removes fewer than `most` and has no rank to go on from).
-- READY means every place a ready event waits: the ready list, the priority
-- set, the lists sorted by key and those left for a newer class version. In
-- flight and dead events are not touched, and no idempotency mark is written:
-- an id drained may be enqueued again at once. An event enqueued meanwhile
-- may survive, as may one a claim took first.
-- KEYS[1] meta: meta hash (a named group's: its headers)
-- KEYS[2] sharedMeta: the type's meta hash, where bodies live: KEYS[1] itself for the default group
-- KEYS[3] pending: pending hash   (id -> how many groups still hold the event)
-- KEYS[4] schedule: schedule index (bucket -> earliest due ms; includes/schedule-buckets-constants.lua):
--         the type's own for the default group (new events and its retries), a named group's retries
-- KEYS[5] legacySchedule: legacy schedule zset (id -> due ms), written by 0.1
-- KEYS[6] ready: ready list
-- KEYS[7] errors: errors hash
-- KEYS[8] errorLog: error-log hash (id -> its last failures)
-- KEYS[9] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] most (number): most deliveries to remove in this call (1 to 1,000)
-- ARGV[2] with_schedule (flag): also the events in KEYS[4] and KEYS[5]
-- ARGV[3] retries_from (number): -1, or the rank of the bucket of KEYS[4] to go on from, taking
--         only the deliveries that ran before (attempt above 0, or snoozed): the default
--         group's retries, which share the type's schedule with new events. At most 4 *
--         `most` entries are looked at a call
-- REPLY {removed: number, next: number}: how many deliveries were removed, and the rank to call
-- again with (-1: the schedule was read to its end, or not asked for).
-- @include bucket-key
-- @include event-drop
-- @include reindex
-- @include keyed-keys
-- @include newer-key
-- @include priority-keys

local k = { meta = KEYS[1], shared_meta = KEYS[2], pending = KEYS[3], errors = KEYS[7], error_log = KEYS[8] }
local removed = 0
local function drop(ids)
  event_drop(k, ids)
  removed = removed + #ids
end

-- The ready list: popped from its head, as a claim takes.
local ids = redis.call('LPOP', KEYS[6], most)
if ids then drop(ids) end

-- The priority set.
if removed < most then
  local pk = priority_keys(KEYS[1])
  local popped = redis.call('ZPOPMIN', pk.queue, most - removed)
  if #popped > 0 then
    local some = {}
    for i = 1, #popped, 2 do some[#some + 1] = popped[i] end
    redis.call('ZREM', pk.aging, unpack(some))
    drop(some)
  end
  if redis.call('EXISTS', pk.queue) == 0 then
    redis.call('DEL', pk.seq, pk.aging)
    redis.call('HDEL', pk.flow, 'rq')
  end
end

-- The lists sorted by key: a key's list emptied leaves the ring.
if removed < most then
  local kk = keyed_keys(KEYS[1])
  while removed < most do
    local key = redis.call('LINDEX', kk.ring, 0)
    if not key then break end
    local some = redis.call('LPOP', kk.list .. key, most - removed)
    if some then
      redis.call('HDEL', kk.id_key, unpack(some))
      drop(some)
    end
    if redis.call('EXISTS', kk.list .. key) == 1 then
      redis.call('HINCRBY', kk.waiting, key, -(some and #some or 0))
    else
      -- It is the ring's head (read above): LPOP, not an LREM that would scan a ring of many keys.
      redis.call('HDEL', kk.waiting, key)
      redis.call('LPOP', kk.ring)
    end
  end
  if redis.call('LLEN', kk.ring) == 0 then redis.call('HDEL', string.sub(KEYS[1], 1, -3) .. ':fc', 'kc') end
end

-- What readers left for a newer class version.
if removed < most then
  local newer = newer_key(KEYS[1])
  for _, version in ipairs(redis.call('HKEYS', newer)) do
    if removed >= most then break end
    local list = newer .. ':' .. version
    local some = redis.call('LPOP', list, most - removed)
    if some then drop(some) end
    if redis.call('LLEN', list) == 0 then redis.call('HDEL', newer, version) end
  end
  -- As a claim that empties them says (includes/claim/take-newer.lua): none waits for a newer version.
  if redis.call('EXISTS', newer) == 0 then redis.call('HDEL', string.sub(KEYS[1], 1, -3) .. ':fc', 'v') end
end

local next_rank = -1
if retries_from >= 0 and not with_schedule then
  -- A bucket at a time, from the rank given: one the scan empties leaves the index, and the next
  -- takes its rank. A bucket merged meanwhile may be read twice, which removes nothing twice.
  local rank, looked = retries_from, 0
  while removed < most and looked < 4 * most do
    local head = redis.call('ZRANGE', KEYS[4], rank, rank, 'WITHSCORES')
    if not head[1] then
      rank = -1
      break
    end
    local bucket = bucket_key(KEYS[4], head[1])
    local ids = redis.call('ZRANGE', bucket, 0, -1)
    looked = looked + #ids
    local retries = {}
    if #ids > 0 then
      local values = redis.call('HMGET', KEYS[1], unpack(ids))
      for i, id in ipairs(ids) do
        local value = values[i]
        -- Ran before: an attempt spent, or a snooze counted in its body (includes/priority-of.lua reads the tail so).
        if value and (tonumber(string.match(value, '^(%d+)|') or '0') > 0 or string.match(value, ';s=%d+[^"]*"%]$', -48)) then retries[#retries + 1] = id end
      end
    end
    if #retries > 0 then
      redis.call('ZREM', bucket, unpack(retries))
      drop(retries)
      reindex(KEYS[4], head[1], head[2])
    end
    if redis.call('ZSCORE', KEYS[4], head[1]) then rank = rank + 1 end
  end
  next_rank = rank
end

if with_schedule and removed < most then
  -- Whole buckets while they fit (they are small), then a slice of the next.
  while removed < most do
    local head = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
    if not head[1] then break end
    local bucket = bucket_key(KEYS[4], head[1])
    local some = redis.call('ZRANGE', bucket, 0, most - removed - 1)
    if #some > 0 then
      redis.call('ZREM', bucket, unpack(some))
      drop(some)
    end
    reindex(KEYS[4], head[1], head[2])
  end
  if removed < most then
    local some = redis.call('ZRANGE', KEYS[5], 0, most - removed - 1)
    if #some > 0 then
      redis.call('ZREM', KEYS[5], unpack(some))
      drop(some)
    end
  end
end
return {removed, next_rank}
