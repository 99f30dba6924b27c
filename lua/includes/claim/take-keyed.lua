-- Phase of complete-and-claim.lua: READY events sorted by key (:kq:<key>), the keys
-- in turn, each within its own limits.
-- Sorted by key (HandlerOptions.key): the keys in turn, each within its own limits; while the queue is keyed,
-- a reader that sorts takes nothing from the ready list, whose ids it sorts first. One that does not (an
-- instance without the key option: a mismatch, warned when stored) takes from it too.
local key_of = false
if count > 0 and (flow[FLOW_KEYED] or flow[FLOW_KC]) and (not ids or #ids < count) then
  local taken, keys, held, held_ms = keyed_take(KEYS[3], flow, count - (ids and #ids or 0), now, flow[FLOW_KEYED] ~= false)
  if #taken > 0 then
    ids = ids or {}
    key_of = {}
    for i, id in ipairs(taken) do
      ids[#ids + 1] = id
      key_of[id] = keys[i]
    end
  end
  if redis.call('LLEN', keyed_keys(KEYS[3]).ring) == 0 then redis.call('HDEL', flow_key, 'kc') end
  if #taken == 0 and held and not ids then
    -- Every key with ready ids is at its limit: wait for a call to end (or a little, for a rate window).
    if not flow[FLOW_THR] then redis.call('HSET', flow_key, 'thr', '1') end
    if #removed > 0 then lease_unpin_if_idle(KEYS[2]) end
    return {now, stale, claimed, dead, 0, '', 0, held_ms, freed, refused}
  end
end
