-- The group whose keys these are, from its meta key's name (<queue>:g:<group>:m;
-- a group name holds no ':'): 'default' for the queue's own.
local function outcome_group(meta_key)
  return string.match(meta_key, ':g:([%w_%.%-]+):m$') or 'default'
end
