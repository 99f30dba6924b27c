-- Reports of running calls (since 0.6): the progress and log lines their
-- handlers gave (delivery.progress, delivery.log), coalesced by the instance,
-- each written only while the call's lease is still its claim's (a stale
-- delivery's report changes nothing). Progress is kept per event with the
-- attempt it belongs to (the last report wins; find() shows it for that
-- attempt); log lines are kept across attempts, the last LOG_MOST, until the
-- event goes. A success drops both (lua/includes/claim/complete.lua), as does
-- every script that removes the event.
-- KEYS[1] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[2] progress: progress hash (id -> 'attempt|at ms|JSON value')
-- KEYS[3] logs: logs hash (id -> JSON [[at ms, attempt, line], ...])
-- KEYS[4] flow: flow hash (rp: reports were made here, includes/limit-keys.lua)
-- KEYS[5] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1..] reports {id: string, claim: number, attempt: number, progress: string, lines: string}: each
--         call's report: its progress as JSON ('' for none) and its new lines as a JSON
--         array of strings ('' for none)
-- REPLY {now: number, lost: number[]}: Redis now ms, {position (from 1) of each report whose
--          call's lease is no longer its claim's: written nowhere}
-- @include lease-fences
-- @include now-ms

local LOG_MOST = 100
local now = now_ms()
local ids = {}
for i = reports_at, reports_at + 5 * reports_n - 1, 5 do ids[#ids + 1] = ARGV[i] end
local lost = {}
if #ids == 0 then return {now, lost} end
local leased = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local progress, logged = {}, {}
for k, id in ipairs(ids) do
  local at = reports_at + 5 * (k - 1)
  if leased[k] and lease_fences(tonumber(leased[k]), tonumber(ARGV[at + 1])) then
    if ARGV[at + 3] ~= '' then
      progress[#progress + 1] = id
      progress[#progress + 1] = ARGV[at + 2] .. '|' .. now .. '|' .. ARGV[at + 3]
    end
    if ARGV[at + 4] ~= '' then logged[#logged + 1] = k end
  else
    lost[#lost + 1] = k
  end
end
if #progress > 0 then redis.call('HSET', KEYS[2], unpack(progress)) end
if #logged > 0 then
  local names = {}
  for i, k in ipairs(logged) do names[i] = ids[k] end
  local stored = redis.call('HMGET', KEYS[3], unpack(names))
  local writes = {}
  for i, k in ipairs(logged) do
    local log = {}
    if stored[i] then
      local ok, decoded = pcall(cjson.decode, stored[i])
      if ok and type(decoded) == 'table' then log = decoded end
    end
    local ok, lines = pcall(cjson.decode, ARGV[reports_at + 5 * (k - 1) + 4])
    if ok and type(lines) == 'table' then
      local attempt = tonumber(ARGV[reports_at + 5 * (k - 1) + 2])
      for _, line in ipairs(lines) do
        if type(line) == 'string' then log[#log + 1] = { now, attempt, line } end
      end
    end
    local from = math.max(1, #log - LOG_MOST + 1)
    local kept = {}
    for j = from, #log do kept[#kept + 1] = log[j] end
    writes[#writes + 1] = names[i]
    writes[#writes + 1] = #kept > 0 and cjson.encode(kept) or '[]'
  end
  redis.call('HSET', KEYS[3], unpack(writes))
end
if #progress + #logged > 0 then redis.call('HSET', KEYS[4], 'rp', '1') end
return {now, lost}
