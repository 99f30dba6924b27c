-- Transitions, in one round trip: IN_FLIGHT -> (removed) for the events whose
-- handlers succeeded, then READY -> IN_FLIGHT (attempt + 1, leased until
-- now + lease) for as many events as the caller has free handler slots, or
-- READY -> DEAD for an event whose lease already expired on its last attempt.
-- Completion is fenced by attempt: a result from an attempt that is no longer
-- the one in flight (lease expired, re-claimed, replaced, cancelled) changes nothing.
-- KEYS[1] ready list
-- KEYS[2] in-flight zset
-- KEYS[3] meta hash
-- KEYS[4] dead zset
-- KEYS[5] errors hash
-- ARGV[1] most events to claim (0: only complete)
-- ARGV[2] lease ms
-- ARGV[3] max attempts
-- ARGV[4..] id, attempt of each succeeded event
-- Returns {Redis now ms, {1|0 completed per succeeded event},
--          {id, attempt, due, body, ...} claimed, {id, attempt, ...} dead-lettered}.
-- @include envelope

local completed = {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local value = redis.call('HGET', KEYS[3], id)
  local done = 0
  if value and envelope_attempt(value) == tonumber(ARGV[i + 1]) and redis.call('ZREM', KEYS[2], id) == 1 then
    redis.call('HDEL', KEYS[3], id)
    redis.call('HDEL', KEYS[5], id)
    done = 1
  end
  completed[#completed + 1] = done
end

local now = now_ms()
local claimed, dead = {}, {}
local count = tonumber(ARGV[1])
local ids = count > 0 and redis.call('LPOP', KEYS[1], count)
if not ids then return {now, completed, claimed, dead} end

local lease_until = now + tonumber(ARGV[2])
local max_attempts = tonumber(ARGV[3])
local leases = {}
for _, id in ipairs(ids) do
  local value = redis.call('HGET', KEYS[3], id)
  -- A missing envelope means the event was cancelled or purged meanwhile.
  if value then
    local attempt, due, body = envelope_parse(value)
    if attempt >= max_attempts then
      redis.call('ZADD', KEYS[4], now, id)
      redis.call('HSET', KEYS[5], id,
        'lease expired on attempt ' .. attempt .. ' of ' .. max_attempts .. ': the handling process died or stalled')
      dead[#dead + 1] = id
      dead[#dead + 1] = attempt
    else
      attempt = attempt + 1
      redis.call('HSET', KEYS[3], id, envelope_make(attempt, lease_until, body))
      leases[#leases + 1] = lease_until
      leases[#leases + 1] = id
      claimed[#claimed + 1] = id
      claimed[#claimed + 1] = attempt
      claimed[#claimed + 1] = due
      claimed[#claimed + 1] = body
    end
  end
end
if #leases > 0 then redis.call('ZADD', KEYS[2], unpack(leases)) end
return {now, completed, claimed, dead}
