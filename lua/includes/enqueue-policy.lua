-- @include burst-keys
-- @include envelope-make
-- @include envelope-parse
-- @include priority-of
-- @include remove-from-any-state
-- @include schedule-add
-- @include schedule-remove

-- The windows of enqueue's options (since 0.6; docs/windows.md): debounce,
-- leading debounce, throttle and dedupe, one event at a time. `q` names the
-- queue's keys as remove_from_any_state takes them, plus recent (idempotency
-- marks) and flow (the flow hash); `now` is Redis's now, `due` the due time
-- the call asked for. Returns the event's status (1 scheduled, 0 duplicate,
-- 3 debounced, 4 throttled) and the due time it scheduled when that moved the
-- schedule's earliest due time earlier (false otherwise).
--
-- A debounced event keeps its burst in its body: the body's first element
-- (enqueued at) is when the burst began, and its extras' `;w=` is the burst's
-- maxWaitMs (0: none), written by the service on every debounce's body
-- (src/core/body-extras.ts) and rewritten here so the stored one wins.
--
-- A leading debounce keeps one record per id in the bursts hash:
--   '<quiet end ms>|<burst start ms>|<max wait ms>|<held due ms>|<held body>'
-- The held body (empty when none) is the trailing payload waiting while the
-- leading event is stored and not done: it is stored as a new event when that
-- event settles (handled in every group, or dead-lettered with no named group
-- holding it: includes/burst-release.lua), never beside it. The burst-ends
-- zset scores each record by its quiet end (+inf while it holds a payload), so
-- that ended records are dropped as later calls go.
local function enqueue_policy(q, mode, mode_ms, now, id, body, due)
  local bursts, burst_ends, throttles = burst_keys(q.meta)
  local stored = redis.call('HGET', q.meta, id)
  local attempt, stored_due = 0, nil
  if stored then attempt, stored_due = envelope_parse(stored) end
  local dead = stored and redis.call('ZSCORE', q.dead, id)
  -- Ran before: an attempt spent, or snoozed (its body counts the snoozes, `;s=`, at its end: a fold
  -- would reset them, and maxSnoozes would no longer hold).
  local ran = attempt > 0 or (stored and string.match(stored, ';s=%d+[^"]*"%]$', -64) ~= nil)
  -- A plain event not started: never run, no group holds it yet, and in the schedule (taken out here).
  local function unscheduled()
    if not stored or dead or ran or redis.call('HEXISTS', q.pending, id) == 1 then return false end
    return schedule_remove(q.schedule, id, stored_due) or redis.call('ZREM', q.legacy, id) == 1
  end
  -- A new event of its own: whatever is stored goes (the fence of replace), the id's mark with it.
  local function store_new(at, new_body)
    if stored then remove_from_any_state(q, id, stored_due) end
    redis.call('HSET', q.meta, id, envelope_make(0, at, new_body))
    redis.call('ZREM', q.recent, id)
    return schedule_add(q.schedule, { { at, id } }) and at
  end
  -- Back in the schedule at `at`: `at` when that moved the schedule's earliest due time earlier.
  local function reschedule(at)
    return schedule_add(q.schedule, { { at, id } }) and at
  end
  -- The body with its burst: began at `start`, bounded by `wait`.
  local function with_burst(start, wait)
    local head, tail = string.match(body, '^(.*;w=)%d+([^"]*"%])$')
    local b = head and (head .. wait .. tail) or body
    -- After the class version in front, when the body has one ('3|[...'; src/core/stored-body.ts).
    return (string.gsub(b, '^(%d*|?)%[%-?%d+', '%1[' .. start, 1))
  end

  if mode == 't' then
    -- Ended windows go as calls come, a few at a time: Redis is never held long.
    local ended = redis.call('ZRANGE', throttles, '-inf', now, 'BYSCORE', 'LIMIT', 0, 64)
    if #ended > 0 then redis.call('ZREM', throttles, unpack(ended)) end
    local until_ms = redis.call('ZSCORE', throttles, id)
    if until_ms and tonumber(until_ms) > now then return 4, false end
    if stored and not dead then return 0, false end
    redis.call('ZADD', throttles, now + mode_ms, id)
    return 1, store_new(due, body)
  end

  if mode == 'i' or mode == 'k' then
    redis.call('HSET', q.flow, 'bq', '1')
    local mark = redis.call('ZSCORE', q.recent, id)
    if not stored and mark and tonumber(mark) > now then return 0, false end
    if stored then
      if mode == 'k' and unscheduled() then
        -- keepLast: the payload and context change; the due time and attempts do not.
        redis.call('HSET', q.meta, id, envelope_make(attempt, stored_due, body))
        reschedule(tonumber(stored_due))
      end
      return 0, false
    end
    return 1, store_new(due, body)
  end

  if mode == 'd' then
    -- The burst of the stored event: when it began, and its bound (the stored one wins).
    local function burst_of()
      local _, _, stored_body = envelope_parse(stored)
      local start = tonumber(string.match(stored_body, '^%d*|?%[(%-?%d+)')) or now
      local wait = tonumber(string.match(stored_body, ';w=(%d+)[^"]*"%]$')) or 0
      if wait == 0 then wait = mode_ms end
      return start, wait
    end
    if unscheduled() then
      local start, wait = burst_of()
      local at = due
      if wait > 0 and start + wait < at then at = start + wait end
      redis.call('HSET', q.meta, id, envelope_make(0, at, with_burst(start, wait)))
      return 3, reschedule(at)
    end
    -- Due and waiting READY for a handler, never run, in no named group: the new payload takes its place there,
    -- and runs as soon as a handler is free. Stored anew instead, a steady stream of enqueues could keep a due
    -- event from ever running, its burst's bound passed. Kept where it waits only while that place stays right:
    -- the same priority, and no handler sorting the ready events by a key of the payload.
    if stored and not dead and not ran and not redis.call('ZSCORE', q.in_flight, id) and redis.call('HEXISTS', q.pending, id) == 0
      and priority_of(stored) == priority_of(body) and not redis.call('HGET', q.flow, 'keyed') then
      local start, wait = burst_of()
      redis.call('HSET', q.meta, id, envelope_make(0, stored_due, with_burst(start, wait)))
      return 3, false
    end
    local at = due
    if mode_ms > 0 and now + mode_ms < at then at = now + mode_ms end
    return 1, store_new(at, with_burst(now, mode_ms))
  end

  -- Leading ('l' with a trailing call, 'L' without).
  redis.call('HSET', q.flow, 'bq', '1')
  for _, ended in ipairs(redis.call('ZRANGE', burst_ends, '-inf', now, 'BYSCORE', 'LIMIT', 0, 16)) do
    redis.call('HDEL', bursts, ended)
    redis.call('ZREM', burst_ends, ended)
  end
  local record = redis.call('HGET', bursts, id)
  local quiet_end, start, wait, held_due, held
  if record then
    quiet_end, start, wait, held_due, held = string.match(record, '^(%d+)|(%-?%d+)|(%d+)|(%d*)|(.*)$')
    quiet_end, start, wait = tonumber(quiet_end), tonumber(start), tonumber(wait)
    -- A record changed by hand is no record.
    if not quiet_end or not start or not wait then record = nil end
  end
  local quiet = due - now
  local live = stored and not dead
  local function keep(q_end, held_at, held_body)
    redis.call('HSET', bursts, id, q_end .. '|' .. start .. '|' .. wait .. '|' .. held_at .. '|' .. held_body)
    redis.call('ZADD', burst_ends, held_body ~= '' and '+inf' or q_end, id)
  end
  if not record or (quiet_end <= now and held == '') then
    -- A new burst: due at once, unless an event of this id is running; then it waits for it.
    start, wait = now, mode_ms
    local first = with_burst(now, mode_ms)
    if live and not unscheduled() then
      keep(now + quiet, now, first)
      return 1, false
    end
    keep(now + quiet, '', '')
    return 1, store_new(now, first)
  end
  if wait == 0 then wait = mode_ms end
  if mode == 'L' then
    if held ~= '' and not live then
      -- The event it waited for settled without releasing it (dead-lettered on a lost lease): it goes now.
      keep(now + quiet, '', '')
      return 3, store_new(tonumber(held_due) or now, held)
    end
    keep(now + quiet, held_due, held)
    return 3, false
  end
  local at = now + quiet
  if wait > 0 and start + wait < at then at = start + wait end
  local trailing = with_burst(start, wait)
  if held ~= '' and live then
    keep(at, at, trailing)
    return 3, false
  end
  if live then
    -- Stored and not yet due: the trailing event released earlier, moved. Due (the leading one) or running: held.
    if tonumber(stored_due) > now and unscheduled() then
      redis.call('HSET', q.meta, id, envelope_make(0, at, trailing))
      keep(at, '', '')
      return 3, reschedule(at)
    end
    keep(at, at, trailing)
    return 3, false
  end
  keep(at, '', '')
  return 3, store_new(at, trailing)
end
