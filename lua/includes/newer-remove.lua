-- @include newer-key

-- Takes `id` out of the events waiting for a reader of `version` (it is
-- cancelled or replaced); an emptied list leaves the hash.
local function newer_remove(meta_key, id, version)
  if version < 2 then return end
  local newer = newer_key(meta_key)
  local list = newer .. ':' .. version
  if redis.call('LREM', list, 1, id) == 1 and redis.call('LLEN', list) == 0 then redis.call('HDEL', newer, version) end
end
