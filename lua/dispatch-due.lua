-- Transition: SCHEDULED (due) -> READY, and IN_FLIGHT (lease expired) -> READY.
-- Atomic, so any number of dispatchers may run it at once without a lock.
-- KEYS[1] schedule zset
-- KEYS[2] in-flight zset
-- KEYS[3] ready list
-- ARGV[1] most events to move in this call
-- Returns {moved due, moved with expired lease, next due ms or -1, Redis now ms}.
-- @include envelope

local limit = tonumber(ARGV[1])
local now = now_ms()

local function move(from)
  if limit <= 0 then return 0 end
  local ids = redis.call('ZRANGE', from, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  if #ids == 0 then return 0 end
  redis.call('ZREM', from, unpack(ids))
  redis.call('RPUSH', KEYS[3], unpack(ids))
  limit = limit - #ids
  return #ids
end

local due = move(KEYS[1])
local expired = move(KEYS[2])
return {due, expired, next_due(KEYS[1], KEYS[2]), now}
