-- An in-flight entry's score is its lease expiry (ms) times 1000 plus three
-- digits that make the claim unique: the microseconds within the millisecond
-- of the Redis clock when the claim ran, rounded down to even, plus 1 once
-- the handler has started (a claim for a free slot starts at once; an event
-- claimed ahead is marked when it starts, includes in complete-and-claim.lua).
-- The score with its last bit cleared is the claim's identity: every result
-- (success, retry, dead letter, give-back) names it and applies only while the
-- lease still has it. A replace, a cancel and a new enqueue, a replay or an
-- expired lease each end the claim, and the next claim of that id runs in
-- another script call, at another microsecond: a result of an earlier claim
-- matches nothing. (Two claims of one id could share a score only if Redis's
-- clock stepped back onto the very microsecond and lease length of the first.)
-- The attempt in flight is the envelope's plus one: a claim writes no envelope.
-- Scores stay exact in a double until the year 2255. 0.2 scored a lease by
-- its expiry alone: such scores are below SCALED_LEASE_FROM (ms stay below
-- 1e14 until the year 5138; scaled ones are above 1e15). The in-flight set's
-- pin (includes/lease-pin-constants.lua) is no lease.
local LEASE_SCALE = 1000

local SCALED_LEASE_FROM = 1e14
