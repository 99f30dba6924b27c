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
-- pin (includes/lease-pin.lua, included before this file) is no lease.
local LEASE_SCALE = 1000
local SCALED_LEASE_FROM = 1e14

-- The two scores of one claim's leases, which share an expiry and a
-- microsecond: not started, and started. Strings: Lua would print numbers
-- this large in 14 significant digits.
local function lease_claim_scores(lease_until, us)
  local prefix = string.format('%d', lease_until)
  local even = us - us % 2
  return prefix .. string.format('%03d', even), prefix .. string.format('%03d', even + 1)
end

local function lease_is_scaled(score)
  return score >= SCALED_LEASE_FROM
end

local function lease_expiry(score)
  if score >= SCALED_LEASE_FROM then return math.floor(score / LEASE_SCALE) end
  return score
end

-- Whether the handler of a scaled lease has started (its last bit).
local function lease_started(score)
  return score % 2 == 1
end

-- Whether an in-flight score is the lease of the claim `identity` names
-- (that claim's not-started score). A 0.2 lease never is: only the 0.2
-- process that claimed it reports on it, with 0.2's scripts.
local function lease_fences(score, identity)
  return score >= SCALED_LEASE_FROM and score - score % 2 == identity
end

-- Earliest moment the type's dispatcher must look again: head of the schedule
-- or the first lease to expire; -1 when neither holds anything.
-- The schedule index's scores are its buckets' earliest due times, so its
-- head is the schedule's. 0.2 leases sort before every scaled one, so when
-- the head is one of them the first scaled lease is read too.
local function next_due(schedule_index, in_flight_key)
  local s = redis.call('ZRANGE', schedule_index, 0, 0, 'WITHSCORES')
  local l = redis.call('ZRANGE', in_flight_key, 0, 0, 'WITHSCORES')
  local best = -1
  if s[2] then best = tonumber(s[2]) end
  local function consider(at)
    if best < 0 or at < best then best = at end
  end
  if l[2] and l[1] ~= LEASE_PIN then
    local head = tonumber(l[2])
    consider(lease_expiry(head))
    if not lease_is_scaled(head) then
      local scaled = redis.call('ZRANGE', in_flight_key, SCALED_LEASE_FROM, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
      if scaled[2] then consider(lease_expiry(tonumber(scaled[2]))) end
    end
  end
  return best
end
