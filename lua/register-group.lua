-- Registers a subscriber group of a type: from now on every event of the type
-- that falls due is delivered to it too (dispatch-due.lua), whether or not any
-- of its handlers runs. The default group (handlers without a group) needs no
-- registry while it is the only one: it is registered only once the type has
-- one, here or by its handlers' dispatchers.
-- KEYS[1] groups: group registry (group -> registered at ms)
-- KEYS[2] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[3] marker: the queue's marker: set with its first registration and removed only by obliterate.lua,
--         so that its absence tells the instances that Redis lost their
--         registrations (dispatch-due.lua)
-- KEYS[4] tombstone: tombstone: set while the queue is obliterated (obliterate.lua)
-- ARGV[1] group (string): group name
-- ARGV[2] marker (string): the marker's value, if it has none yet
-- ARGV[3] fresh (flag): a handler added now (addHandler), not a registration restored after a
--         loss: it starts an obliterated queue again (removes the tombstone); a restored one
--         is refused there
-- REPLY (number): 1 when newly registered, 0 when it already was (or is the default
-- group of a type without named groups, which needs no registry, or the queue was
-- obliterated and the registration is not fresh).
-- @include now-ms

if redis.call('EXISTS', KEYS[4]) == 1 then
  if not fresh then return 0 end
  redis.call('DEL', KEYS[4])
  -- Started again after obliterate: instances still running see a new marker whose 'o' says so, and register
  -- their groups again without taking it for a loss of Redis's data (src/service/group-registrations.ts).
  redis.call('SET', KEYS[3], 'o' .. marker)
end
if group == 'default' and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[3], marker, 'NX')
return redis.call('HSETNX', KEYS[1], group, now_ms())
