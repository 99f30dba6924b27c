-- Transition: MOVING -> (gone from the old queue), once migrate-in.lua stored
-- the events in their new queue: drops their records from the moving hash,
-- but only those of this move (the same token): a newer move of the same id
-- (taken out again after it came back) stays until it is delivered.
-- KEYS[1] moving: moving hash (id -> 'token|taken at ms|record json')
-- KEYS[2] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] token (string): token of the move
-- ARGV[2..] ids (string[]): the moved ids
-- REPLY (number): how many records were dropped.

local prefix = token .. '|'
local values = redis.call('HMGET', KEYS[1], unpack(ARGV, ids_at))
local done = {}
for k, value in ipairs(values) do
  if value and string.sub(value, 1, #prefix) == prefix then done[#done + 1] = ARGV[ids_at - 1 + k] end
end
if #done > 0 then redis.call('HDEL', KEYS[1], unpack(done)) end
return #done
