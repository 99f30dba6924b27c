import type { DelayedEventInstance } from '../core/delayed-event.decorator';
import type { Delay } from '../core/duration';
import { InvalidArgumentError, describe } from '../core/errors';
import type { BodyExtras } from '../core/body-extras';
import { type AllowedKeys, checkArgumentKeys } from '../core/option-keys';
import type { EventContext } from '../core/event-context';
import type { WindowOptions } from './enqueue-windows';
import type { EventClass } from '../core/delayed-event.decorator';
import type { ChildFailurePolicy } from '../redis/flow-store';

// The options of the enqueue calls, and their checks (src/service/enqueuer.ts uses them).

export interface EnqueueOptions extends WindowOptions {
  /** Context stored with the event; default: the service's contextProvider. */
  readonly context?: EventContext;
  /** Replace the payload and due time of an event with the same type and id instead of leaving it as it is. */
  readonly replace?: boolean;
  /**
   * This event's attempts, in every group, instead of the handler's retry
   * policy's (its backoff still applies): 1 to 100,000 (since 0.6). An
   * instance of 0.5 does not see it and uses its handler's.
   */
  readonly maxAttempts?: number;
  /**
   * Its priority among READY events of its type: a whole number from 0
   * (default, the best) to 1,000,000; lower first (since 0.6). It never
   * makes an event run before its due time. An instance of 0.5 ignores it.
   */
  readonly priority?: number;
  /**
   * Events already stored that this one waits for (since 0.6, docs/flows.md):
   * stored WAITING, due once each is done and its own delay has passed. An
   * id neither stored nor handled within the idempotency window is an
   * InvalidArgumentError. Not with replace or a window.
   */
  readonly after?: readonly Dependency[];
}

/** An event already stored that another waits for (enqueue's `after`, since 0.6; docs/flows.md). */
export interface Dependency {
  readonly type: EventClass | string;
  readonly id: string;
  /** As a flow child's: 'fail' (default), 'ignore' or 'continue'. */
  readonly onChildFailure?: ChildFailurePolicy;
}

/** One event of enqueueBatch: due after `delay` (default 0) or at `at`; its own window (since 0.6), as enqueue's. */
export interface BatchEntry<T extends DelayedEventInstance = DelayedEventInstance> extends WindowOptions {
  readonly event: T;
  readonly delay?: Delay;
  readonly at?: Date;
  readonly context?: EventContext;
  /** This event's attempts (EnqueueOptions.maxAttempts). */
  readonly maxAttempts?: number;
  /** Its priority (EnqueueOptions.priority). */
  readonly priority?: number;
}

/** Options of enqueue, enqueueWithDelay and enqueueAt, each once (src/core/option-keys.ts). */
export const ENQUEUE_OPTION_KEYS = {
  context: true,
  replace: true,
  maxAttempts: true,
  priority: true,
  debounce: true,
  throttle: true,
  dedupe: true,
  after: true,
} as const satisfies AllowedKeys<EnqueueOptions>;
/** What an entry of enqueueBatch may hold. */
const BATCH_ENTRY_KEYS = {
  event: true,
  delay: true,
  at: true,
  context: true,
  maxAttempts: true,
  priority: true,
  debounce: true,
  throttle: true,
  dedupe: true,
} as const satisfies AllowedKeys<BatchEntry>;
/** enqueueBatch's own options. */
export const BATCH_OPTION_KEYS = { replace: true } as const satisfies AllowedKeys<Pick<EnqueueOptions, 'replace'>>;

/** Most attempts an event may ask for (EnqueueOptions.maxAttempts). */
const MOST_ATTEMPTS = 100_000;

/** The worst priority (EnqueueOptions.priority); 0 is the best. */
const WORST_PRIORITY = 1_000_000;

/** The body extras of an enqueue's options (or a batch entry), checked. */
export function extrasOf(options: { readonly maxAttempts?: unknown; readonly priority?: unknown }, what: string): BodyExtras {
  const { maxAttempts, priority } = options;
  if (maxAttempts === undefined && priority === undefined) return NO_EXTRAS;
  if (maxAttempts !== undefined && (typeof maxAttempts !== 'number' || !Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > MOST_ATTEMPTS)) {
    throw new InvalidArgumentError(`maxAttempts of ${what}`, `must be a whole number from 1 to ${MOST_ATTEMPTS.toLocaleString('en-US')}, got ${describe(maxAttempts)}`);
  }
  if (priority !== undefined && (typeof priority !== 'number' || !Number.isInteger(priority) || priority < 0 || priority > WORST_PRIORITY)) {
    throw new InvalidArgumentError(`priority of ${what}`, `must be a whole number from 0 (the best) to ${WORST_PRIORITY.toLocaleString('en-US')}, got ${describe(priority)}`);
  }
  return { ...(maxAttempts !== undefined ? { maxAttempts: maxAttempts as number } : {}), ...(priority ? { priority: priority as number } : {}) };
}
export const NO_EXTRAS: BodyExtras = Object.freeze({});

/** An entry of enqueueBatch holds only what an entry may. */
export function checkBatchEntry(entry: unknown, index: number, call: string): void {
  if (entry === null || typeof entry !== 'object')
    throw new InvalidArgumentError(
      `${call} entry ${index}`,
      `must be an object such as { ${Object.keys(BATCH_ENTRY_KEYS)
        .map((k) => (k === 'event' ? k : `${k}?`))
        .join(', ')} }, got ${describe(entry)}`,
    );
  checkArgumentKeys(entry, BATCH_ENTRY_KEYS, `${call} entry ${index}`);
}
