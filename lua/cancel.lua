-- Transition: SCHEDULED | READY | IN_FLIGHT | DEAD -> (removed).
-- A handler still running a cancelled event finds its result fenced off.
-- KEYS[1] meta hash
-- KEYS[2] schedule index (bucket -> earliest due ms; see includes/schedule.lua)
-- KEYS[3] ready list
-- KEYS[4] in-flight zset
-- KEYS[5] dead zset
-- KEYS[6] errors hash
-- KEYS[7] legacy schedule zset (id -> due ms), written by 0.1; only emptied
-- KEYS[8] slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[9] recent zset    (id -> end of its idempotency window ms)
-- KEYS[10] group registry (includes/groups.lua)
-- KEYS[11] pending hash: an event delivered to named groups is removed from each
-- ARGV[1] id
-- ARGV[2] idempotency window ms: a cancelled id is marked for that long, so a
--         late re-send of its enqueue does not bring it back (0: no mark)
-- Returns 1 when the event existed, 0 otherwise.
-- @include envelope
-- @include lease-pin
-- @include schedule
-- @include groups
-- @include groups-forget

local id = ARGV[1]
local value = redis.call('HGET', KEYS[1], id)
if not value then return 0 end
redis.call('HDEL', KEYS[1], id)
local _, due = envelope_parse(value)
if not schedule_remove(KEYS[2], id, due)
  and redis.call('ZREM', KEYS[7], id) == 0
  and not lease_remove(KEYS[4], id)
  and redis.call('ZREM', KEYS[5], id) == 0 then
  redis.call('LREM', KEYS[3], 1, id)
end
redis.call('HDEL', KEYS[6], id)
groups_forget(KEYS[10], KEYS[11], KEYS[1], id)
local window = tonumber(ARGV[2])
if window > 0 then redis.call('ZADD', KEYS[9], now_ms() + window, id) end
return 1
