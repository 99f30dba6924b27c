-- Transition: none; rewrites stored bodies in place (upgradeStored): each
-- event keeps its state, attempt and due time, and its body becomes the one
-- the current event class wrote from it. Fenced by the body: an event whose
-- body is no longer the one read (replaced, cancelled, upgraded by another
-- caller meanwhile) is left as it is, so running this again, or beside
-- handlers and enqueues, changes nothing twice.
-- KEYS[1] sharedMeta: the type's meta hash, where bodies live
-- KEYS[2] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1..] bodies {id: string, from: string, to: string}: per event, its id, the body
--           as read, the body to store instead
-- REPLY (number): how many bodies were rewritten.
-- @include envelope-make
-- @include envelope-parse

local ids = {}
for i = bodies_at, bodies_at + 3 * bodies_n - 1, 3 do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then return 0 end
local values = redis.call('HMGET', KEYS[1], unpack(ids))
local pairs_out = {}
for k, id in ipairs(ids) do
  local value = values[k]
  if value then
    local attempt, due, body = envelope_parse(value)
    if body == ARGV[bodies_at + 3 * k - 2] then
      pairs_out[#pairs_out + 1] = id
      pairs_out[#pairs_out + 1] = envelope_make(attempt, due, ARGV[bodies_at + 3 * k - 1])
    end
  end
end
if #pairs_out > 0 then redis.call('HSET', KEYS[1], unpack(pairs_out)) end
return #pairs_out / 2
