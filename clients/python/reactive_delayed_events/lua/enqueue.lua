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

-- The arguments by name, as this header declares them (written by scripts/lua-contract.mjs):
local mode, mode_ms, wake_channel, wake_tag = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local events_at = 5
local events_n = math.floor((#ARGV - events_at + 1) / 3)
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

-- A queue's window keys (since 0.6), named after its meta key as
-- includes/limit-keys.lua names the flow hash:
--   <queue>:dq  hash: id -> a leading debounce's burst record (includes/enqueue-policy.lua)
--   <queue>:dx  sorted set: id -> when that record's quiet period ends (+inf while it holds a payload)
--   <queue>:th  sorted set: id -> when its throttle window ends
local function burst_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return own .. ':dq', own .. ':dx', own .. ':th'
end
local function envelope_make(attempt, due, body)
  return attempt .. '|' .. due .. '|' .. body
end
-- A stored event is "<attempt>|<due ms>|<body json>": the two numbers that
-- scripts change sit in front so a transition never has to parse the JSON.
-- A value without a valid header (corrupted by hand) parses as attempt 0 with
-- the whole value as body: it is then claimed, fails to decode and is
-- dead-lettered, instead of making every script that touches it fail.
local function envelope_parse(value)
  local attempt, due, body = string.match(value, '^(%d+)|(%d+)|(.*)$')
  if not attempt then return 0, '0', value end
  return tonumber(attempt), due, body
end
-- The priority at the end of a stored value (0: none; since 0.6), read without
-- parsing the JSON: only the extras element, a string, ends a body with '"]'
-- (src/core/body-extras.ts).
local function priority_of(value)
  if not value or string.byte(value, -2) ~= 34 then return 0 end
  return tonumber(string.match(value, ';p=(%d+)[^"]*"%]$', -48)) or 0
end
-- A queue's flow keys (since 0.6, docs/flows.md), named after its type's meta
-- key as includes/burst-keys.lua names the window keys:
--   <queue>:wt  sorted set: parent id -> the due ms it keeps while it waits for its children (state WAITING)
--   <queue>:fl  hash: parent id -> its flow record, JSON {n, e}: how many edges are not done;
--               per edge ('<child type>|<child id>') [state 'p'|'d'|'f', onChildFailure,
--               the child's queue tag, the last notice applied]
--   <queue>:fr:<parent id>  hash: edge -> its child's result, JSON {o, r?, e?} (flow_results_key):
--               apart from the record, so that a notice writes one child's result, not all
--   <queue>:up  hash: child id -> its link, JSON {k, s, p}: its edge's name, how many notices
--               it sent, its parents [[queue tag, id], ...]
--   <queue>:fo  list: notices of children settled here, JSON {k, s, p, o, r?, e?}, until the
--               instance that settled them (or any dispatcher's sweep) applied them to each parent
local function flow_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return own .. ':wt', own .. ':fl', own .. ':up', own .. ':fo'
end
-- (envelope-parse: included above)
-- Subscriber groups (fan-out). A type's due event is delivered to every group
-- in its registry; a named group G keeps its own state under <base>:g:<G>:
-- (headers 'attempt|due|' in :m, retries in :b, :r, :f, :d, :e), and the body
-- stays once in the type's meta hash, held while the pending hash counts the
-- groups that still hold the event.
-- The named group's own keys, from the type's meta key (<base>:m).
local function group_keys(meta_key, group)
  local own = string.sub(meta_key, 1, -3) .. ':g:' .. group
  return {
    meta = own .. ':m', schedule = own .. ':b', legacy = own .. ':s', ready = own .. ':r',
    in_flight = own .. ':f', dead = own .. ':d', errors = own .. ':e', error_log = own .. ':el',
    handled = own .. ':h', handled_index = own .. ':hi', heartbeats = own .. ':hl', progress = own .. ':pg', logs = own .. ':lg',
  }
end
-- The leases of the claim `identity` (includes/lease-heartbeat.lua): those of
-- its not-started and its started score, at most `most`, as {id, score, ...}.
local function heartbeat_leases(in_flight_key, identity, most)
  return redis.call('ZRANGE', in_flight_key, identity, string.format('%.0f', tonumber(identity) + 1), 'BYSCORE', 'LIMIT', 0, most, 'WITHSCORES')
end

-- After leases ended otherwise than by lapsing (a success, a retry, a dead
-- letter, a snooze, a give-back, a cancel, an expiry): the heartbeat entry of
-- each of their claims (includes/lease-heartbeat.lua) goes once no lease of
-- that claim is left. `scores` are their in-flight scores, which name their
-- claims. The heartbeat set is named after the in-flight set (<queue>:f ->
-- <queue>:hl), in its slot; without heartbeats it does not exist, and this
-- costs one EXISTS.
local function lease_heartbeat_drop(in_flight_key, scores)
  local key = string.sub(in_flight_key, 1, -3) .. ':hl'
  if redis.call('EXISTS', key) == 0 then return end
  local seen = {}
  for _, s in ipairs(scores) do
    local score = tonumber(s)
    if score then
      local identity = string.format('%.0f', score - score % 2)
      if not seen[identity] then
        seen[identity] = true
        if #heartbeat_leases(in_flight_key, identity, 1) == 0 then redis.call('ZREM', key, identity) end
      end
    end
  end
end
-- The in-flight zset holds one member besides the leases while any lease is
-- there: the pin. It is longer than the 64 bytes a listpack-encoded sorted set
-- may hold in a member (zset-max-listpack-value), so the set is created as a
-- skiplist and stays one. In a listpack, every ZADD, ZMSCORE and ZREM scans
-- the set for each member it names: a claim of 32 leases spent ~17 µs in its
-- ZADD against ~10 with the pin (measured with the benchmarks). Its first
-- byte, 0xFF, never occurs in UTF-8, so no event id can be the pin; its score,
-- 2^53, is above every lease's until the year 2255, so it is never due and
-- never the first lease to expire.
local LEASE_PIN = '\255pin: keeps this in-flight set a skiplist, not a listpack (docs/redis-layout.md)'

local LEASE_PIN_SCORE = '9007199254740992'

-- After leases were removed: once only the pin is left, the set goes (no
-- empty queue leaves a key behind). The pin sorts last, so it is first only
-- when it is alone.
local function lease_unpin_if_idle(in_flight_key)
  if redis.call('ZRANGE', in_flight_key, 0, 0)[1] == LEASE_PIN then
    redis.call('ZREM', in_flight_key, LEASE_PIN)
  end
end

-- Removes `id`'s lease, if it has one, and its heartbeat entry; true when it had.
local function lease_remove(in_flight_key, id)
  local score = redis.call('ZSCORE', in_flight_key, id)
  if not score then return false end
  redis.call('ZREM', in_flight_key, id)
  lease_heartbeat_drop(in_flight_key, { score })
  lease_unpin_if_idle(in_flight_key)
  return true
end
-- A group being removed (remove-group.lua) stays in the registry with this
-- value until it holds nothing: events are no longer delivered to it, but a
-- cancel or a replace still reaches what it holds.
local GROUP_REMOVING = 'removing'

-- Named groups of a registry (the default group keeps the type's own keys);
-- with `delivering`, only those new events go to (not the ones being removed).
local function named_groups(registry_key, delivering)
  local named = {}
  local flat = redis.call('HGETALL', registry_key)
  for i = 1, #flat, 2 do
    local group = flat[i]
    if group ~= 'default' and not (delivering and flat[i + 1] == GROUP_REMOVING) then named[#named + 1] = group end
  end
  return named
end
-- A queue's keyed state (fairness per key, HandlerOptions.key and perKey),
-- in its slot, named after its meta key:
--   <queue>:kid        hash: id -> its key, for events sorted by key and not done
--   <queue>:kq:<key>   list: ready ids of the key, oldest first
--   <queue>:ring       list: keys with ready ids, in turn (round robin)
--   <queue>:kw         hash: key -> how many of its ids are ready
--   <queue>:kf:<key>   sorted set: id -> lease expiry (ms), its calls running
--   <queue>:kr:<key>   sorted set: when its calls of the last `kper` ms started
local function keyed_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return { id_key = own .. ':kid', list = own .. ':kq:', ring = own .. ':ring', waiting = own .. ':kw', running = own .. ':kf:', rate = own .. ':kr:' }
end

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
-- A queue's flow state, in its slot, named after its meta key as
-- includes/group-keys.lua names a group's keys:
--   <queue>:fc   hash, read whole by every claim in one call:
--                max, per (ms), conc: the limits the handlers' instances
--                  registered last (src/redis/flow-limits.ts);
--                hold: until when (ms) nothing is claimed (a handler said its
--                  provider rate-limited it, lua/rate-limited.lua);
--                thr: '1' once a claim found no room under conc (the next
--                  result that frees room wakes the instances);
--                v: '1' while readers left events for a newer class version
--                  (includes/newer-key.lua);
--                kmax, kper, kconc: each key's limits (HandlerOptions.perKey);
--                keyed: '1' while the handler registered last sorts events by
--                  key (HandlerOptions.key): claims take from the keys in turn;
--                kc: '1' while sorted ids wait (includes/keyed-keys.lua);
--                ks: '1' once ids were sorted by key: results release their keys;
--                kseen: when (ms) a reader that sorts by key last claimed: while
--                  that is recent, readers that do not sort leave the ready
--                  list to it (lua/complete-and-claim.lua);
--                mv: until when (ms) nothing is claimed because the type's
--                  partitions are changing (src/redis/move-pause.ts): the
--                  queues of the setting moved from are paused, and those of
--                  the setting moved to wait until the others' calls and rate
--                  windows are over, so that the limits hold across both;
--                mvs: when (ms) this queue was first paused for a move;
--                rq: '1' while the queue's priority set holds events
--                  (includes/priority-keys.lua): a claim looks there only then;
--                rp: '1' once a handler reported progress or log lines here
--                  (lua/report-calls.lua, since 0.6): successes drop them;
--                bq: '1' once an event with its own dedupe window, or a
--                  leading debounce, was enqueued here (includes/enqueue-policy.lua,
--                  since 0.6): completions read those windows and release
--                  held trailing payloads (includes/burst-release.lua)
--                up: '1' once a child was linked to a parent here (lua/flow-link.lua,
--                  since 0.6): settling an event looks for its link
--                fp: '1' once a parent waited here (lua/flow-park.lua, since
--                  0.6): a handled event drops its flow record
--   <queue>:rl   sorted set: when each call of the last `per` ms started
--                (ms; members unique per claim)
local function limit_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return own .. ':fc', own .. ':rl'
end

-- The fields of the flow hash, as one HMGET reads them (complete-and-claim.lua),
-- and each one's place in its reply: scripts read `flow[FLOW_THR]`, never a
-- number (test/embedded-lua.test.ts checks that the two lists agree). Locals,
-- not a table of names: reading one costs nothing more than a number.
local FLOW_FIELDS = { 'max', 'per', 'conc', 'hold', 'thr', 'v', 'kmax', 'kper', 'kconc', 'keyed', 'kc', 'ks', 'kseen', 'mv', 'rq', 'rp', 'bq', 'up', 'fp' }
local FLOW_MAX, FLOW_PER, FLOW_CONC, FLOW_HOLD, FLOW_THR, FLOW_V, FLOW_KMAX = 1, 2, 3, 4, 5, 6, 7
local FLOW_KPER, FLOW_KCONC, FLOW_KEYED, FLOW_KC, FLOW_KS, FLOW_KSEEN, FLOW_MV = 8, 9, 10, 11, 12, 13, 14
local FLOW_RQ, FLOW_RP, FLOW_BQ, FLOW_UP, FLOW_FP = 15, 16, 17, 18, 19
-- Where a queue keeps the events its readers left for a newer class version:
-- a hash <queue>:v, version -> when a reader last took from it (or one was
-- first left), and a list <queue>:v:<version> of ids per version, oldest
-- first. Named after the queue's meta key, as includes/group-keys.lua names a
-- group's keys, so every script that may touch it finds it in the same slot.
local function newer_key(meta_key)
  return string.sub(meta_key, 1, -3) .. ':v'
end

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
-- READY events with a priority (enqueue's `priority` above 0, since 0.6;
-- src/core/body-extras.ts) wait beside the ready list, which holds those of
-- priority 0, the best. Named after the queue's meta key, as
-- includes/group-keys.lua names a group's keys:
--   <queue>:rq  sorted set, id -> priority * 2^33 + a sequence number, so a
--               claim takes the best priority first and, within one, in the
--               order they became ready;
--   <queue>:ra  sorted set, id -> due ms: those due longer ago than the
--               handler's priorityAgingMs are served first (no starvation);
--   <queue>:rs  the sequence, from 1 again each time the set empties;
-- and the queue's flow hash (includes/limit-keys.lua) has rq = '1' while
-- the set holds events, so a claim, which reads that hash anyway, looks
-- at the set only then.
-- The type's <type>:pq (after its shared meta key) is set by the first
-- enqueue with a priority: until then nothing reads a body's priority.
local function priority_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return { queue = own .. ':rq', aging = own .. ':ra', seq = own .. ':rs', flow = own .. ':fc' }
end

-- Takes `id` out of the priority set, if it is there; true when it was.
local function priority_remove(meta_key, id)
  local pk = priority_keys(meta_key)
  if redis.call('ZREM', pk.queue, id) == 0 then return false end
  redis.call('ZREM', pk.aging, id)
  if redis.call('EXISTS', pk.queue) == 0 then
    redis.call('DEL', pk.seq)
    redis.call('HDEL', pk.flow, 'rq')
  end
  return true
end
local function bucket_key(index, bucket)
  return index .. ':' .. bucket
end
-- (bucket-key: included above)
-- (bucket-key: included above)

local function latest_due(index, bucket)
  return tonumber(redis.call('ZRANGE', bucket_key(index, bucket), -1, -1, 'WITHSCORES')[2])
end
-- (bucket-key: included above)

-- The entries of bucket `from`, moved to bucket `to` (empty).
local function move_entries(index, from, to)
  local from_key = bucket_key(index, from)
  local flat = redis.call('ZRANGE', from_key, 0, -1, 'WITHSCORES')
  local args = {}
  for i = #flat - 1, 1, -2 do -- latest first, as put() does
    args[#args + 1] = flat[i + 1]
    args[#args + 1] = flat[i]
  end
  redis.call('ZREMRANGEBYRANK', from_key, 0, -1)
  redis.call('ZADD', bucket_key(index, to), unpack(args))
end
-- A free name for a new bucket starting at `lo`, sorting after every bucket
-- that starts there.
local function new_bucket(index, lo)
  local last = redis.call('ZRANGE', index, lo, lo, 'BYSCORE', 'REV', 'LIMIT', 0, 1)[1]
  local name = tostring(lo)
  if last then
    local base, n = string.match(last, '^(.*)~(%d+)$')
    name = base and (base .. '~' .. string.format('%09d', tonumber(n) + 1)) or (last .. '~000000001')
  end
  -- Taken by a bucket whose earliest due has changed since it was named.
  while redis.call('ZSCORE', index, name) do name = name .. '~000000001' end
  return name, last
end

-- After `bucket`, indexed at `was`, lost entries: indexes it at its new
-- earliest due, or drops it when empty. A bucket whose earliest due moved
-- onto another bucket's holds only entries due then (it held nothing later
-- than that start). If it now sorts last there while the bucket that was last
-- holds later entries, the two swap entries: only the last may hold those.
local function reindex(index, bucket, was)
  local head = redis.call('ZRANGE', bucket_key(index, bucket), 0, 0, 'WITHSCORES')
  if not head[1] then
    redis.call('ZREM', index, bucket)
    return
  end
  local lo = tonumber(head[2])
  if lo == tonumber(was) then return end
  local last = redis.call('ZRANGE', index, lo, lo, 'BYSCORE', 'REV', 'LIMIT', 0, 1)[1]
  redis.call('ZADD', index, lo, bucket)
  if not last or latest_due(index, last) == lo then return end
  if redis.call('ZRANGE', index, lo, lo, 'BYSCORE', 'REV', 'LIMIT', 0, 1)[1] ~= bucket then return end
  local parked = new_bucket(index, lo)
  move_entries(index, bucket, parked)
  move_entries(index, last, bucket)
  move_entries(index, parked, last)
end

-- Removes `id` from the first of `buckets` (names, each followed by its index score) holding it.
local function remove_from(index, buckets, id)
  for i = 1, #buckets, 2 do
    local bucket = buckets[i]
    if redis.call('ZREM', bucket_key(index, bucket), id) == 1 then
      reindex(index, bucket, buckets[i + 1])
      return true
    end
  end
  return false
end

-- Unschedules `id`, due at `due` (from its envelope): it is in a bucket
-- starting at `due` or at the greatest earliest due below it, newest first
-- being likelier. Returns false when it was not scheduled.
local function schedule_remove(index, id, due)
  if remove_from(index, redis.call('ZRANGE', index, due, due, 'BYSCORE', 'REV', 'WITHSCORES'), id) then return true end
  local below = redis.call('ZRANGE', index, '(' .. due, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
  if below[1] and remove_from(index, redis.call('ZRANGE', index, below[2], below[2], 'BYSCORE', 'REV', 'WITHSCORES'), id) then return true end
  -- An envelope corrupted by hand reads as due 0: its entry may be anywhere.
  return tonumber(due) == 0 and remove_from(index, redis.call('ZRANGE', index, 0, -1, 'WITHSCORES'), id)
end

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
-- (keyed-keys: included above)

-- The calls of `ids` ended (success, retry, dead letter, a hold): they no
-- longer count against their keys' concurrency. Ids never sorted by key are
-- not there.
local function keyed_release(meta_key, ids)
  if #ids == 0 then return end
  local k = keyed_keys(meta_key)
  local keys = redis.call('HMGET', k.id_key, unpack(ids))
  local done = {}
  for i, key in ipairs(keys) do
    if key then
      redis.call('ZREM', k.running .. key, ids[i])
      done[#done + 1] = ids[i]
    end
  end
  if #done > 0 then redis.call('HDEL', k.id_key, unpack(done)) end
end
-- (keyed-remove: included above)
-- (newer-remove: included above)
-- (priority-remove: included above)
-- (lease-remove: included above)
-- (schedule-remove: included above)

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
-- (bucket-key: included above)
-- (latest-due: included above)
-- (new-bucket: included above)
-- (bucket-key: included above)

-- Adds list[from..to] to a bucket. Redis finds a listpack entry's place by
-- scanning from the front, so the latest go first: into a new bucket, each
-- insertion then stops at once.
local function put(index, bucket, list, from, to)
  local args = {}
  local due, printed
  for k = to, from, -1 do
    -- Redis would print each number; entries mostly share a due time.
    if list[k][1] ~= due then
      due = list[k][1]
      printed = tostring(due)
    end
    args[#args + 1] = printed
    args[#args + 1] = list[k][2]
  end
  redis.call('ZADD', bucket_key(index, bucket), unpack(args))
end
-- (latest-due: included above)
-- (move-entries: included above)
-- (new-bucket: included above)

-- A name for a new bucket that will hold list[first..last]. Splitting a
-- bucket can leave a part due only at the next bucket's earliest due, joining
-- the group that starts there. A new name sorts last, and only the last of a
-- group may hold later entries: when the group's last one does, its entries
-- move to the new name, and the part takes the old one, emptied.
local function name_for_part(index, list, first, last)
  local lo = list[first][1]
  local name, newest = new_bucket(index, lo)
  if list[last][1] ~= lo or not newest or latest_due(index, newest) == lo then return name end
  move_entries(index, newest, name)
  redis.call('ZADD', index, lo, name)
  return newest
end
-- (new-bucket: included above)
-- (put: included above)

-- Stores list[from..to] in new buckets of at most `size` entries; with
-- `keep` (a split), the first of them is bucket `keep`, emptied by the caller.
-- Appends need no name_for_part: they go to the last bucket of a group.
local function put_in_new_buckets(index, list, from, to, size, keep)
  local parts = math.ceil((to - from + 1) / size)
  size = math.ceil((to - from + 1) / parts)
  for p = 0, parts - 1 do
    local first = from + p * size
    local last = math.min(to, first + size - 1)
    local name = (p == 0 and keep) or (keep and name_for_part(index, list, first, last)) or new_bucket(index, list[first][1])
    put(index, name, list, first, last)
    redis.call('ZADD', index, list[first][1], name)
  end
end
-- The schedule of a type (state SCHEDULED) is split into buckets: sorted sets
-- id -> due small enough for Redis's compact listpack encoding (about 20 bytes
-- an entry, against about 110 in a skiplist), and an index sorted set
-- bucket name -> earliest due in that bucket. Bucket keys are the index key
-- plus ':<name>', in the index's hash slot; no counter key outlives the schedule.
--
-- Invariants, kept by the functions below:
--   * an index score is exactly the earliest due of its bucket, so the index
--     head is the next due time and only buckets holding something due are read;
--   * a bucket holds nothing later than the next greater earliest due in the
--     index: buckets hold disjoint ranges of due times, except that buckets
--     sharing an earliest due (more events due in one millisecond than a
--     bucket holds) may overlap each other. So an event due at t is in a bucket
--     starting at t or in one starting at the greatest earliest due below t,
--     and finding it needs the index alone;
--   * of buckets sharing an earliest due, only the last by name holds anything
--     due later than that. Adding to such a group goes to that bucket without
--     looking at the others, and when a bucket starts between its entries, the
--     others hold nothing past that start.
-- Half of Redis's default zset-max-listpack-entries (128): adding a member
-- scans the listpack for it first, so smaller buckets cost less per event,
-- for ~2 more bytes an event (a bucket key per 64 events, not per 128).
-- A bucket filled by 0.3.0 may hold up to 128; nothing here needs a bucket
-- to be at most BUCKET_MAX.
local BUCKET_MAX = 64

local BUCKET_FILL = 48 -- most entries a bucket keeps after a split: room to grow

-- Stores entries[from..to] ({due, id}, ascending by due) in `bucket` (nil: a
-- new bucket), whose earliest due is `lo`. A sorted set that grew past the
-- listpack limit would stay a skiplist even after shrinking, so a bucket
-- never grows past it: what does not fit goes to new buckets. Returns true
-- when it opened buckets.
local function schedule_fill(index, bucket, lo, entries, from, to)
  local held = bucket and redis.call('ZCARD', bucket_key(index, bucket)) or 0
  if held + to - from + 1 <= BUCKET_MAX then
    local opened = not bucket
    bucket = bucket or new_bucket(index, entries[from][1])
    put(index, bucket, entries, from, to)
    if not lo or entries[from][1] < lo then redis.call('ZADD', index, entries[from][1], bucket) end
    return opened
  end
  if held == 0 or entries[from][1] >= latest_due(index, bucket) then
    -- Appending, the usual case (one delay for many events): fill the bucket
    -- up and open new full ones after it; nothing is rewritten.
    local room = BUCKET_MAX - held
    if room > 0 and bucket then
      put(index, bucket, entries, from, from + room - 1)
      if not lo or entries[from][1] < lo then redis.call('ZADD', index, entries[from][1], bucket) end
      from = from + room
    end
    put_in_new_buckets(index, entries, from, to, BUCKET_MAX)
    return true
  end
  -- Inserting among its entries: rewrite the bucket as several, with room to grow.
  local key = bucket_key(index, bucket)
  local old = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  redis.call('ZREMRANGEBYRANK', key, 0, -1)
  local merged, k = {}, from
  for o = 1, #old, 2 do
    local old_due = tonumber(old[o + 1])
    while k <= to and entries[k][1] < old_due do
      merged[#merged + 1] = entries[k]
      k = k + 1
    end
    merged[#merged + 1] = { old_due, old[o] }
  end
  for r = k, to do merged[#merged + 1] = entries[r] end
  put_in_new_buckets(index, merged, 1, #merged, BUCKET_FILL, bucket)
  return true
end
-- The bucket that takes due time `due` (nil: a new one), its earliest due,
-- and whether `due` is earlier than the whole schedule.
local function schedule_target(index, due)
  local below = redis.call('ZRANGE', index, due, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
  if below[1] then return below[1], tonumber(below[2]), false end
  -- Earlier than every bucket: the first takes it, unless it shares its
  -- earliest due with others (moving its start would leave it overlapping them).
  local first_two = redis.call('ZRANGE', index, 0, 1, 'WITHSCORES')
  if not first_two[1] then return nil, nil, true end
  local first = tonumber(first_two[2])
  if first_two[3] and tonumber(first_two[4]) == first then return nil, nil, true end
  return first_two[1], first, true
end

-- Schedules entries (a list of {due, id} of ids not scheduled yet), in as few
-- calls as their due times allow: entries bound for one bucket go in one ZADD.
-- Returns true when the schedule's earliest due time moved earlier.
--
-- Entries spread over many buckets (due times drawn at random) make one run
-- per bucket. The bucket starts within the entries' range are read once, not
-- twice per run, and each run goes to the last bucket starting at or before
-- it, up to the next start. Only opening buckets changes which bucket that
-- is (a new part can join the group at the next start), so after a run that
-- opened buckets the index is read again.
local function schedule_add(index, entries)
  local sorted = true
  for k = 2, #entries do
    if entries[k][1] < entries[k - 1][1] then sorted = false break end
  end
  if not sorted then table.sort(entries, function(a, b) return a[1] < b[1] end) end
  local n = #entries
  local from, earlier = 1, false
  local bucket, lo, starts, s
  while from <= n do
    local due = entries[from][1]
    if not starts then
      local earliest
      bucket, lo, earliest = schedule_target(index, due)
      earlier = earlier or earliest
      starts = from < n and redis.call('ZRANGE', index, '(' .. string.format('%d', due), string.format('%d', entries[n][1]), 'BYSCORE', 'WITHSCORES') or {}
      s = 1
    end
    while s <= #starts and tonumber(starts[s + 1]) <= due do
      bucket, lo = starts[s], tonumber(starts[s + 1])
      s = s + 2
    end
    local limit = s <= #starts and tonumber(starts[s + 1]) or nil
    local to = from
    while to < n and (not limit or entries[to + 1][1] < limit) do to = to + 1 end
    if schedule_fill(index, bucket, lo, entries, from, to) then starts = nil end
    from = to + 1
  end
  return earlier
end
-- (schedule-remove: included above)

-- The windows of enqueue's options (since 0.6; docs/windows.md): debounce,
-- leading debounce, throttle and dedupe, one event at a time. `q` names the
-- queue's keys as remove_from_any_state takes them, plus recent (idempotency
-- marks) and flow (the flow hash); `now` is Redis's now, `due` the due time
-- the call asked for. Returns the event's status (1 scheduled, 0 duplicate,
-- 3 debounced, 4 throttled) and the due time it scheduled when that moved the
-- schedule's earliest due time earlier (false otherwise).
--
-- A debounced event keeps its burst in its body: the body's first element
-- (enqueued at) is when the burst began, and its extras' `;w=` is the burst's
-- maxWaitMs (0: none), written by the service on every debounce's body
-- (src/core/body-extras.ts) and rewritten here so the stored one wins.
--
-- A leading debounce keeps one record per id in the bursts hash:
--   '<quiet end ms>|<burst start ms>|<max wait ms>|<held due ms>|<held body>'
-- The held body (empty when none) is the trailing payload waiting while the
-- leading event is stored and not done: it is stored as a new event when that
-- event settles (handled in every group, or dead-lettered with no named group
-- holding it: includes/burst-release.lua), never beside it. The burst-ends
-- zset scores each record by its quiet end (+inf while it holds a payload), so
-- that ended records are dropped as later calls go.
local function enqueue_policy(q, mode, mode_ms, now, id, body, due)
  local bursts, burst_ends, throttles = burst_keys(q.meta)
  local stored = redis.call('HGET', q.meta, id)
  local attempt, stored_due = 0, nil
  if stored then attempt, stored_due = envelope_parse(stored) end
  local dead = stored and redis.call('ZSCORE', q.dead, id)
  -- Ran before: an attempt spent, or snoozed (its body counts the snoozes, `;s=`, at its end: a fold
  -- would reset them, and maxSnoozes would no longer hold).
  local ran = attempt > 0 or (stored and string.match(stored, ';s=%d+[^"]*"%]$', -64) ~= nil)
  -- A plain event not started: never run, no group holds it yet, and in the schedule (taken out here).
  local function unscheduled()
    if not stored or dead or ran or redis.call('HEXISTS', q.pending, id) == 1 then return false end
    return schedule_remove(q.schedule, id, stored_due) or redis.call('ZREM', q.legacy, id) == 1
  end
  -- A new event of its own: whatever is stored goes (the fence of replace), the id's mark with it.
  local function store_new(at, new_body)
    if stored then remove_from_any_state(q, id, stored_due) end
    redis.call('HSET', q.meta, id, envelope_make(0, at, new_body))
    redis.call('ZREM', q.recent, id)
    return schedule_add(q.schedule, { { at, id } }) and at
  end
  -- Back in the schedule at `at`: `at` when that moved the schedule's earliest due time earlier.
  local function reschedule(at)
    return schedule_add(q.schedule, { { at, id } }) and at
  end
  -- The body with its burst: began at `start`, bounded by `wait`.
  local function with_burst(start, wait)
    local head, tail = string.match(body, '^(.*;w=)%d+([^"]*"%])$')
    local b = head and (head .. wait .. tail) or body
    -- After the class version in front, when the body has one ('3|[...'; src/core/stored-body.ts).
    return (string.gsub(b, '^(%d*|?)%[%-?%d+', '%1[' .. start, 1))
  end

  if mode == 't' then
    -- Ended windows go as calls come, a few at a time: Redis is never held long.
    local ended = redis.call('ZRANGE', throttles, '-inf', now, 'BYSCORE', 'LIMIT', 0, 64)
    if #ended > 0 then redis.call('ZREM', throttles, unpack(ended)) end
    local until_ms = redis.call('ZSCORE', throttles, id)
    if until_ms and tonumber(until_ms) > now then return 4, false end
    if stored and not dead then return 0, false end
    redis.call('ZADD', throttles, now + mode_ms, id)
    return 1, store_new(due, body)
  end

  if mode == 'i' or mode == 'k' then
    redis.call('HSET', q.flow, 'bq', '1')
    local mark = redis.call('ZSCORE', q.recent, id)
    if not stored and mark and tonumber(mark) > now then return 0, false end
    if stored then
      if mode == 'k' and unscheduled() then
        -- keepLast: the payload and context change; the due time and attempts do not.
        redis.call('HSET', q.meta, id, envelope_make(attempt, stored_due, body))
        reschedule(tonumber(stored_due))
      end
      return 0, false
    end
    return 1, store_new(due, body)
  end

  if mode == 'd' then
    -- The burst of the stored event: when it began, and its bound (the stored one wins).
    local function burst_of()
      local _, _, stored_body = envelope_parse(stored)
      local start = tonumber(string.match(stored_body, '^%d*|?%[(%-?%d+)')) or now
      local wait = tonumber(string.match(stored_body, ';w=(%d+)[^"]*"%]$')) or 0
      if wait == 0 then wait = mode_ms end
      return start, wait
    end
    if unscheduled() then
      local start, wait = burst_of()
      local at = due
      if wait > 0 and start + wait < at then at = start + wait end
      redis.call('HSET', q.meta, id, envelope_make(0, at, with_burst(start, wait)))
      return 3, reschedule(at)
    end
    -- Due and waiting READY for a handler, never run, in no named group: the new payload takes its place there,
    -- and runs as soon as a handler is free. Stored anew instead, a steady stream of enqueues could keep a due
    -- event from ever running, its burst's bound passed. Kept where it waits only while that place stays right:
    -- the same priority, and no handler sorting the ready events by a key of the payload.
    if stored and not dead and not ran and not redis.call('ZSCORE', q.in_flight, id) and redis.call('HEXISTS', q.pending, id) == 0
      and priority_of(stored) == priority_of(body) and not redis.call('HGET', q.flow, 'keyed') then
      local start, wait = burst_of()
      redis.call('HSET', q.meta, id, envelope_make(0, stored_due, with_burst(start, wait)))
      return 3, false
    end
    local at = due
    if mode_ms > 0 and now + mode_ms < at then at = now + mode_ms end
    return 1, store_new(at, with_burst(now, mode_ms))
  end

  -- Leading ('l' with a trailing call, 'L' without).
  redis.call('HSET', q.flow, 'bq', '1')
  for _, ended in ipairs(redis.call('ZRANGE', burst_ends, '-inf', now, 'BYSCORE', 'LIMIT', 0, 16)) do
    redis.call('HDEL', bursts, ended)
    redis.call('ZREM', burst_ends, ended)
  end
  local record = redis.call('HGET', bursts, id)
  local quiet_end, start, wait, held_due, held
  if record then
    quiet_end, start, wait, held_due, held = string.match(record, '^(%d+)|(%-?%d+)|(%d+)|(%d*)|(.*)$')
    quiet_end, start, wait = tonumber(quiet_end), tonumber(start), tonumber(wait)
    -- A record changed by hand is no record.
    if not quiet_end or not start or not wait then record = nil end
  end
  local quiet = due - now
  local live = stored and not dead
  local function keep(q_end, held_at, held_body)
    redis.call('HSET', bursts, id, q_end .. '|' .. start .. '|' .. wait .. '|' .. held_at .. '|' .. held_body)
    redis.call('ZADD', burst_ends, held_body ~= '' and '+inf' or q_end, id)
  end
  if not record or (quiet_end <= now and held == '') then
    -- A new burst: due at once, unless an event of this id is running; then it waits for it.
    start, wait = now, mode_ms
    local first = with_burst(now, mode_ms)
    if live and not unscheduled() then
      keep(now + quiet, now, first)
      return 1, false
    end
    keep(now + quiet, '', '')
    return 1, store_new(now, first)
  end
  if wait == 0 then wait = mode_ms end
  if mode == 'L' then
    if held ~= '' and not live then
      -- The event it waited for settled without releasing it (dead-lettered on a lost lease): it goes now.
      keep(now + quiet, '', '')
      return 3, store_new(tonumber(held_due) or now, held)
    end
    keep(now + quiet, held_due, held)
    return 3, false
  end
  local at = now + quiet
  if wait > 0 and start + wait < at then at = start + wait end
  local trailing = with_burst(start, wait)
  if held ~= '' and live then
    keep(at, at, trailing)
    return 3, false
  end
  if live then
    -- Stored and not yet due: the trailing event released earlier, moved. Due (the leading one) or running: held.
    if tonumber(stored_due) > now and unscheduled() then
      redis.call('HSET', q.meta, id, envelope_make(0, at, trailing))
      keep(at, '', '')
      return 3, reschedule(at)
    end
    keep(at, at, trailing)
    return 3, false
  end
  keep(at, '', '')
  return 3, store_new(at, trailing)
end
-- (envelope-make: included above)
-- (envelope-parse: included above)
-- (limit-keys: included above)
-- Every instance reads one clock, Redis's, so skewed hosts neither fire early
-- nor late relative to each other.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- (remove-from-any-state: included above)
-- (schedule-add: included above)

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
