-- Transition: (nothing) -> SCHEDULED, or any state -> SCHEDULED when replacing;
-- for one event or a batch of events of one type.
-- KEYS[1] meta hash      (id -> envelope)
-- KEYS[2] schedule zset  (id -> due ms)
-- KEYS[3] ready list
-- KEYS[4] in-flight zset (id -> lease expiry ms)
-- KEYS[5] dead zset      (id -> dead-lettered at ms)
-- KEYS[6] errors hash    (id -> last error)
-- ARGV[1] '1' to replace stored events, '0' to leave them as they are
-- ARGV[2] wake channel
-- ARGV[3] wake message (the type's key tag)
-- ARGV[4..] per event: id, body json, due ('+<ms from Redis now>' or '<absolute ms>')
-- Returns one status per event: 1 stored, 0 already stored (untouched), 2 replaced.
-- @include envelope

local replace = ARGV[1] == '1'
local now = now_ms()
local earliest_new = -1
local statuses = {}

for i = 4, #ARGV, 3 do
  local id, body, due_spec = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local due
  if string.byte(due_spec, 1) == 43 then -- '+': relative to Redis's now
    due = now + tonumber(string.sub(due_spec, 2))
  else
    due = tonumber(due_spec)
  end
  -- Attempt 0 also fences off the result of a handler still running an old payload.
  local envelope = envelope_make(0, due, body)
  local status = 1
  if not replace then
    if redis.call('HSETNX', KEYS[1], id, envelope) == 0 then status = 0 end
  elseif redis.call('HSET', KEYS[1], id, envelope) == 0 then
    -- It existed: an event lives in exactly one of schedule, ready, in-flight or dead.
    status = 2
    if redis.call('ZREM', KEYS[4], id) == 0 and redis.call('ZREM', KEYS[5], id) == 0 then
      redis.call('LREM', KEYS[3], 1, id)
    end
    redis.call('HDEL', KEYS[6], id)
  end
  if status ~= 0 then
    redis.call('ZADD', KEYS[2], due, id)
    if earliest_new < 0 or due < earliest_new then earliest_new = due end
  end
  statuses[#statuses + 1] = status
end

-- Dispatchers sleep until the earliest due time they know; when one of these
-- became the head of the schedule, tell them.
if earliest_new >= 0 then
  local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if tonumber(head[2]) == earliest_new then
    redis.call('PUBLISH', ARGV[2], ARGV[3] .. '|' .. earliest_new)
  end
end
return statuses
