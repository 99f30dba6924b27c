// The keys of one queue, as RedisLayout (src/redis/redis-layout.ts) names them.

/**
 * Every key of one event type (or of one partition of a partitioned type)
 * carries the same hash tag, so every script touches a single hash slot and
 * the service runs unchanged on Redis Cluster. The type lives in the key, not
 * in every member, to keep per-event memory low.
 */
export interface TypeKeys {
  /** The event type, for metrics. */
  readonly type: string;
  /** Names the queue: the hash tag's content (the type, or `type#partition`), then `|group` for a named group's keys. */
  readonly tag: string;
  /** The subscriber group these keys deliver to: `default`, or a group's name. */
  readonly group: string;
  /** The tag of the queue (type or partition) these keys belong to: `tag` itself, or its queue's for a group. */
  readonly queueTag: string;
  /**
   * Hash: id -> envelope `attempt|due|body`. A named group's own hash holds
   * only its header, `attempt|due|`: the body is stored once, in `sharedMeta`.
   */
  readonly meta: string;
  /** The type's hash of envelopes, where bodies live: `meta` itself for the default group. */
  readonly sharedMeta: string;
  /**
   * Hash: group name -> registered at ms, the groups a due event is delivered
   * to. A named group's keys name a hash that is never written here: its own
   * retries are delivered to it alone.
   */
  readonly groups: string;
  /** The type's group registry, `groups` of its default group: a named group's own `groups` is never written. */
  /** String: set once an event of the type was enqueued with a priority (lua/includes/priority.lua); until then nothing reads one. */
  readonly priorityMarker: string;
  readonly sharedGroups: string;
  /** Hash: id -> how many groups still hold the event, for events delivered to named groups. */
  readonly pending: string;
  /** String: while it exists, the type's events are neither dispatched nor claimed, in every instance. */
  readonly paused: string;
  /**
   * String, set with the queue's first group or schedule registration and
   * removed only by obliterate(): gone, it says Redis lost the registrations (lua/dispatch-due.lua).
   */
  readonly marker: string;
  /** String, since 0.6: set by obliterate() (lua/obliterate.lua) with when it ran; while it exists no lost registration is restored. */
  readonly tombstone: string;
  /** String: the same for the recurring schedules kept here (src/service/recurring-schedules.ts). */
  readonly recurringMarker: string;
  /** Hash: recurring schedule name -> its definition (JSON); a partitioned type keeps them in partition 0. */
  readonly recurring: string;
  /**
   * Sorted set: bucket name -> earliest due ms in that bucket; the buckets,
   * `${schedule}:<name>`, are small sorted sets id -> due ms. State SCHEDULED.
   * Buckets keep Redis's compact encoding: lua/includes/schedule-buckets-constants.lua explains.
   */
  readonly schedule: string;
  /** Sorted set: id -> due ms: 0.1's schedule; since 0.6 also trailing payloads a leading debounce released (lua/includes/burst-release.lua). */
  readonly legacySchedule: string;
  /** List of ids due now, oldest first. State READY. */
  readonly ready: string;
  /**
   * Sorted set: id -> lease expiry ms * 1000 + the claim's microsecond, its
   * last bit set once the handler started (lua/includes/lease-constants.lua). State IN_FLIGHT.
   * While it holds a lease it also holds LEASE_PIN, which is no event.
   */
  readonly inFlight: string;
  /**
   * Hash: class version -> when a reader of it last took from its list (or a
   * reader first left one there); the lists `${newer}:<version>` hold, oldest
   * first, the READY events a reader of an older class version left for one
   * that can read them (lua/includes/newer-key.lua).
   */
  readonly newer: string;
  /** Hash: id -> 'token|record' of an event taken out of this queue for its new partition (lua/migrate-out.lua). */
  readonly moving: string;
  /** Sorted set: token -> ms, the moves stored in this queue in the last day (lua/migrate-in.lua): a move sent twice is stored once. */
  readonly moved: string;
  /** Sorted set: id -> dead-lettered at ms. State DEAD. */
  readonly dead: string;
  /** Hash: id -> last error, for events that failed at least once. */
  readonly errors: string;
  /** Hash: id -> its last failures, JSON [[attempt, at ms, message], ...] (lua/includes/error-log-append.lua). */
  readonly errorLog: string;
  /** Hash: id -> 'attempt|handled at|due|body' of events handled lately, when keepHandled is on (lua/includes/handled-keep.lua). */
  readonly handled: string;
  /** Sorted set: id -> handled at ms, the index of `handled`. */
  readonly handledIndex: string;
  /**
   * Sorted set: id -> end of its idempotency window (ms), for events handled or
   * cancelled within the window: enqueueing such an id again is a duplicate.
   */
  readonly recent: string;
  /**
   * Stream (since 0.6, the outcomes option): the outcome of each call settled
   * in this queue, every group's, capped (lua/includes/outcome-add.lua); a
   * group's keys name its queue's.
   */
  readonly outcomes: string;
  /** Since 0.6, a queue's window keys (lua/includes/burst-keys.lua): leading debounce bursts, their quiet ends, throttle windows. */
  readonly bursts: string;
  readonly burstEnds: string;
  readonly throttles: string;
  /** Prefix of each reader's claim log key (`<prefix><reader id>`): what its last claim took. */
  readonly claimLogPrefix: string;
  /**
   * Never written. Every script declares it, so while a cluster moves this
   * slot to another master (some keys here, some there) Redis refuses each
   * script whole with TRYAGAIN instead of running it against half the keys.
   */
  readonly slotGuard: string;
  /**
   * The queue's flow state (lua/includes/limit-keys.lua): a hash of its limits,
   * holds and marks, read whole by every claim.
   */
  readonly flow: string;
  /** When each call of the rate window started (lua/includes/limit-keys.lua). */
  readonly rateWindow: string;
  /**
   * The queue's keyed state (HandlerOptions.key, lua/includes/keyed-keys.lua):
   * id -> key; per key `${keyedList}<key>` (ready ids), `${keyRunning}<key>`
   * (calls running) and `${keyRate}<key>` (rate window); the ring of keys in
   * turn; key -> how many of its ids are ready.
   */
  readonly keyedIds: string;
  readonly keyedList: string;
  readonly keyRing: string;
  readonly keysWaiting: string;
  readonly keyRunning: string;
  readonly keyRate: string;
  /**
   * READY events with a priority (since 0.6; lua/includes/priority.lua):
   * sorted set id -> priority * 2^33 + sequence (the order claims take them),
   * sorted set id -> due ms (aging), and the sequence's counter. Those of
   * priority 0 stay on `ready`.
   */
  readonly readyByPriority: string;
  readonly readyAging: string;
  readonly readySeq: string;
  /**
   * Sorted set (since 0.6): '<claim identity>' (one per claim) -> when the
   * heartbeat lease of its leases lapses (ms) unless its instance renews it
   * (heartbeatMs; lua/includes/lease-heartbeat.lua). Beside `inFlight`,
   * whose lease stays the hard bound.
   */
  readonly heartbeats: string;
  /** Hash (since 0.6): id -> 'attempt|at ms|JSON' of the last progress a handler reported (delivery.progress). */
  readonly progress: string;
  /** Hash (since 0.6): id -> JSON [[at ms, attempt, line], ...], the last 100 lines handlers logged (delivery.log). */
  readonly logs: string;
  /** Hash (since 0.6): id -> the JSON result of the call that handled it (delivery.result), beside `handled`. */
  readonly handledResults: string;
  /**
   * A queue's flow keys (since 0.6, lua/includes/flow-keys.lua; a group's
   * keys name its queue's): parents waiting for children (sorted set id ->
   * due ms, state WAITING), their flow records, children's links to their
   * parents, the outbox of notices not yet applied to a parent, and the
   * notices applied lately (sorted set raw notice -> applied at ms), applied
   * once more a few seconds later (src/redis/flow-store.ts, confirm).
   */
  readonly waiting: string;
  readonly flows: string;
  /** Prefix of each parent's hash of its children's results (`<prefix><parent id>`: edge -> JSON). */
  readonly flowResultsPrefix: string;
  readonly parents: string;
  readonly notices: string;
  readonly noticesApplied: string;
}
