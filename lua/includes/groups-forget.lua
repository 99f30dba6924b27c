-- @include envelope-parse
-- @include group-keys
-- @include lease-remove
-- @include named-groups
-- @include keyed-remove
-- @include newer-remove
-- @include priority-remove
-- @include schedule-remove

-- Takes `id` out of every named group, wherever it is there (cancel, replace).
local function groups_forget(registry_key, pending_key, meta_key, id)
  if redis.call('HDEL', pending_key, id) == 0 then return end
  for _, group in ipairs(named_groups(registry_key)) do
    local g = group_keys(meta_key, group)
    local header = redis.call('HGET', g.meta, id)
    if header then
      redis.call('HDEL', g.meta, id)
      local _, due = envelope_parse(header)
      if not schedule_remove(g.schedule, id, due)
        and not lease_remove(g.in_flight, id)
        and redis.call('ZREM', g.dead, id) == 0
        and redis.call('LREM', g.ready, 1, id) == 0
        and not priority_remove(g.meta, id)
        and not keyed_remove(g.meta, id) then
        newer_remove(g.meta, id)
      end
      redis.call('HDEL', g.errors, id)
      redis.call('HDEL', g.error_log, id)
      redis.call('HDEL', g.progress, id)
      redis.call('HDEL', g.logs, id)
    end
  end
end
