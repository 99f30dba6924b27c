-- Transition: IN_FLIGHT -> SCHEDULED at now + backoff, keeping the error.
-- Fenced by the claim, like complete-and-claim.lua; the envelope gets the attempt that failed.
-- KEYS[1] meta: meta hash
-- KEYS[2] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[3] schedule: schedule index (bucket -> earliest due ms; see includes/schedule-buckets-constants.lua)
-- KEYS[4] errors: errors hash
-- KEYS[5] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[6] errorLog: error-log hash (id -> its last failures; includes/error-log-append.lua)
-- KEYS[7] outcomes: outcome stream (since 0.6; includes/outcome-add.lua)
-- ARGV[1] id (string): the event's id
-- ARGV[2] claim (number): identity of the claim that ran it (its not-started lease score)
-- ARGV[3] attempt (number): attempt that failed
-- ARGV[4] backoff_ms (number): backoff ms
-- ARGV[5] error_text (string): error text
-- ARGV[6] outcomes_max_len (number): the outcomes option's maxLen: the stream's cap (0: outcomes off)
-- REPLY (number): the new due ms, or -1 when the claim was stale.
-- @include envelope-make
-- @include error-log-append
-- @include envelope-parse
-- @include lease-fences
-- @include keyed-release
-- @include lease-remove
-- @include now-ms
-- @include outcome-add
-- @include outcome-group
-- @include schedule-add

local score = redis.call('ZSCORE', KEYS[2], id)
if not score or not lease_fences(tonumber(score), claim) then return -1 end
local value = redis.call('HGET', KEYS[1], id)
if not value then return -1 end
local _, _, body = envelope_parse(value)
lease_remove(KEYS[2], id)
-- Its key's concurrency (HandlerOptions.perKey) is free again.
keyed_release(KEYS[1], { id })

local due = now_ms() + backoff_ms
redis.call('HSET', KEYS[1], id, envelope_make(attempt, due, body))
schedule_add(KEYS[3], { { due, id } })
redis.call('HSET', KEYS[4], id, error_text)
error_log_append(KEYS[6], id, attempt, due - backoff_ms, error_text)
outcome_add(KEYS[7], outcomes_max_len, outcome_group(KEYS[1]), id, 'retried', attempt, 'e', error_text)
return due
