-- @include limit-keys

-- How many of `wanted` events a claim may start now under the queue's
-- limits (includes/limit-keys.lua), `in_flight` being its leases (the pin
-- included), and, when none, how long to wait: ms until the rate window has
-- room or the hold ends, or -1 for "until a running call ends" (then the
-- queue is marked so that the end wakes the instances). Returns
-- room, wait ms (0 when there is room), and the rate key and window (ms)
-- when calls are to be counted in it, or false.
local function limit_room(meta_key, in_flight_key, wanted, now)
  local lim_key, rl_key, hold_key, thr_key = limit_keys(meta_key)
  local hold = redis.call('PTTL', hold_key)
  if hold > 0 then return 0, hold, false, 0 end
  local lim = redis.call('HMGET', lim_key, 'max', 'per', 'conc')
  local room = wanted
  local rate_key = false
  local conc = tonumber(lim[3] or '')
  if conc then
    local leases = redis.call('ZCARD', in_flight_key)
    -- The pin is there exactly while a lease is.
    local running = leases > 0 and leases - 1 or 0
    room = math.min(room, conc - running)
    if room <= 0 then
      redis.call('SET', thr_key, '1', 'PX', 60000)
      return 0, -1, false, 0
    end
  end
  local max, per = tonumber(lim[1] or ''), tonumber(lim[2] or '')
  if max and per then
    redis.call('ZREMRANGEBYSCORE', rl_key, '-inf', now - per)
    local used = redis.call('ZCARD', rl_key)
    if used >= max then
      local oldest = tonumber(redis.call('ZRANGE', rl_key, 0, 0, 'WITHSCORES')[2])
      return 0, math.max(1, oldest + per - now), false, 0
    end
    room = math.min(room, max - used)
    return room, 0, rl_key, per
  end
  return room, 0, rate_key, 0
end
