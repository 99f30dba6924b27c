-- Lua's unpack takes at most ~8,000 values: a large dispatch writes field/value
-- pairs in slices, never failing halfway (a script's earlier writes stay).
local function hset_pairs(key, flat)
  for from = 1, #flat, 2000 do
    redis.call('HSET', key, unpack(flat, from, math.min(from + 1999, #flat)))
  end
end
