-- @include priority-keys
-- @include priority-of

local PRIORITY_UNIT = 8589934592

-- Puts `ids` at the tail of READY in the queue of `meta_key`: those of
-- priority 0 on the ready list, the others in the priority set. `bodies[i]`
-- holds id i's body (its priority) and `dues[i]` its due ms; without `bodies`
-- every id goes to the ready list.
local function ready_add(meta_key, ready_key, ids, bodies, dues)
  if #ids == 0 then return end
  if not bodies then
    redis.call('RPUSH', ready_key, unpack(ids))
    return
  end
  -- Sorted first, each set then written in one call: a dispatch of many events costs a few calls, not three each.
  local plain, prioritized, priorities = {}, {}, {}
  for i, id in ipairs(ids) do
    local p = priority_of(bodies[i])
    if p == 0 then
      plain[#plain + 1] = id
    else
      prioritized[#prioritized + 1] = i
      priorities[#prioritized] = p
    end
  end
  if #prioritized > 0 then
    local pk = priority_keys(meta_key)
    -- The claim reads the flow hash anyway: this mark tells it to look at the set (includes/limit-keys.lua).
    redis.call('HSET', pk.flow, 'rq', '1')
    local first = redis.call('INCRBY', pk.seq, #prioritized) - #prioritized
    local ranked, aging = {}, {}
    for k, i in ipairs(prioritized) do
      ranked[#ranked + 1] = priorities[k] * PRIORITY_UNIT + first + k
      ranked[#ranked + 1] = ids[i]
      aging[#aging + 1] = tonumber(dues[i]) or 0
      aging[#aging + 1] = ids[i]
    end
    -- In slices: unpack takes a few thousand values at most, and a dispatch moves up to 5,000 events.
    for from = 1, #ranked, 2000 do
      local to = math.min(from + 1999, #ranked)
      redis.call('ZADD', pk.queue, unpack(ranked, from, to))
      redis.call('ZADD', pk.aging, unpack(aging, from, to))
    end
  end
  if #plain > 0 then redis.call('RPUSH', ready_key, unpack(plain)) end
end
