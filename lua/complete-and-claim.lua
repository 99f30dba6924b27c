-- Transitions, in one round trip: marks the events claimed ahead whose
-- handlers started since, confirms those the reader is about to start (a
-- handler starts only once confirmed: a cancel, replace or pause that ran
-- first means never), then IN_FLIGHT -> (removed) for the events whose
-- handlers succeeded, then READY -> IN_FLIGHT (attempt + 1, leased until
-- now + lease) for as many events as the caller has free handler slots, or
-- READY -> DEAD for an event whose lease already expired on its last attempt.
-- Every result is fenced by the claim it belongs to (includes/lease-constants.lua): a
-- result of a claim that is no longer the one in flight (lease expired,
-- claimed again, replaced, cancelled) changes nothing.
-- The attempt in flight is the envelope's plus one, so completing reads only
-- the in-flight zset and claiming writes no envelope.
-- KEYS[1] ready: ready list
-- KEYS[2] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[3] meta: meta hash
-- KEYS[4] dead: dead zset
-- KEYS[5] errors: errors hash
-- KEYS[6] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[7] recent: recent zset    (id -> end of its idempotency window ms)
-- KEYS[8] claimLog: claim log of the calling reader: what its last claim took, so that a
--         claim whose reply was lost can be given back (release-claim.lua)
-- KEYS[9] pending: pending hash   (id -> how many groups still hold the event; includes/group-keys.lua)
-- KEYS[10] sharedMeta: the type's meta hash, where bodies live: KEYS[3] itself for the
--         default group; a named group's KEYS[3] holds only headers 'attempt|due|'
-- KEYS[11] paused: paused flag: while it exists nothing is claimed
-- KEYS[12] errorLog: error-log hash (id -> its last failures; includes/error-log-append.lua)
-- KEYS[13] handled: handled hash (id -> 'attempt|handled at|due|body'; includes/handled-keep.lua)
-- KEYS[14] handledIndex: handled index zset (id -> handled at ms)
-- ARGV[1] most (number): most events to claim (0: only complete)
-- ARGV[2] lease_ms (number): lease ms
-- ARGV[3] max_attempts (number): max attempts
-- ARGV[4] window_ms (number): idempotency window ms: completed ids are marked in the
--         recent zset for that long, so enqueueing one again is a duplicate (0: no marks)
-- ARGV[5] token (string): token of this claim, kept in the claim log with what it took
--         ('': no log)
-- ARGV[6] start_now (number): how many of the events claimed start at once (free slots):
--         their leases are written started; the rest wait in the reader, not started
-- ARGV[7] keep_count (number): keepHandled: how many handled events to keep (0: none)
-- ARGV[8] keep_age (number): keepHandled: how long to keep them, ms (0: no age limit)
-- ARGV[9] max_version (number): the newest class version the reader reads: an event
--         written by a newer one is not claimed but left, no attempt spent, in the
--         queue's list for its version (includes/newer-key.lua), which readers of that
--         version or newer take from first
-- ARGV[10] sorts_by_key (flag): the reader sorts ready events by key (its handler's key
--         option, lua/classify.lua): its claims are stamped in the flow hash
--         (kseen). When not: while the queue is keyed it takes from the
--         ready list only once no reader that sorts has claimed for
--         SORTER_GONE_MS, so that no event is left unsorted there once the
--         handlers that sorted stopped, and per-key limits hold while they run
-- ARGV[11..] started {id: string, claim: number}: each event claimed ahead whose handler
--         started, and the identity of the claim that took it
-- ARGV[..] confirmations {id: string, claim: number}: each event claimed ahead that the
--         reader is about to start (writes nothing): refused unless its lease is still
--         that claim's and the type is not paused
-- ARGV[..] successes {id: string, claim: number}: each succeeded event
-- REPLY {now: number, stale: number[], claimed: string[], dead: unknown[], paused: flag, claim_score: string, left: number, throttled_ms: number, freed: flag, refused: number[]}:
--          Redis now ms, {position of each succeeded event not completed},
--          {id, envelope, ...} claimed, {id, attempt, ...} dead-lettered,
--          paused, identity of this claim's leases (not-started score) or '',
--          how many events this call left for a newer version,
--          ms to wait when the queue's limits left no room (-1: until a running
--          call ends; 0: not held back; includes/limit-room.lua),
--          whether completions freed room a claim had found missing,
--          {position (from 1) of each confirmation refused: its lease is no
--          longer that claim's (cancelled, replaced, expired; the handler must
--          not start), or the type is paused (it goes back unstarted)}.
-- The claim takes no more than the queue's limits allow (src/service/flow-control.ts).
-- Positions count the succeeded events from 1. Listing the stale ones, not a
-- flag per event, keeps the usual reply (every success completed) short.
-- A claimed event's envelope is returned as stored: its attempt is the one
-- before this claim (the claim's is one more), and the caller splits it.
-- @include envelope-attempt-version
-- @include envelope-parse
-- @include expire-optional
-- @include error-log-append
-- @include handled-keep
-- @include groups-release
-- @include lease-claim-scores
-- @include lease-fences
-- @include lease-pin-constants
-- @include lease-unpin-if-idle
-- @include keyed-keys
-- @include keyed-release
-- @include keyed-take
-- @include limit-keys
-- @include limit-room
-- @include newer-key
-- @include now-ms-us

local group_queue = KEYS[10] ~= KEYS[3]
-- The queue's flow state, read once: limits, a hold, a full mark, events left for a newer version.
local flow_key = limit_keys(KEYS[3])
local flow = redis.call('HMGET', flow_key, unpack(FLOW_FIELDS))

-- Each batch costs a fixed number of calls, whatever its size: in a script,
-- the calls, not the work they do, are most of the cost.
local stale = {}
local removed = {}
local now, now_us = now_ms_us()
if started_n > 0 then
  -- A started lease keeps its claim's identity with its last bit set; one
  -- that changed meanwhile (expired, replaced) is no longer this claim's.
  local ids = {}
  for i = started_at, started_at + 2 * started_n - 1, 2 do ids[#ids + 1] = ARGV[i] end
  local leased = redis.call('ZMSCORE', KEYS[2], unpack(ids))
  local marks = {}
  for k, id in ipairs(ids) do
    local identity = tonumber(ARGV[started_at - 1 + 2 * k])
    if leased[k] and tonumber(leased[k]) == identity then
      marks[#marks + 1] = string.format('%.0f', identity + 1)
      marks[#marks + 1] = id
    end
  end
  if #marks > 0 then redis.call('ZADD', KEYS[2], 'XX', unpack(marks)) end
end
-- Paused: nothing is claimed, and no event held ahead is confirmed (the reader gives them back).
local paused = (most > 0 or confirmations_n > 0) and redis.call('EXISTS', KEYS[11]) == 1
local refused = {}
if confirmations_n > 0 then
  local ids = {}
  for i = confirmations_at, confirmations_at + 2 * confirmations_n - 1, 2 do ids[#ids + 1] = ARGV[i] end
  -- A lease that changed meanwhile (cancelled, replaced, expired) is no longer this claim's.
  local leased = paused and {} or redis.call('ZMSCORE', KEYS[2], unpack(ids))
  for k = 1, confirmations_n do
    if not (leased[k] and lease_fences(tonumber(leased[k]), tonumber(ARGV[confirmations_at - 1 + 2 * k]))) then refused[#refused + 1] = k end
  end
end
-- Instances with the key option beside ones without (a deploy changing it, a mismatch the log warns of):
-- those without leave the ready list to those with it while these claim, and take over once they are gone.
local SORTER_GONE_MS = 60000
local sorter_here = flow[13] and now - tonumber(flow[13]) < SORTER_GONE_MS
if sorts_by_key and most > 0 then redis.call('HSET', flow_key, 'kseen', now) end
if successes_n > 0 then
  local ids = {}
  for i = successes_at, successes_at + 2 * successes_n - 1, 2 do ids[#ids + 1] = ARGV[i] end
  local leased = redis.call('ZMSCORE', KEYS[2], unpack(ids))
  for k, id in ipairs(ids) do
    if leased[k] and lease_fences(tonumber(leased[k]), tonumber(ARGV[successes_at - 1 + 2 * k])) then
      removed[#removed + 1] = id
    else
      stale[#stale + 1] = k
    end
  end
  if #removed > 0 then
    redis.call('ZREM', KEYS[2], unpack(removed))
    if keep_count > 0 then
      -- The history keeps what ran: the attempt (the envelope's plus the one in flight), when, the due time and the body.
      local headers = redis.call('HMGET', KEYS[3], unpack(removed))
      local bodies = group_queue and redis.call('HMGET', KEYS[10], unpack(removed)) or headers
      local records = {}
      for k, id in ipairs(removed) do
        if headers[k] and bodies[k] then
          local attempt, due = envelope_parse(headers[k])
          local _, _, body = envelope_parse(bodies[k])
          records[#records + 1] = id
          records[#records + 1] = (attempt + 1) .. '|' .. now .. '|' .. due .. '|' .. body
        end
      end
      handled_keep(KEYS[13], KEYS[14], records, now, keep_count, keep_age)
    end
    -- The ids whose bodies go now: all of them, unless other groups still hold some.
    local finished = removed
    if group_queue then
      redis.call('HDEL', KEYS[3], unpack(removed))
      finished = groups_release(KEYS[9], removed)
    elseif redis.call('EXISTS', KEYS[9]) == 1 then
      local held = redis.call('HMGET', KEYS[9], unpack(removed))
      local delivered = {}
      finished = {}
      for k, id in ipairs(removed) do
        if held[k] then delivered[#delivered + 1] = id else finished[#finished + 1] = id end
      end
      for _, id in ipairs(groups_release(KEYS[9], delivered)) do finished[#finished + 1] = id end
    end
    if #finished > 0 then
      redis.call('HDEL', KEYS[10], unpack(finished))
      if window_ms > 0 then
        -- One score for every mark, written once rather than converted from a number per mark.
        local marks = {}
        local until_ms = string.format('%d', now + window_ms)
        for i, id in ipairs(finished) do
          marks[2 * i - 1] = until_ms
          marks[2 * i] = id
        end
        redis.call('ZADD', KEYS[7], unpack(marks))
      end
    end
  end
  -- An event that failed before, or whose lease ran out before it started, has an error recorded.
  if #removed > 0 and redis.call('EXISTS', KEYS[5]) == 1 then redis.call('HDEL', KEYS[5], unpack(removed)) end
  if #removed > 0 and redis.call('EXISTS', KEYS[12]) == 1 then redis.call('HDEL', KEYS[12], unpack(removed)) end
end
-- Room freed under a concurrency limit that a claim found full: the caller wakes the instances.
local freed = 0
if #removed > 0 and flow[12] then keyed_release(KEYS[3], removed) end
if #removed > 0 and flow[5] then
  redis.call('HDEL', flow_key, 'thr')
  flow[5] = false
  freed = 1
end

local claimed, dead = {}, {}
local count = most
if paused then
  if #removed > 0 then lease_unpin_if_idle(KEYS[2]) end
  return {now, stale, claimed, dead, 1, '', 0, 0, freed, refused}
end
local rate_key, rate_per = false, 0
if count > 0 then
  local room, wait
  room, wait, rate_key, rate_per = limit_room(KEYS[3], flow, KEYS[2], count, now)
  if room <= 0 then
    if #removed > 0 then lease_unpin_if_idle(KEYS[2]) end
    return {now, stale, claimed, dead, 0, '', 0, wait, freed, refused}
  end
  count = room
end
-- Events left by readers of an older version come first: they fell due before those in the list.
local newer = newer_key(KEYS[3])
local ids = false
if count > 0 and flow[6] then
  local waiting = redis.call('HKEYS', newer)
  for _, version in ipairs(waiting) do
    local want = count - (ids and #ids or 0)
    if want > 0 and tonumber(version) <= max_version then
      local list = newer .. ':' .. version
      local taken = redis.call('LPOP', list, want)
      if taken then
        ids = ids or {}
        for _, id in ipairs(taken) do ids[#ids + 1] = id end
      end
      -- Its time says when a reader of that version last took from it (src/service/health.ts).
      if redis.call('LLEN', list) == 0 then redis.call('HDEL', newer, version) else redis.call('HSET', newer, version, now) end
    end
  end
  if redis.call('EXISTS', newer) == 0 then redis.call('HDEL', flow_key, 'v') end
end
-- Sorted by key (HandlerOptions.key): the keys in turn, each within its own limits; while the queue is keyed,
-- a reader that sorts takes nothing from the ready list, whose ids it sorts first. One that does not (an
-- instance without the key option: a mismatch, warned when stored) takes from it too.
local key_of = false
if count > 0 and (flow[10] or flow[11]) and (not ids or #ids < count) then
  local taken, keys, held, held_ms = keyed_take(KEYS[3], flow, count - (ids and #ids or 0), now, flow[10] ~= false)
  if #taken > 0 then
    ids = ids or {}
    key_of = {}
    for i, id in ipairs(taken) do
      ids[#ids + 1] = id
      key_of[id] = keys[i]
    end
  end
  if redis.call('LLEN', keyed_keys(KEYS[3]).ring) == 0 then redis.call('HDEL', flow_key, 'kc') end
  if #taken == 0 and held and not ids then
    -- Every key with ready ids is at its limit: wait for a call to end (or a little, for a rate window).
    if not flow[5] then redis.call('HSET', flow_key, 'thr', '1') end
    if #removed > 0 then lease_unpin_if_idle(KEYS[2]) end
    return {now, stale, claimed, dead, 0, '', 0, held_ms, freed, refused}
  end
end
if count > 0 and not (flow[10] and (sorts_by_key or sorter_here)) and (not ids or #ids < count) then
  local more = redis.call('LPOP', KEYS[1], count - (ids and #ids or 0))
  if more then
    if not ids then
      ids = more
    else
      for _, id in ipairs(more) do ids[#ids + 1] = id end
    end
  end
end
if not ids then
  if #removed > 0 then lease_unpin_if_idle(KEYS[2]) end
  -- The reader goes idle: its last claim was answered, so its log can go.
  if count > 0 and token ~= '' then redis.call('DEL', KEYS[8]) end
  return {now, stale, claimed, dead, 0, '', 0, 0, freed, refused}
end

local not_started, started = lease_claim_scores(now + lease_ms, now_us)
local values = redis.call('HMGET', KEYS[3], unpack(ids))
-- A named group's header carries its attempt and due time; the body is the type's.
local bodies = group_queue and redis.call('HMGET', KEYS[10], unpack(ids))
local leases, n_leases, n_claimed, n_dead, n_left = {}, 0, 0, 0, 0
for k, id in ipairs(ids) do
  local value = values[k]
  if bodies then
    if value and bodies[k] then
      local _, _, body = envelope_parse(bodies[k])
      value = value .. body
    else
      value = nil
    end
  end
  -- A missing envelope means the event was cancelled or purged meanwhile.
  local attempt, version = 0, 1
  if value then attempt, version = envelope_attempt_version(value) end
  if version > max_version then
    -- Written by a newer class: this reader could not decode it. It stays ready, for a reader that can.
    local list = newer .. ':' .. version
    redis.call('RPUSH', list, id)
    redis.call('HSETNX', newer, version, now)
    if not flow[6] then
      redis.call('HSET', flow_key, 'v', '1')
      flow[6] = '1'
    end
    n_left = n_left + 1
  elseif value then
    if attempt >= max_attempts then
      redis.call('ZADD', KEYS[4], now, id)
      local reason = 'lease expired on attempt ' .. attempt .. ' of ' .. max_attempts .. ': the handling process died or stalled'
      redis.call('HSET', KEYS[5], id, reason)
      error_log_append(KEYS[12], id, attempt, now, reason)
      dead[n_dead + 1] = id
      dead[n_dead + 2] = attempt
      n_dead = n_dead + 2
      if flow[12] then keyed_release(KEYS[3], { id }) end
    else
      leases[n_leases + 1] = (n_claimed < 2 * start_now) and started or not_started
      leases[n_leases + 2] = id
      n_leases = n_leases + 2
      claimed[n_claimed + 1] = id
      claimed[n_claimed + 2] = value
      n_claimed = n_claimed + 2
    end
  end
end
-- The pin goes first: a new set is then created as a skiplist, not converted.
if n_leases > 0 then
  redis.call('ZADD', KEYS[2], LEASE_PIN_SCORE, LEASE_PIN, unpack(leases))
  -- Overwrites the reader's previous log: a reader has one claim in flight at a time.
  if token ~= '' then redis.call('SET', KEYS[8], token .. ':' .. cmsgpack.pack(leases), 'PX', lease_ms) end
  -- Each call of a key counts against the key's own limits while it runs.
  if key_of then
    local lease_until = now + lease_ms
    local kper = tonumber(flow[8] or '')
    for k = 1, n_claimed, 2 do
      local id = claimed[k]
      local key = key_of[id]
      if key then
        local kk = keyed_keys(KEYS[3])
        redis.call('ZADD', kk.running .. key, lease_until, id)
        expire_optional(kk.running .. key, lease_ms + 1000)
        redis.call('HSET', kk.id_key, id, key)
        if kper then
          redis.call('ZADD', kk.rate .. key, now, not_started .. ':' .. k)
          expire_optional(kk.rate .. key, kper + 1000)
        end
      end
    end
  end
  -- Each call started counts in the rate window, under a member no other claim has.
  if rate_key then
    local starts = {}
    for k = 1, n_claimed / 2 do
      starts[#starts + 1] = now
      starts[#starts + 1] = not_started .. ':' .. k
    end
    redis.call('ZADD', rate_key, unpack(starts))
    expire_optional(rate_key, rate_per + 1000)
  end
elseif #removed > 0 then
  lease_unpin_if_idle(KEYS[2])
end
return {now, stale, claimed, dead, 0, not_started, n_left, 0, freed, refused}
