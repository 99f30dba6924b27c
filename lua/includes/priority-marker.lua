-- The type's mark that some of its events were enqueued with a priority
-- (includes/priority-keys.lua), after its shared meta key.
local function priority_marker(shared_meta_key)
  return string.sub(shared_meta_key, 1, -3) .. ':pq'
end
