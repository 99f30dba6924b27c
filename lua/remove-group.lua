-- Transition: a named group is unregistered for good; every event it still
-- held (ready, in flight, waiting for a retry, dead) is dropped from it, and a
-- body no other group holds goes with it. In calls of ARGV[2] events, so a
-- large group never holds Redis in one long script: call again until it
-- returns 0 left. Until then the group stays in the registry marked as being
-- removed: dispatch delivers nothing more to it, while a cancel or a replace
-- still takes an event out of it (includes/groups-forget.lua).
-- KEYS[1] groups: group registry (group -> registered at ms, or 'removing')
-- KEYS[2] pending: pending hash   (id -> how many groups still hold the event)
-- KEYS[3] sharedMeta: the type's meta hash (bodies; the group's keys sit under the same base)
-- KEYS[4] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] group (string): group name (never 'default')
-- ARGV[2] most (number): most events to drop in this call
-- REPLY {existed: flag, left: number}: whether the group was registered (not already being
-- removed) when this call began, and the events left in it.
-- @include priority-keys
-- @include group-keys
-- @include groups-constants
-- @include groups-release
-- @include keyed-keys
-- @include limit-keys
-- @include newer-key

local was = redis.call('HGET', KEYS[1], group)
if not was then return {0, 0} end
local existed = was ~= GROUP_REMOVING and 1 or 0
if existed == 1 then redis.call('HSET', KEYS[1], group, GROUP_REMOVING) end
local g = group_keys(KEYS[3], group)
local ids = redis.call('HRANDFIELD', g.meta, most)
if #ids > 0 then
  redis.call('HDEL', g.meta, unpack(ids))
  -- Their leases and dead letters go too: a handler of the group still running
  -- one finds its result fenced off, and counts nothing down a second time.
  redis.call('ZREM', g.in_flight, unpack(ids))
  redis.call('ZREM', g.dead, unpack(ids))
  redis.call('HDEL', g.errors, unpack(ids))
  redis.call('HDEL', g.error_log, unpack(ids))
  local finished = groups_release(KEYS[2], ids)
  if #finished > 0 then redis.call('HDEL', KEYS[3], unpack(finished)) end
end
local left = redis.call('HLEN', g.meta)
if left == 0 then
  for _, bucket in ipairs(redis.call('ZRANGE', g.schedule, 0, -1)) do
    redis.call('UNLINK', g.schedule .. ':' .. bucket)
  end
  -- UNLINK: what is left (ids in the ready list, retry buckets) holds no header; freed off the main thread.
  redis.call('UNLINK', g.schedule, g.legacy, g.ready, g.in_flight, g.dead, g.errors, g.error_log, g.handled, g.handled_index, g.heartbeats, g.handled .. 'r', g.progress, g.logs)
  -- And what its readers left for a newer class version.
  local newer = newer_key(g.meta)
  for _, version in ipairs(redis.call('HKEYS', newer)) do redis.call('UNLINK', newer .. ':' .. version) end
  redis.call('UNLINK', newer)
  -- And what it sorted by key (HandlerOptions.key).
  local kk = keyed_keys(g.meta)
  for _, key in ipairs(redis.call('HKEYS', kk.waiting)) do redis.call('UNLINK', kk.list .. key, kk.running .. key, kk.rate .. key) end
  redis.call('UNLINK', kk.id_key, kk.ring, kk.waiting)
  -- And its events waiting by priority.
  local pk = priority_keys(g.meta)
  redis.call('UNLINK', pk.queue, pk.aging, pk.seq)
  -- And its flow state: limits, hold, rate window.
  local flow_key, rate_key = limit_keys(g.meta)
  redis.call('UNLINK', flow_key, rate_key)
  redis.call('HDEL', KEYS[1], group)
end
return {existed, left}
