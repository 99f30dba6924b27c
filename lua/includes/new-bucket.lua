-- A free name for a new bucket starting at `lo`, sorting after every bucket
-- that starts there.
local function new_bucket(index, lo)
  local last = redis.call('ZRANGE', index, lo, lo, 'BYSCORE', 'REV', 'LIMIT', 0, 1)[1]
  local name = tostring(lo)
  if last then
    local base, n = string.match(last, '^(.*)~(%d+)$')
    name = base and (base .. '~' .. string.format('%09d', tonumber(n) + 1)) or (last .. '~000000001')
  end
  -- Taken by a bucket whose earliest due has changed since it was named.
  while redis.call('ZSCORE', index, name) do name = name .. '~000000001' end
  return name, last
end
