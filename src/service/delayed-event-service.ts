import { type Observable, type Subscription, defer, firstValueFrom, map, merge, of, throwError } from 'rxjs';
import { Consumer, type ConsumerQueue } from '../runtime/consumer';
import { DEAD_LETTER_CHUNK, DeadLetters, type DeadLetter } from './dead-letters';
import { type DueTimelineOptions, type EventCounts, type EventState, type EventTarget, type EventTypeInfo, type InspectedEvent, Inspector, type ListOptions } from './inspector';
import type { DueTimeline } from './due-timeline';
import { type ActivitySlot, ActivityRecorder } from '../runtime/activity-log';
import type { JsonEvent } from '../core/stored-body';
import { type DelayedEventInstance, type EventClass, type EventRoute, eventRouteOf } from '../core/delayed-event.decorator';
import { Dispatcher } from '../runtime/dispatcher';
import { EnqueueBatcher } from './enqueue-batcher';
import { type Occurrence, type RecurringSchedule, RecurringSchedules, type ScheduleOptions } from './recurring-schedules';
import type { RecurrenceSpec } from '../core/recurrence';
import { type Delay, dateToMillis, delayToMillis } from '../core/duration';
import { HandlerAlreadyRegisteredError, InvalidOptionError, RedisConnectionError, ServiceClosedError, classifyRedisError } from '../core/errors';
import { type EncodedEvent, EventCodec } from '../core/event-codec';
import { type EventContext, EventContextStore } from '../core/event-context';
import { evictionSettings, evictsKeysWithoutTtl } from '../redis/eviction-policy';
import { type EventHandler, passThroughContextHandler } from '../runtime/handler-invocation';
import { type DueSpec, type EnqueueStatus, LuaScripts } from '../redis/lua-scripts';
import { type GaugeSample, METRIC, type Metric, Metrics } from '../runtime/metrics';
import { OutageBackoff } from '../runtime/outage-backoff';
import { ReadyReader } from '../runtime/ready-reader';
import { RedisConnections } from '../redis/redis-connections';
import { pingWithin, waitForRedis } from '../redis/redis-readiness';
import { ServiceLog } from '../runtime/service-log';
import type { EnqueueScope, ServiceHealth } from './instrumentation';
import { DEFAULT_GROUP, RedisLayout, type TypeKeys } from '../redis/redis-layout';
import { checkGroupOption, checkIdArgument } from '../core/names';
import { isUnsent } from '../redis/ready-gate';
import { permissionError } from '../redis/permissions';
import { type RetryPolicy, checkRetryPolicy } from '../core/retry-policy';
import { type DelayedEventServiceOptions, type ResolvedOptions, integer, positive, resolveOptions } from './service-options';
import { WAKE_ALL, type Wake, wakeListener } from '../runtime/wake-listener';

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
  /** What instrumentEnqueue answered for it: told when the store settled. */
  scope?: EnqueueScope | undefined;
  readonly due: DueSpec;
  /** When the store was asked for (see ScheduledBody): at the call, or at each subscription of the cold form. */
  requestedAt: number;
}

/**
 * Events a handler holds claimed ahead of its free slots by default: enough
 * that a call of complete-and-claim carries over a hundred events and its
 * cost per event levels off (benchmarks/RESULTS.md shows the end-to-end rows
 * with prefetch 0 beside it); the figure Spring AMQP picked for its consumers.
 */
const DEFAULT_PREFETCH = 250;

export interface HandlerOptions {
  readonly retry?: RetryPolicy;
  readonly timeoutMs?: number;
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
}

/** Validates a group option; undefined is the default group. */
function groupName(group: string | undefined): string {
  if (group === undefined) return DEFAULT_GROUP;
  return checkGroupOption(group);
}

interface Registration {
  readonly consumer: Consumer<DelayedEventInstance>;
  readonly stopDispatching: () => void;
  /** Its readers, by the tag of the queue they read (for nudges). */
  readonly readers: ReadonlyArray<{ readonly queueTag: string; readonly reader: ReadyReader }>;
  /** Loops it runs, for health(). */
  readonly loops?: { readonly dispatchers: number; readonly readers: number };
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
  /** The scripts of the handlers' loops, on their own connection (RedisConnections.handling); made with the first handler. */
  private handlingScripts: LuaScripts | undefined;
  private readonly codec: EventCodec;
  private readonly batcher: EnqueueBatcher;
  private readonly contextStore = new EventContextStore();
  private readonly metrics: Metrics;
  private readonly deadLetterSets: DeadLetters;
  private readonly inspector: Inspector;
  private readonly activityRecorder: ActivityRecorder | undefined;
  private readonly wakes$: Observable<Wake>;
  private readonly registrations = new Map<string, Registration>();
  /** Types this instance enqueued or handles; their gauges are sampled. */
  private readonly knownTypes = new Map<string, EventRoute>();
  private closing: Promise<void> | undefined;
  private readonly log: ServiceLog;
  private readonly recurring: RecurringSchedules;
  private recurringLoop: Subscription | undefined;
  /** The readers of each queue (by tag), nudged when events become ready there. */
  private readonly readersByQueue = new Map<string, Set<ReadyReader>>();
  /** Nudges readers on 'ready' wake-ups, while any handler runs here. */
  private readyWakes: Subscription | undefined;
  /** Per queue tag, the marker value its dispatchers last read (markerSeen). */
  private readonly markers = new Map<string, string>();
  /** When the last warning about a stuck call on a client handed in was given; they come at most once a minute. */
  private lastStuckWarning = Number.NEGATIVE_INFINITY;

  constructor(options: DelayedEventServiceOptions) {
    this.options = resolveOptions(options);
    this.layout = new RedisLayout(this.options.prefix);
    this.log = new ServiceLog({
      logger: this.options.logger,
      logPayloads: this.options.logPayloads,
      prefix: this.options.prefix,
      ping: () => this.connections.command.ping(),
    });
    this.metrics = new Metrics(() => this.sampleGauges(), this.options.gaugeIntervalMs, this.log.onNotice);
    this.metrics$ = this.metrics.metrics$;
    this.connections = new RedisConnections(this.options.redis, (error) => {
      this.log.connectionError(error);
      this.metrics.count(METRIC.redisErrors, { loop: 'connection', type: '' });
    });
    this.scripts = new LuaScripts(this.connections.command, this.layout.wakeChannel, {
      ms: this.options.commandTimeoutMs,
      onStuck: () => this.commandStuck(),
    }, this.options.idempotencyWindowMs, undefined, (error) => this.log.refused(error));
    this.codec = new EventCodec(this.options.maxPayloadBytes);
    this.batcher = new EnqueueBatcher((keys, events, replace) => this.scripts.enqueue(keys, events, replace, this.options.durableEnqueue));
    this.deadLetterSets = new DeadLetters(this.connections.command, this.scripts, this.codec);
    this.recurring = new RecurringSchedules(this.connections.command, this.scripts, this.layout, this.codec, this.metrics, {
      pollIntervalMs: this.options.pollIntervalMs,
      store: (occurrences, replace) => this.storeOccurrences(occurrences, replace),
      cancel: (route, id) => this.scripts.cancel(this.layout.forEvent(route, id), id, false),
      onLost: (type, names) => this.log.registrationsLost({ type, schedules: names }),
    });
    this.inspector = new Inspector(this.connections.command, this.layout, this.codec, this.scripts);
    this.activityRecorder = this.options.recordActivity ? new ActivityRecorder(this.connections.command, this.layout, this.options.commandTimeoutMs, (error) =>
          this.log.degraded('activity', `Redis refuses the activity counts (${error.message}); the dashboard's charts stay empty: grant +hincrby and +pexpire, or set recordActivity: false`),
        ) : undefined;
    this.wakes$ = wakeListener(this.connections, this.layout.wakeChannel, {
      pingEveryMs: this.options.readerBlockMs,
      pingTimeoutMs: this.options.watchdogGraceMs,
      onReset: () => this.metrics.count(METRIC.wakeListenerResets, {}),
      onRefused: (error) => this.log.degraded('wake-ups', `Redis refuses the wake-up subscription (${error.message}); dispatchers and readers find new events by polling (every pollIntervalMs and readerBlockMs) instead: grant +subscribe and the channel ${this.layout.wakeChannel}`),
    });
  }

  /** The namespace of this service's keys in Redis (the `prefix` option). */
  get prefix(): string {
    return this.options.prefix;
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
      prepared = this.prepare(event, () => ({ delayMs: delayToMillis(delay) }), options.context, requestedAt, { batch: false, replace: options.replace === true });
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
        this.prepare(entry.event, () => (entry.at !== undefined ? { atMs: dateToMillis(entry.at) } : { delayMs: delayToMillis(entry.delay ?? 0) }), entry.context, calledAt, {
          batch: true,
          replace: options.replace === true,
        }),
      );
    } catch (error) {
      return throwError(() => error);
    }
    return this.store(prepared, options.replace === true);
  }

  /** Removes a stored event in any state; resolves whether it existed. */
  async cancel<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, id: string): Promise<boolean> {
    checkIdArgument(id);
    await this.whenReady(async () => undefined);
    // A type name (tools without the app's classes) is looked up among the partitions stored.
    const keys = typeof eventClass === 'string' ? await this.inspector.queueFor(eventClass, id) : this.layout.forEvent(eventRouteOf(eventClass), id);
    if (!keys) return false;
    const existed = await this.scripts.cancel(keys, id);
    if (existed) this.metrics.count(METRIC.cancelled, { type: keys.type });
    return existed;
  }

  /**
   * Handles events of `eventClass` in this instance, at most `parallelism` at
   * once. With `group`, the handler joins that subscriber group: every group
   * registered for the type receives every event that falls due after it was
   * registered, each with its own attempts, retries and dead letters.
   */
  addHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>, handler: EventHandler<T>, parallelism: number, options: HandlerOptions = {}): void {
    this.assertOpen();
    const route = eventRouteOf(eventClass);
    const type = route.type;
    this.codec.assertBuildable(eventClass);
    if (typeof handler !== 'function') throw new TypeError(`handler for '${type}' must be a function`);
    integer('parallelism', parallelism, 1, 1, 10_000);
    const group = groupName(options.group);
    const registrationKey = `${type}|${group}`;
    if (this.registrations.has(registrationKey)) throw new HandlerAlreadyRegisteredError(type, group);
    const timeoutMs = positive('timeoutMs', options.timeoutMs, this.options.handlerTimeoutMs);
    const prefetch = integer('prefetch', options.prefetch, DEFAULT_PREFETCH, 0, 10_000);
    const retry = checkRetryPolicy(options.retry ?? this.options.retry, 'retry');

    // Per partition: the type's dispatcher moves due events to every registered group;
    // a named group also runs its own, for its retries and expired leases, and a blocking reader.
    const dispatchSettings = { batchSize: this.options.dispatchBatchSize, pollIntervalMs: this.options.pollIntervalMs };
    const scripts = this.scriptsOfHandlers();
    const dispatchers: Dispatcher[] = [];
    const queues: ConsumerQueue[] = this.layout.partitionsOf(route).map((shared) => {
      this.registerGroup(shared, group);
      // The default group's handlers here keep getting events once the type has named groups.
      if (group !== DEFAULT_GROUP && this.registrations.has(`${type}|${DEFAULT_GROUP}`)) this.registerGroup(shared, DEFAULT_GROUP);
      // A named group's registration is this instance's to restore if Redis loses it.
      const onMarker = group === DEFAULT_GROUP ? undefined : (marker: string) => this.markerSeen(shared, marker);
      const onMoved = () => this.nudgeReaders(shared.tag);
      const typeDispatcher = new Dispatcher(shared, scripts, this.metrics, { ...dispatchSettings, defaultGroupHere: group === DEFAULT_GROUP, onMarker, onMoved }, this.wakes$);
      dispatchers.push(typeDispatcher);
      const keys = this.layout.forGroup(shared, group);
      let ownDispatcher = typeDispatcher;
      if (keys !== shared) {
        ownDispatcher = new Dispatcher(keys, scripts, this.metrics, { ...dispatchSettings, defaultGroupHere: false, onMoved }, this.wakes$);
        dispatchers.push(ownDispatcher);
      }
      const reader = new ReadyReader(keys, scripts, this.metrics, {
        leaseMs: timeoutMs + this.options.leaseGraceMs,
        graceMs: this.options.leaseGraceMs,
        maxAttempts: retry.maxAttempts,
        blockMs: this.options.readerBlockMs,
        activity: this.activityRecorder?.of(type),
      });
      return { keys, reader, onRetryScheduled: () => ownDispatcher.nudge() };
    });
    const readers = queues.map((q) => ({ queueTag: q.keys.queueTag, reader: q.reader }));
    for (const { queueTag, reader } of readers) {
      let set = this.readersByQueue.get(queueTag);
      if (!set) this.readersByQueue.set(queueTag, (set = new Set()));
      set.add(reader);
    }
    // Events moved to ready lists by any instance's dispatcher wake this instance's readers at once.
    this.readyWakes ??= this.wakes$.subscribe((wake) => {
      if (wake.tag === WAKE_ALL) for (const set of this.readersByQueue.values()) for (const r of set) r.nudge();
      else if (wake.due < 0) this.nudgeReaders(wake.tag);
    });
    const consumer = new Consumer<T>({
      type,
      group,
      queues,
      eventClass,
      handler,
      parallelism,
      prefetch,
      timeoutMs,
      retry,
      scripts,
      codec: this.codec,
      metrics: this.metrics,
      contextStore: this.contextStore,
      contextHandler: this.options.contextHandler ?? passThroughContextHandler,
      activity: this.activityRecorder?.of(type),
    });
    const dispatching = merge(...dispatchers.map((d) => d.run())).subscribe();
    consumer.start();
    this.startRecurring();
    this.knownTypes.set(type, route);
    this.registrations.set(registrationKey, {
      consumer: consumer as unknown as Consumer<DelayedEventInstance>,
      stopDispatching: () => dispatching.unsubscribe(),
      readers,
      loops: { dispatchers: dispatchers.length, readers: queues.length },
    });
  }

  /** Stops handling `eventClass` (in `group`, default: the default group) here, waiting (up to closeTimeoutMs) for its running handlers. The group stays registered. */
  async removeHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>, group?: string): Promise<void> {
    const key = `${eventRouteOf(eventClass).type}|${groupName(group)}`;
    const registration = this.registrations.get(key);
    if (!registration) return;
    this.registrations.delete(key);
    await this.unregister(registration);
  }

  /**
   * Unregisters subscriber group `group` of `eventClass` for good, in every
   * instance: events falling due are no longer delivered to it, and what was
   * waiting for it (ready, in flight, retries, dead letters) is dropped. Resolves
   * whether it was registered. Handlers of the group still running here are stopped first.
   */
  async removeGroup<T extends DelayedEventInstance>(eventClass: EventClass<T>, group: string): Promise<boolean> {
    const route = eventRouteOf(eventClass);
    const name = groupName(group);
    if (name === DEFAULT_GROUP) throw new InvalidOptionError('group', "the default group cannot be removed; stop its handlers with removeHandler");
    await this.removeHandler(eventClass, name);
    const removed = await Promise.all(
      this.layout.partitionsOf(route).map(async (shared) => {
        let first: boolean | undefined;
        // In calls of DEAD_LETTER_CHUNK events, so a large group never holds Redis in one script.
        for (;;) {
          const { existed, left } = await this.scripts.removeGroup(shared, name, DEAD_LETTER_CHUNK);
          first ??= existed;
          if (left === 0) return first;
        }
      }),
    );
    return removed.some(Boolean);
  }

  /** The context of the handler running in this async scope, if any. */
  currentContext(): EventContext | undefined {
    return this.contextStore.current();
  }

  /** Runs `fn` with `context` as the current context: events it enqueues carry it. */
  runWithContext<R>(context: EventContext, fn: () => R): R {
    return this.contextStore.run(context, fn);
  }

  /** One page of the dead letters of `eventClass` in `group` (default: the default group), oldest first. */
  deadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T>, page?: { group?: string; offset?: number; limit?: number }): Promise<Array<DeadLetter<T>>>;
  /** By type name, for tools without the app's classes: events come back as parsed JSON. */
  deadLetters(type: string, page?: { group?: string; offset?: number; limit?: number }): Promise<Array<DeadLetter<JsonEvent>>>;
  async deadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, page: { group?: string; offset?: number; limit?: number } = {}): Promise<Array<DeadLetter<T>>> {
    await this.whenReady(async () => undefined);
    const offset = integer('offset', page.offset, 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = integer('limit', page.limit, 100, 1, 10_000);
    const group = groupName(page.group);
    const partitions = typeof eventClass === 'string' ? ((await this.inspector.queuesOf(eventClass)) ?? []) : this.layout.partitionsOf(eventRouteOf(eventClass));
    const queues = partitions.map((keys) => this.layout.forGroup(keys, group));
    return this.deadLetterSets.list(queues, eventClass, offset, limit);
  }

  /** Moves dead letters back to scheduled in their group (due now, attempts reset); no ids means all of the group's. */
  replayDeadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, ids?: readonly string[], options: { group?: string } = {}): Promise<number> {
    const group = groupName(options.group);
    return this.eachQueue(eventClass, ids, (keys, queueIds) => this.deadLetterSets.replay(this.layout.forGroup(keys, group), queueIds));
  }

  /** Deletes dead letters of a group; no ids means all of the group's. */
  purgeDeadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, ids?: readonly string[], options: { group?: string } = {}): Promise<number> {
    const group = groupName(options.group);
    return this.eachQueue(eventClass, ids, (keys, queueIds) => this.deadLetterSets.purge(this.layout.forGroup(keys, group), queueIds));
  }

  /**
   * Resolves once Redis answers (PING) and holds every script (SCRIPT LOAD on
   * each master); rejects with a RedisConnectionError after `timeoutMs`
   * (default commandTimeoutMs), at once for refused credentials. Its `reason`
   * says why: 'refused', 'auth', 'tls', 'timeout' or 'other'.
   */
  waitUntilReady(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    try {
      this.assertOpen();
      return waitForRedis(this.connections.command, positive('timeoutMs', options.timeoutMs, this.options.commandTimeoutMs));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * What a readiness probe needs: whether Redis answers a PING now (within
   * `timeoutMs`, default 1 s), the loops running here, and the last Redis
   * error seen. Never rejects.
   */
  async health(options: { readonly timeoutMs?: number } = {}): Promise<ServiceHealth> {
    // Waits for the connection with the calls' shared wait: health probes during an outage add no listeners.
    const up = !this.closing && (await pingWithin(this.connections.command, positive('timeoutMs', options.timeoutMs, 1_000), () => this.scripts.gate.wait()));
    let dispatchers = 0;
    let readers = 0;
    for (const registration of this.registrations.values()) {
      dispatchers += registration.loops?.dispatchers ?? 0;
      readers += registration.loops?.readers ?? 0;
    }
    const last = this.log.lastError;
    const problem = this.scripts.refusal ?? this.handlingScripts?.refusal;
    return {
      ready: up && !this.closing && !problem,
      redis: up ? 'up' : 'down',
      loops: { dispatchers, readers },
      ...(last ? { lastError: { message: last.message, at: new Date(last.at) } } : {}),
      ...(problem ? { problem } : {}),
    };
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
      this.recurringLoop?.unsubscribe();
      this.readyWakes?.unsubscribe();
      await Promise.all(registrations.map((r) => this.unregister(r)));
      // The last slot's counts, if Redis takes them within a second.
      await this.activityRecorder?.close().catch(() => undefined);
      this.metrics.complete();
      this.log.close();
      await this.connections.close();
    })();
    return this.closing;
  }

  /**
   * Schedules `template`'s class to recur: every occurrence is an ordinary event
   * of that class with id `<name>@<occurrence ms>`, due at the occurrence, handled
   * like any other. `spec` is `{ every: delay }` or `{ cron, tz }`. Calling it
   * again with the same class and name replaces the schedule. Resolves when stored.
   */
  async schedule<T extends DelayedEventInstance>(name: string, template: T, spec: RecurrenceSpec, options: ScheduleOptions = {}): Promise<void> {
    this.assertOpen();
    await this.whenReady(() => this.recurring.define(name, template, spec, options));
    this.startRecurring();
  }

  /** Removes a recurring schedule (and the occurrence it had enqueued ahead); resolves whether it existed. */
  async unschedule<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, name: string): Promise<boolean> {
    await this.whenReady(async () => undefined);
    const route = await this.recurringRoute(eventClass);
    return route ? this.recurring.remove(route, name) : false;
  }

  /** The recurring schedules of `eventClass` (or a type name), each with its spec and next occurrence. */
  async schedules<T extends DelayedEventInstance>(eventClass: EventClass<T> | string): Promise<RecurringSchedule[]> {
    await this.whenReady(async () => undefined);
    const route = await this.recurringRoute(eventClass);
    return route ? this.recurring.describe(route) : [];
  }

  private async recurringRoute(eventClass: EventClass | string): Promise<EventRoute | undefined> {
    if (typeof eventClass !== 'string') return eventRouteOf(eventClass);
    if (eventClass.length === 0) throw new InvalidOptionError('type', 'give a type name such as payment.check');
    return this.recurring.routeOf(eventClass);
  }

  /** Every instance that handles events or schedules them advances every schedule under the prefix. */
  private startRecurring(): void {
    if (this.recurringLoop || this.closing) return;
    this.recurringLoop = this.recurring.run().subscribe();
  }

  private async storeOccurrences(occurrences: readonly Occurrence[], replace: boolean): Promise<void> {
    const requestedAt = performance.now();
    const prepared = occurrences.map((o): PreparedEvent => ({ route: o.route, type: o.route.type, id: o.id, body: o.body, due: { atMs: o.at }, requestedAt }));
    await firstValueFrom(this.store(prepared, replace));
  }

  private scheduleOne<T extends DelayedEventInstance>(event: T, due: () => DueSpec, options: EnqueueOptions = {}): Observable<EnqueueStatus> {
    let prepared: PreparedEvent;
    try {
      prepared = this.prepare(event, due, options.context, performance.now(), { batch: false, replace: options.replace === true });
    } catch (error) {
      return throwError(() => error);
    }
    return defer(() => this.storeOne(prepared, options.replace === true, performance.now()));
  }

  private storeOne(prepared: PreparedEvent, replace: boolean, requestedAt: number): Promise<EnqueueStatus> {
    const keys = this.layout.forEvent(prepared.route, prepared.id);
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
            this.countStoredOne(prepared, status);
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

  /** Validates and serializes at the call: errors name the caller's mistake, and the event is captured as it is now. */
  private prepare(
    event: DelayedEventInstance,
    due: () => DueSpec,
    context: EventContext | undefined,
    requestedAt: number,
    how: { readonly batch: boolean; readonly replace: boolean } = { batch: true, replace: false },
  ): PreparedEvent {
    this.assertOpen();
    const instrument = this.options.instrumentEnqueue;
    if (instrument === undefined) {
      const captured = context ?? (this.options.contextProvider ? this.options.contextProvider(this.contextStore.current()) : this.contextStore.current());
      const encoded = this.codec.encode(event, captured, Date.now());
      return { route: encoded.route, type: encoded.type, id: encoded.id, body: encoded.body, due: due(), requestedAt };
    }
    let scope: EnqueueScope | undefined;
    try {
      const info = { type: eventRouteOf(event.constructor as EventClass).type, id: String(event.id), ...how };
      scope = instrument(info) ?? undefined;
    } catch {
      // Instrumentation never fails an enqueue; an event class error is reported by encode below.
    }
    try {
      const capture = () => context ?? (this.options.contextProvider ? this.options.contextProvider(this.contextStore.current()) : this.contextStore.current());
      const captured = scope?.capture ? scope.capture(capture) : capture();
      const encoded = this.codec.encode(event, captured, Date.now());
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
        const keys = this.layout.forEvent(e.route, e.id);
        const queue = byQueue.get(keys.tag);
        if (queue) queue.indexes.push(i);
        else byQueue.set(keys.tag, { keys, indexes: [i] });
      });
      const statuses: EnqueueStatus[] = new Array(events.length);
      try {
        await Promise.all(
          [...byQueue.values()].map(async ({ keys, indexes }) => {
            const results = await this.batcher.submit(keys, indexes.map((i) => events[i]!), replace);
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

  /** countStored() of one event, without the tallies a batch needs. */
  private countStoredOne(event: PreparedEvent, status: EnqueueStatus): void {
    this.knownTypes.set(event.type, event.route);
    if (status === 'duplicate') {
      this.metrics.count(METRIC.duplicatesIgnored, { type: event.type }, 1);
    } else {
      this.metrics.count(METRIC.events, { type: event.type, group: '', direction: 'enqueue' }, 1);
      this.activityRecorder?.of(event.type).enqueued(1);
    }
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
      this.metrics.count(METRIC.events, { type, group: '', direction: 'enqueue' }, count.stored);
      if (count.stored > 0) this.activityRecorder?.of(type).enqueued(count.stored);
    }
  }

  /** Registers the group in Redis; through an outage, again until it lands (dispatch meanwhile delivers to the groups registered). */
  /**
   * Registers `group` of a queue, retrying through an outage. Sent on both
   * connections: an enqueue made after addHandler (command connection) and
   * this instance's first dispatch (handlers' connection) each run after it.
   */
  private registerGroup(shared: TypeKeys, group: string): void {
    const backoff = new OutageBackoff();
    const attempt = (): void => {
      if (this.closing) return;
      Promise.all([this.scripts.registerGroup(shared, group), this.scriptsOfHandlers().registerGroup(shared, group)]).then(
        () => undefined,
        () => {
          this.metrics.count(METRIC.redisErrors, { loop: 'connection', type: shared.type });
          setTimeout(attempt, backoff.next()).unref();
        },
      );
    };
    attempt();
  }

  /**
   * A queue's marker, as a dispatcher of a named group here read it. A value
   * other than the one seen before means Redis lost this queue's registrations
   * (it restarted empty, was flushed, or failed over to an empty replica):
   * every named group of this instance on the queue is registered again, and
   * the loss said once.
   */
  private markerSeen(shared: TypeKeys, marker: string): void {
    const seen = this.markers.get(shared.tag);
    this.markers.set(shared.tag, marker);
    if (seen === undefined || seen === marker || this.closing) return;
    const groups = [...this.registrations.keys()].filter((key) => key.startsWith(`${shared.type}|`)).map((key) => key.slice(shared.type.length + 1));
    const named = groups.filter((g) => g !== DEFAULT_GROUP);
    if (named.length === 0) return;
    this.log.registrationsLost({ type: shared.type, queue: shared.tag, groups: named });
    for (const group of named) this.registerGroup(shared, group);
    // The default group's handlers here keep getting events, as addHandler arranged.
    if (groups.includes(DEFAULT_GROUP)) this.registerGroup(shared, DEFAULT_GROUP);
  }

  /** Events may be ready in a queue: its readers here look at once. */
  private nudgeReaders(queueTag: string): void {
    const set = this.readersByQueue.get(queueTag);
    if (set) for (const reader of set) reader.nudge();
  }

  private async unregister(registration: Registration): Promise<void> {
    for (const { queueTag, reader } of registration.readers) this.readersByQueue.get(queueTag)?.delete(reader);
    registration.stopDispatching();
    await registration.consumer.stop(this.options.closeTimeoutMs);
  }

  /** Runs `action` on each of the type's queues, with the given ids that live there (or undefined: all). */
  private async eachQueue(eventClass: EventClass | string, ids: readonly string[] | undefined, action: (keys: TypeKeys, ids?: readonly string[]) => Promise<number>): Promise<number> {
    if (typeof eventClass === 'string') {
      // A type name: its partitions found in Redis may be fewer than it has, so
      // each takes every id given; an id stored elsewhere is not in its set and is skipped.
      const found = await Promise.all(((await this.inspector.queuesOf(eventClass)) ?? []).map((keys) => action(keys, ids)));
      return found.reduce((a, b) => a + b, 0);
    }
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
  /** The scripts the handlers' loops call: on a connection of their own, so enqueues never hold them up. */
  private scriptsOfHandlers(): LuaScripts {
    this.handlingScripts ??= new LuaScripts(
      this.connections.handling,
      this.layout.wakeChannel,
      {
        ms: this.options.commandTimeoutMs,
        onStuck: () => {
          this.metrics.count(METRIC.redisCallTimeouts, { connection: 'owned' });
          this.connections.resetHandlingConnection();
        },
      },
      this.options.idempotencyWindowMs,
      undefined,
      (error) => this.log.refused(error),
    );
    return this.handlingScripts;
  }

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
    // Not sampled until the command connection is ready (it keeps no offline queue).
    if (this.connections.command.status !== 'ready') return [];
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
        // counts() reads them the same way: one implementation (src/service/inspector.ts).
        const { counts, paused } = await this.inspector.gaugeSample(route);
        const tags = { type: route.type };
        return [
          { name: METRIC.scheduledCount, value: counts.scheduled, tags },
          { name: METRIC.readyCount, value: counts.ready, tags },
          { name: METRIC.inFlightCount, value: counts.inFlight, tags },
          { name: METRIC.deadLetterCount, value: counts.dead, tags },
          { name: METRIC.paused, value: paused ? 1 : 0, tags },
        ];
      }),
    );
    return samples.flat();
  }

  // Inspection and control (src/service/inspector.ts; docs/api.md, "Inspection").
  // Each takes an event class, or a type name: then payloads come back as parsed JSON.
  // Each bounded call fails with RedisCallTimeoutError after commandTimeoutMs, as the
  // scripts do; types() is not: its SCAN takes as long as the keyspace is large.

  /** Every event type with stored events, registered groups or a pause under this prefix, whichever instance stored them. */
  types(): Promise<EventTypeInfo[]> {
    return this.whenReady(() => this.inspector.types());
  }

  /** An inspection call: refused after close(), sent once the connection is ready, under the call deadline. */
  private inspect<R>(name: string, work: () => Promise<R>): Promise<R> {
    if (this.closing) return Promise.reject(new ServiceClosedError());
    return this.scripts.bounded(name, work);
  }

  /** Runs `work` once the command connection is ready, or fails unsent within about a second (src/redis/ready-gate.ts). */
  private whenReady<R>(work: () => Promise<R>): Promise<R> {
    if (this.closing) return Promise.reject(new ServiceClosedError());
    const waiting = this.scripts.gate.wait();
    return waiting ? waiting.then(work) : work();
  }

  /** Events in each state (and per group, where groups are registered); undefined for a type name nothing is stored under. */
  counts(eventClass: EventTarget): Promise<EventCounts | undefined> {
    return this.inspect('counts', () => this.inspector.counts(eventClass));
  }

  /** One stored event and its state, or undefined. */
  find<T extends DelayedEventInstance>(eventClass: EventClass<T>, id: string): Promise<InspectedEvent<T> | undefined>;
  find(type: string, id: string): Promise<InspectedEvent<JsonEvent> | undefined>;
  find<T extends DelayedEventInstance>(eventClass: EventTarget<T>, id: string): Promise<InspectedEvent<T | JsonEvent> | undefined> {
    return this.inspect('find', () => this.inspector.find(eventClass, id));
  }

  /** One page (limit 1..1,000) of the events in `state`, in that state's order. */
  list<T extends DelayedEventInstance>(eventClass: EventClass<T>, state: EventState, options?: ListOptions): Promise<Array<InspectedEvent<T>>>;
  list(type: string, state: EventState, options?: ListOptions): Promise<Array<InspectedEvent<JsonEvent>>>;
  list<T extends DelayedEventInstance>(eventClass: EventTarget<T>, state: EventState, options?: ListOptions): Promise<Array<InspectedEvent<T | JsonEvent>>> {
    return this.inspect('list', () => this.inspector.list(eventClass, state, options));
  }

  /** Moves a scheduled or ready event to a new due time (a delay from now, or a Date), keeping payload, context and attempts; false when it is not stored, in flight or dead. */
  reschedule(eventClass: EventTarget, id: string, delayOrDate: Delay | Date): Promise<boolean> {
    return this.whenReady(() => this.inspector.reschedule(eventClass, id, delayOrDate));
  }

  /** Makes a scheduled or ready event due at once; false when it is not stored, in flight or dead. */
  runNow(eventClass: EventTarget, id: string): Promise<boolean> {
    return this.whenReady(() => this.inspector.runNow(eventClass, id));
  }

  /** Stops dispatching and claiming the type in every instance, across restarts, until resume(); enqueues still store. */
  pause(eventClass: EventTarget): Promise<boolean> {
    return this.inspect('pause', () => this.inspector.pause(eventClass));
  }

  resume(eventClass: EventTarget): Promise<boolean> {
    return this.inspect('resume', () => this.inspector.resume(eventClass));
  }

  isPaused(eventClass: EventTarget): Promise<boolean> {
    return this.inspect('isPaused', () => this.inspector.isPaused(eventClass));
  }

  /** How many scheduled events fall due in each slot from now to a horizon (default an hour in 60 slots); undefined for a type name nothing is stored under. */
  dueTimeline(eventClass: EventTarget, options?: DueTimelineOptions): Promise<DueTimeline | undefined> {
    return this.inspect('dueTimeline', () => this.inspector.dueTimeline(eventClass, options));
  }

  /** What the whole fleet enqueued, handled, failed and dead-lettered of the type, and its lateness, per 10 s over the last `windowMs` (default 15 min, at most 1 h). */
  activity(eventClass: EventTarget, windowMs?: number): Promise<ActivitySlot[]> {
    return this.inspect('activity', () => this.inspector.activity(eventClass, windowMs));
  }
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
