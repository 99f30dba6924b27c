local function envelope_attempt(value)
  return tonumber(string.match(value, '^(%d+)|%d+|')) or 0
end
