-- Transition: none; rewrites a recurring schedule's definition with its
-- template upgraded to the current event class version (upgradeStored),
-- if the definition is still the one read: a schedule advanced, replaced or
-- removed meanwhile is left as it is (the caller reads it again).
-- KEYS[1] recurring: the type's hash of schedule definitions (name -> JSON)
-- KEYS[2] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] name (string): schedule name
-- ARGV[2] read (string): its definition as read
-- ARGV[3] to_store (string): the definition to store instead
-- REPLY (number): 1 when rewritten, 0 when the definition had changed.

if redis.call('HGET', KEYS[1], name) ~= read then return 0 end
redis.call('HSET', KEYS[1], name, to_store)
return 1
