-- Transition: a named group is unregistered for good; every event it still
-- held (ready, in flight, waiting for a retry, dead) is dropped from it, and a
-- body no other group holds goes with it. In calls of ARGV[2] events, so a
-- large group never holds Redis in one long script: call again until it
-- returns 0 left.
-- KEYS[1] group registry (group -> registered at ms)
-- KEYS[2] pending hash   (id -> how many groups still hold the event)
-- KEYS[3] the type's meta hash (bodies; the group's keys sit under the same base)
-- KEYS[4] slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] group name (never 'default')
-- ARGV[2] most events to drop in this call
-- Returns {1 if the group was registered when this call began, events left in it}.
-- @include envelope
-- @include groups

local existed = redis.call('HDEL', KEYS[1], ARGV[1])
local g = group_keys(KEYS[3], ARGV[1])
local ids = redis.call('HRANDFIELD', g.meta, tonumber(ARGV[2]))
if #ids > 0 then
  redis.call('HDEL', g.meta, unpack(ids))
  local finished = groups_release(KEYS[2], ids)
  if #finished > 0 then redis.call('HDEL', KEYS[3], unpack(finished)) end
end
local left = redis.call('HLEN', g.meta)
if left == 0 then
  for _, bucket in ipairs(redis.call('ZRANGE', g.schedule, 0, -1)) do
    redis.call('DEL', g.schedule .. ':' .. bucket)
  end
  redis.call('DEL', g.schedule, g.legacy, g.ready, g.in_flight, g.dead, g.errors)
end
return {existed, left}
