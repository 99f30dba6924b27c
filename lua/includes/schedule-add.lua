-- @include schedule-fill
-- @include schedule-target

-- Schedules entries (a list of {due, id} of ids not scheduled yet), in as few
-- calls as their due times allow: entries bound for one bucket go in one ZADD.
-- Returns true when the schedule's earliest due time moved earlier.
--
-- Entries spread over many buckets (due times drawn at random) make one run
-- per bucket. The bucket starts within the entries' range are read once, not
-- twice per run, and each run goes to the last bucket starting at or before
-- it, up to the next start. Only opening buckets changes which bucket that
-- is (a new part can join the group at the next start), so after a run that
-- opened buckets the index is read again.
local function schedule_add(index, entries)
  local sorted = true
  for k = 2, #entries do
    if entries[k][1] < entries[k - 1][1] then sorted = false break end
  end
  if not sorted then table.sort(entries, function(a, b) return a[1] < b[1] end) end
  local n = #entries
  local from, earlier = 1, false
  local bucket, lo, starts, s
  while from <= n do
    local due = entries[from][1]
    if not starts then
      local earliest
      bucket, lo, earliest = schedule_target(index, due)
      earlier = earlier or earliest
      starts = from < n and redis.call('ZRANGE', index, '(' .. string.format('%d', due), string.format('%d', entries[n][1]), 'BYSCORE', 'WITHSCORES') or {}
      s = 1
    end
    while s <= #starts and tonumber(starts[s + 1]) <= due do
      bucket, lo = starts[s], tonumber(starts[s + 1])
      s = s + 2
    end
    local limit = s <= #starts and tonumber(starts[s + 1]) or nil
    local to = from
    while to < n and (not limit or entries[to + 1][1] < limit) do to = to + 1 end
    if schedule_fill(index, bucket, lo, entries, from, to) then starts = nil end
    from = to + 1
  end
  return earlier
end
