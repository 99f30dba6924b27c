-- A queue's flow keys (since 0.6, docs/flows.md), named after its type's meta
-- key as includes/burst-keys.lua names the window keys:
--   <queue>:wt  sorted set: parent id -> the due ms it keeps while it waits for its children (state WAITING)
--   <queue>:fl  hash: parent id -> its flow record, JSON {n, e}: how many edges are not done;
--               per edge ('<child type>|<child id>') [state 'p'|'d'|'f', onChildFailure,
--               the child's queue tag, the last notice applied]
--   <queue>:fr:<parent id>  hash: edge -> its child's result, JSON {o, r?, e?} (flow_results_key):
--               apart from the record, so that a notice writes one child's result, not all
--   <queue>:up  hash: child id -> its link, JSON {k, s, p}: its edge's name, how many notices
--               it sent, its parents [[queue tag, id], ...]
--   <queue>:fo  list: notices of children settled here, JSON {k, s, p, o, r?, e?}, until the
--               instance that settled them (or any dispatcher's sweep) applied them to each parent
local function flow_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return own .. ':wt', own .. ':fl', own .. ':up', own .. ':fo'
end
