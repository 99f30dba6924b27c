-- Transition: DEAD -> (removed), or a record of the history dropped: those
-- dead-lettered (or handled) more than `older_than_ms` before now, oldest
-- first, at most `most` a call (clean(), since 0.6; call again until it
-- returns fewer). In flight, scheduled and ready events are not touched.
-- KEYS[1] dead: dead zset (id -> dead-lettered at ms)
-- KEYS[2] meta: meta hash
-- KEYS[3] errors: errors hash
-- KEYS[4] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[5] pending: pending hash   (id -> how many groups still hold the event)
-- KEYS[6] sharedMeta: the type's meta hash, where bodies live: KEYS[2] itself for the default group
-- KEYS[7] errorLog: error-log hash (id -> its last failures)
-- KEYS[8] handled: handled hash (the history, includes/handled-keep.lua)
-- KEYS[9] handledIndex: handled index zset (id -> handled at ms)
-- ARGV[1] kind (string): 'dead' or 'handled'
-- ARGV[2] older_than_ms (number): only those older than this many ms (0: all)
-- ARGV[3] most (number): most to drop in this call (1 to 1,000)
-- REPLY (number): how many were dropped.
-- @include event-drop
-- @include now-ms

local cutoff = now_ms() - older_than_ms
local index = kind == 'dead' and KEYS[1] or KEYS[9]
local ids = redis.call('ZRANGE', index, '-inf', '(' .. cutoff, 'BYSCORE', 'LIMIT', 0, most)
if #ids == 0 then return 0 end
redis.call('ZREM', index, unpack(ids))
if kind == 'dead' then
  event_drop({ meta = KEYS[2], shared_meta = KEYS[6], pending = KEYS[5], errors = KEYS[3], error_log = KEYS[7] }, ids)
else
  redis.call('HDEL', KEYS[8], unpack(ids))
  redis.call('HDEL', KEYS[8] .. 'r', unpack(ids))
end
return #ids
