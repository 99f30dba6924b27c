-- Transition: IN_FLIGHT -> (removed), for a batch of handled events.
-- Fenced by attempt: a result from an attempt that is no longer the one in
-- flight (lease expired, re-claimed, replaced, cancelled) changes nothing.
-- KEYS[1] meta hash
-- KEYS[2] in-flight zset
-- KEYS[3] errors hash
-- ARGV    id1, attempt1, id2, attempt2, ...
-- Returns one flag per pair: 1 completed, 0 stale.
-- @include envelope

local flags = {}
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  local value = redis.call('HGET', KEYS[1], id)
  local done = 0
  if value and envelope_attempt(value) == tonumber(ARGV[i + 1]) and redis.call('ZREM', KEYS[2], id) == 1 then
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[3], id)
    done = 1
  end
  flags[#flags + 1] = done
end
return flags
