-- Transition: SCHEDULED (due) -> READY, and IN_FLIGHT (lease expired) -> READY.
-- Atomic, so any number of dispatchers may run it at once without a lock.
-- KEYS[1] schedule index (bucket -> earliest due ms; see includes/schedule.lua)
-- KEYS[2] in-flight zset
-- KEYS[3] ready list
-- KEYS[4] legacy schedule zset (id -> due ms), written by 0.1; only emptied
-- ARGV[1] most events to move in this call
-- Returns {moved due, moved with expired lease, next due ms or -1, Redis now ms}.
-- @include envelope
-- @include schedule

local limit = tonumber(ARGV[1])
local now = now_ms()

local function move(ids)
  if #ids == 0 then return 0 end
  redis.call('RPUSH', KEYS[3], unpack(ids))
  limit = limit - #ids
  return #ids
end

local function take_from_zset(from)
  if limit <= 0 then return {} end
  local ids = redis.call('ZRANGE', from, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  if #ids > 0 then redis.call('ZREM', from, unpack(ids)) end
  return ids
end

local due = move(take_from_zset(KEYS[4]))
due = due + move(schedule_take_due(KEYS[1], now, limit))
local expired = move(take_from_zset(KEYS[2]))

local next_at = next_due(KEYS[1], KEYS[2])
local legacy = tonumber(redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')[2])
if legacy and (next_at < 0 or legacy < next_at) then next_at = legacy end
return {due, expired, next_at, now}
