-- @include keyed-keys

-- The calls of `ids` ended (success, retry, dead letter, a hold): they no
-- longer count against their keys' concurrency. Ids never sorted by key are
-- not there.
local function keyed_release(meta_key, ids)
  if #ids == 0 then return end
  local k = keyed_keys(meta_key)
  local keys = redis.call('HMGET', k.id_key, unpack(ids))
  local done = {}
  for i, key in ipairs(keys) do
    if key then
      redis.call('ZREM', k.running .. key, ids[i])
      done[#done + 1] = ids[i]
    end
  end
  if #done > 0 then redis.call('HDEL', k.id_key, unpack(done)) end
end
