-- Transition: IN_FLIGHT -> READY for events a reader claimed ahead of its
-- handler slots and gives back without having started them: the reader is
-- stopping, the type was paused, or an event waited for a slot so long that
-- its lease could run out while its handler runs. No handler ran them, so no
-- attempt is spent. Fenced by the claim (includes/lease-constants.lua): an event whose
-- lease expired, or that was replaced and claimed again meanwhile, is not this
-- reader's to give back.
-- KEYS[1] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[2] ready: ready list
-- KEYS[3] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1..] events {id: string, claim: number}: each id and the identity of the claim
--           that took it (its not-started lease score), in the order they were claimed
-- REPLY (number): how many events went back to the head of the ready list.
-- @include lease-fences
-- @include lease-give-back

local ids = {}
for i = events_at, events_at + 2 * events_n - 1, 2 do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then return 0 end
local leased = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local back = {}
for k, id in ipairs(ids) do
  if leased[k] and lease_fences(tonumber(leased[k]), tonumber(ARGV[events_at - 1 + 2 * k])) then back[#back + 1] = id end
end
if #back == 0 then return 0 end
lease_give_back(KEYS[1], KEYS[2], back)
return #back
