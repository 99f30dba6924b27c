-- Subscriber groups (fan-out). A type's due event is delivered to every group
-- in its registry; a named group G keeps its own state under <base>:g:<G>:
-- (headers 'attempt|due|' in :m, retries in :b, :r, :f, :d, :e), and the body
-- stays once in the type's meta hash, held while the pending hash counts the
-- groups that still hold the event. Included after envelope.

-- The named group's own keys, from the type's meta key (<base>:m).
local function group_keys(meta_key, group)
  local own = string.sub(meta_key, 1, -3) .. ':g:' .. group
  return {
    meta = own .. ':m', schedule = own .. ':b', legacy = own .. ':s', ready = own .. ':r',
    in_flight = own .. ':f', dead = own .. ':d', errors = own .. ':e',
  }
end

-- Lua's unpack takes at most ~8,000 values: a large dispatch writes field/value
-- pairs in slices, never failing halfway (a script's earlier writes stay).
local function hset_pairs(key, flat)
  for from = 1, #flat, 2000 do
    redis.call('HSET', key, unpack(flat, from, math.min(from + 1999, #flat)))
  end
end

-- A group being removed (remove-group.lua) stays in the registry with this
-- value until it holds nothing: events are no longer delivered to it, but a
-- cancel or a replace still reaches what it holds.
local GROUP_REMOVING = 'removing'

-- Named groups of a registry (the default group keeps the type's own keys);
-- with `delivering`, only those new events go to (not the ones being removed).
local function named_groups(registry_key, delivering)
  local named = {}
  local flat = redis.call('HGETALL', registry_key)
  for i = 1, #flat, 2 do
    local group = flat[i]
    if group ~= 'default' and not (delivering and flat[i + 1] == GROUP_REMOVING) then named[#named + 1] = group end
  end
  return named
end

-- A group is done with `ids` (handled, purged, or the group removed): counts
-- them down, and returns those no group holds any more, whose bodies can go.
local function groups_release(pending_key, ids)
  local finished = {}
  for _, id in ipairs(ids) do
    if redis.call('HINCRBY', pending_key, id, -1) <= 0 then
      redis.call('HDEL', pending_key, id)
      finished[#finished + 1] = id
    end
  end
  return finished
end
