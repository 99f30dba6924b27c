-- @include lease-constants

-- Whether an in-flight score is the lease of the claim `identity` names
-- (that claim's not-started score). A 0.2 lease never is: only the 0.2
-- process that claimed it reports on it, with 0.2's scripts.
local function lease_fences(score, identity)
  return score >= SCALED_LEASE_FROM and score - score % 2 == identity
end
