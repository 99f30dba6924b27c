import { type Observable, defer, of, throwError } from 'rxjs';
import { type DelayedEventInstance, type EventClass, type EventRoute, eventRouteOf } from '../core/delayed-event.decorator';
import { dateToMillis, delayToMillis } from '../core/duration';
import { ContextProviderError, InvalidArgumentError, RedisConnectionError, classifyRedisError } from '../core/errors';
import type { BodyExtras } from '../core/body-extras';
import { checkArgumentKeys } from '../core/option-keys';
import type { EncodedEvent, EventCodec } from '../core/event-codec';
import type { EventContext, EventContextStore } from '../core/event-context';
import type { DueSpec, EnqueueStatus, LuaScripts } from '../redis/lua-scripts';
import { type EnqueuePolicy, PLAIN_POLICY, REPLACE_POLICY } from '../redis/script-results';
import { permissionError } from '../redis/permissions';
import { isUnsent } from '../redis/ready-gate';
import type { RedisLayout, TypeKeys } from '../redis/redis-layout';
import type { ActivityRecorder } from '../runtime/activity-log';
import { METRIC, type Metrics } from '../runtime/metrics';
import { EnqueueBatcher } from './enqueue-batcher';
import { type WindowPolicy, pickWindows, plainWindow, windowsOf } from './enqueue-windows';
import type { EnqueueScope } from './instrumentation';
import type { Occurrence } from './recurring-schedules';
import type { ResolvedOptions } from './service-options';

import { type BatchEntry, ENQUEUE_OPTION_KEYS, type EnqueueOptions, checkBatchEntry, extrasOf } from './enqueue-options';

export type { BatchEntry, EnqueueOptions } from './enqueue-options';
export { BATCH_OPTION_KEYS } from './enqueue-options';

interface PreparedEvent extends Omit<EncodedEvent, 'version'> {
  /** What instrumentEnqueue answered for it: told when the store settled. */
  scope?: EnqueueScope | undefined;
  readonly due: DueSpec;
  /** How the script treats an id already stored: plain, replace, or a window. */
  readonly policy: EnqueuePolicy;
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
    this.batcher = new EnqueueBatcher((keys, events, policy) => parts.scripts.enqueue(keys, events, policy, durability));
  }

  /** Where an enqueue with `after` goes (src/service/flows.ts): it stores a parent WAITING. */
  withDependencies: ((event: DelayedEventInstance, due: DueSpec, options: EnqueueOptions) => Promise<EnqueueStatus>) | undefined;

  /** Promise form of one enqueue; `due` is read at the call. */
  enqueue<T extends DelayedEventInstance>(event: T, due: () => DueSpec, options: EnqueueOptions = {}): Promise<EnqueueStatus> {
    if (options !== null && typeof options === 'object' && options.after !== undefined) return this.dependent(event, due, options);
    // The same path as the Observable form, without building one: this is the hot call.
    const requestedAt = performance.now();
    let prepared: PreparedEvent;
    try {
      checkArgumentKeys(options, ENQUEUE_OPTION_KEYS, 'enqueue');
      prepared = this.prepare(event, due, options.context, requestedAt, { batch: false, replace: options.replace === true }, extrasOf(options, 'enqueue'), windowsOf(options, 'enqueue'));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.storeOne(prepared, requestedAt);
  }

  /** Cold form of one enqueue: validated at the call, stored at each subscription. */
  enqueueCold<T extends DelayedEventInstance>(event: T, due: () => DueSpec, options: EnqueueOptions = {}): Observable<EnqueueStatus> {
    if (options !== null && typeof options === 'object' && options.after !== undefined) return defer(() => this.dependent(event, due, options));
    let prepared: PreparedEvent;
    try {
      checkArgumentKeys(options, ENQUEUE_OPTION_KEYS, 'enqueue');
      prepared = this.prepare(event, due, options.context, performance.now(), { batch: false, replace: options.replace === true }, extrasOf(options, 'enqueue'), windowsOf(options, 'enqueue'));
    } catch (error) {
      return throwError(() => error);
    }
    return defer(() => this.storeOne(prepared, performance.now()));
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
        return this.prepare(
          entry.event,
          due,
          entry.context,
          calledAt,
          { batch: true, replace },
          extrasOf(entry, `${call} entry ${i}`),
          windowsOf({ ...pickWindows(entry), replace }, `${call} entry ${i}`),
        );
      });
    } catch (error) {
      return throwError(() => error);
    }
    return this.store(prepared);
  }

  /** A flow's parent, checked and encoded as enqueue would store it (src/service/flows.ts stores it WAITING). */
  encodeParent(event: DelayedEventInstance, options: EnqueueOptions, call: string, due: DueSpec = { delayMs: 0 }, leaf = false): { route: EventRoute; id: string; body: string } {
    checkArgumentKeys(options, ENQUEUE_OPTION_KEYS, call);
    const windows = leaf ? windowsOf(options, call) : undefined;
    const prepared = this.prepare(event, () => due, options.context, performance.now(), { batch: false, replace: false }, extrasOf(options, call), windows);
    if (prepared.scope) endScope(prepared.scope, { status: 'scheduled' });
    return { route: prepared.route, id: prepared.id, body: prepared.body };
  }

  private dependent(event: DelayedEventInstance, due: () => DueSpec, options: EnqueueOptions): Promise<EnqueueStatus> {
    try {
      this.parts.assertOpen();
      checkArgumentKeys(options, ENQUEUE_OPTION_KEYS, 'enqueue');
      if (!this.withDependencies) throw new InvalidArgumentError('after', 'is not taken here');
      return this.withDependencies(event, due(), options).catch((error: unknown) => Promise.reject(asConnectionError(error)));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Stores a recurring schedule's occurrences (already encoded). */
  storeOccurrences(occurrences: readonly Occurrence[], replace: boolean): Observable<EnqueueStatus[]> {
    const requestedAt = performance.now();
    return this.store(
      occurrences.map((o): PreparedEvent => ({ route: o.route, type: o.route.type, id: o.id, body: o.body, due: { atMs: o.at }, policy: replace ? REPLACE_POLICY : PLAIN_POLICY, requestedAt })),
    );
  }

  /** Sends what is gathered now: close() calls it, so enqueues accepted before close are sent before the connections go. */
  flush(): void {
    this.batcher.flush();
  }

  private storeOne(prepared: PreparedEvent, requestedAt: number): Promise<EnqueueStatus> {
    const keys = this.parts.layout.forEvent(prepared.route, prepared.id);
    prepared.requestedAt = requestedAt;
    // Settled from the batcher's reply handler itself: no promise of the batcher's in between.
    return new Promise<EnqueueStatus>((resolve, reject) => {
      this.batcher.submitOne(
        keys,
        prepared,
        prepared.policy,
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
    windows: (dueSpec: DueSpec) => WindowPolicy = plainWindow,
  ): PreparedEvent {
    this.parts.assertOpen();
    const dueSpec = due();
    const window = windows(dueSpec);
    const policy = window.policy;
    if (window.policy.mode !== '' && window.policy.mode !== 'r') extras = { ...extras, ...window.extras };
    const { instrumentEnqueue: instrument, contextProvider } = this.parts.options;
    const store = this.parts.contextStore;
    const capture = () => context ?? (contextProvider ? provided(contextProvider, store.current()) : store.current());
    if (instrument === undefined) {
      const encoded = this.parts.codec.encode(event, capture(), Date.now(), extras);
      return { route: encoded.route, type: encoded.type, id: encoded.id, body: encoded.body, due: dueSpec, policy, requestedAt };
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
      return { route: encoded.route, type: encoded.type, id: encoded.id, body: encoded.body, due: dueSpec, policy, requestedAt, scope };
    } catch (error) {
      if (scope) endScope(scope, { error });
      throw error;
    }
  }

  /** Cold: script calls of up to ENQUEUE_CHUNK events of one queue, statuses back in the order given. */
  private store(events: readonly PreparedEvent[]): Observable<EnqueueStatus[]> {
    if (events.length === 0) return of([]);
    return defer(async () => {
      const requestedAt = performance.now();
      // One call per queue (type, or partition of a type) and policy: each call stays in one slot.
      const byQueue = new Map<string, { keys: TypeKeys; policy: EnqueuePolicy; indexes: number[] }>();
      events.forEach((e, i) => {
        e.requestedAt = requestedAt;
        const keys = this.parts.layout.forEvent(e.route, e.id);
        const key = e.policy.mode === '' ? keys.tag : `${e.policy.mode}${e.policy.ms}|${keys.tag}`;
        const queue = byQueue.get(key);
        if (queue) queue.indexes.push(i);
        else byQueue.set(key, { keys, policy: e.policy, indexes: [i] });
      });
      const statuses: EnqueueStatus[] = new Array(events.length);
      try {
        await Promise.all(
          [...byQueue.values()].map(async ({ keys, policy, indexes }) => {
            const results = await this.batcher.submit(
              keys,
              indexes.map((i) => events[i]!),
              policy,
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
    this.parts.metrics.count(METRIC.enqueued, { type: event.type, status }, 1);
    if (status === 'duplicate') {
      this.parts.metrics.count(METRIC.duplicatesIgnored, { type: event.type }, 1);
    } else if (status !== 'throttled') {
      this.parts.metrics.count(METRIC.events, { type: event.type, group: '', direction: 'enqueue' }, 1);
      this.parts.activity?.of(event.type).enqueued(1);
    }
  }

  private countStored(events: readonly PreparedEvent[], statuses: readonly EnqueueStatus[]): void {
    const counts = new Map<string, { stored: number; duplicates: number; byStatus: Map<EnqueueStatus, number> }>();
    events.forEach((e, i) => {
      this.parts.onStored(e.route);
      const count = counts.get(e.type) ?? { stored: 0, duplicates: 0, byStatus: new Map() };
      const status = statuses[i]!;
      if (status === 'duplicate') count.duplicates++;
      else if (status !== 'throttled') count.stored++;
      count.byStatus.set(status, (count.byStatus.get(status) ?? 0) + 1);
      counts.set(e.type, count);
    });
    for (const [type, count] of counts) {
      for (const [status, n] of count.byStatus) this.parts.metrics.count(METRIC.enqueued, { type, status }, n);
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
