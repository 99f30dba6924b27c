-- The attempt and the class version of an envelope, in one match (a claim
-- reads both of every event): the body's version is the digits in front of
-- it, or 1 when it has none (JSON never starts with a digit; src/core/stored-body.ts).
local function envelope_attempt_version(value)
  local attempt, version = string.match(value, '^(%d+)|%d+|(%d*)')
  if not attempt then return 0, 1 end
  return tonumber(attempt), tonumber(version) or 1
end
