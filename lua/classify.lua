-- Transition: READY (the ready list or the priority set) -> READY (its key's list), for a
-- handler that shares capacity fairly per key (HandlerOptions.key): each id
-- still in the ready list goes to the list of the key the handler's key
-- function gave it, and a key with nothing waiting joins the ring that
-- claims take turns from (includes/keyed-take.lua). An id no longer in the
-- ready list (claimed, cancelled meanwhile) is left alone.
-- KEYS[1] ready: ready list
-- KEYS[2] meta: meta hash (names the keyed lists and the flow hash)
-- KEYS[3] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1..] sorted {id: string, key: string}: each ready id and its key
-- REPLY (number): how many ids were sorted.
-- @include keyed-keys
-- @include limit-keys
-- @include priority-remove

local k = keyed_keys(KEYS[2])
local moved = 0
for i = sorted_at, sorted_at + 2 * sorted_n - 1, 2 do
  local id, key = ARGV[i], ARGV[i + 1]
  if redis.call('LREM', KEYS[1], 1, id) == 1 or priority_remove(KEYS[2], id) then
    redis.call('RPUSH', k.list .. key, id)
    redis.call('HSET', k.id_key, id, key)
    if redis.call('HINCRBY', k.waiting, key, 1) == 1 then redis.call('RPUSH', k.ring, key) end
    moved = moved + 1
  end
end
if moved > 0 then redis.call('HSET', (limit_keys(KEYS[2])), 'kc', '1', 'ks', '1') end
return moved
