-- A stored event is "<attempt>|<due ms>|<body json>": the two numbers that
-- scripts change sit in front so a transition never has to parse the JSON.
-- A value without a valid header (corrupted by hand) parses as attempt 0 with
-- the whole value as body: it is then claimed, fails to decode and is
-- dead-lettered, instead of making every script that touches it fail.
local function envelope_parse(value)
  local attempt, due, body = string.match(value, '^(%d+)|(%d+)|(.*)$')
  if not attempt then return 0, '0', value end
  return tonumber(attempt), due, body
end

local function envelope_attempt(value)
  return tonumber(string.match(value, '^(%d+)|%d+|')) or 0
end

local function envelope_make(attempt, due, body)
  return attempt .. '|' .. due .. '|' .. body
end

-- Every instance reads one clock, Redis's, so skewed hosts neither fire early
-- nor late relative to each other.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- now_ms(), and the microseconds within that millisecond: a claim's lease
-- score carries them, so that no two claims of one event share a score
-- (includes/lease.lua).
local function now_ms_us()
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  return tonumber(t[1]) * 1000 + math.floor(us / 1000), us % 1000
end
