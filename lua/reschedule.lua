-- Transition: SCHEDULED | READY -> SCHEDULED at a new due time, keeping the
-- payload, context and attempts (reschedule and run-now of the inspection API).
-- READY includes an event left for a reader of a newer class version
-- (includes/newer-key.lua): due again, it goes to whichever reader claims it.
-- An event in flight or dead is left as it is: rescheduling does not apply.
-- KEYS[1] meta: meta hash      (id -> envelope)
-- KEYS[2] schedule: schedule index (bucket -> earliest due ms; see includes/schedule-buckets-constants.lua)
-- KEYS[3] ready: ready list
-- KEYS[4] legacySchedule: legacy schedule zset (id -> due ms), written by 0.1; only emptied
-- KEYS[5] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] wake_channel (string): wake channel
-- ARGV[2] wake_tag (string): wake message (the type's key tag)
-- ARGV[3] id (string): the event's id
-- ARGV[4] due_spec (string): new due: '+<ms from Redis now>' or '<absolute ms>'
-- REPLY (number): the new due ms, or -1 when the event is not stored, or is in flight or dead.
-- @include envelope-make
-- @include envelope-parse
-- @include keyed-remove
-- @include newer-remove
-- @include priority-remove
-- @include now-ms
-- @include schedule-add
-- @include schedule-remove

local value = redis.call('HGET', KEYS[1], id)
if not value then return -1 end
local attempt, due, body = envelope_parse(value)
-- Its bucket is found from the due time in its envelope, as cancel.lua does.
if not schedule_remove(KEYS[2], id, due)
  and redis.call('ZREM', KEYS[4], id) == 0
  and redis.call('LREM', KEYS[3], 1, id) == 0
  and not priority_remove(KEYS[1], id)
  and not keyed_remove(KEYS[1], id)
  and not newer_remove(KEYS[1], id) then
  return -1
end

local spec, new_due = due_spec, nil
if string.byte(spec, 1) == 43 then -- '+': relative to Redis's now
  new_due = now_ms() + tonumber(string.sub(spec, 2))
else
  new_due = tonumber(spec)
end
redis.call('HSET', KEYS[1], id, envelope_make(attempt, new_due, body))
-- Dispatchers sleep until the earliest due time they know: tell them when it moved earlier.
if schedule_add(KEYS[2], { { new_due, id } }) then
  redis.call('PUBLISH', wake_channel, wake_tag .. '|' .. new_due)
end
return new_due
