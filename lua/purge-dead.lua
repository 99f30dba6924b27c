-- Transition: DEAD -> (removed).
-- KEYS[1] dead: dead zset
-- KEYS[2] meta: meta hash
-- KEYS[3] errors: errors hash
-- KEYS[4] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[5] pending: pending hash   (id -> how many groups still hold the event)
-- KEYS[6] sharedMeta: the type's meta hash, where bodies live: KEYS[2] itself for the
--         default group; a named group's KEYS[2] holds only headers
-- KEYS[7] errorLog: error-log hash (id -> its last failures; includes/error-log-append.lua)
-- ARGV[1] most (number): most events to purge when no ids are given
-- ARGV[2..] ids (string[]): ids to purge; none means the oldest `most` dead letters
-- REPLY (number): how many events were purged.
-- @include groups-release

local group_queue = KEYS[6] ~= KEYS[2]
local ids = {}
if ids_n > 0 then
  for i = ids_at, ids_at + ids_n - 1 do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, most - 1)
end

local purged = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    if group_queue then redis.call('HDEL', KEYS[2], id) end
    -- The body goes with the last group that held the event.
    if (group_queue or redis.call('HEXISTS', KEYS[5], id) == 1) then
      if #groups_release(KEYS[5], { id }) > 0 then redis.call('HDEL', KEYS[6], id) end
    else
      redis.call('HDEL', KEYS[2], id)
    end
    redis.call('HDEL', KEYS[3], id)
    redis.call('HDEL', KEYS[7], id)
    purged = purged + 1
  end
end
return purged
