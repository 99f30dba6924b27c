-- Transition: MOVING -> SCHEDULED | READY | DEAD | WAITING, in the event's new
-- partition (src/runtime/repartitioner.ts): stores what migrate-out.lua took
-- from the old one, each event in the state it left, in every group that
-- held it. Once per move: the move's token is kept for a day, so the same
-- records sent again (the caller crashed before it cleared the moving hash,
-- or another instance resent them) change nothing, even if the events were
-- handled meanwhile. An id stored here already (enqueued again meanwhile)
-- keeps what is here; an id handled or cancelled here within the idempotency
-- window is a duplicate, as its enqueue here would have been.
-- KEYS[1] meta: meta hash (bodies)
-- KEYS[2] schedule: schedule index (includes/schedule-buckets-constants.lua)
-- KEYS[3] ready: ready list
-- KEYS[4] dead: dead zset
-- KEYS[5] errors: errors hash
-- KEYS[6] errorLog: error-log hash
-- KEYS[7] groups: group registry (includes/group-keys.lua)
-- KEYS[8] pending: pending hash
-- KEYS[9] moved: moved zset (token of a move stored here -> when, ms)
-- KEYS[10] recent: recent zset    (id -> end of its idempotency window ms)
-- KEYS[11] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] token (string): token of the move
-- ARGV[2] wake_channel (string): wake channel ('' for none)
-- ARGV[3] wake_tag (string): wake message prefix (this queue's tag)
-- ARGV[4..] records (string[]): record json of each event (migrate-out.lua)
-- REPLY (number): how many events were stored.
-- @include flow-results-key
-- @include burst-keys
-- @include envelope-parse
-- @include flow-keys
-- @include limit-keys
-- @include group-keys
-- @include now-ms
-- @include priority-marker
-- @include ready-add
-- @include schedule-add

-- A resend of a move comes from its moving hash: within seconds, or after a crash, within hours at worst.
local MOVE_TOKEN_KEPT_MS = 86400000

if redis.call('ZSCORE', KEYS[9], token) then return 0 end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[9], '-inf', now - MOVE_TOKEN_KEPT_MS)
local stored = 0
local earliest
local any_ready = false
local function store_in(k, id, state, due, dead, body)
  if state == 'scheduled' then
    schedule_add(k.schedule, { { due, id } })
    if not earliest or due < earliest then earliest = due end
  elseif state == 'ready' then
    -- At the tail of its priority (includes/priority.lua).
    ready_add(k.meta, k.ready, { id }, { body }, { due })
    any_ready = true
  elseif state == 'dead' then
    redis.call('ZADD', k.dead, dead, id)
  end
end
local own = { meta = KEYS[1], schedule = KEYS[2], ready = KEYS[3], dead = KEYS[4] }
for i = records_at, records_at + records_n - 1 do
  local record = cjson.decode(ARGV[i])
  local id = record.id
  local mark = tonumber(redis.call('ZSCORE', KEYS[10], id) or '0')
  if redis.call('HEXISTS', KEYS[1], id) == 0 and mark <= now then
    stored = stored + 1
    redis.call('HSET', KEYS[1], id, record.value)
    local _, due = envelope_parse(record.value)
    store_in(own, id, record.state, tonumber(due), record.dead, record.value)
    -- An event with a priority marks its type here too.
    if priority_of(record.value) > 0 then redis.call('SET', priority_marker(KEYS[1]), '1') end
    if record.error then redis.call('HSET', KEYS[5], id, record.error) end
    if record.log then redis.call('HSET', KEYS[6], id, record.log) end
    if record.pending then redis.call('HSET', KEYS[8], id, record.pending) end
    local bursts, burst_ends, throttles = burst_keys(KEYS[1])
    if record.burst then
      -- A leading debounce's burst (since 0.6, includes/enqueue-policy.lua): completions here look for it.
      redis.call('HSET', bursts, id, record.burst)
      local quiet_end, _, _, held = string.match(record.burst, '^(%d+)|([^|]*)|([^|]*)|[^|]*|(.*)$')
      redis.call('ZADD', burst_ends, held and held ~= '' and '+inf' or quiet_end or '0', id)
    end
    -- So do its own dedupe window's (includes/limit-keys.lua, bq).
    if record.burst or string.match(record.value, ';i=%d+[^"]*"%]$', -64) then redis.call('HSET', (limit_keys(KEYS[1])), 'bq', '1') end
    if record.throttle then redis.call('ZADD', throttles, record.throttle, id) end
    -- Its part in flows (since 0.6): a parent keeps waiting here, a child keeps its parents.
    local waiting, flows, parents = flow_keys(KEYS[1])
    if record.waiting then redis.call('ZADD', waiting, record.waiting, id) end
    if record.results then redis.call('HSET', flow_results_key(KEYS[1], id), unpack(record.results)) end
    if record.flow then
      redis.call('HSET', flows, id, record.flow)
      redis.call('HSET', (limit_keys(KEYS[1])), 'fp', '1')
    end
    if record.link then
      redis.call('HSET', parents, id, record.link)
      redis.call('HSET', (limit_keys(KEYS[1])), 'up', '1')
    end
    for _, h in ipairs(record.groups or {}) do
      local g = group_keys(KEYS[1], h.group)
      -- A group that held it here is registered there too, as it was.
      redis.call('HSETNX', KEYS[7], h.group, now)
      redis.call('HSET', g.meta, id, h.header)
      local _, group_due = envelope_parse(h.header)
      if h.state ~= cjson.null then store_in(g, id, h.state, tonumber(group_due), h.dead, record.value) end
      if h.error ~= cjson.null then redis.call('HSET', g.errors, id, h.error) end
      if h.log ~= cjson.null then redis.call('HSET', g.error_log, id, h.log) end
    end
  end
end
redis.call('ZADD', KEYS[9], now, token)
if wake_channel ~= '' then
  if any_ready then redis.call('PUBLISH', wake_channel, wake_tag .. '|-1') end
  if earliest then redis.call('PUBLISH', wake_channel, wake_tag .. '|' .. string.format('%d', earliest)) end
end
return stored
