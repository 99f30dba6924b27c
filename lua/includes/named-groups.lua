-- @include groups-constants

-- Named groups of a registry (the default group keeps the type's own keys);
-- with `delivering`, only those new events go to (not the ones being removed).
local function named_groups(registry_key, delivering)
  local named = {}
  local flat = redis.call('HGETALL', registry_key)
  for i = 1, #flat, 2 do
    local group = flat[i]
    if group ~= 'default' and not (delivering and flat[i + 1] == GROUP_REMOVING) then named[#named + 1] = group end
  end
  return named
end
