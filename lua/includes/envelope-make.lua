local function envelope_make(attempt, due, body)
  return attempt .. '|' .. due .. '|' .. body
end
