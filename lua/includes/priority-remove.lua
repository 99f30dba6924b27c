-- @include priority-keys

-- Takes `id` out of the priority set, if it is there; true when it was.
local function priority_remove(meta_key, id)
  local pk = priority_keys(meta_key)
  if redis.call('ZREM', pk.queue, id) == 0 then return false end
  redis.call('ZREM', pk.aging, id)
  if redis.call('EXISTS', pk.queue) == 0 then
    redis.call('DEL', pk.seq)
    redis.call('HDEL', pk.flow, 'rq')
  end
  return true
end
