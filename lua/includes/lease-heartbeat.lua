-- Heartbeat leases (since 0.6, HandlerOptions.heartbeatMs). A claim made with
-- heartbeats writes, beside each lease in the in-flight set, an entry in the
-- queue's heartbeat set: member '<claim identity>:<id>' (the identity as
-- includes/lease-constants.lua defines it: no ':' in it, so the id is all
-- after the first one), scored by when it lapses unless its instance renews it
-- (lua/renew-leases.lua). The in-flight score is never changed by a renewal,
-- so it stays the claim's fence; its expiry (timeout + grace) stays the hard
-- bound. A lapsed entry ends its lease only while the lease is still that
-- claim's: an entry left by a claim that ended otherwise (a retry, a cancel, a
-- 0.5 instance's script) changes nothing and is dropped when it lapses.
-- @include lease-fences

-- The in-flight leases whose heartbeat lapsed by `now` and whose hard expiry
-- has not come (those the caller takes as expired anyway), at most `limit`, as
-- {id, in-flight score} pairs. Every lapsed entry looked at is removed: those of
-- ended claims are skipped without counting against `limit`.
local function heartbeat_lapsed(heartbeats_key, in_flight_key, now, limit)
  local ended = {}
  local hard = now * 1000 + 999
  -- Entries of ended claims are skipped; ten looks at most, so a pile of them costs a few calls, not one long one.
  local looks = 0
  while #ended < 2 * limit and looks < 10 do
    looks = looks + 1
    local lapsed = redis.call('ZRANGE', heartbeats_key, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit - #ended / 2)
    if #lapsed == 0 then break end
    redis.call('ZREM', heartbeats_key, unpack(lapsed))
    local ids, identities = {}, {}
    for _, member in ipairs(lapsed) do
      local identity, id = string.match(member, '^(%d+):(.*)$')
      if identity then
        ids[#ids + 1] = id
        identities[#ids] = tonumber(identity)
      end
    end
    local scores = #ids > 0 and redis.call('ZMSCORE', in_flight_key, unpack(ids)) or {}
    for k, id in ipairs(ids) do
      local score = scores[k] and tonumber(scores[k])
      if score and score > hard and lease_fences(score, identities[k]) then
        ended[#ended + 1] = id
        ended[#ended + 1] = scores[k]
      end
    end
  end
  return ended
end
