-- Transition: IN_FLIGHT -> DEAD with its reason (attempts used up, or the
-- stored envelope cannot be decoded). Fenced by attempt, like complete-and-claim.lua.
-- KEYS[1] meta hash
-- KEYS[2] in-flight zset
-- KEYS[3] dead zset
-- KEYS[4] errors hash
-- ARGV[1] id
-- ARGV[2] attempt
-- ARGV[3] reason
-- Returns 1 when dead-lettered, 0 when the attempt was stale.
-- @include envelope

local id = ARGV[1]
local value = redis.call('HGET', KEYS[1], id)
if not value or envelope_attempt(value) ~= tonumber(ARGV[2]) then return 0 end
if redis.call('ZREM', KEYS[2], id) == 0 then return 0 end
redis.call('ZADD', KEYS[3], now_ms(), id)
redis.call('HSET', KEYS[4], id, ARGV[3])
return 1
