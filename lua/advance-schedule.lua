-- Transition of a recurring schedule: stores its new definition (the next
-- occurrence moved on) only if it is still the one the caller read, so that of
-- several instances advancing it at once one wins; the others' enqueues of the
-- same occurrences were duplicates (their ids are <name>@<occurrence ms>).
-- KEYS[1] recurring: recurring schedules hash (name -> definition JSON)
-- KEYS[2] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] name (string): schedule name
-- ARGV[2] read (string): the definition as read; '' when there was none (since 0.6: then it is stored only if there still is none)
-- ARGV[3] to_store (string): the definition to store
-- REPLY (number): 1 when stored, 0 when the definition had changed (advanced, replaced or removed).

if (redis.call('HGET', KEYS[1], name) or '') ~= read then return 0 end
redis.call('HSET', KEYS[1], name, to_store)
return 1
