import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Subscription } from 'rxjs';
import { type DelayedEventInstance, type EventClass, eventRouteOf, eventVersioningOf } from '../core/delayed-event.decorator';
import { HandlerAlreadyRegisteredError, InvalidOptionError } from '../core/errors';
import { INSTANCES_QUESTION, type InstanceHandler, announceAlive, announceLook, announceReady, answerInstances } from '../redis/instance-registry';
import { LuaScripts } from '../redis/lua-scripts';
import { DEFAULT_GROUP, type TypeKeys } from '../redis/redis-layout';
import { Consumer, type ConsumerQueue } from '../runtime/consumer';
import { type BatchHandler, BatchConsumer, type BatchSettings } from '../runtime/batch-consumer';
import type { Dispatcher } from '../runtime/dispatcher';
import { InstanceBeacon } from '../runtime/instance-beacon';
import { type EventHandler, passThroughContextHandler } from '../runtime/handler-invocation';
import { METRIC } from '../runtime/metrics';
import type { ReadyReader } from '../runtime/ready-reader';
import { Repartitioner, SETTING_STALE_MS } from '../runtime/repartitioner';
import { PartitionMoves } from '../redis/partition-moves';
import { WAKE_ALL } from '../runtime/wake-listener';
import { WakeRouter } from '../runtime/wake-router';
import { DEAD_LETTER_CHUNK } from './inspection-types';
import { integer, positive } from './service-options';
import { checkOptionKeys } from '../core/option-keys';
import { groupName, planHandler } from './handler-plan';
import { type HandlersParts, type PartitionHost, wirePartition } from './partition-wiring';
import { BATCH_HANDLER_OPTION_KEYS, type BatchHandlerOptions, type HandlerOptions } from './handler-options';

export type { BatchHandlerOptions, HandlerOptions } from './handler-options';
import { keySorter, storeLimitsWhenReady } from './flow-registration';
import { type StoredLimits, forgetSorter } from '../redis/flow-limits';
import { GroupRegistrations } from './group-registrations';
import { Registrations } from './registrations';
import { KeyLabels } from '../runtime/key-labels';

/** A handler registered here: its consumer, the dispatchers it runs, its readers (by queue tag, for nudges). */
interface Registration {
  readonly type: string;
  readonly group: string;
  readonly parallelism: number;
  /** The event class's version here. */
  readonly version: number;
  readonly consumer: Consumer<DelayedEventInstance>;
  readonly dispatchers: readonly Dispatcher[];
  readonly readers: ReadonlyArray<{ readonly queueTag: string; readonly reader: ReadyReader }>;
  /** With limits: stores them again now and then, should Redis have lost them (a restart without persistence, a flush). */
  readonly limitsRefresh?: NodeJS.Timeout;
  /** With the key option: the queues its readers sorted by key, whose stamp goes when it stops (flow-limits.ts forgetSorter). */
  readonly sortedQueues?: readonly TypeKeys[];
}

/** How often a handler with limits stores them again (one transaction; a change since is logged). */
const LIMITS_REFRESH_MS = 60_000;

export type { HandlersParts } from './partition-wiring';

/**
 * Handler registration and consumption: per handled type (and partition) a
 * dispatcher that moves due events to every registered group, a reader that
 * claims them for this instance's handler, and the consumer that runs it;
 * the group registrations this instance restores when Redis loses them.
 */
export class Handlers {
  private readonly registrations = new Registrations<Registration>();
  private readonly wakeRouter: WakeRouter;
  /** The readers of each queue (by tag), nudged when events become ready there. */
  private readonly readersByQueue = new Map<string, Set<ReadyReader>>();
  /** Nudges readers on 'ready' wake-ups, while any handler runs here. */
  private readyWakes: Subscription | undefined;
  /** The groups this instance registers, and restores when Redis loses them. */
  private readonly groups: GroupRegistrations;
  /** The scripts of the handlers' loops, on their own connection (RedisConnections.handling); made with the first handler. */
  private handlingScripts: LuaScripts | undefined;
  /** Per type handled here, the loop that moves its events to this instance's partitions. */
  private readonly repartitioners = new Map<string, Repartitioner>();
  /** Who this instance is in instances(): random, and when it started. */
  private readonly instanceId = randomBytes(6).toString('hex');
  private readonly startedAt = Date.now();
  /** Says this instance is alive, and has every queue here look when another falls silent (from the first handler on). */
  private beacon: InstanceBeacon | undefined;

  constructor(private readonly parts: HandlersParts) {
    this.groups = new GroupRegistrations({
      scripts: () => [parts.scripts, this.scriptsOfHandlers()],
      metrics: parts.metrics,
      log: parts.log,
      isClosing: parts.isClosing,
      errands: parts.errands,
      groupsOf: (type) => this.registrations.groupsOf(type),
      onNamedGroup: (queueTag) => this.announce(queueTag, announceLook),
    });
    this.wakeRouter = new WakeRouter(parts.wakes$);
  }

  /** The ACL refusal that holds on the handlers' connection, if any. */
  get refusal() {
    return this.handlingScripts?.refusal;
  }

  /** The loops running here, for health(). */
  loops(): { dispatchers: number; readers: number } {
    let dispatchers = 0;
    let readers = 0;
    for (const registration of this.registrations.values()) {
      dispatchers += registration.dispatchers.length;
      readers += registration.readers.length;
    }
    return { dispatchers, readers };
  }

  /**
   * instances() asked on the wake-up channel: this instance answers with what
   * it runs (src/redis/instance-registry.ts). A lost answer only leaves it
   * out of one listing.
   */
  private answerInstances(question: number): void {
    const answer = { id: this.instanceId, host: hostname(), pid: process.pid, startedAt: this.startedAt, handlers: this.running() };
    const { scripts, connections, layout } = this.parts;
    this.parts.errands.run((signal) => scripts.bounded('instances', () => (signal.aborted ? Promise.resolve() : answerInstances(connections.command, layout.wakeChannel, question, answer))));
  }

  /** The handlers registered here, and how many calls each is running: what this instance answers instances(). */
  running(): InstanceHandler[] {
    return [...this.registrations.values()].map((r) => ({
      type: r.type,
      group: r.group,
      parallelism: r.parallelism,
      running: r.consumer.running,
      ...(r.version > 1 ? { version: r.version } : {}),
    }));
  }

  /** A batch handler: its calls take up to maxBatch events, at most `parallelism` calls at once (BatchConsumer). */
  addBatch<T extends DelayedEventInstance>(eventClass: EventClass<T>, handler: BatchHandler<T>, options: BatchHandlerOptions<T> = {}): void {
    const type = eventRouteOf(eventClass).type;
    if (typeof handler !== 'function') throw new TypeError(`batch handler for '${type}' must be a function`);
    if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', 'must be an object like { maxBatch, maxWaitMs, parallelism }');
    checkOptionKeys(options, BATCH_HANDLER_OPTION_KEYS, `addBatchHandler(${type})`);
    const maxBatch = integer('maxBatch', options.maxBatch, 100, 1, 10_000);
    const maxWaitMs = positive('maxWaitMs', options.maxWaitMs, 50, 60_000);
    const calls = integer('parallelism', options.parallelism, 1, 1, 1_000);
    this.add(eventClass, () => true, calls, options, { handler, maxBatch, maxWaitMs, calls });
  }

  add<T extends DelayedEventInstance>(eventClass: EventClass<T>, handler: EventHandler<T>, parallelismGiven: number | undefined, options: HandlerOptions<T> = {}, batch?: BatchSettings<T>): void {
    const { options: settings, layout, metrics } = this.parts;
    const route = eventRouteOf(eventClass);
    const type = route.type;
    this.parts.codec.assertBuildable(eventClass);
    if (typeof handler !== 'function') throw new TypeError(`handler for '${type}' must be a function`);
    const defaults = {
      handlerTimeoutMs: settings.handlerTimeoutMs,
      leaseGraceMs: settings.leaseGraceMs,
      heartbeatMs: settings.heartbeatMs,
      retry: settings.retry,
      priorityAgingMs: settings.priorityAgingMs,
      keepDead: settings.keepDead,
    };
    const plan = planHandler(route, parallelismGiven, options, defaults, batch, (group) => {
      if (this.registrations.has(`${type}|${group}`)) throw new HandlerAlreadyRegisteredError(type, group);
    });
    const { group, limited } = plan;
    const registrationKey = `${type}|${group}`;
    const sortByKey = options.key ? keySorter(eventClass, (event: T) => options.key!.call(options, event), this.parts.codec) : undefined;
    const version = eventVersioningOf(eventClass).version;

    const scripts = this.scriptsOfHandlers();
    const dispatchers: Dispatcher[] = [];
    const limitsStored: Array<Promise<void>> = [];
    // The consumer is made below, once its queues are wired.
    const running = () => (this.registrations.get(registrationKey)?.consumer.running ?? 0) > 0;
    const wiring = { plan, version, sortByKey, confirmedByConsumer: batch !== undefined, scripts, dispatchers, limitsStored, running };
    const host: PartitionHost = {
      parts: this.parts,
      groups: this.groups,
      handlesDefaultGroup: () => this.registrations.has(`${type}|${DEFAULT_GROUP}`),
      registerLimits: (keys, limits) => this.registerLimits(keys, limits),
      nudgeReaders: (queueTag) => this.nudgeReaders(queueTag),
      // Quiet only while wake-ups reach this instance end to end (src/runtime/instance-beacon.ts).
      listening: () => this.beacon?.hearing() ?? false,
      announceReady: (queueTag) => this.announceReady(queueTag),
      wakesOf: (tags) => this.wakeRouter.of(tags),
    };
    const queues: ConsumerQueue[] = layout.partitionsOf(route).map((shared, p) => wirePartition(host, shared, p, wiring));
    const readers = queues.map((q) => ({ queueTag: q.keys.queueTag, reader: q.reader }));
    for (const { queueTag, reader } of readers) {
      let set = this.readersByQueue.get(queueTag);
      if (!set) this.readersByQueue.set(queueTag, (set = new Set()));
      set.add(reader);
    }
    // Events moved to ready lists by any instance's dispatcher wake this instance's readers at once.
    this.readyWakes ??= this.parts.wakes$.subscribe((wake) => {
      if (wake.tag === WAKE_ALL) for (const set of this.readersByQueue.values()) for (const r of set) r.nudge();
      else if (wake.tag === INSTANCES_QUESTION) this.answerInstances(wake.due);
      else if (wake.due < 0) this.nudgeReaders(wake.tag);
    });
    this.startBeacon();
    const consumerParts = {
      type,
      group,
      queues,
      eventClass,
      handler,
      parallelism: plan.slots,
      prefetch: plan.prefetch,
      timeoutMs: plan.timeoutMs,
      heartbeat: { everyMs: plan.heartbeatMs, leaseMs: plan.heartbeatLeaseMs },
      ...(plan.keyMetrics > 0 && options.key ? { keyLabels: new KeyLabels((event: T) => options.key!.call(options, event), plan.keyMetrics) } : {}),
      retry: plan.retry,
      maxSnoozes: plan.maxSnoozes,
      keepDead: plan.keepDead,
      scripts,
      codec: this.parts.codec,
      metrics,
      contextStore: this.parts.contextStore,
      contextHandler: settings.contextHandler ?? passThroughContextHandler,
      activity: this.parts.activity?.of(type),
      limited: plan.countsRunning,
      // A hold set here ends: this instance's readers look at once, and every other instance's on the wake-up.
      onHoldEnded: (keys: TypeKeys) => {
        this.nudgeReaders(keys.queueTag);
        this.announceReady(keys.queueTag);
      },
      errands: this.parts.errands,
    };
    const consumer = batch ? new BatchConsumer<T>(consumerParts, batch) : new Consumer<T>(consumerParts);
    for (const dispatcher of dispatchers) dispatcher.start();
    // On the command connection: the handlers' own carries claims and results alone.
    const moves = new PartitionMoves(this.parts.connections.command, layout, this.parts.scripts);
    // With limits, no claim before they are stored: the first claims would otherwise run unlimited. Nor while
    // another partitions setting of the type may be claiming: the repartitioner says when (src/redis/move-pause.ts).
    if (limited) {
      const shared = layout.partitionsOf(route);
      const registered = () => this.registrations.get(registrationKey)?.consumer === (consumer as unknown);
      this.parts.errands.run(async (signal) => {
        await Promise.all(limitsStored);
        // Stored, or given up because the service closes or the handler was removed meanwhile: then nothing more is sent.
        if (!registered()) return;
        await moves.waitIfMoving(type, route.partitions, shared, SETTING_STALE_MS, signal).catch(() => false);
        if (registered()) consumer.start();
      });
    } else {
      consumer.start();
    }
    if (!this.repartitioners.has(type)) {
      const onResumed = () => {
        for (const shared of layout.partitionsOf(route)) {
          this.nudgeReaders(shared.tag);
          this.announceReady(shared.tag);
        }
      };
      const hasLimits = () => this.registrations.ofType(type).some((r) => r.limitsRefresh !== undefined);
      const repartitioner = new Repartitioner(route, moves, metrics, () => this.parts.scripts.gate.wait(), undefined, onResumed, hasLimits);
      this.repartitioners.set(type, repartitioner);
      repartitioner.start();
    }
    this.parts.onHandled(route);
    const limitsRefresh = limited
      ? setInterval(() => {
          for (const [p, shared] of layout.partitionsOf(route).entries()) this.parts.errands.run(() => this.registerLimits(layout.forGroup(shared, group), plan.partitionLimits[p]!));
        }, LIMITS_REFRESH_MS).unref()
      : undefined;
    this.registrations.set(registrationKey, {
      type,
      group,
      parallelism: plan.parallelism,
      version,
      ...(limitsRefresh ? { limitsRefresh } : {}),
      ...(sortByKey ? { sortedQueues: queues.map((q) => q.keys) } : {}),
      consumer: consumer as unknown as Consumer<DelayedEventInstance>,
      dispatchers,
      readers,
    });
  }

  /** Stops handling `eventClass` in `group` here, waiting (up to closeTimeoutMs) for its running handlers. */
  async remove<T extends DelayedEventInstance>(eventClass: EventClass<T>, group?: string): Promise<void> {
    const key = `${eventRouteOf(eventClass).type}|${groupName(group)}`;
    const registration = this.registrations.get(key);
    if (!registration) return;
    this.registrations.delete(key);
    if (this.registrations.ofType(registration.type).length === 0) {
      const repartitioner = this.repartitioners.get(registration.type);
      this.repartitioners.delete(registration.type);
      await repartitioner?.stop();
    }
    await this.unregister(registration);
    // Other instances' quiet dispatchers of its queues look: their retries and leases are theirs now.
    for (const { queueTag } of registration.readers) this.announce(queueTag, announceLook);
    // The last handler gone: this instance no longer claims, so it says nothing of its liveness.
    const beacon = this.registrations.size === 0 ? this.beacon : undefined;
    if (beacon) await beacon.stop().then(() => void (this.beacon = undefined));
  }

  /** Unregisters a named group for good, in every instance, dropping what waited for it; resolves whether it was registered. */
  async removeGroup<T extends DelayedEventInstance>(eventClass: EventClass<T>, group: string): Promise<boolean> {
    const route = eventRouteOf(eventClass);
    const name = groupName(group);
    if (name === DEFAULT_GROUP) throw new InvalidOptionError('group', 'the default group cannot be removed; stop its handlers with removeHandler');
    await this.remove(eventClass, name);
    const removed = await Promise.all(
      this.parts.layout.partitionsOf(route).map(async (shared) => {
        let first: boolean | undefined;
        // In calls of DEAD_LETTER_CHUNK events, so a large group never holds Redis in one script.
        for (;;) {
          const { existed, left } = await this.parts.scripts.removeGroup(shared, name, DEAD_LETTER_CHUNK);
          first ??= existed;
          if (left === 0) return first;
        }
      }),
    );
    return removed.some(Boolean);
  }

  /**
   * Stops every handler: no more claims or dispatch, then up to closeTimeoutMs
   * for the handlers running. Readers stop before dispatchers would matter:
   * an event a dispatcher moves meanwhile waits in the ready list for any instance.
   */
  async stopAll(): Promise<void> {
    const registrations = [...this.registrations.values()];
    this.registrations.clear();
    this.readyWakes?.unsubscribe();
    await this.beacon?.stop();
    const repartitioners = [...this.repartitioners.values()];
    this.repartitioners.clear();
    await Promise.all(repartitioners.map((r) => r.stop()));
    await Promise.all(registrations.map((r) => this.unregister(r)));
  }

  private async unregister(registration: Registration): Promise<void> {
    clearInterval(registration.limitsRefresh);
    for (const { queueTag, reader } of registration.readers) this.readersByQueue.get(queueTag)?.delete(reader);
    // Stopped together: the dispatchers' stops resolve once their looks in flight are answered.
    await Promise.all([...registration.dispatchers.map((dispatcher) => dispatcher.stop()), registration.consumer.stop(this.parts.options.closeTimeoutMs)]);
    const command = this.parts.connections.command;
    await Promise.all((registration.sortedQueues ?? []).map((keys) => this.parts.scripts.bounded('forget-sorter', () => forgetSorter(command, keys)).catch(() => undefined)));
  }

  /** Stores a queue's limits, retried through an outage (src/service/flow-registration.ts). */
  private registerLimits(keys: TypeKeys, limits: StoredLimits): Promise<void> {
    return storeLimitsWhenReady(this.parts, keys, limits);
  }

  /** Events may be ready in a queue: every instance's readers look (on the wake-up channel). */
  private announceReady(queueTag: string): void {
    this.announce(queueTag, announceReady);
  }

  /** Publishes on the wake-up channel, through the ready gate and under a deadline: on a client handed in, a call queued offline would be sent after close(). */
  private announce(queueTag: string, say: typeof announceReady): void {
    const { scripts, connections, layout } = this.parts;
    this.parts.errands.run((signal) => scripts.bounded('announce', () => (signal.aborted ? Promise.resolve() : say(connections.command, layout.wakeChannel, queueTag))));
  }

  private startBeacon(): void {
    if (this.beacon) return;
    const { connections, layout } = this.parts;
    const scripts = this.scriptsOfHandlers(); // the beacon goes on the handlers' connection, under its deadline
    const dispatchers = () => [...this.registrations.values()].flatMap((r) => r.dispatchers);
    this.beacon = new InstanceBeacon({
      instanceId: this.instanceId,
      announce: (seq) => scripts.bounded('beacon', () => announceAlive(connections.handling, layout.wakeChannel, this.instanceId, seq)),
      wakes$: this.parts.wakes$,
      listening: this.parts.listening,
      lookEverywhere: (missed) => {
        for (const dispatcher of dispatchers()) dispatcher.lookEverywhere();
        if (missed) for (const set of this.readersByQueue.values()) for (const reader of set) reader.nudge();
      },
      deaf: () => dispatchers().forEach((dispatcher) => dispatcher.check()),
    });
    this.beacon.start();
  }

  /** Events may be ready in a queue: its readers here look at once. */
  private nudgeReaders(queueTag: string): void {
    const set = this.readersByQueue.get(queueTag);
    if (set) for (const reader of set) reader.nudge();
  }

  /** The scripts the handlers' loops call: on a connection of their own, so enqueues never hold them up. */
  private scriptsOfHandlers(): LuaScripts {
    const { options, connections, layout, metrics, log } = this.parts;
    this.handlingScripts ??= new LuaScripts(
      connections.handling,
      layout.wakeChannel,
      {
        ms: options.commandTimeoutMs,
        onStuck: () => {
          metrics.count(METRIC.redisCallTimeouts, { connection: 'owned' });
          connections.resetHandlingConnection();
        },
      },
      options.idempotencyWindowMs,
      undefined,
      (error) => log.refused(error),
      options.keepHandled,
      options.outcomesMaxLen,
    );
    return this.handlingScripts;
  }
}
