-- Phase of complete-and-claim.lua: the events claimed ahead that the reader is
-- about to start are confirmed, or refused (`refused`), writing nothing; `paused`
-- is read once for the whole call.
-- Paused: nothing is claimed, and no event held ahead is confirmed (the reader gives them back).
local paused = (most > 0 or confirmations_n > 0) and redis.call('EXISTS', KEYS[11]) == 1
local refused = {}
if confirmations_n > 0 then
  local ids = {}
  for i = confirmations_at, confirmations_at + 2 * confirmations_n - 1, 2 do ids[#ids + 1] = ARGV[i] end
  -- A lease that changed meanwhile (cancelled, replaced, expired) is no longer this claim's.
  local leased = paused and {} or redis.call('ZMSCORE', KEYS[2], unpack(ids))
  for k = 1, confirmations_n do
    if not (leased[k] and lease_fences(tonumber(leased[k]), tonumber(ARGV[confirmations_at - 1 + 2 * k]))) then refused[#refused + 1] = k end
  end
end
