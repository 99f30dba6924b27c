-- The outcome of a call, appended to its queue's outcome stream (since 0.6,
-- the outcomes option; one stream per type and partition, every group's):
-- fields id, g (the group, '*' for every group), o (outcome), a (attempt),
-- and r (the result, JSON) or e (the error). Capped at about `max_len`
-- entries (MAXLEN ~ trims whole nodes: cheap). The entry's id is its time and
-- its position.
-- (complete-and-claim.lua appends inline: a function defined there would cost every claim.)
local function outcome_add(stream_key, max_len, group, id, outcome, attempt, extra_field, extra)
  if max_len <= 0 then return end
  if extra then
    redis.call('XADD', stream_key, 'MAXLEN', '~', max_len, '*', 'id', id, 'g', group, 'o', outcome, 'a', attempt, extra_field, extra)
  else
    redis.call('XADD', stream_key, 'MAXLEN', '~', max_len, '*', 'id', id, 'g', group, 'o', outcome, 'a', attempt)
  end
end

