-- The priority at the end of a stored value (0: none; since 0.6), read without
-- parsing the JSON: only the extras element, a string, ends a body with '"]'
-- (src/core/body-extras.ts).
local function priority_of(value)
  if not value or string.byte(value, -2) ~= 34 then return 0 end
  return tonumber(string.match(value, ';p=(%d+)[^"]*"%]$', -48)) or 0
end
