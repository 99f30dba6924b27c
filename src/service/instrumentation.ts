import type { RedisConnectionError } from '../core/errors';
import type { EnqueueStatus } from '../redis/lua-scripts';

/** The event an enqueue is storing, as `instrumentEnqueue` sees it. */
export interface EnqueueInfo {
  readonly type: string;
  readonly id: string;
  /** One entry of `enqueueBatch` (or a recurring occurrence), not a single enqueue. */
  readonly batch: boolean;
  readonly replace: boolean;
}

/** What `instrumentEnqueue` answers for one event; both parts are optional. */
export interface EnqueueScope {
  /**
   * Runs the capture of the event's context inside the instrumentation's
   * scope: `contextProvider` is called within `capture`, so a tracing span
   * made active here is the one written into the stored context.
   */
  readonly capture?: <R>(fn: () => R) => R;
  /**
   * Told once when the store settled: the status, or the error (validation,
   * Redis). A cold Observable enqueue that is never subscribed never settles.
   */
  readonly end?: (result: { readonly status?: EnqueueStatus; readonly error?: unknown }) => void;
}

/**
 * Called at each enqueued event, before its context is captured, for
 * instrumentation (a producer span around the enqueue, a counter). A throw is
 * ignored: instrumentation never fails an enqueue.
 */
export type EnqueueInstrumentation = (info: EnqueueInfo) => EnqueueScope | undefined | void;

/** A readiness probe's view of the service: see DelayedEventService.health(). */
export interface ServiceHealth {
  /** Redis answered a PING just now and the service is not closed. */
  readonly ready: boolean;
  readonly redis: 'up' | 'down';
  /**
   * Loops in this instance: one dispatcher and one reader per partition and group of each handler (a named group's
   * partition has two dispatchers). `parked` (since 0.6): the handlers whose idle loops are parked, counted in the
   * others too: their looks go on, made by one scheduler of the instance.
   */
  readonly loops: { readonly dispatchers: number; readonly readers: number; readonly parked: number };
  /** The last Redis error seen (a connection error, or a failed call of a loop). */
  readonly lastError?: { readonly message: string; readonly at: Date };
  /**
   * Why the service cannot work although Redis answers: the ACL user may not
   * run a command it needs (`reason: 'permission'`, naming it). `ready` is
   * false while it holds; it clears once the command is allowed again.
   */
  readonly problem?: RedisConnectionError;
  /**
   * Stuck work: groups of the types this instance enqueues or handles whose
   * events are READY while no live instance (instances()) runs a handler for
   * them, as when every instance of a group was stopped. Absent when there is
   * none. It does not make `ready` false: this instance works.
   */
  readonly unconsumed?: ReadonlyArray<{ readonly type: string; readonly group: string; readonly ready: number; readonly oldestReadyMs: number }>;
  /**
   * Events that instances of an older event class left for a newer version
   * (versioned classes, docs/changing-event-classes.md) and that no instance
   * has taken for longer than `newerVersionWarnMs`: nothing running reads
   * their version (a producer was deployed before its consumers). Absent when
   * none. It does not make `ready` false.
   */
  readonly awaitingNewerVersion?: ReadonlyArray<{ readonly type: string; readonly group: string; readonly version: number; readonly events: number; readonly waitingMs: number }>;
  /**
   * Since 0.6 (docs/flows.md): parents of the types this instance enqueues or
   * handles that wait for children which no longer exist (never stored after
   * an enqueueFlow cut short, or purged, drained or obliterated): they would
   * wait for ever. Send the flow again, or cancel the parent. At most 100
   * parents per partition are looked at. Absent when none; `ready` stays true.
   */
  readonly orphanedParents?: ReadonlyArray<{ readonly type: string; readonly id: string; readonly missing: ReadonlyArray<{ readonly type: string; readonly id: string }> }>;
  /**
   * Since 0.6: recurring schedules with `pauseOnFailure` that a dead-lettered
   * occurrence paused, with the reason naming it: they run nothing until
   * resumeSchedule(). Absent when none; `ready` stays true.
   */
  readonly pausedSchedules?: ReadonlyArray<{ readonly type: string; readonly name: string; readonly reason: string }>;
}
