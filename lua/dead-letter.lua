-- Transition: IN_FLIGHT -> DEAD with its reason (attempts used up, or the
-- stored envelope cannot be decoded). Fenced by the claim, like complete-and-claim.lua;
-- the envelope gets the attempt that ended, which the dead-letter listing shows.
-- KEYS[1] meta: meta hash
-- KEYS[2] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[3] dead: dead zset
-- KEYS[4] errors: errors hash
-- KEYS[5] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[6] errorLog: error-log hash (id -> its last failures; includes/error-log-append.lua)
-- KEYS[7] pending: pending hash   (id -> how many groups still hold the event)
-- KEYS[8] sharedMeta: the type's meta hash, where bodies live: KEYS[1] itself for the default group
-- KEYS[9] outcomes: outcome stream (since 0.6; includes/outcome-add.lua)
-- ARGV[1] id (string): the event's id
-- ARGV[2] claim (number): identity of the claim that ran it (its not-started lease score)
-- ARGV[3] attempt (number): the attempt that ran
-- ARGV[4] reason (string): why it is dead-lettered
-- ARGV[5] keep_count (number): keepDead.count: the most dead letters kept (0: no limit)
-- ARGV[6] keep_age (number): keepDead.ageMs: how long one is kept (0: no limit)
-- ARGV[7] outcomes_max_len (number): the outcomes option's maxLen: the stream's cap (0: outcomes off)
-- REPLY (number): 1 when dead-lettered, 2 when dead-lettered and a parent's notice was queued
--         (the caller applies the outbox: src/redis/flow-notices.ts), 0 when the claim was stale.
-- @include burst-release
-- @include dead-trim
-- @include envelope-make
-- @include error-log-append
-- @include flow-notice-push
-- @include envelope-parse
-- @include lease-fences
-- @include keyed-release
-- @include lease-remove
-- @include now-ms
-- @include outcome-add
-- @include outcome-group

local score = redis.call('ZSCORE', KEYS[2], id)
if not score or not lease_fences(tonumber(score), claim) then return 0 end
local value = redis.call('HGET', KEYS[1], id)
if not value then return 0 end
lease_remove(KEYS[2], id)
-- Its key's concurrency (HandlerOptions.perKey) is free again.
keyed_release(KEYS[1], { id })
-- A value without a header (corrupted by hand) is kept as it is: it is the evidence.
if string.match(value, '^%d+|%d+|') then
  local _, due, body = envelope_parse(value)
  redis.call('HSET', KEYS[1], id, envelope_make(attempt, due, body))
end
local now = now_ms()
redis.call('ZADD', KEYS[3], now, id)
redis.call('HSET', KEYS[4], id, reason)
error_log_append(KEYS[6], id, attempt, now, reason)
outcome_add(KEYS[9], outcomes_max_len, outcome_group(KEYS[1]), id, 'dead-lettered', attempt, 'e', reason)
-- A trailing payload a leading debounce held for it (since 0.6) goes now, in its place, unless a named group holds it.
if KEYS[1] == KEYS[8] and redis.call('HEXISTS', KEYS[7], id) == 0 and #burst_release(KEYS[1], { id }) > 0 then
  redis.call('ZREM', KEYS[3], id)
  redis.call('HDEL', KEYS[4], id)
  redis.call('HDEL', KEYS[6], id)
end
-- Parents that wait for it hear of it (since 0.6): its link stays, for a replay handled later.
local noticed = flow_notice_push(KEYS[8], { id }, 'dead-lettered', nil, reason)
-- Retention (keepDead): amortised like the history's, at most DEAD_TRIM_MOST (250) a call.
if keep_count > 0 or keep_age > 0 then
  dead_trim({ dead = KEYS[3], meta = KEYS[1], shared_meta = KEYS[8], pending = KEYS[7], errors = KEYS[4], error_log = KEYS[6] }, now, keep_count, keep_age)
end
return noticed > 0 and 2 or 1
