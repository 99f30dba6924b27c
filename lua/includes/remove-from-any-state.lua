-- @include flow-keys
-- @include groups-forget
-- @include keyed-release
-- @include keyed-remove
-- @include newer-remove
-- @include priority-remove
-- @include lease-remove
-- @include schedule-remove

-- Removes `id`, whose envelope says it is due at `due`, from whichever state holds it (an event lives in
-- exactly one of schedule, ready, in flight, dead or, since 0.6, waiting for its children
-- (a parent replaced stops waiting: it is a plain event from then on); ready includes the lists
-- of events left for a newer version, includes/newer-key.lua), with its last
-- error and what named groups hold of it. Its envelope stays: the caller
-- deletes or replaces it. `k` names the queue's keys:
-- meta, schedule, ready, in_flight, dead, errors, error_log, legacy (0.1's
-- schedule), groups (the registry) and pending.
local function remove_from_any_state(k, id, due)
  if not schedule_remove(k.schedule, id, due)
    and redis.call('ZREM', k.legacy, id) == 0
    and not lease_remove(k.in_flight, id)
    and redis.call('ZREM', k.dead, id) == 0
    and redis.call('LREM', k.ready, 1, id) == 0
    and redis.call('ZREM', (flow_keys(k.meta)), id) == 0
    and not priority_remove(k.meta, id)
    and not keyed_remove(k.meta, id) then
    newer_remove(k.meta, id)
  end
  -- Sorted by key and running: its key's room is free again, and its key forgotten.
  keyed_release(k.meta, { id })
  redis.call('HDEL', k.errors, id)
  redis.call('HDEL', k.error_log, id)
  -- What its calls reported (since 0.6), named after its meta key.
  local base = string.sub(k.meta, 1, -3)
  redis.call('HDEL', base .. ':pg', id)
  redis.call('HDEL', base .. ':lg', id)
  groups_forget(k.groups, k.pending, k.meta, id)
end
