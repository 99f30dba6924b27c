-- Phase of complete-and-claim.lua: the rest from the ready list; when nothing was
-- taken, an early reply.
if count > 0 and not (flow[FLOW_KEYED] and (sorts_by_key or sorter_here)) and (not ids or #ids < count) then
  local more = redis.call('LPOP', KEYS[1], count - (ids and #ids or 0))
  if more then
    if not ids then
      ids = more
    else
      for _, id in ipairs(more) do ids[#ids + 1] = id end
    end
  end
end
if not ids then
  if #removed > 0 then lease_unpin_if_idle(KEYS[2]) end
  -- The reader goes idle: its last claim was answered, so its log can go.
  if count > 0 and token ~= '' then redis.call('DEL', KEYS[8]) end
  return {now, stale, claimed, dead, 0, '', 0, 0, freed, refused}
end
