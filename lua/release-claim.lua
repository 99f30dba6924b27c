-- Transition: IN_FLIGHT -> READY for the events of one claim whose reply never
-- reached its reader (the connection was reset, the call timed out): no
-- handler runs them, and waiting out their leases would spend an attempt.
-- The attempt in flight lives only in the lease (includes/lease-constants.lua), so
-- taking the lease back leaves the event's attempts as they were.
-- KEYS[1] claimLog: claim log of the reader (complete-and-claim.lua): token ':' msgpack
--         {lease score, id, ...} of its last claim; expires with the leases
-- KEYS[2] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[3] ready: ready list
-- KEYS[4] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] token (string): token of the claim whose reply was lost
-- REPLY (number): how many events went back to the head of the ready list.
-- @include lease-fences
-- @include lease-give-back

local log = redis.call('GET', KEYS[1])
if not log then return 0 end
local cut = string.find(log, ':', 1, true)
-- Another token: the lost call never ran, and the log is of a claim its reader got.
if not cut or string.sub(log, 1, cut - 1) ~= token then return 0 end
redis.call('DEL', KEYS[1])

local leases = cmsgpack.unpack(string.sub(log, cut + 1))
local ids, scores = {}, {}
for i = 1, #leases, 2 do
  local score = tonumber(leases[i])
  scores[#scores + 1] = score - score % 2
  ids[#ids + 1] = leases[i + 1]
end
if #ids == 0 then return 0 end
-- Only leases still of this claim: one completed, cancelled or claimed again
-- since is no longer this claim's.
local current = redis.call('ZMSCORE', KEYS[2], unpack(ids))
local back = {}
for k, id in ipairs(ids) do
  if current[k] and lease_fences(tonumber(current[k]), scores[k]) then back[#back + 1] = id end
end
if #back == 0 then return 0 end
lease_give_back(KEYS[2], KEYS[3], back)
return #back
