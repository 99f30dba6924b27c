-- READY events with a priority (enqueue's `priority` above 0, since 0.6;
-- src/core/body-extras.ts) wait beside the ready list, which holds those of
-- priority 0, the best. Named after the queue's meta key, as
-- includes/group-keys.lua names a group's keys:
--   <queue>:rq  sorted set, id -> priority * 2^33 + a sequence number, so a
--               claim takes the best priority first and, within one, in the
--               order they became ready;
--   <queue>:ra  sorted set, id -> due ms: those due longer ago than the
--               handler's priorityAgingMs are served first (no starvation);
--   <queue>:rs  the sequence, from 1 again each time the set empties;
-- and the queue's flow hash (includes/limit-keys.lua) has rq = '1' while
-- the set holds events, so a claim, which reads that hash anyway, looks
-- at the set only then.
-- The type's <type>:pq (after its shared meta key) is set by the first
-- enqueue with a priority: until then nothing reads a body's priority.
local function priority_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return { queue = own .. ':rq', aging = own .. ':ra', seq = own .. ':rs', flow = own .. ':fc' }
end
