-- @include keyed-keys

-- Takes `id` out of its key's ready ids, if it waits there (cancel, replace,
-- reschedule, a move); returns true when it did. An emptied key leaves the ring.
local function keyed_remove(meta_key, id)
  local k = keyed_keys(meta_key)
  local key = redis.call('HGET', k.id_key, id)
  if not key then return false end
  -- Not waiting (it runs): its key stays known, so its end frees the key's room.
  if redis.call('LREM', k.list .. key, 1, id) == 0 then return false end
  redis.call('HDEL', k.id_key, id)
  if redis.call('HINCRBY', k.waiting, key, -1) <= 0 then
    redis.call('HDEL', k.waiting, key)
    redis.call('LREM', k.ring, 0, key)
  end
  return true
end
