-- Transition: SCHEDULED | READY | DEAD | WAITING -> MOVING, for a change of the type's
-- partitions (src/runtime/repartitioner.ts): each event of the list that no
-- holder (the default group or a named one) has in flight leaves every state
-- here and is kept whole in the moving hash, so no reader here claims it and
-- none is lost; migrate-in.lua then stores it in its new partition, and the
-- caller deletes it from the moving hash. An event some holder has in flight
-- stays: its lease ends here first (the caller dispatches this queue, so an
-- expired lease comes back to READY like anywhere else).
-- KEYS[1] meta: meta hash (bodies)
-- KEYS[2] schedule: schedule index (includes/schedule-buckets-constants.lua)
-- KEYS[3] ready: ready list
-- KEYS[4] inFlight: in-flight zset
-- KEYS[5] dead: dead zset
-- KEYS[6] errors: errors hash
-- KEYS[7] errorLog: error-log hash
-- KEYS[8] legacySchedule: legacy schedule zset, written by 0.1
-- KEYS[9] groups: group registry (includes/group-keys.lua)
-- KEYS[10] pending: pending hash (id -> how many groups still hold the event)
-- KEYS[11] moving: moving hash (id -> 'token|taken at ms|record json' of an event between partitions)
-- KEYS[12] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] token (string): token of this move (the caller's batch)
-- ARGV[2..] ids (string[]): the ids to move
-- REPLY (string[]): {id, record json, ...} of the events taken out.
-- @include flow-results-key
-- @include flow-drop
-- @include burst-keys
-- @include envelope-parse
-- @include flow-keys
-- @include group-keys
-- @include groups-constants
-- @include named-groups
-- @include keyed-remove
-- @include newer-remove
-- @include priority-remove
-- @include now-ms
-- @include schedule-remove

-- Takes `id` out of the state it is in, in the keys `k`; returns that state (and a dead letter's score), or nil.
local function take(k, id, due)
  if schedule_remove(k.schedule, id, due) or redis.call('ZREM', k.legacy, id) == 1 then return 'scheduled' end
  local dead = redis.call('ZSCORE', k.dead, id)
  if dead then
    redis.call('ZREM', k.dead, id)
    return 'dead', tonumber(dead)
  end
  if redis.call('LREM', k.ready, 1, id) == 1 or priority_remove(k.meta, id) or keyed_remove(k.meta, id) or newer_remove(k.meta, id) then return 'ready' end
  return nil
end

local now = now_ms()
local own = { meta = KEYS[1], schedule = KEYS[2], ready = KEYS[3], legacy = KEYS[8], dead = KEYS[5] }
-- A group being removed does not move: its share of an event is dropped here, as remove-group.lua would.
local named = named_groups(KEYS[9], true)
local removing = {}
for _, group in ipairs(named_groups(KEYS[9])) do
  if redis.call('HGET', KEYS[9], group) == GROUP_REMOVING then removing[#removing + 1] = group_keys(KEYS[1], group) end
end
local out = {}
for i = ids_at, ids_at + ids_n - 1 do
  local id = ARGV[i]
  local value = redis.call('HGET', KEYS[1], id)
  local busy = value == nil or value == false or redis.call('ZSCORE', KEYS[4], id)
  local held = {}
  if not busy then
    for _, group in ipairs(named) do
      local g = group_keys(KEYS[1], group)
      local header = redis.call('HGET', g.meta, id)
      if header then
        if redis.call('ZSCORE', g.in_flight, id) then busy = true break end
        held[#held + 1] = { group = group, g = g, header = header }
      end
    end
  end
  if not busy then
    for _, g in ipairs(removing) do
      if redis.call('ZSCORE', g.in_flight, id) then busy = true break end
    end
  end
  if not busy then
    local _, due = envelope_parse(value)
    local record = { id = id, value = value }
    record.state, record.dead = take(own, id, due)
    record.error = redis.call('HGET', KEYS[6], id) or nil
    record.log = redis.call('HGET', KEYS[7], id) or nil
    -- Its windows (since 0.6) go with it: a leading debounce's burst, with the payload it may hold, and a throttle window.
    local bursts, burst_ends, throttles = burst_keys(KEYS[1])
    record.burst = redis.call('HGET', bursts, id) or nil
    record.throttle = redis.call('ZSCORE', throttles, id) or nil
    redis.call('HDEL', bursts, id)
    redis.call('ZREM', burst_ends, id)
    redis.call('ZREM', throttles, id)
    -- Its part in flows (since 0.6): a parent's WAITING state and flow record, a child's link to its parents.
    local waiting, flows, parents = flow_keys(KEYS[1])
    record.waiting = redis.call('ZSCORE', waiting, id) or nil
    record.flow = redis.call('HGET', flows, id) or nil
    record.link = redis.call('HGET', parents, id) or nil
    local results = redis.call('HGETALL', flow_results_key(KEYS[1], id))
    if #results > 0 then record.results = results end
    redis.call('ZREM', waiting, id)
    flow_drop(KEYS[1], { id })
    redis.call('HDEL', parents, id)
    local pending = tonumber(redis.call('HGET', KEYS[10], id) or '')
    for _, g in ipairs(removing) do
      local header = redis.call('HGET', g.meta, id)
      if header then
        local _, group_due = envelope_parse(header)
        take(g, id, group_due)
        redis.call('HDEL', g.meta, id)
        redis.call('HDEL', g.errors, id)
        redis.call('HDEL', g.error_log, id)
        redis.call('HDEL', g.progress, id)
        redis.call('HDEL', g.logs, id)
        if pending then pending = pending - 1 end
      end
    end
    record.pending = pending and pending > 0 and tostring(pending) or nil
    record.groups = {}
    for _, h in ipairs(held) do
      local _, group_due = envelope_parse(h.header)
      local state, dead = take(h.g, id, group_due)
      record.groups[#record.groups + 1] = {
        group = h.group, header = h.header, state = state or cjson.null, dead = dead or cjson.null,
        error = redis.call('HGET', h.g.errors, id) or cjson.null, log = redis.call('HGET', h.g.error_log, id) or cjson.null,
      }
      redis.call('HDEL', h.g.meta, id)
      redis.call('HDEL', h.g.errors, id)
      redis.call('HDEL', h.g.error_log, id)
      -- Progress and log lines (since 0.6) are dropped: a move carries the event, not its calls' reports.
      redis.call('HDEL', h.g.progress, id)
      redis.call('HDEL', h.g.logs, id)
    end
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', string.sub(KEYS[1], 1, -3) .. ':pg', id)
    redis.call('HDEL', string.sub(KEYS[1], 1, -3) .. ':lg', id)
    redis.call('HDEL', KEYS[6], id)
    redis.call('HDEL', KEYS[7], id)
    redis.call('HDEL', KEYS[10], id)
    -- Held by no one any more (its last holder was a group being removed): it ends here.
    if record.state or #record.groups > 0 or record.waiting then
      local json = cjson.encode(record)
      redis.call('HSET', KEYS[11], id, token .. '|' .. now .. '|' .. json)
      out[#out + 1] = id
      out[#out + 1] = json
    end
  end
end
return out
