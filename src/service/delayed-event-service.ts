import { type Observable, defer, map, merge, of, throwError } from 'rxjs';
import { Consumer, type ConsumerQueue } from '../runtime/consumer';
import { DeadLetters, type DeadLetter } from './dead-letters';
import { type DelayedEventInstance, type EventClass, type EventRoute, eventRouteOf } from '../core/delayed-event.decorator';
import { Dispatcher } from '../runtime/dispatcher';
import { EnqueueBatcher } from './enqueue-batcher';
import { type Delay, dateToMillis, delayToMillis } from '../core/duration';
import { HandlerAlreadyRegisteredError, ServiceClosedError } from '../core/errors';
import { type EncodedEvent, EventCodec } from '../core/event-codec';
import { type EventContext, EventContextStore } from '../core/event-context';
import { evictionSettings, evictsKeysWithoutTtl } from '../redis/eviction-policy';
import { type EventHandler, passThroughContextHandler } from '../runtime/handler-invocation';
import { type DueSpec, type EnqueueStatus, LuaScripts } from '../redis/lua-scripts';
import { type GaugeSample, METRIC, type Metric, Metrics } from '../runtime/metrics';
import { ReadyReader } from '../runtime/ready-reader';
import { RedisConnections } from '../redis/redis-connections';
import { LEASE_PIN, RedisLayout, type TypeKeys } from '../redis/redis-layout';
import { type RetryPolicy, checkRetryPolicy } from '../core/retry-policy';
import { type DelayedEventServiceOptions, type ResolvedOptions, integer, positive, resolveOptions } from './service-options';
import { type Wake, wakeListener } from '../runtime/wake-listener';

export interface EnqueueOptions {
  /** Context stored with the event; default: the service's contextProvider. */
  readonly context?: EventContext;
  /** Replace the payload and due time of an event with the same type and id instead of leaving it as it is. */
  readonly replace?: boolean;
}

/** One event of enqueueBatch: due after `delay` (default 0) or at `at`. */
export interface BatchEntry<T extends DelayedEventInstance = DelayedEventInstance> {
  readonly event: T;
  readonly delay?: Delay;
  readonly at?: Date;
  readonly context?: EventContext;
}

interface PreparedEvent extends EncodedEvent {
  readonly due: DueSpec;
  /** When the store was asked for (see ScheduledBody): at the call, or at each subscription of the cold form. */
  requestedAt: number;
}

export interface HandlerOptions {
  readonly retry?: RetryPolicy;
  readonly timeoutMs?: number;
}

interface Registration {
  readonly consumer: Consumer<DelayedEventInstance>;
  readonly stopDispatching: () => void;
}

/**
 * Composition root: wires the key layout, scripts, codec, dispatchers,
 * consumers and metrics. See docs/state-machine.md for what happens to an event.
 */
export class DelayedEventService {
  /** Hot stream of counters, gauges and timings; see the README for every metric. */
  readonly metrics$: Observable<Metric>;

  private readonly options: ResolvedOptions;
  private readonly layout: RedisLayout;
  private readonly connections: RedisConnections;
  private readonly scripts: LuaScripts;
  private readonly codec: EventCodec;
  private readonly batcher: EnqueueBatcher;
  private readonly contextStore = new EventContextStore();
  private readonly metrics: Metrics;
  private readonly deadLetterSets: DeadLetters;
  private readonly wakes$: Observable<Wake>;
  private readonly registrations = new Map<string, Registration>();
  /** Types this instance enqueued or handles; their gauges are sampled. */
  private readonly knownTypes = new Map<string, EventRoute>();
  private closing: Promise<void> | undefined;
  /** When the last warning about a stuck call on a client handed in was given; they come at most once a minute. */
  private lastStuckWarning = Number.NEGATIVE_INFINITY;

  constructor(options: DelayedEventServiceOptions) {
    this.options = resolveOptions(options);
    this.layout = new RedisLayout(this.options.prefix);
    this.metrics = new Metrics(() => this.sampleGauges(), this.options.gaugeIntervalMs);
    this.metrics$ = this.metrics.metrics$;
    this.connections = new RedisConnections(this.options.redis, () => this.metrics.count(METRIC.redisErrors, { loop: 'connection' }));
    this.scripts = new LuaScripts(this.connections.command, this.layout.wakeChannel, {
      ms: this.options.commandTimeoutMs,
      onStuck: () => this.commandStuck(),
    }, this.options.idempotencyWindowMs);
    this.codec = new EventCodec(this.options.maxPayloadBytes);
    this.batcher = new EnqueueBatcher((keys, events, replace) => this.scripts.enqueue(keys, events, replace, this.options.durableEnqueue));
    this.deadLetterSets = new DeadLetters(this.connections.command, this.scripts, this.codec);
    this.wakes$ = wakeListener(this.connections, this.layout.wakeChannel, {
      pingEveryMs: this.options.readerBlockMs,
      pingTimeoutMs: this.options.watchdogGraceMs,
      onReset: () => this.metrics.count(METRIC.wakeListenerResets, {}),
    });
  }

  /** Schedules `event` to be handled after `delay`. Cold: nothing reaches Redis until subscribed; emits once stored. */
  enqueueWithDelay<T extends DelayedEventInstance>(event: T, delay: Delay, options?: EnqueueOptions): Observable<void> {
    return this.scheduleOne(event, () => ({ delayMs: delayToMillis(delay) }), options).pipe(map(() => undefined));
  }

  /** Schedules `event` to be handled at `date` (a past date means now). Cold, like enqueueWithDelay. */
  enqueueAt<T extends DelayedEventInstance>(event: T, date: Date, options?: EnqueueOptions): Observable<void> {
    return this.scheduleOne(event, () => ({ atMs: dateToMillis(date) }), options).pipe(map(() => undefined));
  }

  /** Promise form of enqueueWithDelay; tells whether the event was scheduled, replaced, or already stored. */
  enqueue<T extends DelayedEventInstance>(event: T, delay: Delay, options: EnqueueOptions = {}): Promise<EnqueueStatus> {
    // The same path as the Observable form, without building one: this is the hot call.
    const requestedAt = performance.now();
    let prepared: PreparedEvent;
    try {
      prepared = this.prepare(event, () => ({ delayMs: delayToMillis(delay) }), options.context, requestedAt);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.storeOne(prepared, options.replace === true, requestedAt);
  }

  /**
   * Schedules many events in script calls of up to ENQUEUE_CHUNK events of one type.
   * Cold; emits one status per entry, in order. Every entry is validated first:
   * one bad entry rejects the batch and nothing is written.
   */
  enqueueBatch(entries: ReadonlyArray<BatchEntry>, options: Pick<EnqueueOptions, 'replace'> = {}): Observable<EnqueueStatus[]> {
    let prepared: PreparedEvent[];
    const calledAt = performance.now();
    try {
      prepared = entries.map((entry) =>
        this.prepare(entry.event, () => (entry.at !== undefined ? { atMs: dateToMillis(entry.at) } : { delayMs: delayToMillis(entry.delay ?? 0) }), entry.context, calledAt),
      );
    } catch (error) {
      return throwError(() => error);
    }
    return this.store(prepared, options.replace === true);
  }

  /** Removes a stored event in any state; resolves whether it existed. */
  async cancel<T extends DelayedEventInstance>(eventClass: EventClass<T>, id: string): Promise<boolean> {
    const route = eventRouteOf(eventClass);
    const existed = await this.scripts.cancel(this.layout.forEvent(route, id), id);
    if (existed) this.metrics.count(METRIC.cancelled, { type: route.type });
    return existed;
  }

  /** Handles events of `eventClass` in this instance, at most `parallelism` at once. */
  addHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>, handler: EventHandler<T>, parallelism: number, options: HandlerOptions = {}): void {
    this.assertOpen();
    const route = eventRouteOf(eventClass);
    const type = route.type;
    this.codec.assertBuildable(eventClass);
    if (typeof handler !== 'function') throw new TypeError(`handler for '${type}' must be a function`);
    integer('parallelism', parallelism, 1, 1, 10_000);
    if (this.registrations.has(type)) throw new HandlerAlreadyRegisteredError(type);
    const timeoutMs = positive('timeoutMs', options.timeoutMs, this.options.handlerTimeoutMs);
    const retry = checkRetryPolicy(options.retry ?? this.options.retry, 'retry');

    // One dispatcher and one blocking reader per partition; one handler, one set of slots.
    const dispatchers = this.layout.partitionsOf(route).map(
      (keys) => new Dispatcher(keys, this.scripts, this.metrics, { batchSize: this.options.dispatchBatchSize, pollIntervalMs: this.options.pollIntervalMs }, this.wakes$),
    );
    const queues: ConsumerQueue[] = dispatchers.map((dispatcher, p) => {
      const keys = this.layout.partitionsOf(route)[p]!;
      const reader = new ReadyReader(keys, this.scripts, this.connections, this.metrics, {
        leaseMs: timeoutMs + this.options.leaseGraceMs,
        maxAttempts: retry.maxAttempts,
        blockMs: this.options.readerBlockMs,
        watchdogGraceMs: this.options.watchdogGraceMs,
      });
      return { keys, reader, onRetryScheduled: () => dispatcher.nudge() };
    });
    const consumer = new Consumer<T>({
      type,
      queues,
      eventClass,
      handler,
      parallelism,
      timeoutMs,
      retry,
      scripts: this.scripts,
      codec: this.codec,
      metrics: this.metrics,
      contextStore: this.contextStore,
      contextHandler: this.options.contextHandler ?? passThroughContextHandler,
    });
    const dispatching = merge(...dispatchers.map((d) => d.run())).subscribe();
    consumer.start();
    this.knownTypes.set(type, route);
    this.registrations.set(type, { consumer: consumer as unknown as Consumer<DelayedEventInstance>, stopDispatching: () => dispatching.unsubscribe() });
  }

  /** Stops handling `eventClass` here, waiting (up to closeTimeoutMs) for its running handlers. */
  async removeHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>): Promise<void> {
    const type = eventRouteOf(eventClass).type;
    const registration = this.registrations.get(type);
    if (!registration) return;
    this.registrations.delete(type);
    await this.unregister(registration);
  }

  /** The context of the handler running in this async scope, if any. */
  currentContext(): EventContext | undefined {
    return this.contextStore.current();
  }

  /** Runs `fn` with `context` as the current context: events it enqueues carry it. */
  runWithContext<R>(context: EventContext, fn: () => R): R {
    return this.contextStore.run(context, fn);
  }

  deadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T>, page: { offset?: number; limit?: number } = {}): Promise<Array<DeadLetter<T>>> {
    const offset = integer('offset', page.offset, 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = integer('limit', page.limit, 100, 1, 10_000);
    return this.deadLetterSets.list(this.layout.partitionsOf(eventRouteOf(eventClass)), eventClass, offset, limit);
  }

  /** Moves dead letters back to scheduled (due now, attempts reset); no ids means all of the type. */
  replayDeadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T>, ids?: readonly string[]): Promise<number> {
    return this.eachQueue(eventClass, ids, (keys, queueIds) => this.deadLetterSets.replay(keys, queueIds));
  }

  /** Deletes dead letters; no ids means all of the type. */
  purgeDeadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T>, ids?: readonly string[]): Promise<number> {
    return this.eachQueue(eventClass, ids, (keys, queueIds) => this.deadLetterSets.purge(keys, queueIds));
  }

  /**
   * Stops taking events, waits up to closeTimeoutMs for running handlers,
   * then releases every connection it opened. An event whose handler did not
   * finish keeps its lease in Redis and is redelivered when the lease expires.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      // Enqueues accepted before close are sent before the connections are released.
      this.batcher.flush();
      const registrations = [...this.registrations.values()];
      this.registrations.clear();
      await Promise.all(registrations.map((r) => this.unregister(r)));
      this.metrics.complete();
      await this.connections.close();
    })();
    return this.closing;
  }

  private scheduleOne<T extends DelayedEventInstance>(event: T, due: () => DueSpec, options: EnqueueOptions = {}): Observable<EnqueueStatus> {
    let prepared: PreparedEvent;
    try {
      prepared = this.prepare(event, due, options.context, performance.now());
    } catch (error) {
      return throwError(() => error);
    }
    return defer(() => this.storeOne(prepared, options.replace === true, performance.now()));
  }

  private storeOne(prepared: PreparedEvent, replace: boolean, requestedAt: number): Promise<EnqueueStatus> {
    const keys = this.layout.forEvent(prepared.route, prepared.id);
    prepared.requestedAt = requestedAt;
    return this.batcher.submit(keys, [prepared], replace).then((statuses) => {
      this.countStored([prepared], statuses);
      return statuses[0]!;
    });
  }

  /** Validates and serializes at the call: errors name the caller's mistake, and the event is captured as it is now. */
  private prepare(event: DelayedEventInstance, due: () => DueSpec, context: EventContext | undefined, requestedAt: number): PreparedEvent {
    this.assertOpen();
    const captured = context ?? (this.options.contextProvider ? this.options.contextProvider() : this.contextStore.current());
    const encoded = this.codec.encode(event, captured, Date.now());
    return { route: encoded.route, type: encoded.type, id: encoded.id, body: encoded.body, due: due(), requestedAt };
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
        const keys = this.layout.forEvent(e.route, e.id);
        const queue = byQueue.get(keys.tag);
        if (queue) queue.indexes.push(i);
        else byQueue.set(keys.tag, { keys, indexes: [i] });
      });
      const statuses: EnqueueStatus[] = new Array(events.length);
      await Promise.all(
        [...byQueue.values()].map(async ({ keys, indexes }) => {
          const results = await this.batcher.submit(keys, indexes.map((i) => events[i]!), replace);
          results.forEach((status, k) => (statuses[indexes[k]!] = status));
        }),
      );
      this.countStored(events, statuses);
      return statuses;
    });
  }

  private countStored(events: readonly PreparedEvent[], statuses: readonly EnqueueStatus[]): void {
    const counts = new Map<string, { stored: number; duplicates: number }>();
    events.forEach((e, i) => {
      this.knownTypes.set(e.type, e.route);
      const count = counts.get(e.type) ?? { stored: 0, duplicates: 0 };
      if (statuses[i] === 'duplicate') count.duplicates++;
      else count.stored++;
      counts.set(e.type, count);
    });
    for (const [type, count] of counts) {
      this.metrics.count(METRIC.duplicatesIgnored, { type }, count.duplicates);
      this.metrics.count(METRIC.events, { type, direction: 'enqueue' }, count.stored);
    }
  }

  private async unregister(registration: Registration): Promise<void> {
    registration.stopDispatching();
    await registration.consumer.stop(this.options.closeTimeoutMs);
  }

  /** Runs `action` on each of the type's queues, with the given ids that live there (or undefined: all). */
  private async eachQueue(eventClass: EventClass, ids: readonly string[] | undefined, action: (keys: TypeKeys, ids?: readonly string[]) => Promise<number>): Promise<number> {
    const route = eventRouteOf(eventClass);
    if (!ids) {
      const counts = await Promise.all(this.layout.partitionsOf(route).map((keys) => action(keys)));
      return counts.reduce((a, b) => a + b, 0);
    }
    const byQueue = new Map<string, { keys: TypeKeys; ids: string[] }>();
    for (const id of ids) {
      const keys = this.layout.forEvent(route, id);
      const queue = byQueue.get(keys.tag);
      if (queue) queue.ids.push(id);
      else byQueue.set(keys.tag, { keys, ids: [id] });
    }
    const counts = await Promise.all([...byQueue.values()].map((queue) => action(queue.keys, queue.ids)));
    return counts.reduce((a, b) => a + b, 0);
  }

  /**
   * A Redis call outlived commandTimeoutMs. The service's own connection is
   * reset; a client handed in stays as it is, so its owner is told.
   */
  private commandStuck(): void {
    const owned = this.connections.ownsCommandConnection;
    this.metrics.count(METRIC.redisCallTimeouts, { connection: owned ? 'owned' : 'passed-in' });
    if (owned) {
      this.connections.resetCommandConnection();
    } else if (performance.now() - this.lastStuckWarning > 60_000) {
      this.lastStuckWarning = performance.now();
      process.emitWarning(
        `a Redis call on the client passed to DelayedEventService took longer than commandTimeoutMs (${this.options.commandTimeoutMs} ms); ` +
          'the service does not reset a client it does not own: give it ioredis commandTimeout and keepAlive settings so a half-open connection is replaced',
        { code: 'DELAYED_EVENTS_REDIS_CALL_TIMEOUT' },
      );
    }
  }

  private assertOpen(): void {
    if (this.closing) throw new ServiceClosedError();
  }

  private async sampleGauges(): Promise<GaugeSample[]> {
    const [queues, eviction] = await Promise.all([this.sampleQueueGauges(), this.sampleEviction()]);
    return [...queues, ...eviction];
  }

  /** How many masters may evict this service's keys, and under which policies; none when INFO is refused. */
  private async sampleEviction(): Promise<GaugeSample[]> {
    try {
      const masters = await evictionSettings(this.connections.command);
      // A cluster client lists no masters until it has connected.
      if (masters.length === 0) return [];
      const tags = { policy: [...new Set(masters.map((m) => m.policy))].sort().join(',') };
      return [{ name: METRIC.evictingMasters, value: masters.filter(evictsKeysWithoutTtl).length, tags }];
    } catch {
      return [];
    }
  }

  private async sampleQueueGauges(): Promise<GaugeSample[]> {
    const samples = await Promise.all(
      [...this.knownTypes.values()].map(async (route) => {
        // One slot per queue, so one pipeline per queue works on a Cluster; partitions are summed.
        const perQueue = await Promise.all(
          this.layout.partitionsOf(route).map(async (keys) => {
            const pipeline = this.connections.command.pipeline().hlen(keys.meta).llen(keys.ready).zcard(keys.inFlight).zscore(keys.inFlight, LEASE_PIN).zcard(keys.dead);
            const replies = (await pipeline.exec()) ?? [];
            const [stored = 0, ready = 0, inFlightMembers = 0, pinScore = 0, dead = 0] = [0, 1, 2, 3, 4].map((i) => Number(replies[i]?.[1] ?? 0));
            const inFlight = inFlightMembers - (pinScore > 0 ? 1 : 0);
            // Every stored event is in exactly one state, and the schedule is
            // spread over buckets: what is in no other state is scheduled.
            return [Math.max(0, stored - ready - inFlight - dead), ready, inFlight, dead];
          }),
        );
        const total = (i: number) => perQueue.reduce((sum, counts) => sum + counts[i]!, 0);
        const tags = { type: route.type };
        return [
          { name: METRIC.scheduledCount, value: total(0), tags },
          { name: METRIC.readyCount, value: total(1), tags },
          { name: METRIC.inFlightCount, value: total(2), tags },
          { name: METRIC.deadLetterCount, value: total(3), tags },
        ];
      }),
    );
    return samples.flat();
  }
}
