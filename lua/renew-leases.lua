-- Heartbeat (since 0.6): renews the heartbeat leases of the claims an
-- instance still runs or holds, each only while its lease in the in-flight set
-- is still that claim's (includes/lease-heartbeat.lua). With `abandon` (close()
-- gave up waiting for the calls), their leases are marked not started instead
-- and left to lapse: the events come back, their attempts unspent.
-- KEYS[1] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[2] heartbeats: heartbeat zset ('<claim identity>' -> lapses at ms)
-- KEYS[3] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] lease_ms (number): the heartbeat lease: the entry of each claim with a lease still its own lapses
--         this long from now
-- ARGV[2] abandon (flag): mark the leases not started and renew nothing
-- ARGV[3..] events {id: string, claim: number}: each id and the identity of the claim
--         that took it
-- REPLY {now: number, lost: number[]}: Redis now ms, {position (from 1) of each event
--          whose lease is no longer that claim's: the call may run elsewhere now}
-- @include lease-fences
-- @include now-ms

local now = now_ms()
local ids = {}
for i = events_at, events_at + 2 * events_n - 1, 2 do ids[#ids + 1] = ARGV[i] end
local lost = {}
if #ids == 0 then return {now, lost} end
local leased = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local entries, marks, renewed = {}, {}, {}
local lapses = string.format('%d', now + lease_ms)
for k, id in ipairs(ids) do
  local claim = ARGV[events_at - 1 + 2 * k]
  if leased[k] and lease_fences(tonumber(leased[k]), tonumber(claim)) then
    if abandon then
      marks[#marks + 1] = claim
      marks[#marks + 1] = id
    elseif not renewed[claim] then
      -- One entry per claim (includes/lease-heartbeat.lua): renewed once, for all its leases.
      renewed[claim] = true
      entries[#entries + 1] = lapses
      entries[#entries + 1] = claim
    end
  else
    lost[#lost + 1] = k
  end
end
if #entries > 0 then redis.call('ZADD', KEYS[2], unpack(entries)) end
if #marks > 0 then redis.call('ZADD', KEYS[1], 'XX', unpack(marks)) end
return {now, lost}
