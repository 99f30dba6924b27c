-- Where a queue keeps the events its readers left for a newer class version:
-- a hash <queue>:v, version -> when a reader last took from it (or one was
-- first left), and a list <queue>:v:<version> of ids per version, oldest
-- first. Named after the queue's meta key, as includes/group-keys.lua names a
-- group's keys, so every script that may touch it finds it in the same slot.
local function newer_key(meta_key)
  return string.sub(meta_key, 1, -3) .. ':v'
end
