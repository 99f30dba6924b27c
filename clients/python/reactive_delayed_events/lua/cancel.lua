-- Transition: SCHEDULED | READY | IN_FLIGHT | DEAD -> (removed).
-- A handler still running a cancelled event finds its result fenced off.
-- KEYS[1] meta: meta hash
-- KEYS[2] schedule: schedule index (bucket -> earliest due ms; see includes/schedule-buckets-constants.lua)
-- KEYS[3] ready: ready list
-- KEYS[4] inFlight: in-flight zset
-- KEYS[5] dead: dead zset
-- KEYS[6] errors: errors hash
-- KEYS[7] legacySchedule: legacy schedule zset (id -> due ms), written by 0.1; only emptied
-- KEYS[8] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[9] recent: recent zset    (id -> end of its idempotency window ms)
-- KEYS[10] groups: group registry (includes/group-keys.lua)
-- KEYS[11] pending: pending hash: an event delivered to named groups is removed from each
-- KEYS[12] errorLog: error-log hash (id -> its last failures; includes/error-log-append.lua)
-- KEYS[13] outcomes: outcome stream (since 0.6; includes/outcome-add.lua): written while it exists (an instance handling the type writes outcomes)
-- ARGV[1] id (string): the event's id
-- ARGV[2] window_ms (number): idempotency window ms: a cancelled id is marked for that long, so a
--         late re-send of its enqueue does not bring it back (0: no mark)
-- ARGV[3] outcomes_max_len (number): the caller's outcomes maxLen (0: its outcomes are off; the stream is still written, untrimmed, while it exists)
-- REPLY (number): 1 when the event existed, 2 when it existed and a parent's notice was queued
--         (the caller applies the outbox: src/redis/flow-notices.ts), 0 otherwise.
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
-- The arguments by name, as this header declares them (written by scripts/lua-contract.mjs):
local id, window_ms, outcomes_max_len = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function flow_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return own .. ':wt', own .. ':fl', own .. ':up', own .. ':fo'
end
-- The hash of a parent's children's results, named after the type's meta key and the parent's id.
local function flow_results_key(meta_key, id)
  return string.sub(meta_key, 1, -3) .. ':fr:' .. id
end

-- Parents `ids` settled for good (handled, cancelled, purged): their flow records and results go.
local function flow_drop(meta_key, ids)
  local _, flows = flow_keys(meta_key)
  redis.call('HDEL', flows, unpack(ids))
  local results = {}
  for i, id in ipairs(ids) do results[i] = flow_results_key(meta_key, id) end
  redis.call('UNLINK', unpack(results))
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
-- (flow-keys: included above)

-- Each of `ids` just settled here (`outcome`: handled in every group,
-- dead-lettered in one, or cancelled) that a parent waits for: its notice,
-- numbered by the child's link so that a parent applies each once and in
-- order, goes to the queue's outbox, which the instance that settled it
-- applies to each parent at once (src/redis/flow-notices.ts) and any
-- dispatcher sweeps after a crash. A dead letter keeps its link (a replay
-- that is handled sends another); handled and cancelled drop it.
-- `results`: id -> its JSON result, or nil. Returns how many notices were queued.
local function flow_notice_push(shared_meta, ids, outcome, results, err)
  local _, _, parents, notices = flow_keys(shared_meta)
  local links = redis.call('HMGET', parents, unpack(ids))
  local queued = 0
  for k, id in ipairs(ids) do
    if links[k] then
      local link = cjson.decode(links[k])
      link.s = (link.s or 0) + 1
      local notice = { k = link.k, s = link.s, p = link.p, o = outcome }
      if results and results[id] then notice.r = results[id] end
      if err then notice.e = err end
      redis.call('RPUSH', notices, cjson.encode(notice))
      if outcome == 'dead-lettered' then
        redis.call('HSET', parents, id, cjson.encode(link))
      else
        redis.call('HDEL', parents, id)
      end
      queued = queued + 1
    end
  end
  return queued
end
-- Every instance reads one clock, Redis's, so skewed hosts neither fire early
-- nor late relative to each other.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The outcome of a call, appended to its queue's outcome stream (since 0.6,
-- the outcomes option; one stream per type and partition, every group's):
-- fields id, g (the group, '*' for every group), o (outcome), a (attempt),
-- and r (the result, JSON) or e (the error). Capped at about `max_len`
-- entries (MAXLEN ~ trims whole nodes: cheap). The entry's id is its time and
-- its position.
-- (complete-and-claim.lua appends inline: a function defined there would cost every claim.)
local function outcome_add(stream_key, max_len, group, id, outcome, attempt, extra_field, extra)
  if max_len <= 0 then return end
  if extra then
    redis.call('XADD', stream_key, 'MAXLEN', '~', max_len, '*', 'id', id, 'g', group, 'o', outcome, 'a', attempt, extra_field, extra)
  else
    redis.call('XADD', stream_key, 'MAXLEN', '~', max_len, '*', 'id', id, 'g', group, 'o', outcome, 'a', attempt)
  end
end
-- (flow-keys: included above)
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

-- A leading debounce's burst (since 0.6) ends with it: a payload held to run after it never runs.
local bursts, burst_ends = burst_keys(KEYS[1])
redis.call('HDEL', bursts, id)
redis.call('ZREM', burst_ends, id)
local value = redis.call('HGET', KEYS[1], id)
if not value then return 0 end
-- Since 0.6: a parent that waits for it hears it was cancelled (a failure of its edge); a
-- waiting parent cancelled stops waiting (its children are the caller's to cascade to).
local noticed = flow_notice_push(KEYS[1], { id }, 'cancelled', nil, 'cancelled')
redis.call('ZREM', (flow_keys(KEYS[1])), id)
flow_drop(KEYS[1], { id })
redis.call('HDEL', KEYS[1], id)
local _, due = envelope_parse(value)
remove_from_any_state({ meta = KEYS[1], schedule = KEYS[2], ready = KEYS[3], in_flight = KEYS[4], dead = KEYS[5], errors = KEYS[6], error_log = KEYS[12], legacy = KEYS[7], groups = KEYS[10], pending = KEYS[11] }, id, due)
-- An event with its own idempotency window (dedupe, since 0.6) is marked for that long instead.
local own_window = tonumber(string.match(value, ';i=(%d+)[^"]*"%]$', -64))
if own_window then window_ms = own_window end
if window_ms > 0 then redis.call('ZADD', KEYS[9], now_ms() + window_ms, id) end
-- Cancelled for every group ('*'), with its last attempt.
-- A caller without the option appends only to a stream others write, and trims nothing: their cap is theirs.
if outcomes_max_len > 0 then
  outcome_add(KEYS[13], outcomes_max_len, '*', id, 'cancelled', (envelope_parse(value)))
elseif redis.call('EXISTS', KEYS[13]) == 1 then
  redis.call('XADD', KEYS[13], '*', 'id', id, 'g', '*', 'o', 'cancelled', 'a', (envelope_parse(value)))
end
return noticed > 0 and 2 or 1
