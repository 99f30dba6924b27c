-- Reads a parent's children's results (since 0.6; lua/flow-notice.lua writes
-- them), for delivery.childResults(): a read, sent as a script so that a
-- handler's connection needs nothing more than the scripts it already runs.
-- KEYS[1] sharedMeta: the type's meta hash, after which the results hash is named (includes/flow-keys.lua)
-- KEYS[2] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- ARGV[1] id (string): the parent's id
-- REPLY (string[]): {edge, result JSON, ...}
-- @include flow-results-key

return redis.call('HGETALL', flow_results_key(KEYS[1], id))
