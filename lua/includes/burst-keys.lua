-- A queue's window keys (since 0.6), named after its meta key as
-- includes/limit-keys.lua names the flow hash:
--   <queue>:dq  hash: id -> a leading debounce's burst record (includes/enqueue-policy.lua)
--   <queue>:dx  sorted set: id -> when that record's quiet period ends (+inf while it holds a payload)
--   <queue>:th  sorted set: id -> when its throttle window ends
local function burst_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return own .. ':dq', own .. ':dx', own .. ':th'
end
