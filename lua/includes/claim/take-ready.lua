-- Phase of complete-and-claim.lua: the rest from READY, the ready list (priority 0,
-- the best) and the priority set (since 0.6, includes/priority.lua): first those of
-- the set due longer ago than priorityAgingMs, each against the ready list's head by
-- due time, then the ready list, then the set by priority. When nothing was taken,
-- an early reply.
if count > 0 and not (flow[FLOW_KEYED] and (sorts_by_key or sorter_here)) and (not ids or #ids < count) then
  -- The priority set's keys as includes/priority-keys.lua names them, built here only when the flow hash says
  -- the set holds events: a function defined in this script would cost every claim its definition.
  local own = flow[FLOW_RQ] and string.sub(KEYS[3], 1, -3)
  local pk = own and { queue = own .. ':rq', aging = own .. ':ra', seq = own .. ':rs' }
  local prioritized = flow[FLOW_RQ] and redis.call('EXISTS', pk.queue) == 1
  if prioritized and aging_ms > 0 then
    local aged = redis.call('ZRANGE', pk.aging, '-inf', now - aging_ms, 'BYSCORE', 'LIMIT', 0, count - (ids and #ids or 0), 'WITHSCORES')
    if #aged > 0 then
      -- Served as the best priority: by due time, among the ready list's events too.
      ids = ids or {}
      local head = redis.call('LINDEX', KEYS[1], 0)
      local head_due = head and tonumber((select(2, envelope_parse(redis.call('HGET', KEYS[3], head) or ''))))
      local i = 1
      while i <= #aged and #ids < count do
        if head and head_due <= tonumber(aged[i + 1]) then
          ids[#ids + 1] = redis.call('LPOP', KEYS[1])
          head = redis.call('LINDEX', KEYS[1], 0)
          head_due = head and tonumber((select(2, envelope_parse(redis.call('HGET', KEYS[3], head) or ''))))
        else
          redis.call('ZREM', pk.queue, aged[i])
          redis.call('ZREM', pk.aging, aged[i])
          ids[#ids + 1] = aged[i]
          i = i + 2
        end
      end
      if #ids == 0 then ids = false end
    end
  end
  local want = count - (ids and #ids or 0)
  if want > 0 then
    local more = redis.call('LPOP', KEYS[1], want)
    if more then
      if not ids then
        ids = more
      else
        for _, id in ipairs(more) do ids[#ids + 1] = id end
      end
      want = want - #more
    end
  end
  if prioritized and want > 0 then
    local best = redis.call('ZPOPMIN', pk.queue, want)
    if #best > 0 then
      ids = ids or {}
      local taken = {}
      for i = 1, #best, 2 do
        taken[#taken + 1] = best[i]
        ids[#ids + 1] = best[i]
      end
      redis.call('ZREM', pk.aging, unpack(taken))
    end
  end
  if flow[FLOW_RQ] and not (prioritized and redis.call('EXISTS', pk.queue) == 1) then
    redis.call('DEL', pk.aging, pk.seq)
    redis.call('HDEL', flow_key, 'rq')
  end
end
if not ids then
  if #removed > 0 then lease_unpin_if_idle(KEYS[2]) end
  -- The reader goes idle: its last claim was answered, so its log can go.
  if count > 0 and token ~= '' then redis.call('DEL', KEYS[8]) end
  return {now, stale, claimed, dead, 0, '', 0, 0, freed, refused}
end
