-- Phase of complete-and-claim.lua: READY events left by readers of an older class
-- version (:v:<version>) are taken first, those this reader can read.
-- Events left by readers of an older version come first: they fell due before those in the list.
local newer = newer_key(KEYS[3])
local ids = false
if count > 0 and flow[FLOW_V] then
  local waiting = redis.call('HKEYS', newer)
  for _, version in ipairs(waiting) do
    local want = count - (ids and #ids or 0)
    if want > 0 and tonumber(version) <= max_version then
      local list = newer .. ':' .. version
      local taken = redis.call('LPOP', list, want)
      if taken then
        ids = ids or {}
        for _, id in ipairs(taken) do ids[#ids + 1] = id end
      end
      -- Its time says when a reader of that version last took from it (src/service/health.ts).
      if redis.call('LLEN', list) == 0 then redis.call('HDEL', newer, version) else redis.call('HSET', newer, version, now) end
    end
  end
  if redis.call('EXISTS', newer) == 0 then redis.call('HDEL', flow_key, 'v') end
end
