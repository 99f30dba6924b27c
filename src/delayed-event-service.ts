import { type Observable, defer, firstValueFrom, map, tap, throwError } from 'rxjs';
import { CompletionBatcher } from './completion-batcher';
import { Consumer } from './consumer';
import { DeadLetters, type DeadLetter } from './dead-letters';
import { type DelayedEventInstance, type EventClass, eventTypeOf } from './delayed-event.decorator';
import { Dispatcher } from './dispatcher';
import { type Delay, dateToMillis, delayToMillis } from './duration';
import { HandlerAlreadyRegisteredError, ServiceClosedError } from './errors';
import { EventCodec } from './event-codec';
import { type EventContext, EventContextStore } from './event-context';
import { type EventHandler, passThroughContextHandler } from './handler-invocation';
import { type EnqueueStatus, LuaScripts } from './lua-scripts';
import { type GaugeSample, METRIC, type Metric, Metrics } from './metrics';
import { ReadyReader } from './ready-reader';
import { RedisConnections } from './redis-connections';
import { RedisLayout, type TypeKeys } from './redis-layout';
import { type RetryPolicy, checkRetryPolicy } from './retry-policy';
import { type DelayedEventServiceOptions, type ResolvedOptions, integer, positive, resolveOptions } from './service-options';
import { type Wake, wakeListener } from './wake-listener';

export interface EnqueueOptions {
  /** Context stored with the event; default: the service's contextProvider. */
  readonly context?: EventContext;
  /** Replace the payload and due time of an event with the same type and id instead of leaving it as it is. */
  readonly replace?: boolean;
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
  private readonly contextStore = new EventContextStore();
  private readonly metrics: Metrics;
  private readonly deadLetterSets: DeadLetters;
  private readonly wakes$: Observable<Wake>;
  private readonly registrations = new Map<string, Registration>();
  /** Types this instance enqueued or handles; their gauges are sampled. */
  private readonly knownTypes = new Set<string>();
  private closing: Promise<void> | undefined;

  constructor(options: DelayedEventServiceOptions) {
    this.options = resolveOptions(options);
    this.layout = new RedisLayout(this.options.prefix);
    this.metrics = new Metrics(() => this.sampleGauges(), this.options.gaugeIntervalMs);
    this.metrics$ = this.metrics.metrics$;
    this.connections = new RedisConnections(this.options.redis, () => this.metrics.count(METRIC.redisErrors, { loop: 'connection' }));
    this.scripts = new LuaScripts(this.connections.command, this.layout.wakeChannel);
    this.codec = new EventCodec(this.options.maxPayloadBytes);
    this.deadLetterSets = new DeadLetters(this.connections.command, this.scripts, this.codec);
    this.wakes$ = wakeListener(this.connections, this.layout.wakeChannel);
  }

  /** Schedules `event` to be handled after `delay`. Cold: nothing reaches Redis until subscribed; emits once stored. */
  enqueueWithDelay<T extends DelayedEventInstance>(event: T, delay: Delay, options?: EnqueueOptions): Observable<void> {
    return this.schedule(event, () => ({ delayMs: delayToMillis(delay) }), options).pipe(map(() => undefined));
  }

  /** Schedules `event` to be handled at `date` (a past date means now). Cold, like enqueueWithDelay. */
  enqueueAt<T extends DelayedEventInstance>(event: T, date: Date, options?: EnqueueOptions): Observable<void> {
    return this.schedule(event, () => ({ atMs: dateToMillis(date) }), options).pipe(map(() => undefined));
  }

  /** Promise form of enqueueWithDelay; tells whether the event was scheduled, replaced, or already stored. */
  enqueue<T extends DelayedEventInstance>(event: T, delay: Delay, options?: EnqueueOptions): Promise<EnqueueStatus> {
    return firstValueFrom(this.schedule(event, () => ({ delayMs: delayToMillis(delay) }), options));
  }

  /** Removes a stored event in any state; resolves whether it existed. */
  async cancel<T extends DelayedEventInstance>(eventClass: EventClass<T>, id: string): Promise<boolean> {
    const type = eventTypeOf(eventClass);
    const existed = await this.scripts.cancel(this.layout.forType(type), id);
    if (existed) this.metrics.count(METRIC.cancelled, { type });
    return existed;
  }

  /** Handles events of `eventClass` in this instance, at most `parallelism` at once. */
  addHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>, handler: EventHandler<T>, parallelism: number, options: HandlerOptions = {}): void {
    this.assertOpen();
    const type = eventTypeOf(eventClass);
    if (typeof handler !== 'function') throw new TypeError(`handler for '${type}' must be a function`);
    integer('parallelism', parallelism, 1, 1, 10_000);
    if (this.registrations.has(type)) throw new HandlerAlreadyRegisteredError(type);
    const timeoutMs = positive('timeoutMs', options.timeoutMs, this.options.handlerTimeoutMs);
    const retry = checkRetryPolicy(options.retry ?? this.options.retry, 'retry');
    const keys = this.layout.forType(type);

    const dispatcher = new Dispatcher(keys, this.scripts, this.metrics, { batchSize: this.options.dispatchBatchSize, pollIntervalMs: this.options.pollIntervalMs }, this.wakes$);
    const reader = new ReadyReader(keys, this.scripts, this.connections, this.metrics, {
      leaseMs: timeoutMs + this.options.leaseGraceMs,
      maxAttempts: retry.maxAttempts,
      blockMs: this.options.readerBlockMs,
      watchdogGraceMs: this.options.watchdogGraceMs,
    });
    const consumer = new Consumer<T>({
      keys,
      eventClass,
      handler,
      parallelism,
      timeoutMs,
      retry,
      reader,
      completions: new CompletionBatcher(keys, this.scripts),
      scripts: this.scripts,
      codec: this.codec,
      metrics: this.metrics,
      contextStore: this.contextStore,
      contextHandler: this.options.contextHandler ?? passThroughContextHandler,
      onRetryScheduled: () => dispatcher.nudge(),
    });
    const dispatching = dispatcher.run().subscribe();
    consumer.start();
    this.knownTypes.add(type);
    this.registrations.set(type, { consumer: consumer as unknown as Consumer<DelayedEventInstance>, stopDispatching: () => dispatching.unsubscribe() });
  }

  /** Stops handling `eventClass` here, waiting (up to closeTimeoutMs) for its running handlers. */
  async removeHandler<T extends DelayedEventInstance>(eventClass: EventClass<T>): Promise<void> {
    const type = eventTypeOf(eventClass);
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
    return this.deadLetterSets.list(this.keysOf(eventClass), eventClass, offset, limit);
  }

  /** Moves dead letters back to scheduled (due now, attempts reset); no ids means all of the type. */
  replayDeadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T>, ids?: readonly string[]): Promise<number> {
    return this.deadLetterSets.replay(this.keysOf(eventClass), ids);
  }

  /** Deletes dead letters; no ids means all of the type. */
  purgeDeadLetters<T extends DelayedEventInstance>(eventClass: EventClass<T>, ids?: readonly string[]): Promise<number> {
    return this.deadLetterSets.purge(this.keysOf(eventClass), ids);
  }

  /**
   * Stops taking events, waits up to closeTimeoutMs for running handlers,
   * then releases every connection it opened. An event whose handler did not
   * finish keeps its lease in Redis and is redelivered when the lease expires.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const registrations = [...this.registrations.values()];
      this.registrations.clear();
      await Promise.all(registrations.map((r) => this.unregister(r)));
      this.metrics.complete();
      await this.connections.close();
    })();
    return this.closing;
  }

  private schedule<T extends DelayedEventInstance>(
    event: T,
    due: () => { delayMs: number } | { atMs: number },
    options: EnqueueOptions = {},
  ): Observable<EnqueueStatus> {
    // Validate and serialize at the call: errors name the caller's mistake, and the event is captured as it is now.
    let prepared;
    try {
      this.assertOpen();
      const context = options.context ?? (this.options.contextProvider ?? (() => this.contextStore.current()))();
      prepared = { encoded: this.codec.encode(event, context, Date.now()), due: due() };
    } catch (error) {
      return throwError(() => error);
    }
    const { encoded } = prepared;
    const keys = this.layout.forType(encoded.type);
    return defer(() => this.scripts.enqueue(keys, encoded.id, encoded.body, prepared.due, options.replace === true)).pipe(
      tap((status) => {
        this.knownTypes.add(encoded.type);
        if (status === 'duplicate') this.metrics.count(METRIC.duplicatesIgnored, { type: encoded.type });
        else this.metrics.count(METRIC.events, { type: encoded.type, direction: 'enqueue' });
      }),
    );
  }

  private async unregister(registration: Registration): Promise<void> {
    registration.stopDispatching();
    await registration.consumer.stop(this.options.closeTimeoutMs);
  }

  private keysOf(eventClass: EventClass): TypeKeys {
    return this.layout.forType(eventTypeOf(eventClass));
  }

  private assertOpen(): void {
    if (this.closing) throw new ServiceClosedError();
  }

  private async sampleGauges(): Promise<GaugeSample[]> {
    const samples = await Promise.all(
      [...this.knownTypes].map(async (type) => {
        const keys = this.layout.forType(type);
        // One slot per type, so one pipeline per type works on a Cluster.
        const replies = (await this.connections.command.pipeline().zcard(keys.schedule).llen(keys.ready).zcard(keys.inFlight).zcard(keys.dead).exec()) ?? [];
        const value = (i: number) => Number(replies[i]?.[1] ?? 0);
        const tags = { type };
        return [
          { name: METRIC.scheduledCount, value: value(0), tags },
          { name: METRIC.readyCount, value: value(1), tags },
          { name: METRIC.inFlightCount, value: value(2), tags },
          { name: METRIC.deadLetterCount, value: value(3), tags },
        ];
      }),
    );
    return samples.flat();
  }
}
