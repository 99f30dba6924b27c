-- Transition: every state -> (removed), for good: one queue (a type, or one
-- partition of it) loses every key, its named groups' among them, in steps
-- of at most `most` schedule buckets or keys sorted by key (obliterate(),
-- since 0.6; call again until it returns 0). The first call leaves a
-- tombstone, which the scripts that restore registrations after a data loss
-- read (dispatch-due.lua, register-group.lua): an instance still running a
-- handler of the type does not bring its groups back. A handler added anew
-- (addHandler in a process started after) removes it. Big keys go with
-- UNLINK: Redis frees them off its main thread.
-- KEYS[1] groups: group registry (group -> registered at ms)
-- KEYS[2] meta: meta hash (<base>:m; every key of the queue is named after it)
-- KEYS[3] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[4] tombstone: tombstone: when (ms) the queue was obliterated
-- ARGV[1] most (number): most schedule buckets, or keys sorted by key, removed in this call
-- REPLY (number): 1 while there is more to remove, 0 once the queue is gone.
-- @include now-ms

redis.call('SET', KEYS[4], now_ms(), 'NX')
local base = string.sub(KEYS[2], 1, -3)

-- A queue's own keys, or a named group's (includes/group-keys.lua, keyed-keys.lua,
-- newer-key.lua, priority-keys.lua, limit-keys.lua name them); false while more is left.
local function clear(own)
  local buckets = redis.call('ZRANGE', own .. ':b', 0, most - 1)
  if #buckets > 0 then
    local names = {}
    for i, bucket in ipairs(buckets) do names[i] = own .. ':b:' .. bucket end
    redis.call('UNLINK', unpack(names))
    redis.call('ZREM', own .. ':b', unpack(buckets))
    if #buckets == most then return false end
  end
  local keys = redis.call('HRANDFIELD', own .. ':kw', most)
  if #keys > 0 then
    local names = {}
    for _, key in ipairs(keys) do
      names[#names + 1] = own .. ':kq:' .. key
      names[#names + 1] = own .. ':kf:' .. key
      names[#names + 1] = own .. ':kr:' .. key
    end
    redis.call('UNLINK', unpack(names))
    redis.call('HDEL', own .. ':kw', unpack(keys))
    if #keys == most then return false end
  end
  -- And the keys of events still sorted by key (running, or in a rate window), found through their ids.
  local sorted = redis.call('HRANDFIELD', own .. ':kid', most, 'WITHVALUES')
  if #sorted > 0 then
    local names, ids = {}, {}
    for i = 1, #sorted, 2 do
      ids[#ids + 1] = sorted[i]
      names[#names + 1] = own .. ':kf:' .. sorted[i + 1]
      names[#names + 1] = own .. ':kr:' .. sorted[i + 1]
    end
    redis.call('UNLINK', unpack(names))
    redis.call('HDEL', own .. ':kid', unpack(ids))
    if #ids == most then return false end
  end
  for _, version in ipairs(redis.call('HKEYS', own .. ':v')) do redis.call('UNLINK', own .. ':v:' .. version) end
  redis.call('UNLINK', own .. ':m', own .. ':b', own .. ':s', own .. ':r', own .. ':f', own .. ':d', own .. ':e', own .. ':el',
    own .. ':h', own .. ':hi', own .. ':v', own .. ':kid', own .. ':ring', own .. ':kw', own .. ':rq', own .. ':ra', own .. ':rs',
    own .. ':fc', own .. ':rl', own .. ':groups', own .. ':hl', own .. ':pg', own .. ':lg', own .. ':hr')
  return true
end

for _, group in ipairs(redis.call('HKEYS', KEYS[1])) do
  if group ~= 'default' then
    if not clear(base .. ':g:' .. group) then return 1 end
    redis.call('HDEL', KEYS[1], group)
  end
end
if not clear(base) then return 1 end
-- Flows' results (since 0.6): one hash per parent, found through the flow records.
local parents = redis.call('HRANDFIELD', base .. ':fl', most)
if #parents > 0 then
  local names = {}
  for i, id in ipairs(parents) do names[i] = base .. ':fr:' .. id end
  redis.call('UNLINK', unpack(names))
  redis.call('HDEL', base .. ':fl', unpack(parents))
  if #parents == most then return 1 end
end
-- Schedules' records of backfilled occurrences (since 0.6), one per schedule, by the schedules' names.
for _, name in ipairs(redis.call('HKEYS', base .. ':sched')) do
  redis.call('UNLINK', base .. ':sched:bf:' .. name)
end
-- The queue's shared keys; claim logs expire with their leases.
redis.call('UNLINK', KEYS[1], base .. ':pq', base .. ':n', base .. ':p', base .. ':here', base .. ':sched:here', base .. ':sched',
  base .. ':mv', base .. ':mi', base .. ':i', base .. ':o', base .. ':dq', base .. ':dx', base .. ':th',
  base .. ':wt', base .. ':fl', base .. ':up', base .. ':fo', base .. ':fa')
return 0
