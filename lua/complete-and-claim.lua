-- Transitions, in one round trip: marks the events claimed ahead whose
-- handlers started since, confirms those the reader is about to start (a
-- handler starts only once confirmed: a cancel, replace or pause that ran
-- first means never), then IN_FLIGHT -> (removed) for the events whose
-- handlers succeeded, then READY -> IN_FLIGHT (attempt + 1, leased until
-- now + lease) for as many events as the caller has free handler slots, or
-- READY -> DEAD for an event whose lease already expired on its last attempt.
-- Every result is fenced by the claim it belongs to (includes/lease-constants.lua): a
-- result of a claim that is no longer the one in flight (lease expired,
-- claimed again, replaced, cancelled) changes nothing.
-- The attempt in flight is the envelope's plus one, so completing reads only
-- the in-flight zset and claiming writes no envelope.
-- KEYS[1] ready: ready list
-- KEYS[2] inFlight: in-flight zset (id -> lease score, includes/lease-constants.lua)
-- KEYS[3] meta: meta hash
-- KEYS[4] dead: dead zset
-- KEYS[5] errors: errors hash
-- KEYS[6] slotGuard: slot guard: never written; declared so that Redis refuses the script
--         whole while a cluster moves the slot (docs/redis-layout.md, "Resharding")
-- KEYS[7] recent: recent zset    (id -> end of its idempotency window ms)
-- KEYS[8] claimLog: claim log of the calling reader: what its last claim took, so that a
--         claim whose reply was lost can be given back (release-claim.lua)
-- KEYS[9] pending: pending hash   (id -> how many groups still hold the event; includes/group-keys.lua)
-- KEYS[10] sharedMeta: the type's meta hash, where bodies live: KEYS[3] itself for the
--         default group; a named group's KEYS[3] holds only headers 'attempt|due|'
-- KEYS[11] paused: paused flag: while it exists nothing is claimed
-- KEYS[12] errorLog: error-log hash (id -> its last failures; includes/error-log-append.lua)
-- KEYS[13] handled: handled hash (id -> 'attempt|handled at|due|body'; includes/handled-keep.lua)
-- KEYS[14] handledIndex: handled index zset (id -> handled at ms)
-- KEYS[15] heartbeats: heartbeat zset ('<claim identity>:<id>' -> lapses at ms; includes/lease-heartbeat.lua)
-- ARGV[1] most (number): most events to claim (0: only complete)
-- ARGV[2] lease_ms (number): lease ms
-- ARGV[3] max_attempts (number): max attempts
-- ARGV[4] window_ms (number): idempotency window ms: completed ids are marked in the
--         recent zset for that long, so enqueueing one again is a duplicate (0: no marks)
-- ARGV[5] token (string): token of this claim, kept in the claim log with what it took
--         ('': no log)
-- ARGV[6] start_now (number): how many of the events claimed start at once (free slots):
--         their leases are written started; the rest wait in the reader, not started
-- ARGV[7] keep_count (number): keepHandled: how many handled events to keep (0: none)
-- ARGV[8] keep_age (number): keepHandled: how long to keep them, ms (0: no age limit)
-- ARGV[9] max_version (number): the newest class version the reader reads: an event
--         written by a newer one is not claimed but left, no attempt spent, in the
--         queue's list for its version (includes/newer-key.lua), which readers of that
--         version or newer take from first
-- ARGV[10] sorts_by_key (flag): the reader sorts ready events by key (its handler's key
--         option, lua/classify.lua): its claims are stamped in the flow hash
--         (kseen). When not: while the queue is keyed it takes from the
--         ready list only once no reader that sorts has claimed for
--         SORTER_GONE_MS, so that no event is left unsorted there once the
--         handlers that sorted stopped, and per-key limits hold while they run
-- ARGV[11] aging_ms (number): priorityAgingMs: a READY event with a priority due longer ago
--         than this is served before the others, by due time (0: never; includes/priority.lua)
-- ARGV[12] heartbeat_lease_ms (number): the heartbeat lease (since 0.6): each claim's entry in the
--         heartbeat zset lapses this long from now unless renewed; successes drop theirs (0: none)
-- ARGV[13..] started {id: string, claim: number}: each event claimed ahead whose handler
--         started, and the identity of the claim that took it
-- ARGV[..] confirmations {id: string, claim: number}: each event claimed ahead that the
--         reader is about to start (writes nothing): refused unless its lease is still
--         that claim's and the type is not paused
-- ARGV[..] successes {id: string, claim: number}: each succeeded event
-- REPLY {now: number, stale: number[], claimed: string[], dead: unknown[], paused: flag, claim_score: string, left: number, throttled_ms: number, freed: flag, refused: number[]}:
--          Redis now ms, {position of each succeeded event not completed},
--          {id, envelope, ...} claimed, {id, attempt, ...} dead-lettered,
--          paused, identity of this claim's leases (not-started score) or '',
--          how many events this call left for a newer version,
--          ms to wait when the queue's limits left no room (-1: until a running
--          call ends; 0: not held back; includes/limit-room.lua),
--          whether completions freed room a claim had found missing,
--          {position (from 1) of each confirmation refused: its lease is no
--          longer that claim's (cancelled, replaced, expired; the handler must
--          not start), or the type is paused (it goes back unstarted)}.
-- The claim takes no more than the queue's limits allow (src/service/flow-control.ts).
-- Positions count the succeeded events from 1. Listing the stale ones, not a
-- flag per event, keeps the usual reply (every success completed) short.
-- A claimed event's envelope is returned as stored: its attempt is the one
-- before this claim (the claim's is one more), and the caller splits it.
-- @include envelope-attempt-version
-- @include envelope-parse
-- @include expire-optional
-- @include error-log-append
-- @include handled-keep
-- @include groups-release
-- @include lease-claim-scores
-- @include lease-fences
-- @include lease-pin-constants
-- @include lease-unpin-if-idle
-- @include keyed-keys
-- @include keyed-release
-- @include keyed-take
-- @include limit-keys
-- @include limit-room
-- @include newer-key
-- @include now-ms-us

local group_queue = KEYS[10] ~= KEYS[3]
-- The queue's flow state, read once: limits, a hold, a full mark, events left for a newer version.
local flow_key = limit_keys(KEYS[3])
local flow = redis.call('HMGET', flow_key, unpack(FLOW_FIELDS))

-- Each batch costs a fixed number of calls, whatever its size: in a script,
-- the calls, not the work they do, are most of the cost.
local stale = {}
local removed = {}
local now, now_us = now_ms_us()
-- @include claim/mark-started
-- @include claim/confirm
-- Instances with the key option beside ones without (a deploy changing it, a mismatch the log warns of):
-- those without leave the ready list to those with it while these claim, and take over once they are gone.
local SORTER_GONE_MS = 60000
local sorter_here = flow[FLOW_KSEEN] and now - tonumber(flow[FLOW_KSEEN]) < SORTER_GONE_MS
if sorts_by_key and most > 0 then redis.call('HSET', flow_key, 'kseen', now) end
-- @include claim/complete
-- @include claim/room
-- @include claim/take-newer
-- @include claim/take-keyed
-- @include claim/take-ready
-- @include claim/lease
return {now, stale, claimed, dead, 0, not_started, n_left, 0, freed, refused}
