-- A stored event is "<attempt>|<due ms>|<body json>": the two numbers that
-- scripts change sit in front so a transition never has to parse the JSON.
-- A value without a valid header (corrupted by hand) parses as attempt 0 with
-- the whole value as body: it is then claimed, fails to decode and is
-- dead-lettered, instead of making every script that touches it fail.
local function envelope_parse(value)
  local attempt, due, body = string.match(value, '^(%d+)|(%d+)|(.*)$')
  if not attempt then return 0, '0', value end
  return tonumber(attempt), due, body
end
