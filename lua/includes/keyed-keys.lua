-- A queue's keyed state (fairness per key, HandlerOptions.key and perKey),
-- in its slot, named after its meta key:
--   <queue>:kid        hash: id -> its key, for events sorted by key and not done
--   <queue>:kq:<key>   list: ready ids of the key, oldest first
--   <queue>:ring       list: keys with ready ids, in turn (round robin)
--   <queue>:kw         hash: key -> how many of its ids are ready
--   <queue>:kf:<key>   sorted set: id -> lease expiry (ms), its calls running
--   <queue>:kr:<key>   sorted set: when its calls of the last `kper` ms started
local function keyed_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return { id_key = own .. ':kid', list = own .. ':kq:', ring = own .. ':ring', waiting = own .. ':kw', running = own .. ':kf:', rate = own .. ':kr:' }
end
