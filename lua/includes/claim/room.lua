-- Phase of complete-and-claim.lua: how many to claim. Nothing while paused; else
-- as many as the queue's limits leave room for (includes/limit-room.lua: a move,
-- a hold, concurrency, the rate window), or an early reply saying how long to wait.
local claimed, dead = {}, {}
local count = most
if paused then
  if #removed > 0 then lease_unpin_if_idle(KEYS[2]) end
  return {now, stale, claimed, dead, 1, '', 0, 0, freed, refused}
end
local rate_key, rate_per = false, 0
if count > 0 then
  local room, wait
  room, wait, rate_key, rate_per = limit_room(KEYS[3], flow, KEYS[2], count, now)
  if room <= 0 then
    if #removed > 0 then lease_unpin_if_idle(KEYS[2]) end
    return {now, stale, claimed, dead, 0, '', 0, wait, freed, refused}
  end
  count = room
end
