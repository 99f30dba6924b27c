-- Transition: DEAD -> SCHEDULED (due now, attempts reset).
-- KEYS[1] dead: dead zset
-- KEYS[2] schedule: schedule index (bucket -> earliest due ms; see includes/schedule-buckets-constants.lua)
-- KEYS[3] meta: meta hash
-- KEYS[4] errors: errors hash
-- KEYS[5] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[6] errorLog: error-log hash (id -> its last failures; includes/error-log-append.lua)
-- ARGV[1] wake_channel (string): wake channel
-- ARGV[2] wake_tag (string): wake message (the type's key tag)
-- ARGV[3] most (number): most events to replay when no ids are given
-- ARGV[4..] ids (string[]): ids to replay; none means the oldest `most` dead letters
-- REPLY {done: number, taken: number}: how many events were replayed, how many dead
-- letters were taken: a dead letter whose envelope is gone (deleted by hand) is taken
-- and dropped, as there is nothing to replay.
-- @include envelope-make
-- @include envelope-parse
-- @include now-ms
-- @include schedule-add

local ids = {}
if ids_n > 0 then
  for i = ids_at, ids_at + ids_n - 1 do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, most - 1)
end

local now = now_ms()
local replayed, taken = 0, 0
local schedule = {}
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    taken = taken + 1
    redis.call('HDEL', KEYS[4], id)
    local value = redis.call('HGET', KEYS[3], id)
    if value then
      local _, _, body = envelope_parse(value)
      redis.call('HSET', KEYS[3], id, envelope_make(0, now, body))
      schedule[#schedule + 1] = { now, id }
      replayed = replayed + 1
    else
      -- Its event is gone: so is what it kept of its failures. A replayed one keeps them.
      redis.call('HDEL', KEYS[6], id)
    end
  end
end
if replayed > 0 then
  schedule_add(KEYS[2], schedule)
  redis.call('PUBLISH', wake_channel, wake_tag .. '|' .. now)
end
return {replayed, taken}
