-- Transition: none. The ids at the head of the ready list and their bodies,
-- for a reader that sorts its events by key (HandlerOptions.key): it
-- decodes them, asks the handler's key function, and sends the keys to
-- classify.lua. Nothing changes here: another reader may sort or claim them
-- meanwhile, and classify.lua moves only ids still in the list.
-- KEYS[1] ready: ready list
-- KEYS[2] sharedMeta: the type's meta hash, where bodies live
-- KEYS[3] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] most (number): most ids
-- REPLY (string[]): {id, envelope ('' when gone), ...}.

local ids = redis.call('LRANGE', KEYS[1], 0, most - 1)
if #ids == 0 then return {} end
local values = redis.call('HMGET', KEYS[2], unpack(ids))
local out = {}
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = values[i] or ''
end
return out
