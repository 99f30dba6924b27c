-- Transition: READY -> IN_FLIGHT (attempt + 1, leased until now + lease), or
-- READY -> DEAD when a lease already expired on the last allowed attempt.
-- KEYS[1] ready list
-- KEYS[2] in-flight zset
-- KEYS[3] meta hash
-- KEYS[4] dead zset
-- KEYS[5] errors hash
-- ARGV[1] most events to claim (the caller's free handler slots)
-- ARGV[2] lease ms
-- ARGV[3] max attempts
-- Returns {Redis now ms, {id, attempt, due, body, ...} claimed, {id, attempt, ...} dead-lettered}.
-- @include envelope

local ids = redis.call('LPOP', KEYS[1], tonumber(ARGV[1]))
local now = now_ms()
local claimed, dead = {}, {}
if not ids then return {now, claimed, dead} end

local lease_until = now + tonumber(ARGV[2])
local max_attempts = tonumber(ARGV[3])
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
      redis.call('ZADD', KEYS[2], lease_until, id)
      claimed[#claimed + 1] = id
      claimed[#claimed + 1] = attempt
      claimed[#claimed + 1] = due
      claimed[#claimed + 1] = body
    end
  end
end
return {now, claimed, dead}
