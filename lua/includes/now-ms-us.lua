-- now_ms(), and the microseconds within that millisecond: a claim's lease
-- score carries them, so that no two claims of one event share a score
-- (includes/lease-constants.lua).
local function now_ms_us()
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  return tonumber(t[1]) * 1000 + math.floor(us / 1000), us % 1000
end
