-- The hash of a parent's children's results, named after the type's meta key and the parent's id.
local function flow_results_key(meta_key, id)
  return string.sub(meta_key, 1, -3) .. ':fr:' .. id
end
