import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Subscription } from 'rxjs';
import { type DelayedEventInstance, type EventClass, eventRouteOf, eventVersioningOf } from '../core/delayed-event.decorator';
import { HandlerAlreadyRegisteredError, InvalidOptionError } from '../core/errors';
import { INSTANCES_QUESTION, type InstanceHandler, announceAlive, announceLook, announceReady, answerInstances } from '../redis/instance-registry';
import type { LuaScripts } from '../redis/lua-scripts';
import { DEFAULT_GROUP, type TypeKeys } from '../redis/redis-layout';
import type { Consumer } from '../runtime/consumer';
import type { BatchHandler, BatchSettings } from '../runtime/batch-consumer';
import { ParkedLooks } from '../runtime/parked-looks';
import { InstanceBeacon } from '../runtime/instance-beacon';
import type { EventHandler } from '../runtime/handler-invocation';
import type { ReadyReader } from '../runtime/ready-reader';
import { SETTING_STALE_MS } from '../runtime/repartitioner';
import { Repartitioners } from './repartitioners';
import { PartitionMoves } from '../redis/partition-moves';
import { WAKE_ALL, WAKE_LOST, type Wake } from '../runtime/wake-listener';
import { WakeRouter } from '../runtime/wake-router';
import { removeGroupInChunks } from './dead-letter-chunks';
import { integer, positive } from './service-options';
import { checkOptionKeys } from '../core/option-keys';
import { groupName, planHandler } from './handler-plan';
import { type HandlersParts, type PartitionHost, registerPartition } from './partition-wiring';
import { handlingScripts, startLoops } from './handler-loops';
import { TagIndex } from './tag-index';
import { type LiveLoops, PARK_AFTER_MS, PARK_PASS_MS, QueueLoops, type QueueLoopsHost } from './queue-loops';
import { BATCH_HANDLER_OPTION_KEYS, type BatchHandlerOptions, type HandlerOptions } from './handler-options';

export type { BatchHandlerOptions, HandlerOptions } from './handler-options';
import { keySorter, storeLimitsWhenReady } from './flow-registration';
import { forgetSorter } from '../redis/flow-limits';
import { GroupRegistrations } from './group-registrations';
import { FlowStore } from '../redis/flow-store';
import { Registrations } from './registrations';
import { KeyLabels } from '../runtime/key-labels';

/** A handler registered here: its loops, running or parked (src/service/queue-loops.ts). */
interface Registration {
  readonly type: string;
  readonly group: string;
  readonly parallelism: number;
  /** The event class's version here. */
  readonly version: number;
  readonly loops: QueueLoops;
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
  private readonly readersByQueue = new TagIndex<ReadyReader>();
  /** The loops of each queue (by wake-up tag): a parked one wakes on a wake-up or a nudge there. */
  private readonly loopsByTag = new TagIndex<QueueLoops>();
  /** The looks of the parked queues, and the pass that parks quiet ones (src/runtime/parked-looks.ts). */
  private readonly parked: ParkedLooks;
  private parkPass: NodeJS.Timeout | undefined;
  private readonly host: PartitionHost;
  private readonly loopsHost: QueueLoopsHost;
  /** A hold set here ends: this instance's readers look at once, and every other instance's on the wake-up. */
  private readonly onHoldEnded = (keys: TypeKeys): void => {
    this.nudgeReaders(keys.queueTag);
    this.announceReady(keys.queueTag);
  };
  private readonly moves: PartitionMoves;
  /** Nudges readers on 'ready' wake-ups, while any handler runs here. */
  private readyWakes: Subscription | undefined;
  /** The groups this instance registers, and restores when Redis loses them. */
  private readonly groups: GroupRegistrations;
  /** The scripts of the handlers' loops, on their own connection (RedisConnections.handling); made with the first handler. */
  private handlingScripts: LuaScripts | undefined;
  /** Per type handled here, the loop that moves its events to this instance's partitions. */
  private readonly repartitioners: Repartitioners;
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
    const listening = () => this.beacon?.hearing() ?? false;
    this.parked = new ParkedLooks(() => this.scriptsOfHandlers(), parts.metrics, listening);
    const { connections, layout, scripts } = parts;
    // On the command connection: the handlers' own carries claims and results alone.
    this.moves = new PartitionMoves(connections.command, layout, scripts);
    this.repartitioners = new Repartitioners(this.moves, parts.metrics, {
      ready: () => scripts.gate.wait(),
      // Its queues may claim again after a move's limits held them: every instance's readers look.
      onResumed: (route) => {
        for (const shared of layout.partitionsOf(route)) {
          this.nudgeReaders(shared.tag);
          this.announceReady(shared.tag);
        }
      },
      hasLimits: (type) => this.registrations.ofType(type).some((r) => r.limitsRefresh !== undefined),
    });
    // One for every handler: per handler, its closures were a good part of what an idle type cost.
    this.host = {
      parts,
      groups: this.groups,
      flowStore: new FlowStore(connections.command, layout, scripts, layout.wakeChannel),
      handlesDefaultGroup: (type) => this.registrations.has(`${type}|${DEFAULT_GROUP}`),
      registerLimits: (keys, limits) => storeLimitsWhenReady(parts, keys, limits),
      nudgeReaders: (queueTag) => this.nudgeReaders(queueTag),
      // Quiet only while wake-ups reach this instance end to end (src/runtime/instance-beacon.ts).
      listening,
      announceReady: (queueTag) => this.announceReady(queueTag),
      wakesOf: (tags) => this.wakeRouter.of(tags),
    };
    this.loopsHost = {
      parked: this.parked,
      listed: (live) => this.listReaders(live, true),
      unlisted: (live) => this.listReaders(live, false),
      parkAfterMs: PARK_AFTER_MS,
      stopTimeoutMs: parts.options.closeTimeoutMs,
    };
  }

  /** The ACL refusal that holds on the handlers' connection, if any. */
  get refusal() {
    return this.handlingScripts?.refusal;
  }

  /** The loops running here, for health(). */
  loops(): { dispatchers: number; readers: number; parked: number } {
    let dispatchers = 0;
    let readers = 0;
    let parked = 0;
    for (const { loops } of this.registrations.values()) {
      dispatchers += loops.loopCounts.dispatchers;
      readers += loops.loopCounts.readers;
      if (loops.parked) parked++;
    }
    return { dispatchers, readers, parked };
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
      running: r.loops.running,
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
    const { options: settings, layout } = this.parts;
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
    const wiring = { plan, version, sortByKey, confirmedByConsumer: batch !== undefined, scripts };
    const host = this.host;
    const specs = layout.partitionsOf(route).map((shared, p) => registerPartition(host, shared, p, wiring));
    // Events moved to ready lists by any instance's dispatcher wake this instance's readers (and parked queues) at once.
    this.readyWakes ??= this.parts.wakes$.subscribe((wake) => this.onWake(wake));
    this.startBeacon();
    const moves = this.moves;
    const registered = (consumer: Consumer<DelayedEventInstance>) => this.registrations.get(registrationKey)?.loops.live?.consumer === consumer;
    // With limits, no claim before they are stored: the first claims would otherwise run unlimited. Nor while
    // another partitions setting of the type may be claiming: the repartitioner says when (src/redis/move-pause.ts).
    const startConsumer = (consumer: Consumer<DelayedEventInstance>) => {
      if (!limited) return consumer.start();
      this.parts.errands.run(async (signal) => {
        await Promise.all(specs.map((spec) => spec.limitsStored));
        // Stored, or given up because the service closes or the handler was removed meanwhile: then nothing more is sent.
        if (!registered(consumer)) return;
        await moves.waitIfMoving(type, route.partitions, layout.partitionsOf(route), SETTING_STALE_MS, signal).catch(() => false);
        if (registered(consumer)) consumer.start();
      });
    };
    const loopsPlan = {
      eventClass,
      handler,
      batch,
      specs,
      wiring,
      keyLabels: plan.keyMetrics > 0 && options.key ? new KeyLabels((event: T) => options.key!.call(options, event), plan.keyMetrics) : undefined,
      onHoldEnded: this.onHoldEnded,
      startConsumer,
    };
    const loops = new QueueLoops(specs, () => startLoops(host, loopsPlan), this.loopsHost);
    for (const tag of loops.tags) this.loopsByTag.add(tag, loops);
    this.parkPass ??= setInterval(() => this.parkQuiet(), PARK_PASS_MS).unref();
    this.repartitioners.startFor(route);
    this.parts.onHandled(route);
    const limitsRefresh = limited
      ? setInterval(() => {
          for (const [p, shared] of layout.partitionsOf(route).entries()) this.parts.errands.run(() => host.registerLimits(layout.forGroup(shared, group), plan.partitionLimits[p]!));
        }, LIMITS_REFRESH_MS).unref()
      : undefined;
    this.registrations.set(registrationKey, {
      type,
      group,
      parallelism: plan.parallelism,
      version,
      ...(limitsRefresh ? { limitsRefresh } : {}),
      ...(sortByKey ? { sortedQueues: specs.map((spec) => spec.keys) } : {}),
      loops,
    });
  }

  /** A wake-up: readers nudged (and parked queues woken) for events ready, parked queues for anything of theirs; or instances() asked. */
  private onWake(wake: Wake): void {
    if (wake.tag === INSTANCES_QUESTION) return this.answerInstances(wake.due);
    if (wake.tag === WAKE_ALL) {
      for (const reader of this.readersByQueue.all()) reader.nudge();
      this.parked.lookEverywhere();
    } else if (wake.tag === WAKE_LOST) {
      this.parked.check();
    } else if (wake.due < 0) {
      this.nudgeReaders(wake.tag);
    } else {
      // Something falls due sooner, or a resume: a parked queue looks now, as its dispatcher would have.
      for (const loops of this.loopsByTag.of(wake.tag)) loops.lookSoon();
    }
  }

  /** Parks the loops of every quiet handler (src/service/queue-loops.ts). */
  private parkQuiet(): void {
    for (const { loops } of this.registrations.values()) loops.tryPark();
  }

  private listReaders(live: LiveLoops, listed: boolean): void {
    for (const { queueTag, reader } of live.readers) {
      if (listed) this.readersByQueue.add(queueTag, reader);
      else this.readersByQueue.delete(queueTag, reader);
    }
  }

  /** Stops handling `eventClass` in `group` here, waiting (up to closeTimeoutMs) for its running handlers. */
  async remove<T extends DelayedEventInstance>(eventClass: EventClass<T>, group?: string): Promise<void> {
    const key = `${eventRouteOf(eventClass).type}|${groupName(group)}`;
    const registration = this.registrations.get(key);
    if (!registration) return;
    this.registrations.delete(key);
    if (this.registrations.ofType(registration.type).length === 0) {
      await this.repartitioners.stopFor(registration.type);
    }
    await this.unregister(registration);
    // Other instances' quiet dispatchers of its queues look: their retries and leases are theirs now.
    for (const queueTag of registration.loops.queueTags) this.announce(queueTag, announceLook);
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
    const removed = await Promise.all(this.parts.layout.partitionsOf(route).map((shared) => removeGroupInChunks(this.parts.scripts, shared, name)));
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
    await this.repartitioners.stopAll();
    await Promise.all(registrations.map((r) => this.unregister(r)));
    clearInterval(this.parkPass);
    await this.parked.stop();
  }

  private async unregister(registration: Registration): Promise<void> {
    clearInterval(registration.limitsRefresh);
    const { loops } = registration;
    for (const tag of loops.tags) this.loopsByTag.delete(tag, loops);
    await loops.stop(this.parts.options.closeTimeoutMs);
    const command = this.parts.connections.command;
    await Promise.all((registration.sortedQueues ?? []).map((keys) => this.parts.scripts.bounded('forget-sorter', () => forgetSorter(command, keys)).catch(() => undefined)));
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
    const dispatchers = () => [...this.registrations.values()].flatMap((r) => r.loops.live?.dispatchers ?? []);
    this.beacon = new InstanceBeacon({
      instanceId: this.instanceId,
      announce: (seq) => scripts.bounded('beacon', () => announceAlive(connections.handling, layout.wakeChannel, this.instanceId, seq)),
      wakes$: this.parts.wakes$,
      listening: this.parts.listening,
      lookEverywhere: (missed) => {
        for (const dispatcher of dispatchers()) dispatcher.lookEverywhere();
        if (missed) for (const reader of this.readersByQueue.all()) reader.nudge();
        // A parked queue's look finds events left ready (those readers would have looked), and wakes it.
        this.parked.lookEverywhere();
      },
      deaf: () => {
        for (const dispatcher of dispatchers()) dispatcher.check();
        this.parked.check();
      },
    });
    this.beacon.start();
  }

  /** Events may be ready in a queue: its readers here look at once, parked ones made again first. */
  private nudgeReaders(queueTag: string): void {
    for (const loops of this.loopsByTag.of(queueTag)) loops.nudged(queueTag);
    for (const reader of this.readersByQueue.of(queueTag)) reader.nudge();
  }

  /** The scripts the handlers' loops call: on a connection of their own, so enqueues never hold them up. */
  private scriptsOfHandlers(): LuaScripts {
    this.handlingScripts ??= handlingScripts(this.parts);
    return this.handlingScripts;
  }
}
