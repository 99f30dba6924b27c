-- A queue's flow state, in its slot, named after its meta key as
-- includes/group-keys.lua names a group's keys:
--   <queue>:fc   hash, read whole by every claim in one call:
--                max, per (ms), conc: the limits the handlers' instances
--                  registered last (src/redis/flow-limits.ts);
--                hold: until when (ms) nothing is claimed (a handler said its
--                  provider rate-limited it, lua/rate-limited.lua);
--                thr: '1' once a claim found no room under conc (the next
--                  result that frees room wakes the instances);
--                v: '1' while readers left events for a newer class version
--                  (includes/newer-key.lua);
--                kmax, kper, kconc: each key's limits (HandlerOptions.perKey);
--                keyed: '1' while the handler registered last sorts events by
--                  key (HandlerOptions.key): claims take from the keys in turn;
--                kc: '1' while sorted ids wait (includes/keyed-keys.lua);
--                ks: '1' once ids were sorted by key: results release their keys;
--                kseen: when (ms) a reader that sorts by key last claimed: while
--                  that is recent, readers that do not sort leave the ready
--                  list to it (lua/complete-and-claim.lua);
--                mv: until when (ms) nothing is claimed because the type's
--                  partitions are changing (src/redis/move-pause.ts): the
--                  queues of the setting moved from are paused, and those of
--                  the setting moved to wait until the others' calls and rate
--                  windows are over, so that the limits hold across both;
--                mvs: when (ms) this queue was first paused for a move;
--                rq: '1' while the queue's priority set holds events
--                  (includes/priority-keys.lua): a claim looks there only then;
--                rp: '1' once a handler reported progress or log lines here
--                  (lua/report-calls.lua, since 0.6): successes drop them;
--                bq: '1' once an event with its own dedupe window, or a
--                  leading debounce, was enqueued here (includes/enqueue-policy.lua,
--                  since 0.6): completions read those windows and release
--                  held trailing payloads (includes/burst-release.lua)
--                up: '1' once a child was linked to a parent here (lua/flow-link.lua,
--                  since 0.6): settling an event looks for its link
--                fp: '1' once a parent waited here (lua/flow-park.lua, since
--                  0.6): a handled event drops its flow record
--   <queue>:rl   sorted set: when each call of the last `per` ms started
--                (ms; members unique per claim)
local function limit_keys(meta_key)
  local own = string.sub(meta_key, 1, -3)
  return own .. ':fc', own .. ':rl'
end

-- The fields of the flow hash, as one HMGET reads them (complete-and-claim.lua),
-- and each one's place in its reply: scripts read `flow[FLOW_THR]`, never a
-- number (test/embedded-lua.test.ts checks that the two lists agree). Locals,
-- not a table of names: reading one costs nothing more than a number.
local FLOW_FIELDS = { 'max', 'per', 'conc', 'hold', 'thr', 'v', 'kmax', 'kper', 'kconc', 'keyed', 'kc', 'ks', 'kseen', 'mv', 'rq', 'rp', 'bq', 'up', 'fp' }
local FLOW_MAX, FLOW_PER, FLOW_CONC, FLOW_HOLD, FLOW_THR, FLOW_V, FLOW_KMAX = 1, 2, 3, 4, 5, 6, 7
local FLOW_KPER, FLOW_KCONC, FLOW_KEYED, FLOW_KC, FLOW_KS, FLOW_KSEEN, FLOW_MV = 8, 9, 10, 11, 12, 13, 14
local FLOW_RQ, FLOW_RP, FLOW_BQ, FLOW_UP, FLOW_FP = 15, 16, 17, 18, 19
