-- An in-flight entry's score is its lease expiry (ms) times 1000 plus the
-- claim's attempt modulo 1000. The attempt is the fence for the handler's
-- result: completing checks the score alone, without reading the envelope,
-- and a claim need not rewrite the envelope. While in flight the envelope
-- keeps the attempt before the claim (in flight = envelope attempt + 1); a
-- transition out of flight writes the attempt it ends. Attempts 1000 apart
-- share a fence: a result would have to outlive 1,000 expired leases to
-- pass for a newer attempt. 0.2 scored a lease by its expiry alone, with the
-- attempt in the envelope: such scores are below SCALED_LEASE_FROM (ms stay
-- below 1e14 until the year 5138; scaled ones are above 1e15). Scaled scores
-- stay exact in a double until the year 2255. The in-flight set's pin
-- (includes/lease-pin.lua, included before this file) is no lease.
local LEASE_SCALE = 1000
local SCALED_LEASE_FROM = 1e14

-- As a string: Lua would print a number this large in 14 significant digits.
local function lease_score(lease_until, attempt)
  return string.format('%.0f', lease_until * LEASE_SCALE + attempt % LEASE_SCALE)
end

-- lease_score() for the events of one claim, which share an expiry: its
-- digits are written once, and each attempt's three digits once per call,
-- instead of a double formatted per event.
local function lease_scores_until(lease_until)
  local prefix = string.format('%d', lease_until)
  local suffixes = {}
  return function(attempt)
    local a = attempt % LEASE_SCALE
    local suffix = suffixes[a]
    if not suffix then
      suffix = string.format('%03d', a)
      suffixes[a] = suffix
    end
    return prefix .. suffix
  end
end

local function lease_is_scaled(score)
  return score >= SCALED_LEASE_FROM
end

local function lease_expiry(score)
  if score >= SCALED_LEASE_FROM then return math.floor(score / LEASE_SCALE) end
  return score
end

-- Whether an in-flight score is the lease of `attempt`. A 0.2 lease never
-- is: only the 0.2 process that claimed it reports on it, with 0.2's scripts.
local function lease_fences(score, attempt)
  return score >= SCALED_LEASE_FROM and score % LEASE_SCALE == attempt % LEASE_SCALE
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
