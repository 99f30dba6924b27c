-- @include flow-keys

-- Each of `ids` just settled here (`outcome`: handled in every group,
-- dead-lettered in one, or cancelled) that a parent waits for: its notice,
-- numbered by the child's link so that a parent applies each once and in
-- order, goes to the queue's outbox, which the instance that settled it
-- applies to each parent at once (src/redis/flow-notices.ts) and any
-- dispatcher sweeps after a crash. A dead letter keeps its link (a replay
-- that is handled sends another); handled and cancelled drop it.
-- `results`: id -> its JSON result, or nil. Returns how many notices were queued.
local function flow_notice_push(shared_meta, ids, outcome, results, err)
  local _, _, parents, notices = flow_keys(shared_meta)
  local links = redis.call('HMGET', parents, unpack(ids))
  local queued = 0
  for k, id in ipairs(ids) do
    if links[k] then
      local link = cjson.decode(links[k])
      link.s = (link.s or 0) + 1
      local notice = { k = link.k, s = link.s, p = link.p, o = outcome }
      if results and results[id] then notice.r = results[id] end
      if err then notice.e = err end
      redis.call('RPUSH', notices, cjson.encode(notice))
      if outcome == 'dead-lettered' then
        redis.call('HSET', parents, id, cjson.encode(link))
      else
        redis.call('HDEL', parents, id)
      end
      queued = queued + 1
    end
  end
  return queued
end
