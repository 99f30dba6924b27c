-- @include keyed-keys
-- @include limit-keys

-- Up to `count` ready ids from the keys in turn (round robin, one id per key
-- per turn), each key within its own limits (`flow` holds kmax, kper, kconc
-- at 7..9; none: no limit), or all of them when `limited` is false (the queue
-- is no longer keyed: what was sorted drains). Returns the ids, their keys,
-- whether some key was held back by its limits, and how long until one has
-- room: ms until the first key's rate window does, or -1 when only running
-- calls hold them (their end wakes the readers).
local function keyed_take(meta_key, flow, count, now, limited)
  local k = keyed_keys(meta_key)
  local kmax, kper, kconc = tonumber(flow[FLOW_KMAX] or ''), tonumber(flow[FLOW_KPER] or ''), tonumber(flow[FLOW_KCONC] or '')
  local ids, keys = {}, {}
  local held = false
  local held_ms = -1
  local turns = redis.call('LLEN', k.ring)
  local idle = 0
  local room = {}
  while #ids < count and turns > 0 and idle < turns do
    local key = redis.call('LMOVE', k.ring, k.ring, 'LEFT', 'RIGHT')
    if not key then break end
    local left = room[key]
    if left == nil then
      left = count
      if limited and kconc then
        redis.call('ZREMRANGEBYSCORE', k.running .. key, '-inf', now)
        left = math.min(left, kconc - redis.call('ZCARD', k.running .. key))
      end
      if limited and kmax and kper and left > 0 then
        redis.call('ZREMRANGEBYSCORE', k.rate .. key, '-inf', now - kper)
        local used = redis.call('ZCARD', k.rate .. key)
        if used >= kmax then
          local oldest = tonumber(redis.call('ZRANGE', k.rate .. key, 0, 0, 'WITHSCORES')[2])
          local wait = math.max(1, oldest + kper - now)
          if held_ms < 0 or wait < held_ms then held_ms = wait end
        end
        left = math.min(left, kmax - used)
      end
    end
    local id = left > 0 and redis.call('LPOP', k.list .. key) or false
    if id then
      ids[#ids + 1] = id
      keys[#keys + 1] = key
      room[key] = left - 1
      idle = 0
      if redis.call('HINCRBY', k.waiting, key, -1) <= 0 then
        redis.call('HDEL', k.waiting, key)
        redis.call('LREM', k.ring, 0, key)
        turns = turns - 1
      end
    else
      if left <= 0 then held = true end
      room[key] = 0
      idle = idle + 1
    end
  end
  return ids, keys, held, held_ms
end
