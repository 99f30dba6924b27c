-- The version of the event class that wrote an envelope's body: a body of
-- version 2 and up starts with '<version>|' (src/core/stored-body.ts), JSON
-- never starts with a digit, and a body without one is version 1.
local function envelope_version(value)
  return tonumber(string.match(value, '^%d+|%d+|(%d+)|')) or 1
end
