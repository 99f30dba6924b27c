-- Transition: none. The ids at the head of READY and their bodies (the ready
-- list, then by priority: includes/priority.lua),
-- for a reader that sorts its events by key (HandlerOptions.key): it
-- decodes them, asks the handler's key function, and sends the keys to
-- classify.lua. Nothing changes here: another reader may sort or claim them
-- meanwhile, and classify.lua moves only ids still in the list.
-- KEYS[1] ready: ready list
-- KEYS[2] sharedMeta: the type's meta hash, where bodies live
-- KEYS[3] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[4] meta: meta hash (names the queue's priority set)
-- ARGV[1] most (number): most ids
-- REPLY (string[]): {id, envelope ('' when gone), ...}.
-- @include priority-keys

local ids = redis.call('LRANGE', KEYS[1], 0, most - 1)
if #ids < most then
  for _, id in ipairs(redis.call('ZRANGE', priority_keys(KEYS[4]).queue, 0, most - #ids - 1)) do ids[#ids + 1] = id end
end
if #ids == 0 then return {} end
local values = redis.call('HMGET', KEYS[2], unpack(ids))
local out = {}
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = values[i] or ''
end
return out
