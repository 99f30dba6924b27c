-- Drops the records of a queue's history (includes/handled-keep.lua) older
-- than `keep_age` ms before `now`, at most 1,000 a call: one look at the
-- oldest entry while nothing is due to go.
local function handled_trim_age(hash_key, index_key, now, keep_age)
  local cutoff = now - keep_age
  local oldest = redis.call('ZRANGE', index_key, 0, 0, 'WITHSCORES')
  if oldest[2] and tonumber(oldest[2]) < cutoff then
    local old = redis.call('ZRANGE', index_key, '-inf', '(' .. cutoff, 'BYSCORE', 'LIMIT', 0, 1000)
    redis.call('ZREM', index_key, unpack(old))
    redis.call('HDEL', hash_key, unpack(old))
    -- Their calls' results (since 0.6), kept beside them.
    redis.call('HDEL', hash_key .. 'r', unpack(old))
  end
end
