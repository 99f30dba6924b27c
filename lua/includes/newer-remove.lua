-- @include limit-keys
-- @include newer-key

-- Takes `id` out of the events waiting for a reader of a newer version (it
-- is cancelled, replaced, rescheduled or moved); an emptied list leaves the
-- hash, and the last one the queue's flow hash. Every list is looked at, not
-- only the one its body's version names: upgradeStored may have rewritten
-- its body since it was left there. Returns true when it was there.
local function newer_remove(meta_key, id)
  local newer = newer_key(meta_key)
  for _, version in ipairs(redis.call('HKEYS', newer)) do
    local list = newer .. ':' .. version
    if redis.call('LREM', list, 1, id) == 1 then
      if redis.call('LLEN', list) == 0 then
        redis.call('HDEL', newer, version)
        if redis.call('EXISTS', newer) == 0 then redis.call('HDEL', (limit_keys(meta_key)), 'v') end
      end
      return true
    end
  end
  return false
end
