-- Phase of complete-and-claim.lua: the events claimed ahead whose handlers
-- started since get their leases marked started (an expiry then spends the attempt).
if started_n > 0 then
  -- A started lease keeps its claim's identity with its last bit set; one
  -- that changed meanwhile (expired, replaced) is no longer this claim's.
  local ids = {}
  for i = started_at, started_at + 2 * started_n - 1, 2 do ids[#ids + 1] = ARGV[i] end
  local leased = redis.call('ZMSCORE', KEYS[2], unpack(ids))
  local marks = {}
  for k, id in ipairs(ids) do
    local identity = tonumber(ARGV[started_at - 1 + 2 * k])
    if leased[k] and tonumber(leased[k]) == identity then
      marks[#marks + 1] = string.format('%.0f', identity + 1)
      marks[#marks + 1] = id
    end
  end
  if #marks > 0 then redis.call('ZADD', KEYS[2], 'XX', unpack(marks)) end
end
