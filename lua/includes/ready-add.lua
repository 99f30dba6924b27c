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
  local plain, pk = {}, nil
  for i, id in ipairs(ids) do
    local p = priority_of(bodies[i])
    if p == 0 then
      plain[#plain + 1] = id
    else
      pk = pk or priority_keys(meta_key)
      local seq = redis.call('INCR', pk.seq)
      redis.call('ZADD', pk.queue, p * PRIORITY_UNIT + seq, id)
      redis.call('ZADD', pk.aging, tonumber(dues[i]) or 0, id)
    end
  end
  if #plain > 0 then redis.call('RPUSH', ready_key, unpack(plain)) end
end

