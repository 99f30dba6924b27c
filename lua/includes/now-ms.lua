-- Every instance reads one clock, Redis's, so skewed hosts neither fire early
-- nor late relative to each other.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
