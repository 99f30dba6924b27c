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
-- @include event-drop

local k = { meta = KEYS[2], shared_meta = KEYS[6], pending = KEYS[5], errors = KEYS[3], error_log = KEYS[7] }
local ids = {}
if ids_n > 0 then
  for i = ids_at, ids_at + ids_n - 1 do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, most - 1)
end

local purged = {}
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then purged[#purged + 1] = id end
end
event_drop(k, purged)
return #purged
