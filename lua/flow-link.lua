-- Links a child to a parent that waits for it (since 0.6, docs/flows.md), in
-- the child's slot: once linked, the child's settling (handled in every
-- group, dead-lettered, cancelled) queues a notice for the parent
-- (includes/flow-notice-push.lua). A child a flow stores next is linked
-- before it is stored (`expect`), so that no outcome of it goes unheard.
-- KEYS[1] meta: the type's meta hash
-- KEYS[2] recent: recent zset    (id -> end of its idempotency window ms)
-- KEYS[3] dead: dead zset
-- KEYS[4] errors: errors hash
-- KEYS[5] flow: the queue's flow hash (includes/limit-keys.lua): 'up' set, so that results look for links
-- KEYS[6] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] id (string): the child's id
-- ARGV[2] edge (string): the edge's name, '<child type>|<child id>'
-- ARGV[3] parent_tag (string): the parent's queue tag
-- ARGV[4] parent_id (string): the parent's id
-- ARGV[5] expect (flag): the caller stores the child next: linked even while it is not stored
-- REPLY (number): 1 linked to the stored child, 2 linked ahead of its store (expect), 3 not
--         linked: handled or cancelled within the idempotency window (the edge is done), 4
--         linked to a dead letter (its notice is queued: the caller applies the outbox), 0 not
--         linked: neither stored nor marked.
-- @include flow-keys
-- @include now-ms

local _, _, parents, notices = flow_keys(KEYS[1])
local stored = redis.call('HEXISTS', KEYS[1], id) == 1
if not stored then
  local mark = redis.call('ZSCORE', KEYS[2], id)
  if mark and tonumber(mark) > now_ms() then return 3 end
  if not expect then return 0 end
end
local raw = redis.call('HGET', parents, id)
local link = raw and cjson.decode(raw) or { k = edge, s = 0, p = {} }
local known = false
for _, p in ipairs(link.p) do
  if p[1] == parent_tag and p[2] == parent_id then known = true end
end
if not known then link.p[#link.p + 1] = { parent_tag, parent_id } end
redis.call('HSET', KEYS[5], 'up', '1')
if stored and redis.call('ZSCORE', KEYS[3], id) then
  link.s = link.s + 1
  local notice = { k = link.k, s = link.s, p = { { parent_tag, parent_id } }, o = 'dead-lettered' }
  local err = redis.call('HGET', KEYS[4], id)
  if err then notice.e = err end
  redis.call('RPUSH', notices, cjson.encode(notice))
  redis.call('HSET', parents, id, cjson.encode(link))
  return 4
end
redis.call('HSET', parents, id, cjson.encode(link))
return stored and 1 or 2
