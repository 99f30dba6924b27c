-- @include limit-keys

-- How many of `wanted` events a claim may start now, given the queue's flow
-- hash as read (`flow`: the values of FLOW_FIELDS) and its leases (the pin
-- included), and, when none, how long to wait: ms until the rate window has
-- room or the hold ends, or -1 for "until a running call ends" (then the
-- queue is marked so that the end wakes the instances). Returns room, wait
-- ms (0 when there is room), and the rate key and window (ms) when calls
-- are to be counted in it, or false.
local function limit_room(meta_key, flow, in_flight_key, wanted, now)
  local flow_key, rl_key = limit_keys(meta_key)
  -- Paused (or waiting) while the type's partitions change: the limits hold across both settings.
  local moving = tonumber(flow[FLOW_MV] or '')
  if moving and moving > now then return 0, moving - now, false, 0 end
  local hold = tonumber(flow[FLOW_HOLD] or '')
  if hold then
    if hold > now then return 0, hold - now, false, 0 end
    redis.call('HDEL', flow_key, 'hold')
  end
  local room = wanted
  local conc = tonumber(flow[FLOW_CONC] or '')
  if conc then
    local leases = redis.call('ZCARD', in_flight_key)
    -- The pin is there exactly while a lease is.
    local running = leases > 0 and leases - 1 or 0
    room = math.min(room, conc - running)
    if room <= 0 then
      if not flow[FLOW_THR] then redis.call('HSET', flow_key, 'thr', '1') end
      return 0, -1, false, 0
    end
  end
  local max, per = tonumber(flow[FLOW_MAX] or ''), tonumber(flow[FLOW_PER] or '')
  if max and per then
    redis.call('ZREMRANGEBYSCORE', rl_key, '-inf', now - per)
    local used = redis.call('ZCARD', rl_key)
    if used >= max then
      local oldest = tonumber(redis.call('ZRANGE', rl_key, 0, 0, 'WITHSCORES')[2])
      return 0, math.max(1, oldest + per - now), false, 0
    end
    return math.min(room, max - used), 0, rl_key, per
  end
  return room, 0, false, 0
end
