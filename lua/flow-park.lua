-- Transition (since 0.6): (none) -> WAITING: a parent stored to wait for its
-- children (enqueueFlow, enqueue's `after`), before any child is stored or
-- linked, so that every child's notice finds it (docs/flows.md). The same
-- parent sent again while it waits (a flow call re-sent after a crash) gains
-- the edges it lacks and keeps those it has.
-- KEYS[1] meta: meta hash
-- KEYS[2] recent: recent zset    (id -> end of its idempotency window ms)
-- KEYS[3] flow: the queue's flow hash (includes/limit-keys.lua): 'fp' set, so that results drop flow records
-- KEYS[4] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] id (string): the parent's id
-- ARGV[2] delay_ms (number): due this long after now (Redis clock) once its children are done
-- ARGV[3] at_ms (number): or at this time (ms; -1: use delay_ms)
-- ARGV[4] body (string): the parent's body
-- ARGV[5..] edges {key: string, policy: string, tag: string}: each child ('<type>|<id>'), its
--         onChildFailure ('fail', 'ignore' or 'continue') and its queue's key tag
-- REPLY (number): 1 stored waiting, 2 already waiting (edges it lacked added), 0 a duplicate:
--         stored and not waiting, or handled or cancelled within the idempotency window.
-- @include flow-keys
-- @include now-ms

local waiting, flows = flow_keys(KEYS[1])
if redis.call('HEXISTS', KEYS[1], id) == 1 then
  local raw = redis.call('HGET', flows, id)
  if not raw or not redis.call('ZSCORE', waiting, id) then return 0 end
  local record = cjson.decode(raw)
  for i = edges_at, edges_at + 3 * edges_n - 1, 3 do
    if not record.e[ARGV[i]] then
      record.e[ARGV[i]] = { 'p', ARGV[i + 1], ARGV[i + 2], 0 }
      record.n = record.n + 1
    end
  end
  redis.call('HSET', flows, id, cjson.encode(record))
  return 2
end
local now = now_ms()
local mark = redis.call('ZSCORE', KEYS[2], id)
if mark and tonumber(mark) > now then return 0 end
local due = at_ms >= 0 and at_ms or now + delay_ms
local record = { n = 0, e = {} }
for i = edges_at, edges_at + 3 * edges_n - 1, 3 do
  if not record.e[ARGV[i]] then
    record.e[ARGV[i]] = { 'p', ARGV[i + 1], ARGV[i + 2], 0 }
    record.n = record.n + 1
  end
end
redis.call('HSET', KEYS[1], id, '0|' .. string.format('%d', due) .. '|' .. body)
redis.call('ZADD', waiting, due, id)
redis.call('HSET', flows, id, cjson.encode(record))
redis.call('HSET', KEYS[3], 'fp', '1')
return 1
