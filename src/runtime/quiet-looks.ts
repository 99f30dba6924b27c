/**
 * How an idle queue is watched (since 0.6). A queue's dispatcher and readers
 * look in Redis every pollIntervalMs and readerBlockMs while anything happens
 * there; once nothing has for QUIET_AFTER_MS, no handler call of the queue runs
 * here and the wake-up subscription is up, they go quiet: they wait for a
 * wake-up (every enqueue, replay or move that makes something due or ready
 * sooner publishes one) or for what their last look said falls due, and look
 * by themselves only every QUIET_LOOK_MS. With 1,000 handled types, 1,000
 * looks a second became a few dozen (benchmarks/MANY-TYPES-RESULTS.md).
 *
 * The safety nets that the per-pollIntervalMs look used to be keep bounds:
 * - a wake-up lost with the subscription: while it is not confirmed (down,
 *   reconnecting, refused), or while this instance does not hear its own
 *   beacon (a Cluster subscription ioredis moved, a half-open connection),
 *   nothing is quiet; when it is back, every queue looks at once;
 * - a paused queue is never quiet (its look says so);
 * - an expired lease: its instance's own dispatcher is not quiet while it runs
 *   handlers of the queue; an instance that dies stops its beacon, and every
 *   other instance looks at every queue within BEACON_LAPSE_MS of its last
 *   beacon (src/runtime/instance-beacon.ts), then at the lease's expiry;
 * - a data loss: a queue with named groups registered here looks at least
 *   every QUIET_LOOK_REGISTERED_MS (its look restores them).
 */

/** Nothing happened on the queue for this long: its looks may go quiet. */
export const QUIET_AFTER_MS = 10_000;

/** How often a quiet queue is looked at anyway: what a lost wake-up of an instance of 0.5 (no beacon) or a Cluster's bus costs at most. */
export const QUIET_LOOK_MS = 30_000;

/** The same for a queue with named groups registered here: a data loss that took their registrations is noticed within it. */
export const QUIET_LOOK_REGISTERED_MS = 10_000;

/** What a dispatcher or a reader asks before it goes quiet. */
export interface QuietWatch {
  /** The wake-up subscription is confirmed: what is published reaches this instance. */
  listening(): boolean;
  /** A handler call of the queue runs here, or events wait here for one (their leases are this instance's to watch). */
  busy(): boolean;
}

/** When a quiet wait looks again by itself: spread over its second half, so that 1,000 queues do not look in step. */
export function quietLookIn(everyMs: number, random: () => number = Math.random): number {
  return everyMs * (0.5 + random() / 2);
}
