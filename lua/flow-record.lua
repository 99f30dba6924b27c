-- Reads a parent's flow record (since 0.6; lua/flow-park.lua writes it), for
-- delivery.childResults(): a read, sent as a script so that a handler's
-- connection needs nothing more than the scripts it already runs.
-- KEYS[1] flows: the queue's flow records (includes/flow-keys.lua)
-- KEYS[2] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] id (string): the parent's id
-- REPLY (string): its record (JSON), or '' when it has none
return redis.call('HGET', KEYS[1], id) or ''
