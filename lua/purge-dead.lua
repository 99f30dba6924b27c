-- Transition: DEAD -> (removed).
-- KEYS[1] dead zset
-- KEYS[2] meta hash
-- KEYS[3] errors hash
-- KEYS[4] slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] most events to purge when no ids are given
-- ARGV[2..] ids to purge; none means the oldest ARGV[1] dead letters
-- Returns how many events were purged.

local ids = {}
if #ARGV > 1 then
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
end

local purged = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    redis.call('HDEL', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    purged = purged + 1
  end
end
return purged
