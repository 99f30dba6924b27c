-- @include lease-constants

local function lease_expiry(score)
  if score >= SCALED_LEASE_FROM then return math.floor(score / LEASE_SCALE) end
  return score
end
