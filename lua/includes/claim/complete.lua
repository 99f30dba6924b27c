-- Phase of complete-and-claim.lua: IN_FLIGHT -> (removed), or HANDLED with
-- keepHandled, for each success still fenced by its claim (`stale` lists the
-- others); ids marked for the idempotency window; `freed` when a concurrency
-- limit a claim found full has room again.
-- Room freed under a concurrency limit that a claim found full, or a trailing
-- payload stored (includes/burst-release.lua): 1, the caller wakes the
-- instances and its dispatcher; a parent's notice queued (includes/flow-notice-push.lua):
-- 2 more, the caller applies its queue's outbox. Set with `freed = freed % 2 + 2` and `freed = freed - freed % 2 + 1`.
local freed = 0
if successes_n > 0 then
  local ids = {}
  for i = successes_at, successes_at + 2 * successes_n - 1, 2 do ids[#ids + 1] = ARGV[i] end
  local leased = redis.call('ZMSCORE', KEYS[2], unpack(ids))
  for k, id in ipairs(ids) do
    if leased[k] and lease_fences(tonumber(leased[k]), tonumber(ARGV[successes_at - 1 + 2 * k])) then
      removed[#removed + 1] = id
    else
      stale[#stale + 1] = k
    end
  end
  if #removed > 0 then
    redis.call('ZREM', KEYS[2], unpack(removed))
    if heartbeat_lease_ms > 0 then
      -- A claim's heartbeat entry goes with its last lease (includes/lease-heartbeat.lua, inline: one look per claim).
      local done = {}
      for k = 1, successes_n do
        local identity = ARGV[successes_at - 1 + 2 * k]
        if not done[identity] then
          done[identity] = true
          local left = redis.call('ZRANGE', KEYS[2], identity, string.format('%.0f', tonumber(identity) + 1), 'BYSCORE', 'LIMIT', 0, 1)
          if #left == 0 then redis.call('ZREM', KEYS[15], identity) end
        end
      end
    end
    if outcomes_max_len > 0 then
      -- Each success's outcome (includes/outcome-add.lua, inline): its attempt, and its result when it gave one.
      local group = string.match(KEYS[3], ':g:([%w_%.%-]+):m$') or 'default'
      local headers = redis.call('HMGET', KEYS[3], unpack(removed))
      local results = {}
      for i = results_at, results_at + 2 * results_n - 1, 2 do results[ARGV[i]] = ARGV[i + 1] end
      for k, id in ipairs(removed) do
        local attempt = (headers[k] and tonumber(string.match(headers[k], '^(%d+)|')) or 0) + 1
        if results[id] then
          redis.call('XADD', KEYS[16], 'MAXLEN', '~', outcomes_max_len, '*', 'id', id, 'g', group, 'o', 'handled', 'a', attempt, 'r', results[id])
        else
          redis.call('XADD', KEYS[16], 'MAXLEN', '~', outcomes_max_len, '*', 'id', id, 'g', group, 'o', 'handled', 'a', attempt)
        end
      end
    end
    if keep_count > 0 then
      -- The history keeps what ran: the attempt (the envelope's plus the one in flight), when, the due time and the body.
      local headers = redis.call('HMGET', KEYS[3], unpack(removed))
      local bodies = group_queue and redis.call('HMGET', KEYS[10], unpack(removed)) or headers
      local records = {}
      for k, id in ipairs(removed) do
        if headers[k] and bodies[k] then
          local attempt, due = envelope_parse(headers[k])
          local _, _, body = envelope_parse(bodies[k])
          records[#records + 1] = id
          records[#records + 1] = (attempt + 1) .. '|' .. now .. '|' .. due .. '|' .. body
        end
      end
      handled_keep(KEYS[13], KEYS[14], records, now, keep_count, keep_age)
      -- An earlier handling's result of a reused id goes: a record shows its own call's result, or none.
      if results_n == 0 and redis.call('EXISTS', KEYS[13] .. 'r') == 1 then
        local ids_kept = {}
        for k = 1, #records, 2 do ids_kept[#ids_kept + 1] = records[k] end
        if #ids_kept > 0 then redis.call('HDEL', KEYS[13] .. 'r', unpack(ids_kept)) end
      end
      if results_n > 0 then
        -- Each call's result (delivery.result) beside its record, in the history's results hash (its name + 'r').
        local given, pairs_, none = {}, {}, {}
        for i = results_at, results_at + 2 * results_n - 1, 2 do given[ARGV[i]] = ARGV[i + 1] end
        for k = 1, #records, 2 do
          local id = records[k]
          if given[id] then
            pairs_[#pairs_ + 1] = id
            pairs_[#pairs_ + 1] = given[id]
          else
            none[#none + 1] = id
          end
        end
        if #pairs_ > 0 then redis.call('HSET', KEYS[13] .. 'r', unpack(pairs_)) end
        if #none > 0 then redis.call('HDEL', KEYS[13] .. 'r', unpack(none)) end
      end
    end
    -- The ids whose bodies go now: all of them, unless other groups still hold some.
    local finished = removed
    if group_queue then
      redis.call('HDEL', KEYS[3], unpack(removed))
      finished = groups_release(KEYS[9], removed)
    elseif redis.call('EXISTS', KEYS[9]) == 1 then
      local held = redis.call('HMGET', KEYS[9], unpack(removed))
      local delivered = {}
      finished = {}
      for k, id in ipairs(removed) do
        if held[k] then delivered[#delivered + 1] = id else finished[#finished + 1] = id end
      end
      for _, id in ipairs(groups_release(KEYS[9], delivered)) do finished[#finished + 1] = id end
    end
    if #finished > 0 then
      -- Since 0.6 an event may carry its own idempotency window (dedupe), a leading debounce may
      -- hold a trailing payload for it, and parents may wait for it or it may be one: the type's flow hash says when to look.
      local shared = group_queue and redis.call('HMGET', (limit_keys(KEYS[10])), 'bq', 'up', 'fp') or { flow[FLOW_BQ], flow[FLOW_UP], flow[FLOW_FP] }
      local windows = shared[1]
      if shared[2] then
        local given = {}
        for i = results_at, results_at + 2 * results_n - 1, 2 do given[ARGV[i]] = ARGV[i + 1] end
        if flow_notice_push(KEYS[10], finished, 'handled', given) > 0 then freed = freed % 2 + 2 end
      end
      if shared[3] then flow_drop(KEYS[10], finished) end
      local values = windows and redis.call('HMGET', KEYS[10], unpack(finished))
      redis.call('HDEL', KEYS[10], unpack(finished))
      if windows then
        local released = {}
        for _, id in ipairs(burst_release(KEYS[10], finished)) do released[id] = true end
        if next(released) then freed = freed - freed % 2 + 1 end
        local marks = {}
        for k, id in ipairs(finished) do
          local own = values[k] and tonumber(string.match(values[k], ';i=(%d+)[^"]*"%]$', -64))
          local w = own or window_ms
          if w > 0 and not released[id] then
            marks[#marks + 1] = string.format('%d', now + w)
            marks[#marks + 1] = id
          end
        end
        if #marks > 0 then redis.call('ZADD', KEYS[7], unpack(marks)) end
      elseif window_ms > 0 then
        -- One score for every mark, written once rather than converted from a number per mark.
        local marks = {}
        local until_ms = string.format('%d', now + window_ms)
        for i, id in ipairs(finished) do
          marks[2 * i - 1] = until_ms
          marks[2 * i] = id
        end
        redis.call('ZADD', KEYS[7], unpack(marks))
      end
    end
  end
  -- Progress and log lines its calls reported (since 0.6) go with the event, as its errors do.
  if #removed > 0 and flow[FLOW_RP] then
    local base = string.sub(KEYS[3], 1, -3)
    redis.call('HDEL', base .. ':pg', unpack(removed))
    redis.call('HDEL', base .. ':lg', unpack(removed))
  end
  -- An event that failed before, or whose lease ran out before it started, has an error recorded.
  if #removed > 0 and redis.call('EXISTS', KEYS[5]) == 1 then redis.call('HDEL', KEYS[5], unpack(removed)) end
  if #removed > 0 and redis.call('EXISTS', KEYS[12]) == 1 then redis.call('HDEL', KEYS[12], unpack(removed)) end
end
if #removed > 0 and flow[FLOW_KS] then keyed_release(KEYS[3], removed) end
if #removed > 0 and flow[FLOW_THR] then
  redis.call('HDEL', flow_key, 'thr')
  flow[FLOW_THR] = false
  freed = freed - freed % 2 + 1
end
