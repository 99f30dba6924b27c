-- Transition: IN_FLIGHT -> SCHEDULED at now + delay, the attempt unspent: the
-- handler snoozed the event (Delivery.snooze, a thrown or returned Snoozed;
-- since 0.6). Fenced by the claim, like retry.lua. The stored attempt stays
-- one less than this delivery's, so the next delivery has the same attempt.
-- The body is stored again with its snooze count one more and, when the
-- handler gave one, its new payload (src/core/body-extras.ts): in the type's
-- meta hash, which is `meta` itself for the default group and holds the one
-- body every group shares for a named one. A new payload is refused while the
-- type has more than one group: it would change what the others deliver.
-- KEYS[1] meta: meta hash (a named group's: its header, `attempt|due|`)
-- KEYS[2] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[3] schedule: schedule index (bucket -> earliest due ms; see includes/schedule-buckets-constants.lua)
-- KEYS[4] sharedMeta: the type's meta hash, where bodies live: KEYS[1] itself for the
--         default group
-- KEYS[5] sharedGroups: the type's group registry (group -> registered at ms)
-- KEYS[6] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[7] outcomes: outcome stream (since 0.6; includes/outcome-add.lua)
-- ARGV[1] id (string): the event's id
-- ARGV[2] claim (number): identity of the claim that ran it (its not-started lease score)
-- ARGV[3] attempt (number): this delivery's attempt
-- ARGV[4] delay_ms (number): how long to snooze, ms
-- ARGV[5] body (string): the body to store: its snooze count one more, maybe a new payload
-- ARGV[6] replaces (flag): the body holds a new payload from the handler
-- ARGV[7] outcomes_max_len (number): the outcomes option's maxLen: the stream's cap (0: outcomes off)
-- REPLY (number): the new due ms; -1 when the claim was stale; -2 when a new payload was
-- refused (the type has more than one group): nothing changed.
-- @include envelope-make
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
if replaces and redis.call('HLEN', KEYS[5]) > 1 then return -2 end
lease_remove(KEYS[2], id)
-- Its key's concurrency (HandlerOptions.perKey) is free again.
keyed_release(KEYS[1], { id })

local due = now_ms() + delay_ms
local stored_attempt = math.max(attempt - 1, 0)
if KEYS[4] == KEYS[1] then
  redis.call('HSET', KEYS[1], id, envelope_make(stored_attempt, due, body))
else
  -- A named group: its header moves; the shared body keeps the header it has.
  redis.call('HSET', KEYS[1], id, envelope_make(stored_attempt, due, ''))
  local shared = redis.call('HGET', KEYS[4], id)
  if shared then
    local shared_attempt, shared_due = envelope_parse(shared)
    redis.call('HSET', KEYS[4], id, envelope_make(shared_attempt, shared_due, body))
  end
end
schedule_add(KEYS[3], { { due, id } })
outcome_add(KEYS[7], outcomes_max_len, outcome_group(KEYS[1]), id, 'snoozed', attempt)
return due
