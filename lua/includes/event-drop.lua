-- @include flow-drop
-- @include groups-release

-- Drops a group's copies of `ids` (k: meta, shared_meta, pending, errors,
-- error_log), taken out of their state by the caller: a named group's header
-- goes, and a body goes with the last group that held it (the pending hash
-- counts them); the default group's entry is the body itself.
local function event_drop(k, ids)
  if #ids == 0 then return end
  -- A body that goes takes a parent's flow record with it (since 0.6; includes/flow-keys.lua).
  local function bodies_go(gone)
    redis.call('HDEL', k.shared_meta, unpack(gone))
    flow_drop(k.shared_meta, gone)
  end
  if k.meta ~= k.shared_meta then
    redis.call('HDEL', k.meta, unpack(ids))
    local finished = groups_release(k.pending, ids)
    if #finished > 0 then bodies_go(finished) end
  else
    local counts = redis.call('HMGET', k.pending, unpack(ids))
    local held, own = {}, {}
    for i, id in ipairs(ids) do
      if counts[i] then held[#held + 1] = id else own[#own + 1] = id end
    end
    if #own > 0 then bodies_go(own) end
    if #held > 0 then
      local finished = groups_release(k.pending, held)
      if #finished > 0 then bodies_go(finished) end
    end
  end
  redis.call('HDEL', k.errors, unpack(ids))
  redis.call('HDEL', k.error_log, unpack(ids))
  -- What its calls reported (since 0.6): the group's own, named after its meta key.
  local base = string.sub(k.meta, 1, -3)
  redis.call('HDEL', base .. ':pg', unpack(ids))
  redis.call('HDEL', base .. ':lg', unpack(ids))
end
