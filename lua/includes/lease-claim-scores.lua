-- The two scores of one claim's leases, which share an expiry and a
-- microsecond: not started, and started. Strings: Lua would print numbers
-- this large in 14 significant digits.
local function lease_claim_scores(lease_until, us)
  local prefix = string.format('%d', lease_until)
  local even = us - us % 2
  return prefix .. string.format('%03d', even), prefix .. string.format('%03d', even + 1)
end
