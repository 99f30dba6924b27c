-- @include lease-constants

local function lease_is_scaled(score)
  return score >= SCALED_LEASE_FROM
end
