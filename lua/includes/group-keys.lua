-- Subscriber groups (fan-out). A type's due event is delivered to every group
-- in its registry; a named group G keeps its own state under <base>:g:<G>:
-- (headers 'attempt|due|' in :m, retries in :b, :r, :f, :d, :e), and the body
-- stays once in the type's meta hash, held while the pending hash counts the
-- groups that still hold the event.
-- The named group's own keys, from the type's meta key (<base>:m).
local function group_keys(meta_key, group)
  local own = string.sub(meta_key, 1, -3) .. ':g:' .. group
  return {
    meta = own .. ':m', schedule = own .. ':b', legacy = own .. ':s', ready = own .. ':r',
    in_flight = own .. ':f', dead = own .. ':d', errors = own .. ':e', error_log = own .. ':el',
    handled = own .. ':h', handled_index = own .. ':hi', heartbeats = own .. ':hl', progress = own .. ':pg', logs = own .. ':lg',
  }
end
