-- Transition: none. A result that ended a call (a retry, a dead letter, a
-- hold) freed room under the queue's concurrency limit: if a claim had
-- found it full (includes/limit-keys.lua), the instances are told to look
-- now instead of at their next poll.
-- KEYS[1] meta: meta hash (names the queue's flow hash)
-- KEYS[2] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] wake_channel (string): wake channel
-- ARGV[2] wake_message (string): wake message: the queue's tag, then '|-1'
-- REPLY (number): 1 when someone was waiting.
-- @include limit-keys

if redis.call('HDEL', (limit_keys(KEYS[1])), 'thr') == 0 then return 0 end
redis.call('PUBLISH', wake_channel, wake_message)
return 1
