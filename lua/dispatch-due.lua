-- Transition: SCHEDULED (due) -> READY, and IN_FLIGHT (lease expired) -> READY,
-- writing the attempt that expired into the envelope when its handler had
-- started (see includes/lease-constants.lua). An event claimed ahead whose instance
-- stopped before starting it spends no attempt; the note left in its error
-- makes a second such expiry in a row count, so that an event which stops its
-- instance before the start reaches Redis still runs out of attempts.
-- Atomic, so any number of dispatchers may run it at once without a lock.
-- KEYS[1] schedule: schedule index (bucket -> earliest due ms; see includes/schedule-buckets-constants.lua)
-- KEYS[2] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[3] ready: ready list
-- KEYS[4] legacySchedule: legacy schedule zset (id -> due ms), written by 0.1; only emptied
-- KEYS[5] meta: meta hash
-- KEYS[6] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[7] recent: recent zset    (id -> end of its idempotency window ms); marks whose
--         window ended are dropped here, at most `limit` a call
-- KEYS[8] groups: group registry (group -> registered at ms): a due event goes to every
--         group in it; none, or only 'default': to the ready list alone. A named
--         group's own keys name a registry never written: its retries are its own.
-- KEYS[9] pending: pending hash   (id -> how many groups still hold the event)
-- KEYS[10] paused: paused flag: while it exists nothing is moved
-- KEYS[11] errors: errors hash   (id -> last error)
-- KEYS[12] marker: the queue's marker (register-group.lua): set while Redis holds the
--         registrations of groups and recurring schedules made on this queue
-- KEYS[13] handled: handled hash (the history, includes/handled-keep.lua)
-- KEYS[14] handledIndex: handled index zset (id -> handled at ms): records older than
--         `keep_age_ms` are dropped here, at most 1,000 a call
-- KEYS[15] sharedMeta: the type's meta hash, where bodies live (their priorities): KEYS[5]
--         itself for the default group
-- KEYS[16] dead: dead zset (keepDead trims it here too)
-- KEYS[17] errorLog: error-log hash (id -> its last failures)
-- KEYS[18] tombstone: tombstone: while set (obliterate.lua), a missing marker is no loss to
--         repair: nothing is registered again
-- KEYS[19] heartbeats: heartbeat zset ('<claim identity>' -> lapses at ms, since 0.6): a lease
--         whose heartbeat lapsed ends as an expired one does (includes/lease-heartbeat.lua)
-- ARGV[1] limit (number): most events to move in this call
-- ARGV[2] default_here (flag): a handler of the default group runs here: once the type has
--         named groups, the default group is registered too, so it keeps getting events
-- ARGV[3] new_marker (string): a new marker value, when the caller registered something on this
--         queue (a named group) and so wants the marker's value; '' otherwise.
--         A missing marker (Redis lost its data: a restart without persistence,
--         FLUSHALL, a failover to an empty replica) is set to it. Every
--         instance remembers the value it saw: a changed value tells each of
--         them, not only the first to look, that its registrations are gone
-- ARGV[4] wake_channel (string): wake channel: when this call moved events to a ready list, it says
--         so there ('<queue tag>|-1'), so that the readers of every instance
--         look at once ('': say nothing)
-- ARGV[5] queue_tag (string): the queue's tag (a group's keys: its queue's)
-- ARGV[6] marker_seen (flag): the caller saw this queue's marker before: a missing one
--         now means Redis lost the registrations (not a queue never registered)
-- ARGV[7] keep_age_ms (number): keepHandled.ageMs: how long the history keeps a record (0: no age limit)
-- ARGV[8] keep_dead_count (number): keepDead.count of the group whose keys these are (0: no limit)
-- ARGV[9] keep_dead_age (number): keepDead.ageMs of that group (0: no limit): dead letters past it
--         go as time passes, not only when another event is dead-lettered
-- ARGV[10..] groups (string[]): the groups the caller's instance handles on this queue ('default'
--         among them when a default-group handler runs there), given with
--         new_marker. While the marker is missing they are registered again in
--         this call, before anything moves, so an event that falls due right
--         after a data loss reaches them. When the loss is known (marker_seen)
--         and the registry then lacks 'default', the events already in the
--         default group's ready list (moved there while the registrations
--         were missing, by an instance that could not restore them: nobody
--         takes from it) are handed to every registered group.
-- REPLY {moved_due: number, moved_expired: number, next_due: number, now: number, marker: string, handed_to_groups: number, ready_waiting: number}:
-- moved due, moved with expired lease, next due ms or -1, Redis now ms, the marker's
-- value (new_marker given) or '', events handed from the default group's ready list
-- to the named groups, and (since 0.6) how many events wait in the ready list and the
-- priority set when this call moved none (0 when it moved some; -1 when the queue is
-- paused): readers that missed a wake-up look.
-- A look that finds nothing due, expired or lapsed reads the heads alone, and a queue that holds
-- nothing (a quiet queue, src/runtime/quiet-looks.ts) not even those: about five commands.
-- @include dead-trim
-- @include envelope-make
-- @include envelope-parse
-- @include group-keys
-- @include handled-trim-age
-- @include hset-pairs
-- @include keyed-release
-- @include lease-heartbeat
-- @include lease-heartbeat-drop
-- @include lease-constants
-- @include lease-started
-- @include lease-unpin-if-idle
-- @include named-groups
-- @include next-due
-- @include now-ms
-- @include ready-add
-- @include ready-bodies
-- @include schedule-take-due

local UNSTARTED = 'lease expired before its handler started (the instance that claimed it ahead stopped); attempt not counted'

local now = now_ms()

-- The caller's groups, registered again (the marker was missing); 'default' only beside a named
-- group, as register-group.lua does. With the loss known and no default group registered, what
-- waits in the default group's ready list has no reader: it goes to every named group, as a due
-- event would have. Returns how many events were handed over.
local function register_again(loss_known)
  local named = false
  for i = groups_at, groups_at + groups_n - 1 do
    if ARGV[i] ~= 'default' then named = true end
  end
  if not named then return 0 end
  for i = groups_at, groups_at + groups_n - 1 do redis.call('HSETNX', KEYS[8], ARGV[i], now) end
  if not loss_known or redis.call('HEXISTS', KEYS[8], 'default') == 1 then return 0 end
  local stranded = redis.call('LRANGE', KEYS[3], 0, -1)
  if #stranded == 0 then return 0 end
  local groups = named_groups(KEYS[8], true)
  local envelopes = redis.call('HMGET', KEYS[5], unpack(stranded))
  -- One the named groups were handed already (the pending hash counts it) is the default group's own copy:
  -- it stays where it is. A missing envelope was cancelled meanwhile.
  local delivered = redis.call('HMGET', KEYS[9], unpack(stranded))
  local ids, kept, headers, counts, bodies, dues = {}, {}, {}, {}, {}, {}
  for k, id in ipairs(stranded) do
    if delivered[k] then
      kept[#kept + 1] = id
    elseif envelopes[k] then
      local _, due = envelope_parse(envelopes[k])
      ids[#ids + 1] = id
      bodies[#ids] = envelopes[k]
      dues[#ids] = due
      headers[#headers + 1] = id
      headers[#headers + 1] = envelope_make(0, due, '')
      counts[#counts + 1] = id
      counts[#counts + 1] = #groups
    end
  end
  redis.call('DEL', KEYS[3])
  if #kept > 0 then redis.call('RPUSH', KEYS[3], unpack(kept)) end
  if #ids == 0 then return 0 end
  for _, group in ipairs(groups) do
    local g = group_keys(KEYS[5], group)
    hset_pairs(g.meta, headers)
    ready_add(g.meta, g.ready, ids, bodies, dues)
  end
  hset_pairs(KEYS[9], counts)
  return #ids
end

local marker = ''
local rescued = 0
if new_marker ~= '' then
  marker = redis.call('GET', KEYS[12])
  if not marker and redis.call('EXISTS', KEYS[18]) == 1 then
    marker = ''
  elseif not marker then
    -- With pcall: at Redis's memory limit it is refused, and the script must go on freeing memory;
    -- then the value is not known yet, rather than new on every look.
    local set = redis.pcall('SET', KEYS[12], new_marker)
    marker = (type(set) == 'table' and set.err) and '' or new_marker
    if marker ~= '' then rescued = register_again(marker_seen) end
  end
end

-- Dead letters past keepDead (those the claim dead-letters on an expired lease among them), paused or not:
-- a pause stops deliveries, not retention.
if keep_dead_count > 0 or keep_dead_age > 0 then
  dead_trim({ dead = KEYS[16], meta = KEYS[5], shared_meta = KEYS[15], pending = KEYS[9], errors = KEYS[11], error_log = KEYS[17] }, now, keep_dead_count, keep_dead_age)
end


-- Mostly neither exists: one EXISTS for both tells (a quiet queue's look costs a command less).
if redis.call('EXISTS', KEYS[10], KEYS[8]) > 0 then
  -- Paused: nothing moves; ready_waiting -1 says so, and the dispatcher looks again after pollIntervalMs.
  if redis.call('EXISTS', KEYS[10]) == 1 then return {0, 0, -1, now, marker, rescued, -1} end
  -- Written once, and with pcall: at Redis's memory limit this write, the first
  -- of the call, is refused, and the script must still go on freeing memory.
  if default_here and redis.call('HEXISTS', KEYS[8], 'default') == 0 then
    redis.pcall('HSET', KEYS[8], 'default', now)
  end
end

-- Expired leases and the default group's own retries go back to its ready list.
local function move_here(ids)
  if #ids == 0 then return 0 end
  ready_add(KEYS[5], KEYS[3], ids, ready_bodies(KEYS[5], KEYS[15], ids))
  limit = limit - #ids
  return #ids
end

-- Due events go to every registered group. An event already delivered (it is
-- in the pending hash) is back in this schedule as the default group's retry or
-- replay: it goes to the default group alone.
local function move(ids)
  if #ids == 0 then return 0 end
  local named = named_groups(KEYS[8], true)
  if #named == 0 then return move_here(ids) end
  local to_default = redis.call('HEXISTS', KEYS[8], 'default') == 1
  local delivered = redis.call('HMGET', KEYS[9], unpack(ids))
  local again, fresh, headers, counts, bodies, dues = {}, {}, {}, {}, {}, {}
  local again_bodies, again_dues = {}, {}
  local envelopes = redis.call('HMGET', KEYS[5], unpack(ids))
  local holders = #named + (to_default and 1 or 0)
  for k, id in ipairs(ids) do
    if delivered[k] then
      again[#again + 1] = id
      again_bodies[#again] = envelopes[k]
      again_dues[#again] = envelopes[k] and select(2, envelope_parse(envelopes[k]))
    elseif envelopes[k] then -- a missing envelope was cancelled meanwhile
      fresh[#fresh + 1] = id
      local _, due = envelope_parse(envelopes[k])
      bodies[#fresh] = envelopes[k]
      dues[#fresh] = due
      headers[#headers + 1] = id
      headers[#headers + 1] = envelope_make(0, due, '')
      counts[#counts + 1] = id
      counts[#counts + 1] = holders
    end
  end
  ready_add(KEYS[5], KEYS[3], again, again_bodies, again_dues)
  if #fresh > 0 then
    for _, group in ipairs(named) do
      local g = group_keys(KEYS[5], group)
      hset_pairs(g.meta, headers)
      ready_add(g.meta, g.ready, fresh, bodies, dues)
    end
    if to_default then ready_add(KEYS[5], KEYS[3], fresh, bodies, dues) end
    hset_pairs(KEYS[9], counts)
  end
  limit = limit - #ids
  return #ids
end

local function take_from_zset(from)
  if limit <= 0 then return {} end
  local ids = redis.call('ZRANGE', from, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  if #ids > 0 then redis.call('ZREM', from, unpack(ids)) end
  return ids
end

-- Leases that expired. 0.2 scored a lease by its expiry alone and kept the
-- attempt in the envelope; a scaled lease's attempt goes into the envelope now.
local function take_expired()
  if limit <= 0 then return {} end
  local unscaled = redis.call('ZRANGE', KEYS[2], '-inf', math.min(now, SCALED_LEASE_FROM - 1), 'BYSCORE', 'LIMIT', 0, limit)
  local scaled = {}
  if #unscaled < limit then
    scaled = redis.call('ZRANGE', KEYS[2], SCALED_LEASE_FROM, string.format('%d', now) .. '999', 'BYSCORE', 'LIMIT', 0, limit - #unscaled, 'WITHSCORES')
  end
  -- Leases whose heartbeat lapsed (since 0.6): their instance stopped renewing them.
  local lapsed = {}
  if #unscaled + #scaled / 2 < limit then lapsed = heartbeat_lapsed(KEYS[19], KEYS[2], now, limit - #unscaled - #scaled / 2) end
  local expired, scaled_ids, started = {}, {}, {}
  for _, id in ipairs(unscaled) do expired[#expired + 1] = id end
  -- Disjoint: a lapsed lease past its hard expiry is among the scaled ones (includes/lease-heartbeat.lua).
  for _, found in ipairs({ scaled, lapsed }) do
    for i = 1, #found, 2 do
      expired[#expired + 1] = found[i]
      scaled_ids[#scaled_ids + 1] = found[i]
      started[#scaled_ids] = lease_started(tonumber(found[i + 1]))
    end
  end
  if #expired == 0 then return expired end
  -- A lapsed lease ends before its hard expiry: its calls no longer count against their keys' limits.
  if #lapsed > 0 then
    local ids = {}
    for i = 1, #lapsed, 2 do ids[#ids + 1] = lapsed[i] end
    keyed_release(KEYS[5], ids)
  end
  -- The leases go first. At Redis's memory limit (noeviction) a script's first
  -- write that may grow memory is refused, and later ones are not: removing
  -- first lets the crashed workers' events come back when memory is short.
  redis.call('ZREM', KEYS[2], unpack(expired))
  lease_unpin_if_idle(KEYS[2])
  -- Leases past their hard expiry that also had a heartbeat entry: it goes with them.
  if #scaled > 0 then
    local scores = {}
    for i = 2, #scaled, 2 do scores[#scores + 1] = scaled[i] end
    lease_heartbeat_drop(KEYS[2], scores)
  end
  if #scaled_ids > 0 then
    local values = redis.call('HMGET', KEYS[5], unpack(scaled_ids))
    local notes = redis.call('HMGET', KEYS[11], unpack(scaled_ids))
    local envelopes, noted, cleared = {}, {}, {}
    for k, id in ipairs(scaled_ids) do
      -- A missing envelope (cancelled meanwhile) stays missing; the claim skips it.
      if values[k] then
        local spent = started[k] or notes[k] == UNSTARTED
        if not started[k] then
          noted[#noted + 1] = id
          noted[#noted + 1] = UNSTARTED
        elseif notes[k] == UNSTARTED then
          -- A run that started ends a series of unstarted expiries: the next one is free again.
          cleared[#cleared + 1] = id
        end
        if spent then
          local attempt, due, body = envelope_parse(values[k])
          envelopes[#envelopes + 1] = id
          envelopes[#envelopes + 1] = envelope_make(attempt + 1, due, body)
        end
      end
    end
    if #envelopes > 0 then hset_pairs(KEYS[5], envelopes) end
    if #noted > 0 then hset_pairs(KEYS[11], noted) end
    if #cleared > 0 then redis.call('HDEL', KEYS[11], unpack(cleared)) end
  end
  return expired
end

-- The history's records past keepHandled.ageMs: dropped as time passes, not only at the next completion.
local keep_age = keep_age_ms
if keep_age > 0 then handled_trim_age(KEYS[13], KEYS[14], now, keep_age) end

-- A quiet queue holds no schedule, lease, heartbeat, side schedule or idempotency mark: one EXISTS
-- tells, and its look reads none of their heads.
local holds_any = redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[7], KEYS[19], KEYS[4]) > 0

-- Idempotency marks whose window ended: the head is the oldest, so one look
-- tells whether there is anything to drop.
local oldest_mark = holds_any and redis.call('ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')[2]
if oldest_mark and tonumber(oldest_mark) <= now then
  local ended = redis.call('ZCOUNT', KEYS[7], '-inf', now)
  redis.call('ZREMRANGEBYRANK', KEYS[7], 0, math.min(ended, limit) - 1)
end

-- The heads say when a look has work: the schedule's, the leases', the heartbeats' and the side
-- schedule's (one EXISTS for the last two, which are mostly missing).
local function next_look_at()
  local at = next_due(KEYS[1], KEYS[2])
  if redis.call('EXISTS', KEYS[19], KEYS[4]) == 0 then return at end
  local heartbeat_head = tonumber(redis.call('ZRANGE', KEYS[19], 0, 0, 'WITHSCORES')[2])
  if heartbeat_head and (at < 0 or heartbeat_head < at) then at = heartbeat_head end
  local legacy = tonumber(redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')[2])
  if legacy and (at < 0 or legacy < at) then at = legacy end
  return at
end

local next_at = holds_any and next_look_at() or -1
local due, expired = 0, 0
if next_at >= 0 and next_at <= now then
  due = move(take_from_zset(KEYS[4]))
  due = due + move(schedule_take_due(KEYS[1], now, limit))
  expired = move_here(take_expired())
  next_at = next_look_at()
end
local ready_waiting = 0
if due + expired + rescued > 0 then
  if wake_channel ~= '' then redis.call('PUBLISH', wake_channel, queue_tag .. '|-1') end
else
  local queue = priority_keys(KEYS[5]).queue
  -- Mostly both are missing: one EXISTS tells.
  if redis.call('EXISTS', KEYS[3], queue) > 0 then ready_waiting = redis.call('LLEN', KEYS[3]) + redis.call('ZCARD', queue) end
end
return {due, expired, next_at, now, marker, rescued, ready_waiting}
