-- History of what ran (keepHandled): per queue, a hash id -> 'attempt|handled
-- at|due|body' of events handled successfully, and an index id -> handled at.
-- The newest `keep_count` are kept (0: no count limit), none older than
-- `keep_age` ms (0: no age limit; the dispatchers drop them by age too, as
-- time passes, lua/dispatch-due.lua). Trimming costs a ZCARD and a look at
-- the oldest entry per call while nothing is due to go.
-- @include handled-trim-age
local function handled_keep(hash_key, index_key, records, at, keep_count, keep_age)
  if #records == 0 then return end
  redis.call('HSET', hash_key, unpack(records))
  local scored = {}
  for i = 1, #records, 2 do
    scored[#scored + 1] = at
    scored[#scored + 1] = records[i]
  end
  redis.call('ZADD', index_key, unpack(scored))
  if keep_count > 0 then
    -- At most 1,000 a call: a count lowered by a redeploy trims over a few calls, never in one huge HDEL.
    local over = math.min(redis.call('ZCARD', index_key) - keep_count, 1000)
    if over > 0 then
      local old = redis.call('ZRANGE', index_key, 0, over - 1)
      redis.call('ZREMRANGEBYRANK', index_key, 0, over - 1)
      redis.call('HDEL', hash_key, unpack(old))
      redis.call('HDEL', hash_key .. 'r', unpack(old))
    end
  end
  if keep_age > 0 then handled_trim_age(hash_key, index_key, at, keep_age) end
end
