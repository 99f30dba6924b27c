-- @include flow-keys
-- @include flow-results-key

-- Parents `ids` settled for good (handled, cancelled, purged): their flow records and results go.
local function flow_drop(meta_key, ids)
  local _, flows = flow_keys(meta_key)
  redis.call('HDEL', flows, unpack(ids))
  local results = {}
  for i, id in ipairs(ids) do results[i] = flow_results_key(meta_key, id) end
  redis.call('UNLINK', unpack(results))
end
