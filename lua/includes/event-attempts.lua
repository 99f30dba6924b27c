-- An event's own attempts (enqueue's maxAttempts, since 0.6; src/core/body-extras.ts),
-- read from the end of its stored value without parsing the JSON: only the extras
-- element, a string, ends a body with '"]'. Otherwise `default`, the handler's.
local function event_attempts(value, default)
  if string.byte(value, -2) ~= 34 then return default end
  return tonumber(string.match(value, ';a=(%d+)[^"]*"%]$', -48)) or default
end
