-- Transition: (nothing) -> SCHEDULED, or any state -> SCHEDULED when replacing;
-- for one event or a batch of events of one type. With a window (debounce,
-- throttle, dedupe; since 0.6) each event goes through includes/enqueue-policy.lua.
-- KEYS[1] meta: meta hash      (id -> envelope)
-- KEYS[2] schedule: schedule index (bucket -> earliest due ms; see includes/schedule-buckets-constants.lua)
-- KEYS[3] recent: recent zset    (id -> end of its idempotency window ms): ids handled or
--         cancelled lately; enqueueing one again without replace is a duplicate
-- KEYS[4] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[5] ready: ready list
-- KEYS[6] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[7] dead: dead zset      (id -> dead-lettered at ms)
-- KEYS[8] errors: errors hash    (id -> last error)
-- KEYS[9] legacySchedule: legacy schedule zset (id -> due ms), written by 0.1; only emptied
-- KEYS[10] groups: group registry (includes/group-keys.lua)
-- KEYS[11] pending: pending hash: a replaced event delivered to named groups leaves each
-- KEYS[12] errorLog: error-log hash (id -> its last failures; includes/error-log-append.lua)
-- ARGV[1] mode (string): '' leaves stored events as they are; 'r' replaces them; since
--         0.6, a window (includes/enqueue-policy.lua): 'd' debounce, 'l' leading debounce,
--         'L' leading debounce without a trailing call, 't' throttle, 'i' dedupe, 'k' dedupe
--         keeping the last payload
-- ARGV[2] mode_ms (number): the debounce's maxWaitMs (0: none) or the throttle's windowMs
-- ARGV[3] wake_channel (string): wake channel
-- ARGV[4] wake_tag (string): wake message (the type's key tag)
-- ARGV[5..] events {id: string, body: string, due: string}: per event, its id, body json
--         and due ('+<ms from Redis now>' or '<absolute ms>')
-- REPLY (unknown): one status per event: 1 stored, 0 already stored or handled within
-- the idempotency window (untouched), 2 replaced, 3 debounced, 4 throttled; for one event, its status
-- alone (a number: Redis sends it for less than a list of one).
--
-- A call that does not replace reads and writes only the meta hash, the
-- schedule and the recent zset. It may name just those and the slot guard,
-- its first four keys, ARGV as above: eight keys fewer are less for the client
-- to write and for Redis to read on every enqueue.
-- KEYS(plain) meta schedule recent slotGuard

local RECENT = KEYS[3]

-- An event with a priority (since 0.6) marks its type: from then on, what enters
-- READY is sorted by it (includes/priority.lua). Its body ends with the extras
-- element, a string, which holds ';p=' (src/core/body-extras.ts).
for i = events_at + 1, events_at + 3 * events_n - 2, 3 do
  local body = ARGV[i]
  if string.byte(body, -2) == 34 and string.find(body, ';p=', -48, true) then
    redis.call('SET', string.sub(KEYS[1], 1, -3) .. ':pq', '1')
    break
  end
end

-- One new event into a bucket that starts at or before its due time and has
-- room: the most common call, taken before any helper below is defined, as
-- defining them costs Redis more than this path's own work (~10.5 -> ~8 µs a
-- call). It is schedule_target + schedule_fill of includes/schedule-buckets-constants.lua for
-- that one case (BUCKET_MAX 64); everything else goes the general way.
local replace = mode == 'r'
if events_n == 1 and mode == '' then
  local spec, due = ARGV[events_at + 2], nil
  if string.byte(spec, 1) == 43 then -- '+': relative to Redis's now
    local t = redis.call('TIME')
    due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(string.sub(spec, 2))
  else
    due = tonumber(spec)
  end
  -- Whole milliseconds below 10^14, as every due time is: then '%d' prints
  -- the digits Lua's and Redis's own number printing would, without their
  -- floating-point formatting (a good part of this path's time), and once.
  if due % 1 == 0 and due < 1e14 and due > -1e14 then
    local printed = string.format('%d', due)
    -- With one delay for every event, each is due after every bucket's start:
    -- the last bucket takes it, found by rank, which Redis answers for less
    -- than by score. Otherwise the bucket starting at or before it, by score.
    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
    local below = last[1]
    if below and tonumber(last[2]) > due then
      below = redis.call('ZRANGE', KEYS[2], printed, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1)[1]
    end
    -- An id handled lately goes the general way, which knows idempotency windows.
    if below and not redis.call('ZSCORE', RECENT, ARGV[events_at]) then
      local bucket = KEYS[2] .. ':' .. below
      if redis.call('ZCARD', bucket) < 64 then
        if redis.call('HSETNX', KEYS[1], ARGV[events_at], '0|' .. printed .. '|' .. ARGV[events_at + 1]) == 0 then return 0 end
        redis.call('ZADD', bucket, printed, ARGV[events_at])
        return 1
      end
    end
  end
end

-- @include enqueue-policy
-- @include envelope-make
-- @include envelope-parse
-- @include limit-keys
-- @include now-ms
-- @include remove-from-any-state
-- @include schedule-add

if mode ~= '' and not KEYS[12] then
  return redis.error_reply('ERR enqueue: replacing or a window needs all 12 keys, not the four of a plain enqueue')
end
-- The queue's keys for remove_from_any_state: only a replacing call (all 12 keys) removes.
local QUEUE = mode ~= '' and { meta = KEYS[1], schedule = KEYS[2], ready = KEYS[5], in_flight = KEYS[6], dead = KEYS[7], errors = KEYS[8], error_log = KEYS[12], legacy = KEYS[9], groups = KEYS[10], pending = KEYS[11] } or nil
local now
local function due_of(due_spec)
  if string.byte(due_spec, 1) == 43 then -- '+': relative to Redis's now
    now = now or now_ms()
    return now + tonumber(string.sub(due_spec, 2))
  end
  return tonumber(due_spec)
end

-- A batch mostly shares one due time (one delay, one Redis now): parsing it
-- and printing the envelope header once, not per event, is a good part of
-- what a large batch costs in Lua.
local last_spec, last_due, last_header
local function due_and_header(due_spec)
  if due_spec ~= last_spec then
    last_spec = due_spec
    last_due = due_of(due_spec)
    last_header = envelope_make(0, last_due, '')
  end
  return last_due, last_header
end

-- Dispatchers sleep until the earliest due time they know; when an event
-- moved the schedule's earliest due time earlier, tell them.
local function announce(due)
  redis.call('PUBLISH', wake_channel, wake_tag .. '|' .. due)
end

-- Whether `mark` (a recent zset score) still holds its id's idempotency window.
local function within_window(mark)
  if not mark then return false end
  now = now or now_ms()
  return tonumber(mark) > now
end

-- Windows: one event at a time, each seeing the one before it.
if mode ~= '' and mode ~= 'r' then
  QUEUE.recent = RECENT
  QUEUE.flow = limit_keys(KEYS[1])
  now = now or now_ms()
  local statuses = {}
  for k = 1, events_n do
    local at = events_at + 3 * (k - 1)
    local status, earlier = enqueue_policy(QUEUE, mode, mode_ms, now, ARGV[at], ARGV[at + 1], due_of(ARGV[at + 2]))
    statuses[k] = status
    if earlier then announce(earlier) end
  end
  if events_n == 1 then return statuses[1] end
  return statuses
end

-- One new event that needs a new bucket or the index changed: HSETNX tests and stores in one call.
if events_n == 1 and not replace then
  local id = ARGV[events_at]
  local mark = redis.call('ZSCORE', RECENT, id)
  if within_window(mark) then return 0 end
  local due = due_of(ARGV[events_at + 2])
  -- The store first: at Redis's memory limit it is refused, and nothing else changes.
  if redis.call('HSETNX', KEYS[1], id, envelope_make(0, due, ARGV[events_at + 1])) == 0 then return 0 end
  if mark then redis.call('ZREM', RECENT, id) end
  if schedule_add(KEYS[2], { { due, id } }) then announce(due) end
  return 1
end

-- Which ids are stored already, in one call: in a script the calls, not the
-- work they do, are most of the cost, so writes are gathered too. Lists are
-- appended to through counters: Lua 5.1 computes #t by a search on every use
-- (~5% of a 250-event call).
local ids, n = {}, 0
for i = events_at, events_at + 3 * events_n - 1, 3 do n = n + 1 ids[n] = ARGV[i] end
local stored = redis.call('HMGET', KEYS[1], unpack(ids))
-- Marks of ids handled or cancelled lately: within its window a mark makes a
-- plain enqueue a duplicate; an expired one, or a replace, clears it.
local marks = redis.call('ZMSCORE', RECENT, unpack(ids))
local cleared, n_cleared = {}, 0

local statuses, envelopes, schedule = {}, {}, {}
local n_env, n_sched = 0, 0
local taken = {} -- id -> its place in schedule
local earliest_new = -1
for k = 1, n do
  local id = ids[k]
  local body, due_spec = ARGV[events_at - 2 + 3 * k], ARGV[events_at - 1 + 3 * k]
  local exists = stored[k] ~= false or taken[id] ~= nil
  local recent = not exists and not replace and within_window(marks[k])
  if marks[k] and not recent and not taken[id] then
    n_cleared = n_cleared + 1
    cleared[n_cleared] = id
  end
  if recent then
    statuses[k] = 0
  elseif exists and not replace then
    statuses[k] = 0
  else
    local due, header = due_and_header(due_spec)
    statuses[k] = 1
    if exists then statuses[k] = 2 end
    if stored[k] and not taken[id] then
      -- An event lives in exactly one of schedule, ready, in-flight or dead.
      local _, stored_due = envelope_parse(stored[k])
      remove_from_any_state(QUEUE, id, stored_due)
    end
    -- Attempt 0 also fences off the result of a handler still running an old payload.
    envelopes[n_env + 1] = id
    envelopes[n_env + 2] = header .. body
    n_env = n_env + 2
    local at = taken[id]
    if at then
      schedule[at][1] = due -- the same id twice in one call: the last one counts
    else
      n_sched = n_sched + 1
      schedule[n_sched] = { due, id }
      taken[id] = n_sched
    end
    if earliest_new < 0 or due < earliest_new then earliest_new = due end
  end
end

if earliest_new >= 0 then
  redis.call('HSET', KEYS[1], unpack(envelopes))
  if n_cleared > 0 then redis.call('ZREM', RECENT, unpack(cleared)) end
  if schedule_add(KEYS[2], schedule) then announce(earliest_new) end
end
return statuses
