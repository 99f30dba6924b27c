import { type Observable, firstValueFrom, lastValueFrom, map, throwError } from 'rxjs';
import type { DelayedEventInstance, EventClass, EventRoute } from '../core/delayed-event.decorator';
import { type Delay, dateToMillis, delayToMillis } from '../core/duration';
import { type RedisConnectionError, ServiceClosedError } from '../core/errors';
import { EventCodec } from '../core/event-codec';
import { type EventContext, EventContextStore } from '../core/event-context';
import type { RecurrenceSpec } from '../core/recurrence';
import { type EnqueueStatus, LuaScripts } from '../redis/lua-scripts';
import { RedisConnections } from '../redis/redis-connections';
import { typedConnectionError } from '../redis/ready-gate';
import { ping, waitForRedis } from '../redis/redis-readiness';
import { RedisLayout } from '../redis/redis-layout';
import { ActivityRecorder } from '../runtime/activity-log';
import type { EventHandler } from '../runtime/handler-invocation';
import { METRIC, type Metric, Metrics } from '../runtime/metrics';
import { ServiceLog } from '../runtime/service-log';
import { WakeListener } from '../runtime/wake-listener';
import { Errands } from '../runtime/background-service';
import { BATCH_OPTION_KEYS, type BatchEntry, type EnqueueOptions, Enqueuer } from './enqueuer';
import { checkArgumentKeys } from '../core/option-keys';
import { type BatchHandlerOptions, type HandlerOptions, Handlers } from './handlers';
import type { BatchHandler } from '../runtime/batch-consumer';
import { Health } from './health';
import { TIMEOUT_OPTION_KEYS } from './inspection-types';
import { Inspector } from './inspector';
import { FlowCalls } from './flow-calls';
import { Flows } from './flows';
import { PartitionMoves } from '../redis/partition-moves';
import type { ServiceHealth } from './instrumentation';
import { RecurringSchedules, type ScheduleOptions, checkScheduleKeys } from './recurring-schedules';
import { type DelayedEventServiceOptions, type ResolvedOptions, positive, resolveOptions } from './service-options';

/**
 * Composition root: wires the key layout, connections and scripts to the
 * service's roles, each in its own module: enqueueing (enqueuer.ts), handler
 * registration and consumption (handlers.ts), recurring schedules
 * (recurring-schedules.ts), inspection (inspector.ts), health and gauges
 * (health.ts). Every other method is a one-line delegate. See
 * docs/architecture.md for the shape and docs/state-machine.md for what
 * happens to an event.
 */
export class DelayedEventService extends FlowCalls {
  /** Hot stream of counters, gauges and timings; see the README for every metric. */
  readonly metrics$: Observable<Metric>;

  private readonly options: ResolvedOptions;
  private readonly connections: RedisConnections;
  private readonly scripts: LuaScripts;
  private readonly metrics: Metrics;
  private readonly log: ServiceLog;
  private readonly contextStore = new EventContextStore();
  private readonly activityRecorder: ActivityRecorder | undefined;
  private readonly wakeListener: WakeListener;
  /** The one-off calls beside the loops: registrations retried, wake-ups said, limits stored. */
  private readonly errands = new Errands();
  private readonly enqueuer: Enqueuer;
  private readonly handlers: Handlers;
  private readonly recurring: RecurringSchedules;
  protected readonly inspector: Inspector;
  protected readonly flows: Flows;
  private readonly healthState: Health;
  private recurringStarted = false;
  private closing: Promise<void> | undefined;

  constructor(options: DelayedEventServiceOptions) {
    super();
    const settings = (this.options = resolveOptions(options));
    const layout = new RedisLayout(settings.prefix);
    const codec = new EventCodec(settings.maxPayloadBytes);
    const isClosing = () => this.closing !== undefined;
    const assertOpen = () => this.assertOpen();

    // Asked only of a connection that is up: on a client handed in, one queued offline would be sent after close().
    const probe = () => (this.connections.command.status === 'ready' ? ping(this.connections.command) : Promise.reject(new Error('not connected')));
    this.log = new ServiceLog({ logger: settings.logger, logPayloads: settings.logPayloads, prefix: settings.prefix, ping: probe });
    this.metrics = new Metrics(() => this.healthState.sampleGauges(), settings.gaugeIntervalMs, this.log.onNotice);
    this.metrics$ = this.metrics.metrics$;
    this.connections = new RedisConnections(settings.redis, (error) => {
      this.log.connectionError(error);
      this.metrics.count(METRIC.redisErrors, { loop: 'connection', type: '' });
    });
    const deadline = { ms: settings.commandTimeoutMs, onStuck: () => this.healthState.commandStuck() };
    const refused = (error: RedisConnectionError) => this.log.refused(error);
    this.scripts = new LuaScripts(this.connections.command, layout.wakeChannel, deadline, settings.idempotencyWindowMs, undefined, refused, undefined, settings.outcomesMaxLen);
    this.activityRecorder = settings.recordActivity
      ? new ActivityRecorder(this.connections.command, layout, settings.commandTimeoutMs, (error) =>
          this.log.degraded('activity', `Redis refuses the activity counts (${error.message}); the dashboard's charts stay empty: grant +hincrby and +pexpire, or set recordActivity: false`),
        )
      : undefined;
    this.activityRecorder?.start();
    this.wakeListener = new WakeListener(this.connections, layout.wakeChannel, {
      pingEveryMs: Math.min(settings.readerBlockMs, settings.pollIntervalMs), // quiet queues rely on it (src/runtime/quiet-looks.ts)
      pingTimeoutMs: settings.watchdogGraceMs,
      onReset: () => this.metrics.count(METRIC.wakeListenerResets, {}),
      onRefused: (error) =>
        this.log.degraded(
          'wake-ups',
          `Redis refuses the wake-up subscription (${error.message}); dispatchers and readers find new events by polling (every pollIntervalMs and readerBlockMs) instead: grant +subscribe and the channel ${layout.wakeChannel}`,
        ),
    });

    const partitionMoves = new PartitionMoves(this.connections.command, layout, this.scripts);
    this.inspector = new Inspector({
      client: this.connections.command,
      layout,
      scripts: this.scripts,
      codec,
      closed: isClosing,
      onCancelled: (type) => this.metrics.count(METRIC.cancelled, { type }),
      onDroppedAnswers: (count) => this.metrics.count(METRIC.instanceAnswersDropped, {}, count),
      handledAgeMs: settings.keepHandled.ageMs,
      handledHere: () => this.handlers.running().map((h) => h.type),
      outcomesOff: settings.outcomesMaxLen === 0,
      chainOccurrence: async (occurrence, after) =>
        after ? this.flows.enqueueEncodedAfter(occurrence, { atMs: occurrence.at }, after) : (await firstValueFrom(this.enqueuer.storeOccurrences([occurrence], false)))[0]!,
      onScheduleChanged: () => this.recurring.look(),
    });
    this.enqueuer = new Enqueuer({
      options: settings,
      layout,
      scripts: this.scripts,
      codec,
      contextStore: this.contextStore,
      metrics: this.metrics,
      activity: this.activityRecorder,
      assertOpen,
      onStored: (route) => this.healthState.know(route),
    });
    const flowParts = { layout, store: this.inspector.flowStore, metrics: this.metrics, onStored: (route: EventRoute) => this.healthState.know(route) };
    this.flows = new Flows({ ...flowParts, keysOf: (type, id) => this.inspector.eventKeys(type, id) }, this.enqueuer);
    this.recurring = new RecurringSchedules(this.connections.command, this.scripts, layout, codec, this.metrics, {
      pollIntervalMs: settings.pollIntervalMs,
      store: async (occurrences, replace) => void (await firstValueFrom(this.enqueuer.storeOccurrences(occurrences, replace))),
      cancel: (route, id) => this.scripts.cancel(layout.forEvent(route, id), id, false),
      stateOf: (route, id) => this.inspector.occurrenceState(route, id),
      onLost: (type, names) => this.log.registrationsLost({ type, schedules: names }),
    });
    this.handlers = new Handlers({
      options: settings,
      layout,
      connections: this.connections,
      scripts: this.scripts,
      codec,
      contextStore: this.contextStore,
      metrics: this.metrics,
      log: this.log,
      activity: this.activityRecorder,
      wakes$: this.wakeListener.wakes$,
      listening: () => this.wakeListener.listening(),
      isClosing,
      errands: this.errands,
      onHandled: (route) => {
        this.healthState.know(route);
        this.startRecurring();
      },
    });
    this.healthState = new Health({
      connections: this.connections,
      scripts: this.scripts,
      inspector: this.inspector,
      metrics: this.metrics,
      log: this.log,
      commandTimeoutMs: settings.commandTimeoutMs,
      isClosing,
      loops: () => this.handlers.loops(),
      handlersHere: () => this.handlers.running(),
      handlingRefusal: () => this.handlers.refusal,
      newerVersionWarnMs: settings.newerVersionWarnMs,
      announce: (route) => this.errands.run((signal) => partitionMoves.announceInPassing(route.type, route.partitions, signal)),
    });
  }

  /** The namespace of this service's keys in Redis (the `prefix` option). */
  get prefix(): string {
    return this.options.prefix;
  }

  // Enqueueing (src/service/enqueuer.ts).

  /** Schedules `event` to be handled after `delay`. Cold: nothing reaches Redis until subscribed; emits once stored. */
  enqueueWithDelay<T extends DelayedEventInstance>(event: T, delay: Delay, options?: EnqueueOptions): Observable<void> {
    return this.enqueuer.enqueueCold(event, () => ({ delayMs: delayToMillis(delay) }), options).pipe(map(() => undefined));
  }

  /** Schedules `event` to be handled at `date` (a past date means now). Cold, like enqueueWithDelay. */
  enqueueAt<T extends DelayedEventInstance>(event: T, date: Date, options?: EnqueueOptions): Observable<void> {
    return this.enqueuer.enqueueCold(event, () => ({ atMs: dateToMillis(date) }), options).pipe(map(() => undefined));
  }

  /**
   * Promise form of enqueueWithDelay and enqueueAt: `when` is a delay, or a
   * `Date` (since 0.6; a past date means now). Tells whether the event was
   * scheduled, replaced, or already stored.
   */
  enqueue<T extends DelayedEventInstance>(event: T, when: Delay | Date, options?: EnqueueOptions): Promise<EnqueueStatus> {
    return this.enqueuer.enqueue(event, () => (when instanceof Date ? { atMs: dateToMillis(when) } : { delayMs: delayToMillis(when) }), options);
  }

  /**
   * Schedules many events in script calls of up to 250 events of one queue.
   * Cold; emits one status per entry, in order. Every entry is validated first:
   * one bad entry rejects the batch and nothing is written.
   */
  enqueueBatch(entries: ReadonlyArray<BatchEntry>, options: Pick<EnqueueOptions, 'replace'> = {}): Observable<EnqueueStatus[]> {
    try {
      checkArgumentKeys(options, BATCH_OPTION_KEYS, 'enqueueBatch');
    } catch (error) {
      return throwError(() => error);
    }
    return this.enqueuer.enqueueBatch(entries, options.replace === true);
  }

  /** Promise form of enqueueBatch (since 0.6): one status per entry, in order; nothing is written when an entry is bad. */
  enqueueMany(entries: ReadonlyArray<BatchEntry>, options: Pick<EnqueueOptions, 'replace'> = {}): Promise<EnqueueStatus[]> {
    try {
      checkArgumentKeys(options, BATCH_OPTION_KEYS, 'enqueueMany');
    } catch (error) {
      return Promise.reject(error);
    }
    return lastValueFrom(this.enqueuer.enqueueBatch(entries, options.replace === true, 'enqueueMany'), { defaultValue: [] });
  }

  /** The context of the handler running in this async scope, if any. */
  currentContext(): EventContext | undefined {
    return this.contextStore.current();
  }

  /** Runs `fn` with `context` as the current context: events it enqueues carry it. */
  runWithContext<R>(context: EventContext, fn: () => R): R {
    return this.contextStore.run(context, fn);
  }

  // Handlers (src/service/handlers.ts).

  /**
   * Handles events of `eventClass` in this instance, at most `parallelism` at
   * once (default 1; the third argument, or since 0.6 an option). With `group`, the handler joins that subscriber group: every group
   * registered for the type receives every event that falls due after it was
   * registered, each with its own attempts, retries and dead letters.
   */
  addHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>, handler: EventHandler<T>, options?: HandlerOptions<NoInfer<T>>): void;
  addHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>, handler: EventHandler<T>, parallelism?: number, options?: HandlerOptions<NoInfer<T>>): void;
  addHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>, handler: EventHandler<T>, third?: number | HandlerOptions<NoInfer<T>>, fourth?: HandlerOptions<NoInfer<T>>): void {
    this.assertOpen();
    // Since 0.6 parallelism may be given in the options, as addBatchHandler and @OnDelayedEvent take it; the positional form stays.
    if (third !== null && typeof third === 'object' && fourth === undefined) this.handlers.add(eventClass, handler, undefined, third);
    else this.handlers.add(eventClass, handler, third as number | undefined, fourth);
  }

  /**
   * Handles events of `eventClass` in batches: one call takes up to `maxBatch`
   * due events (or those that came within `maxWaitMs`), e.g. for one bulk API
   * call or one database write. Each event keeps its own attempts, retries
   * and dead letters: the result says success or failure for all (nothing or
   * a throw), or per event (an outcome each, in order, or the ids that
   * failed). Limits (`rateLimit`, `globalConcurrency`) count events.
   */
  addBatchHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>, handler: BatchHandler<T>, options?: BatchHandlerOptions<NoInfer<T>>): void {
    this.assertOpen();
    this.handlers.addBatch(eventClass, handler, options);
  }

  /** Stops handling `eventClass` (in `group`, default: the default group) here, waiting (up to closeTimeoutMs) for its running handlers. The group stays registered. */
  removeHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>, group?: string): Promise<void> {
    return this.handlers.remove(eventClass, group);
  }

  /**
   * Unregisters subscriber group `group` of `eventClass` for good, in every
   * instance: events falling due are no longer delivered to it, and what was
   * waiting for it (ready, in flight, retries, dead letters) is dropped. Resolves
   * whether it was registered. Handlers of the group still running here are stopped first.
   */
  removeGroup<T extends DelayedEventInstance>(eventClass: EventClass<T>, group: string): Promise<boolean> {
    return this.handlers.removeGroup(eventClass, group);
  }

  // Recurring schedules (src/service/recurring-schedules.ts).

  /**
   * Schedules `template`'s class to recur: every occurrence is an ordinary event
   * of that class with id `<name>@<occurrence ms>`, due at the occurrence, handled
   * like any other. `spec` is `{ every: delay }` or `{ cron, tz }`. Calling it
   * again with the same class and name replaces the schedule. Resolves when stored.
   */
  async schedule<T extends DelayedEventInstance>(name: string, template: T, spec: RecurrenceSpec, options: ScheduleOptions = {}): Promise<void> {
    this.assertOpen();
    checkScheduleKeys(spec, options);
    await this.whenReady(() => this.recurring.define(name, template, spec, options));
    this.startRecurring();
  }

  /** Removes a recurring schedule (and the occurrence it had enqueued ahead); resolves whether it existed. */
  unschedule<T extends DelayedEventInstance>(eventClass: EventClass<T> | string, name: string): Promise<boolean> {
    return this.whenReady(async () => {
      const route = await this.inspector.recurringRoute(eventClass);
      return route ? this.recurring.remove(route, name) : false;
    });
  }

  // Health (src/service/health.ts).

  /**
   * Resolves once Redis answers (PING) and holds every script (SCRIPT LOAD on
   * each master); rejects with a RedisConnectionError after `timeoutMs`
   * (default commandTimeoutMs), at once for refused credentials. Its `reason`
   * says why: 'refused', 'auth', 'tls', 'timeout' or 'other'.
   */
  waitUntilReady(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    try {
      this.assertOpen();
      checkArgumentKeys(options, TIMEOUT_OPTION_KEYS, 'waitUntilReady');
      return waitForRedis(this.connections.command, positive('timeoutMs', options.timeoutMs, this.options.commandTimeoutMs), this.scripts.gate);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * What a readiness probe needs: whether Redis answers a PING now (within
   * `timeoutMs`, default 1 s), the loops running here, and the last Redis
   * error seen. Never rejects.
   */
  health(options: { readonly timeoutMs?: number } = {}): Promise<ServiceHealth> {
    try {
      checkArgumentKeys(options, TIMEOUT_OPTION_KEYS, 'health');
      return this.healthState.health(positive('timeoutMs', options.timeoutMs, 1_000));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Stops taking events, waits up to closeTimeoutMs for running handlers,
   * then releases every connection it opened. An event whose handler did not
   * finish keeps its lease in Redis and is redelivered when the lease expires.
   * The order, and why: docs/architecture.md, "Shutdown".
   */
  close(): Promise<void> {
    this.closing ??= this.stopInOrder();
    return this.closing;
  }

  /**
   * What close() stops, in order. Each stop resolves once its part will touch
   * Redis no more (src/runtime/background-service.ts), so each step may count
   * on everything before it being still.
   */
  private async stopInOrder(): Promise<void> {
    const steps: ReadonlyArray<() => unknown> = [
      // Enqueues accepted before close are sent first: their callers were told they would be.
      () => this.enqueuer.flush(),
      // Schedules next: an occurrence enqueued later would wait for a handler that is stopping.
      () => this.recurring.stop(),
      // Handlers: readers claim no more and give back what waits unstarted, running calls get
      // closeTimeoutMs and their results are written, then dispatchers and repartitioners end.
      () => this.handlers.stopAll(),
      // The one-off calls the parts above started (a limit stored, a wake-up said): none starts now,
      // and one never answered is given a second at most (its later answer sends nothing more).
      () => this.errands.stop(this.options.commandTimeoutMs),
      // Nobody listens for wake-ups any more; a probe of its connection under way opens no other.
      () => this.wakeListener.stop(),
      // The activity's last slot: only now does it hold every handled event.
      () => this.activityRecorder?.stop().catch(() => undefined),
      // Nothing more will be measured or logged; a gauge sample under way gets its answers first.
      () => {
        const sampled = this.metrics.stop(this.options.commandTimeoutMs);
        this.log.close();
        return sampled;
      },
      // Connections last: every step above may still use them.
      () => this.connections.close(),
    ];
    // None is meant to fail; should one, the steps after it still run, so the connections close.
    for (const step of steps)
      await Promise.resolve()
        .then(step)
        .catch(() => undefined);
  }

  /** Every instance that handles events or schedules them advances every schedule under the prefix. */
  private startRecurring(): void {
    if (this.recurringStarted || this.closing) return;
    this.recurringStarted = true;
    this.recurring.start();
  }

  private assertOpen(): void {
    if (this.closing) throw new ServiceClosedError();
  }

  /** Runs `work` once the command connection is ready, or fails unsent within about a second (src/redis/ready-gate.ts). */
  private whenReady<R>(work: () => Promise<R>): Promise<R> {
    if (this.closing) return Promise.reject(new ServiceClosedError());
    const waiting = this.scripts.gate.wait();
    return (waiting ? waiting.then(work) : work()).then(undefined, (error: unknown) => {
      throw typedConnectionError(error, 'the call');
    });
  }
}
