-- A queue's flow-control keys (a type's or a group's, in its slot), named
-- after its meta key as includes/group-keys.lua names a group's:
--   <queue>:lim   hash: max, per (ms), conc: the limits the handlers' instances
--                 last registered (src/service/flow-control.ts)
--   <queue>:rl    sorted set: when each of the calls of the last `per` ms
--                 started (ms; members unique per claim)
--   <queue>:hold  string, expiring: while it exists nothing is claimed (a
--                 handler said its provider rate-limited it)
--   <queue>:thr   string, expiring: a claim found no room under `conc`; the
--                 next result that frees room wakes the instances
local function limit_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return own .. ':lim', own .. ':rl', own .. ':hold', own .. ':thr'
end
