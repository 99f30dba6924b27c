-- @include envelope-parse
-- @include priority-marker

-- The stored values of `ids` in `meta_key` and their dues, when the type has
-- priorities (its marker after `shared_meta_key`); else nil: ready_add then
-- puts every id on the ready list without reading anything. A named group's
-- header holds the due, the type's meta the body.
local function ready_bodies(meta_key, shared_meta_key, ids)
  if #ids == 0 or redis.call('EXISTS', priority_marker(shared_meta_key)) == 0 then return nil, nil end
  local headers = redis.call('HMGET', meta_key, unpack(ids))
  local bodies = shared_meta_key == meta_key and headers or redis.call('HMGET', shared_meta_key, unpack(ids))
  local dues = {}
  for i = 1, #ids do
    local _, due = envelope_parse(headers[i] or '')
    dues[i] = due
  end
  return bodies, dues
end

