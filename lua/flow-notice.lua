-- Applies one child's notice to its parent (since 0.6, docs/flows.md), in the
-- parent's slot: once per edge and notice number, so a notice sent again
-- (a crash before its outbox entry went, a sweep beside the sender) or one
-- overtaken by a later one changes nothing. WAITING -> SCHEDULED once every
-- edge is done and its own due time has passed (at once when it has);
-- WAITING -> DEAD (reason dependency) when a child of edge policy 'fail' fails;
-- DEAD (dependency) -> SCHEDULED when that child is handled after all.
-- KEYS[1] meta: meta hash
-- KEYS[2] dead: dead zset
-- KEYS[3] errors: errors hash
-- KEYS[4] errorLog: error-log hash (id -> its last failures; includes/error-log-append.lua)
-- KEYS[5] legacySchedule: the side schedule (id -> due ms), which dispatch-due.lua drains
-- KEYS[6] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] id (string): the parent's id
-- ARGV[2] edge (string): the edge, '<child type>|<child id>'
-- ARGV[3] seq (number): the notice's number (its child's link counts them)
-- ARGV[4] outcome (string): 'handled', 'dead-lettered' or 'cancelled'
-- ARGV[5] result (string): the child's JSON result ('': none)
-- ARGV[6] failure (string): the child's error ('': none)
-- ARGV[7] wake_channel (string): wake channel
-- ARGV[8] wake_tag (string): wake message (the parent's queue tag)
-- REPLY (number): 0 nothing to do (no such parent or edge, or a notice applied before),
--         1 applied, 2 the parent is due, 3 the parent is dead-lettered (reason dependency; its
--         own parents' notice queued in its queue's outbox: the caller applies it).
-- @include flow-results-key
-- @include envelope-parse
-- @include envelope-make
-- @include error-log-append
-- @include flow-keys
-- @include flow-notice-push
-- @include now-ms

local waiting, flows = flow_keys(KEYS[1])
local raw = redis.call('HGET', flows, id)
if not raw then return 0 end
local record = cjson.decode(raw)
local edge_state = record.e[edge]
if not edge_state or seq <= (edge_state[4] or 0) then return 0 end
edge_state[4] = seq
local policy = edge_state[2]
local failed = outcome ~= 'handled' and policy == 'fail'
local child = { o = outcome }
if outcome ~= 'handled' and policy == 'ignore' then child.o = 'ignored' end
if result ~= '' then child.r = result end
if failure ~= '' then child.e = failure end
redis.call('HSET', flow_results_key(KEYS[1], id), edge, cjson.encode(child))
local was_done = edge_state[1] == 'd'
edge_state[1] = failed and 'f' or 'd'
if not failed and not was_done then record.n = record.n - 1 end
if failed and was_done then record.n = record.n + 1 end
redis.call('HSET', flows, id, cjson.encode(record))

local now = now_ms()
local kept_due = redis.call('ZSCORE', waiting, id)
local due
if kept_due then
  if failed then
    redis.call('ZREM', waiting, id)
    local reason = 'dependency: ' .. edge .. ' ' .. outcome
    redis.call('ZADD', KEYS[2], now, id)
    redis.call('HSET', KEYS[3], id, reason)
    error_log_append(KEYS[4], id, 0, now, reason)
    -- A parent that is itself a child tells its own parents, in its slot's outbox (the caller applies it).
    flow_notice_push(KEYS[1], { id }, 'dead-lettered', nil, reason)
    return 3
  end
  if record.n > 0 then return 1 end
  redis.call('ZREM', waiting, id)
  due = math.max(tonumber(kept_due), now)
else
  -- Dead-lettered for a child that failed: due again once every edge is done.
  if record.n > 0 or not redis.call('ZSCORE', KEYS[2], id) then return 1 end
  local why = redis.call('HGET', KEYS[3], id)
  if not why or string.sub(why, 1, 11) ~= 'dependency:' then return 1 end
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  due = now
end
local value = redis.call('HGET', KEYS[1], id)
if not value then return 1 end
local attempt, _, body = envelope_parse(value)
local at = string.format('%d', due)
redis.call('HSET', KEYS[1], id, envelope_make(attempt, at, body))
redis.call('ZADD', KEYS[5], at, id)
redis.call('PUBLISH', wake_channel, wake_tag .. '|' .. at)
return 2
