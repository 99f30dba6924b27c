-- Transition: (nothing) -> SCHEDULED, or any state -> SCHEDULED when replacing.
-- KEYS[1] meta hash      (id -> envelope)
-- KEYS[2] schedule zset  (id -> due ms)
-- KEYS[3] ready list
-- KEYS[4] in-flight zset (id -> lease expiry ms)
-- KEYS[5] dead zset      (id -> dead-lettered at ms)
-- KEYS[6] errors hash    (id -> last error)
-- ARGV[1] id
-- ARGV[2] body json
-- ARGV[3] delay ms from Redis's now, or '' when ARGV[4] is given
-- ARGV[4] absolute due ms, or ''
-- ARGV[5] '1' to replace a stored event, '0' to leave it as it is
-- ARGV[6] wake channel
-- ARGV[7] wake message (the type's key tag)
-- Returns {status, due}: status 1 stored, 0 already stored (untouched), 2 replaced.
-- @include envelope

local id = ARGV[1]
local existing = redis.call('HEXISTS', KEYS[1], id) == 1
if existing and ARGV[5] ~= '1' then
  return {0, -1}
end

local due
if ARGV[4] ~= '' then
  due = tonumber(ARGV[4])
else
  due = now_ms() + tonumber(ARGV[3])
end

local status = 1
if existing then
  status = 2
  -- An event lives in exactly one of schedule, ready, in-flight or dead.
  if redis.call('ZREM', KEYS[4], id) == 0 and redis.call('ZREM', KEYS[5], id) == 0 then
    redis.call('LREM', KEYS[3], 1, id)
  end
  redis.call('HDEL', KEYS[6], id)
end

local earliest = next_due(KEYS[2], KEYS[4])
-- Attempt 0 also fences off the result of a handler still running the old payload.
redis.call('HSET', KEYS[1], id, envelope_make(0, due, ARGV[2]))
redis.call('ZADD', KEYS[2], due, id)
if earliest < 0 or due < earliest then
  redis.call('PUBLISH', ARGV[6], ARGV[7] .. '|' .. due)
end
return {status, due}
