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
-- @include flow-drop
-- @include burst-keys
-- @include envelope-parse
-- @include flow-notice-push
-- @include now-ms
-- @include outcome-add
-- @include remove-from-any-state

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
