-- Phase of complete-and-claim.lua: READY -> IN_FLIGHT for each taken event (or
-- DEAD when its lease already expired on its last attempt; left for a newer version
-- when its class is newer than the reader's), its lease written, the claim logged,
-- and each call counted against its key's and the queue's rate windows.
local not_started, started = lease_claim_scores(now + lease_ms, now_us)
local values = redis.call('HMGET', KEYS[3], unpack(ids))
-- A named group's header carries its attempt and due time; the body is the type's.
local bodies = group_queue and redis.call('HMGET', KEYS[10], unpack(ids))
local leases, n_leases, n_claimed, n_dead, n_left = {}, 0, 0, 0, 0
for k, id in ipairs(ids) do
  local value = values[k]
  if bodies then
    if value and bodies[k] then
      local _, _, body = envelope_parse(bodies[k])
      value = value .. body
    else
      value = nil
    end
  end
  -- A missing envelope means the event was cancelled or purged meanwhile.
  local attempt, version = 0, 1
  if value then attempt, version = envelope_attempt_version(value) end
  if version > max_version then
    -- Written by a newer class: this reader could not decode it. It stays ready, for a reader that can.
    local list = newer .. ':' .. version
    redis.call('RPUSH', list, id)
    redis.call('HSETNX', newer, version, now)
    if not flow[FLOW_V] then
      redis.call('HSET', flow_key, 'v', '1')
      flow[FLOW_V] = '1'
    end
    n_left = n_left + 1
  elseif value then
    -- The event's own attempts (enqueue's maxAttempts, since 0.6; src/core/body-extras.ts), from the end of its
    -- body without parsing the JSON: only the extras element, a string, ends a body with '"]' (as
    -- includes/priority-of.lua reads a priority). Inline: a function defined here would cost every claim.
    local most = max_attempts
    if string.byte(value, -2) == 34 then most = tonumber(string.match(value, ';a=(%d+)[^"]*"%]$', -48)) or max_attempts end
    if attempt >= most then
      redis.call('ZADD', KEYS[4], now, id)
      local reason = 'lease expired on attempt ' .. attempt .. ' of ' .. most .. ': the handling process died or stalled'
      redis.call('HSET', KEYS[5], id, reason)
      error_log_append(KEYS[12], id, attempt, now, reason)
      if outcomes_max_len > 0 then
        local group = string.match(KEYS[3], ':g:([%w_%.%-]+):m$') or 'default'
        redis.call('XADD', KEYS[16], 'MAXLEN', '~', outcomes_max_len, '*', 'id', id, 'g', group, 'o', 'dead-lettered', 'a', attempt, 'e', reason)
      end
      dead[n_dead + 1] = id
      dead[n_dead + 2] = attempt
      n_dead = n_dead + 2
      if flow[FLOW_KS] then keyed_release(KEYS[3], { id }) end
    else
      leases[n_leases + 1] = (n_claimed < 2 * start_now) and started or not_started
      leases[n_leases + 2] = id
      n_leases = n_leases + 2
      claimed[n_claimed + 1] = id
      claimed[n_claimed + 2] = value
      n_claimed = n_claimed + 2
    end
  end
end
-- The pin goes first: a new set is then created as a skiplist, not converted.
if n_leases > 0 then
  redis.call('ZADD', KEYS[2], LEASE_PIN_SCORE, LEASE_PIN, unpack(leases))
  -- One heartbeat entry for the claim's leases (includes/lease-heartbeat.lua), under its identity.
  if heartbeat_lease_ms > 0 then redis.call('ZADD', KEYS[15], string.format('%d', now + heartbeat_lease_ms), not_started) end
  -- Overwrites the reader's previous log: a reader has one claim in flight at a time.
  if token ~= '' then redis.call('SET', KEYS[8], token .. ':' .. cmsgpack.pack(leases), 'PX', lease_ms) end
  -- Each call of a key counts against the key's own limits while it runs.
  if key_of then
    local lease_until = now + lease_ms
    local kper = tonumber(flow[FLOW_KPER] or '')
    for k = 1, n_claimed, 2 do
      local id = claimed[k]
      local key = key_of[id]
      if key then
        local kk = keyed_keys(KEYS[3])
        redis.call('ZADD', kk.running .. key, lease_until, id)
        expire_optional(kk.running .. key, lease_ms + 1000)
        redis.call('HSET', kk.id_key, id, key)
        if kper then
          redis.call('ZADD', kk.rate .. key, now, not_started .. ':' .. k)
          expire_optional(kk.rate .. key, kper + 1000)
        end
      end
    end
  end
  -- Each call started counts in the rate window, under a member no other claim has.
  if rate_key then
    local starts = {}
    for k = 1, n_claimed / 2 do
      starts[#starts + 1] = now
      starts[#starts + 1] = not_started .. ':' .. k
    end
    redis.call('ZADD', rate_key, unpack(starts))
    expire_optional(rate_key, rate_per + 1000)
  end
elseif #removed > 0 then
  lease_unpin_if_idle(KEYS[2])
end
-- A child dead-lettered on an expired lease tells the parents that wait for it (since 0.6; includes/flow-notice-push.lua).
if n_dead > 0 and (flow[FLOW_UP] or (group_queue and redis.call('HGET', (limit_keys(KEYS[10])), 'up'))) then
  local gone = {}
  for i = 1, n_dead, 2 do gone[#gone + 1] = dead[i] end
  if flow_notice_push(KEYS[10], gone, 'dead-lettered', nil, 'lease expired') > 0 then freed = freed % 2 + 2 end
end
