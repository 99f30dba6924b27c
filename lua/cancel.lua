-- Transition: SCHEDULED | READY | IN_FLIGHT | DEAD -> (removed).
-- A handler still running a cancelled event finds its result fenced off.
-- KEYS[1] meta hash
-- KEYS[2] schedule zset
-- KEYS[3] ready list
-- KEYS[4] in-flight zset
-- KEYS[5] dead zset
-- KEYS[6] errors hash
-- ARGV[1] id
-- Returns 1 when the event existed, 0 otherwise.

local id = ARGV[1]
if redis.call('HDEL', KEYS[1], id) == 0 then return 0 end
if redis.call('ZREM', KEYS[2], id) == 0
  and redis.call('ZREM', KEYS[4], id) == 0
  and redis.call('ZREM', KEYS[5], id) == 0 then
  redis.call('LREM', KEYS[3], 1, id)
end
redis.call('HDEL', KEYS[6], id)
return 1
