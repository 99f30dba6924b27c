import { type Observable, defer, of, throwError } from 'rxjs';
import { type DelayedEventInstance, type EventClass, type EventRoute, eventRouteOf } from '../core/delayed-event.decorator';
import { type Delay, dateToMillis, delayToMillis } from '../core/duration';
import { ContextProviderError, InvalidArgumentError, RedisConnectionError, classifyRedisError, describe } from '../core/errors';
import type { BodyExtras } from '../core/body-extras';
import { type AllowedKeys, checkArgumentKeys } from '../core/option-keys';
import type { EncodedEvent, EventCodec } from '../core/event-codec';
import type { EventContext, EventContextStore } from '../core/event-context';
import type { DueSpec, EnqueueStatus, LuaScripts } from '../redis/lua-scripts';
import { permissionError } from '../redis/permissions';
import { isUnsent } from '../redis/ready-gate';
import type { RedisLayout, TypeKeys } from '../redis/redis-layout';
import type { ActivityRecorder } from '../runtime/activity-log';
import { METRIC, type Metrics } from '../runtime/metrics';
import { EnqueueBatcher } from './enqueue-batcher';
import type { EnqueueScope } from './instrumentation';
import type { Occurrence } from './recurring-schedules';
import type { ResolvedOptions } from './service-options';

export interface EnqueueOptions {
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
}

/** One event of enqueueBatch: due after `delay` (default 0) or at `at`. */
export interface BatchEntry<T extends DelayedEventInstance = DelayedEventInstance> {
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
const ENQUEUE_OPTION_KEYS = { context: true, replace: true, maxAttempts: true, priority: true } as const satisfies AllowedKeys<EnqueueOptions>;
/** What an entry of enqueueBatch may hold. */
const BATCH_ENTRY_KEYS = { event: true, delay: true, at: true, context: true, maxAttempts: true, priority: true } as const satisfies AllowedKeys<BatchEntry>;
/** enqueueBatch's own options. */
export const BATCH_OPTION_KEYS = { replace: true } as const satisfies AllowedKeys<Pick<EnqueueOptions, 'replace'>>;

/** Most attempts an event may ask for (EnqueueOptions.maxAttempts). */
const MOST_ATTEMPTS = 100_000;

/** The worst priority (EnqueueOptions.priority); 0 is the best. */
const WORST_PRIORITY = 1_000_000;

/** The body extras of an enqueue's options (or a batch entry), checked. */
function extrasOf(options: { readonly maxAttempts?: unknown; readonly priority?: unknown }, what: string): BodyExtras {
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
const NO_EXTRAS: BodyExtras = Object.freeze({});

/** An entry of enqueueBatch holds only what an entry may. */
function checkBatchEntry(entry: unknown, index: number, call: string): void {
  if (entry === null || typeof entry !== 'object') throw new InvalidArgumentError(`${call} entry ${index}`, 'must be { event, delay?, at?, context? }');
  checkArgumentKeys(entry, BATCH_ENTRY_KEYS, `${call} entry ${index}`);
}

interface PreparedEvent extends Omit<EncodedEvent, 'version'> {
  /** What instrumentEnqueue answered for it: told when the store settled. */
  scope?: EnqueueScope | undefined;
  readonly due: DueSpec;
  /** When the store was asked for (see ScheduledBody): at the call, or at each subscription of the cold form. */
  requestedAt: number;
}

export interface EnqueuerParts {
  readonly options: Pick<ResolvedOptions, 'instrumentEnqueue' | 'contextProvider' | 'durableEnqueue'>;
  readonly layout: RedisLayout;
  readonly scripts: LuaScripts;
  readonly codec: EventCodec;
  readonly contextStore: EventContextStore;
  readonly metrics: Metrics;
  readonly activity: ActivityRecorder | undefined;
  /** Throws ServiceClosedError once the service is closing. */
  readonly assertOpen: () => void;
  /** Told of each type stored (its gauges are then sampled). */
  readonly onStored: (route: EventRoute) => void;
}

/**
 * The enqueue path: validates and serializes at the call (errors name the
 * caller's mistake, and the event is captured as it is then), gathers the
 * calls of one tick per queue (src/service/enqueue-batcher.ts) and settles
 * each caller from its script call's reply.
 */
export class Enqueuer {
  private readonly batcher: EnqueueBatcher;

  constructor(private readonly parts: EnqueuerParts) {
    const durability = parts.options.durableEnqueue;
    this.batcher = new EnqueueBatcher((keys, events, replace) => parts.scripts.enqueue(keys, events, replace, durability));
  }

  /** Promise form of one enqueue; `due` is read at the call. */
  enqueue<T extends DelayedEventInstance>(event: T, due: () => DueSpec, options: EnqueueOptions = {}): Promise<EnqueueStatus> {
    // The same path as the Observable form, without building one: this is the hot call.
    const requestedAt = performance.now();
    let prepared: PreparedEvent;
    try {
      checkArgumentKeys(options, ENQUEUE_OPTION_KEYS, 'enqueue');
      prepared = this.prepare(event, due, options.context, requestedAt, { batch: false, replace: options.replace === true }, extrasOf(options, 'enqueue'));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.storeOne(prepared, options.replace === true, requestedAt);
  }

  /** Cold form of one enqueue: validated at the call, stored at each subscription. */
  enqueueCold<T extends DelayedEventInstance>(event: T, due: () => DueSpec, options: EnqueueOptions = {}): Observable<EnqueueStatus> {
    let prepared: PreparedEvent;
    try {
      checkArgumentKeys(options, ENQUEUE_OPTION_KEYS, 'enqueue');
      prepared = this.prepare(event, due, options.context, performance.now(), { batch: false, replace: options.replace === true }, extrasOf(options, 'enqueue'));
    } catch (error) {
      return throwError(() => error);
    }
    return defer(() => this.storeOne(prepared, options.replace === true, performance.now()));
  }

  /** Every entry validated first: one bad entry rejects the batch and nothing is written. */
  enqueueBatch(entries: ReadonlyArray<BatchEntry>, replace: boolean, call: 'enqueueBatch' | 'enqueueMany' = 'enqueueBatch'): Observable<EnqueueStatus[]> {
    let prepared: PreparedEvent[];
    const calledAt = performance.now();
    try {
      if (!Array.isArray(entries)) throw new InvalidArgumentError(`${call} entries`, `must be an array of { event, delay?, at?, ... }, got ${typeof entries}`);
      prepared = entries.map((entry, i) => {
        checkBatchEntry(entry, i, call);
        const due = () => (entry.at !== undefined ? { atMs: dateToMillis(entry.at) } : { delayMs: delayToMillis(entry.delay ?? 0) });
        return this.prepare(entry.event, due, entry.context, calledAt, { batch: true, replace }, extrasOf(entry, `${call} entry ${i}`));
      });
    } catch (error) {
      return throwError(() => error);
    }
    return this.store(prepared, replace);
  }

  /** Stores a recurring schedule's occurrences (already encoded). */
  storeOccurrences(occurrences: readonly Occurrence[], replace: boolean): Observable<EnqueueStatus[]> {
    const requestedAt = performance.now();
    return this.store(
      occurrences.map((o): PreparedEvent => ({ route: o.route, type: o.route.type, id: o.id, body: o.body, due: { atMs: o.at }, requestedAt })),
      replace,
    );
  }

  /** Sends what is gathered now: close() calls it, so enqueues accepted before close are sent before the connections go. */
  flush(): void {
    this.batcher.flush();
  }

  private storeOne(prepared: PreparedEvent, replace: boolean, requestedAt: number): Promise<EnqueueStatus> {
    const keys = this.parts.layout.forEvent(prepared.route, prepared.id);
    prepared.requestedAt = requestedAt;
    // Settled from the batcher's reply handler itself: no promise of the batcher's in between.
    return new Promise<EnqueueStatus>((resolve, reject) => {
      this.batcher.submitOne(
        keys,
        prepared,
        replace,
        (status) => {
          // Called in the batcher's loop over a call's waiters: a throw must reach this caller alone, as a rejection.
          try {
            this.countOne(prepared, status);
          } catch (error) {
            reject(error);
            return;
          }
          if (prepared.scope) endScope(prepared.scope, { status });
          resolve(status);
        },
        (error: unknown) => {
          const typed = asConnectionError(error);
          if (prepared.scope) endScope(prepared.scope, { error: typed });
          reject(typed);
        },
      );
    });
  }

  private prepare(
    event: DelayedEventInstance,
    due: () => DueSpec,
    context: EventContext | undefined,
    requestedAt: number,
    how: { readonly batch: boolean; readonly replace: boolean },
    extras: BodyExtras = {},
  ): PreparedEvent {
    this.parts.assertOpen();
    const { instrumentEnqueue: instrument, contextProvider } = this.parts.options;
    const store = this.parts.contextStore;
    const capture = () => context ?? (contextProvider ? provided(contextProvider, store.current()) : store.current());
    if (instrument === undefined) {
      const encoded = this.parts.codec.encode(event, capture(), Date.now(), extras);
      return { route: encoded.route, type: encoded.type, id: encoded.id, body: encoded.body, due: due(), requestedAt };
    }
    let scope: EnqueueScope | undefined;
    try {
      const info = { type: eventRouteOf(event.constructor as EventClass).type, id: String(event.id), ...how };
      scope = scopeOf(instrument(info));
    } catch {
      // Instrumentation never fails an enqueue; an event class error is reported by encode below.
    }
    try {
      const captured = scope?.capture ? capturedWithin(scope.capture, capture) : capture();
      const encoded = this.parts.codec.encode(event, captured, Date.now(), extras);
      return { route: encoded.route, type: encoded.type, id: encoded.id, body: encoded.body, due: due(), requestedAt, scope };
    } catch (error) {
      if (scope) endScope(scope, { error });
      throw error;
    }
  }

  /** Cold: script calls of up to ENQUEUE_CHUNK events of one queue, statuses back in the order given. */
  private store(events: readonly PreparedEvent[], replace: boolean): Observable<EnqueueStatus[]> {
    if (events.length === 0) return of([]);
    return defer(async () => {
      const requestedAt = performance.now();
      // One call per queue (type, or partition of a type): each call stays in one slot.
      const byQueue = new Map<string, { keys: TypeKeys; indexes: number[] }>();
      events.forEach((e, i) => {
        e.requestedAt = requestedAt;
        const keys = this.parts.layout.forEvent(e.route, e.id);
        const queue = byQueue.get(keys.tag);
        if (queue) queue.indexes.push(i);
        else byQueue.set(keys.tag, { keys, indexes: [i] });
      });
      const statuses: EnqueueStatus[] = new Array(events.length);
      try {
        await Promise.all(
          [...byQueue.values()].map(async ({ keys, indexes }) => {
            const results = await this.batcher.submit(
              keys,
              indexes.map((i) => events[i]!),
              replace,
            );
            results.forEach((status, k) => (statuses[indexes[k]!] = status));
          }),
        );
      } catch (error) {
        const typed = asConnectionError(error);
        for (const e of events) if (e.scope) endScope(e.scope, { error: typed });
        throw typed;
      }
      this.countStored(events, statuses);
      events.forEach((e, i) => e.scope && endScope(e.scope, { status: statuses[i]! }));
      return statuses;
    });
  }

  /** countStored() of one event (the hot path), without the tallies a batch needs. */
  private countOne(event: PreparedEvent, status: EnqueueStatus): void {
    this.parts.onStored(event.route);
    if (status === 'duplicate') {
      this.parts.metrics.count(METRIC.duplicatesIgnored, { type: event.type }, 1);
    } else {
      this.parts.metrics.count(METRIC.events, { type: event.type, group: '', direction: 'enqueue' }, 1);
      this.parts.activity?.of(event.type).enqueued(1);
    }
  }

  private countStored(events: readonly PreparedEvent[], statuses: readonly EnqueueStatus[]): void {
    const counts = new Map<string, { stored: number; duplicates: number }>();
    events.forEach((e, i) => {
      this.parts.onStored(e.route);
      const count = counts.get(e.type) ?? { stored: 0, duplicates: 0 };
      if (statuses[i] === 'duplicate') count.duplicates++;
      else count.stored++;
      counts.set(e.type, count);
    });
    for (const [type, count] of counts) {
      this.parts.metrics.count(METRIC.duplicatesIgnored, { type }, count.duplicates);
      this.parts.metrics.count(METRIC.events, { type, group: '', direction: 'enqueue' }, count.stored);
      if (count.stored > 0) this.parts.activity?.of(type).enqueued(count.stored);
    }
  }
}

/**
 * The contextProvider's context. User code: whatever it throws, the enqueue
 * fails with an error that says so, and nothing is stored.
 */
function provided(contextProvider: NonNullable<ResolvedOptions['contextProvider']>, current: EventContext | undefined): EventContext | undefined {
  try {
    return contextProvider(current);
  } catch (error) {
    throw new ContextProviderError(error);
  }
}

/** The scope's methods, read once: a scope whose properties throw is no scope. */
function scopeOf(value: EnqueueScope | undefined | null | void): EnqueueScope | undefined {
  if (value === undefined || value === null) return undefined;
  const capture = value.capture;
  const end = value.end;
  return {
    ...(typeof capture === 'function' ? { capture: capture.bind(value) } : {}),
    ...(typeof end === 'function' ? { end: end.bind(value) } : {}),
  };
}

/**
 * The context captured within the instrumentation's scope. Should the
 * instrumentation itself throw (or never call back), it is captured without
 * it: instrumentation never fails an enqueue. A contextProvider's throw does.
 */
function capturedWithin(within: NonNullable<EnqueueScope['capture']>, capture: () => EventContext | undefined): EventContext | undefined {
  let outcome: { readonly value: EventContext | undefined } | { readonly error: unknown } | undefined;
  // Called back after `within` returned (deferred by the instrumentation): too late, and nothing is done.
  let returned = false;
  try {
    within(() => {
      if (returned) return undefined;
      try {
        const value = capture();
        outcome = { value };
        return value;
      } catch (error) {
        outcome = { error };
        throw error;
      }
    });
  } catch {
    // The instrumentation's own throw, or the capture's, which is thrown below.
  }
  returned = true;
  if (outcome === undefined) return capture();
  if ('error' in outcome) throw outcome.error;
  return outcome.value;
}

/** Tells an enqueue's instrumentation how it ended; its throw is ignored. */
function endScope(scope: EnqueueScope, result: Parameters<NonNullable<EnqueueScope['end']>>[0]): void {
  try {
    scope.end?.(result);
  } catch {
    // Instrumentation never fails an enqueue.
  }
}

/**
 * Refused credentials, refused commands and a connection being replaced reach
 * the caller as a RedisConnectionError, not as ioredis's errors.
 */
function asConnectionError(error: unknown): unknown {
  if (!(error instanceof Error) || error instanceof RedisConnectionError) return error;
  const reason = classifyRedisError(error);
  if (reason === 'auth') {
    return new RedisConnectionError('auth', `Redis refused the credentials (${error.message.split(' ')[0]}); check the user and password in the URL or client`, { cause: error });
  }
  if (reason === 'permission') return permissionError('a command of the enqueue', error);
  if (isUnsent(error)) return new RedisConnectionError('other', 'the connection to Redis was closing, so the call was not sent (sending it again is safe)', { cause: error });
  return error;
}
