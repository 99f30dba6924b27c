-- @include event-drop

-- Most dead letters one call drops: with a million stored, a step of 250 holds Redis about half a millisecond.
local DEAD_TRIM_MOST = 250

-- Dead-letter retention (keepDead, since 0.6): drops the oldest dead letters
-- over `keep_count` and those dead-lettered more than `keep_age` ms before
-- `now` (0: no such limit), at most DEAD_TRIM_MOST a call, so that a count lowered by
-- a redeploy trims over a few calls. k: dead, meta, shared_meta, pending,
-- errors, error_log. Costs a ZCARD and a look at the oldest entry while
-- nothing is due to go. Returns how many went.
local function dead_trim(k, now, keep_count, keep_age)
  local gone = 0
  if keep_count > 0 then
    local over = math.min(redis.call('ZCARD', k.dead) - keep_count, DEAD_TRIM_MOST)
    if over > 0 then
      local old = redis.call('ZRANGE', k.dead, 0, over - 1)
      redis.call('ZREM', k.dead, unpack(old))
      event_drop(k, old)
      gone = #old
    end
  end
  if keep_age > 0 then
    local cutoff = now - keep_age
    local oldest = redis.call('ZRANGE', k.dead, 0, 0, 'WITHSCORES')
    if gone < DEAD_TRIM_MOST and oldest[2] and tonumber(oldest[2]) < cutoff then
      local old = redis.call('ZRANGE', k.dead, '-inf', '(' .. cutoff, 'BYSCORE', 'LIMIT', 0, DEAD_TRIM_MOST - gone)
      if #old > 0 then
        redis.call('ZREM', k.dead, unpack(old))
        event_drop(k, old)
        gone = gone + #old
      end
    end
  end
  return gone
end
