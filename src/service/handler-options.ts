import type { DelayedEventInstance } from '../core/delayed-event.decorator';
import type { AllowedKeys } from '../core/option-keys';
import type { RetryPolicy } from '../core/retry-policy';
import type { PerKeyLimits, RateLimit } from './flow-control';
import type { KeepDead } from './service-options';

/** addBatchHandler's options: those of addHandler, and how events gather into calls. */
export interface BatchHandlerOptions<T = DelayedEventInstance> extends Omit<HandlerOptions<T>, 'prefetch'> {
  /** Most events in one call; default 100 (1 to 10,000). */
  readonly maxBatch?: number;
  /** How long the first event of a batch waits for more before the call; default 50 ms. */
  readonly maxWaitMs?: number;
  /** Most calls at once in this instance; default 1. */
  readonly parallelism?: number;
}

export interface HandlerOptions<T = DelayedEventInstance> {
  /** Most calls at once in this instance: 1 to 10,000, default 1 (since 0.6 also here; or addHandler's third argument, not both). */
  readonly parallelism?: number;
  /**
   * Dead letters this handler's group keeps (since 0.6): the newest `count`
   * (1 to 1,000,000), none older than `ageMs`; default: the service's keepDead
   * (off: every dead letter is kept until purged). See the service option.
   */
  readonly keepDead?: KeepDead | false;
  readonly retry?: RetryPolicy;
  /** A call running longer fails its attempt (its signal aborts with code `timeout`); default the service's handlerTimeoutMs, up to about 24.8 days. */
  readonly timeoutMs?: number;
  /** This handler's heartbeatMs (see the service option); since 0.6. */
  readonly heartbeatMs?: number | false;
  /**
   * Snoozes an event may take (`delivery.snooze`, `Snoozed`) before it is
   * dead-lettered with reason `snoozes-exhausted`: 0 to 1,000,000, default
   * 1,000 (since 0.6). Counted per event, in its body, across groups.
   */
  readonly maxSnoozes?: number;
  /** This handler's priorityAgingMs (see the service option); since 0.6. */
  readonly priorityAgingMs?: number;
  /**
   * Subscriber group to join (letters, digits, '_', '.', '-'; up to 64). Every
   * registered group receives every event; instances of one group share its
   * events. Default: the type's default group.
   */
  readonly group?: string;
  /**
   * Most events this handler's readers hold claimed ahead of its free slots:
   * the next events are at hand when a call returns, and the next claim runs
   * in Redis while the handler runs, instead of each waiting for the other.
   * A reader claims ahead only as many as the handler is expected to start
   * within a quarter of leaseGraceMs at its recent pace (none for slow
   * handlers), and gives back unstarted, without spending an attempt, an event
   * that waited half of it, so every call still ends within its lease.
   * Default 250; 0 claims only for free slots. Events held ahead keep their
   * payloads in memory: lower it for large payloads.
   */
  readonly prefetch?: number;
  /**
   * At most `max` calls of this type and group start per `perMs` window,
   * across every instance (a sliding window, counted in Redis). Events over it
   * wait READY, no attempt spent; readers sleep until the window has room.
   * With partitions, each gets an even share.
   */
  readonly rateLimit?: RateLimit;
  /**
   * At most this many calls of this type and group run at once, across every
   * instance. A call that ends wakes the instances waiting for room.
   */
  readonly globalConcurrency?: number;
  /**
   * Shares capacity per key (a tenant, a customer): ready events are sorted
   * by the key this function gives them, and claims take from the keys in
   * turn, so one key's backlog does not hold up another key's events. A
   * throw, or a value that is not a string, puts the event under the key ''.
   */
  key?(event: T): string;
  /** Each key's own limits (with `key`): at most `rateLimit` calls per window and `globalConcurrency` at once per key, across instances. */
  readonly perKey?: PerKeyLimits;
  /**
   * Lateness per key (with `key`; since 0.6): `delayed.queue.key.lateness`
   * with a `key` tag, for the first `keyMetrics` distinct keys this instance
   * sees (1 to 10,000); every later key is tagged `(other)`, so the series
   * stay bounded. Default: none.
   */
  readonly keyMetrics?: number;
}

/** addHandler's options, each once (src/core/option-keys.ts). */
export const HANDLER_OPTION_KEYS = {
  parallelism: true,
  keepDead: true,
  retry: true,
  timeoutMs: true,
  heartbeatMs: true,
  maxSnoozes: true,
  priorityAgingMs: true,
  group: true,
  prefetch: true,
  rateLimit: true,
  globalConcurrency: true,
  key: true,
  perKey: true,
  keyMetrics: true,
} as const satisfies AllowedKeys<HandlerOptions>;

/** addBatchHandler's options, each once. */
export const BATCH_HANDLER_OPTION_KEYS = {
  retry: true,
  timeoutMs: true,
  heartbeatMs: true,
  maxSnoozes: true,
  priorityAgingMs: true,
  group: true,
  rateLimit: true,
  globalConcurrency: true,
  key: true,
  perKey: true,
  keyMetrics: true,
  keepDead: true,
  maxBatch: true,
  maxWaitMs: true,
  parallelism: true,
} as const satisfies AllowedKeys<BatchHandlerOptions>;

/**
 * Events a handler holds claimed ahead of its free slots by default: enough
 * that a call of complete-and-claim carries over a hundred events and its
 * cost per event levels off (benchmarks/RESULTS.md shows the end-to-end rows
 * with prefetch 0 beside it); the figure Spring AMQP picked for its consumers.
 */
export const DEFAULT_PREFETCH = 250;
