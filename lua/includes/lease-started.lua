-- Whether the handler of a scaled lease has started (its last bit).
local function lease_started(score)
  return score % 2 == 1
end
