-- Transition: IN_FLIGHT -> READY (head of the list), no attempt spent, and
-- the queue held: the handler said its provider rate-limited it
-- (Delivery.rateLimited(ms), or a thrown RateLimited). No instance claims
-- from the queue until the hold ends; a longer hold already set stays.
-- Fenced by the claim, like complete-and-claim.lua.
-- KEYS[1] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[2] ready: ready list
-- KEYS[3] meta: meta hash (names the queue's flow hash, includes/limit-keys.lua)
-- KEYS[4] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[5] outcomes: outcome stream (since 0.6; includes/outcome-add.lua)
-- ARGV[1] id (string): the event's id
-- ARGV[2] claim (number): identity of the claim that ran it (its not-started lease score)
-- ARGV[3] hold_ms (number): how long to hold the queue, ms
-- ARGV[4] outcomes_max_len (number): the outcomes option's maxLen: the stream's cap (0: outcomes off)
-- REPLY {given_back: flag, held_ms: number}: given back (false when the claim was stale;
-- the hold is set either way: the provider's word holds for every call), and ms until the
-- queue's hold ends (a longer one already set included): the caller wakes the readers of
-- every instance then.
-- @include lease-fences
-- @include keyed-release
-- @include lease-give-back
-- @include limit-keys
-- @include now-ms
-- @include outcome-add
-- @include outcome-group
-- @include envelope-parse

local flow_key = limit_keys(KEYS[3])
local now = now_ms()
local until_ms = now + hold_ms
local held = tonumber(redis.call('HGET', flow_key, 'hold') or '') or 0
if held < until_ms then
  redis.call('HSET', flow_key, 'hold', string.format('%d', until_ms))
  held = until_ms
end
local score = redis.call('ZSCORE', KEYS[1], id)
if not score or not lease_fences(tonumber(score), claim) then return {0, held - now} end
lease_give_back(KEYS[1], KEYS[2], { id })
keyed_release(KEYS[3], { id })
if outcomes_max_len > 0 then
  -- The attempt that ran: the stored one plus the one in flight (the hold spends none).
  local attempt = envelope_parse(redis.call('HGET', KEYS[3], id) or '0|0|')
  outcome_add(KEYS[5], outcomes_max_len, outcome_group(KEYS[3]), id, 'rate-limited', attempt + 1)
end
return {1, held - now}
