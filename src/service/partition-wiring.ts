import type { Observable } from 'rxjs';
import type { EventRoute } from '../core/delayed-event.decorator';
import type { EventCodec } from '../core/event-codec';
import type { EventContextStore } from '../core/event-context';
import type { RedisConnections } from '../redis/redis-connections';
import type { ActivityRecorder } from '../runtime/activity-log';
import type { Metrics } from '../runtime/metrics';
import type { ServiceLog } from '../runtime/service-log';
import type { Errands } from '../runtime/background-service';
import type { Wake } from '../runtime/wake-listener';
import type { ResolvedOptions } from './service-options';
import type { StoredLimits } from '../redis/flow-limits';
import type { LuaScripts } from '../redis/lua-scripts';
import { DEFAULT_GROUP, type RedisLayout, type TypeKeys } from '../redis/redis-layout';
import type { ConsumerQueue } from '../runtime/consumer';
import { type DispatchLook, Dispatcher } from '../runtime/dispatcher';
import { FlowSweep } from '../runtime/flow-sweep';
import type { FlowStore } from '../redis/flow-store';
import { ReadyReader, type ReaderSettings } from '../runtime/ready-reader';
import type { GroupRegistrations } from './group-registrations';
import type { HandlerPlan } from './handler-plan';

/** What Handlers is made of (the service's composition root hands it these). */
export interface HandlersParts {
  readonly options: ResolvedOptions;
  readonly layout: RedisLayout;
  readonly connections: RedisConnections;
  /** The command connection's scripts: group registrations go on both connections. */
  readonly scripts: LuaScripts;
  readonly codec: EventCodec;
  readonly contextStore: EventContextStore;
  readonly metrics: Metrics;
  readonly log: ServiceLog;
  readonly activity: ActivityRecorder | undefined;
  readonly wakes$: Observable<Wake>;
  /** Whether the wake-up subscription is confirmed: idle queues' looks go quiet only then (src/runtime/quiet-looks.ts). */
  readonly listening: () => boolean;
  readonly isClosing: () => boolean;
  /** Where the handlers' one-off calls run (limits stored, groups registered, wake-ups said): close() waits for them. */
  readonly errands: Errands;
  /** Told of each type handled here (its gauges are then sampled, and the recurring loop runs). */
  readonly onHandled: (route: EventRoute) => void;
}

/** What wiring a partition needs of the Handlers that own it. */
export interface PartitionHost {
  readonly parts: HandlersParts;
  readonly groups: GroupRegistrations;
  /** A handler of the type's default group runs here. */
  handlesDefaultGroup(type: string): boolean;
  /** Where the flow notices of every queue are applied (one for the instance). */
  readonly flowStore: FlowStore;
  registerLimits(keys: TypeKeys, limits: StoredLimits): Promise<void>;
  nudgeReaders(queueTag: string): void;
  /** Whether wake-ups reach this instance now: its queues may go quiet (src/runtime/quiet-looks.ts). */
  listening(): boolean;
  /** Tells every instance's readers that events may be ready in the queue (an errand). */
  announceReady(queueTag: string): void;
  /** The wake-ups of these tags and those for all (src/runtime/wake-router.ts). */
  wakesOf(tags: readonly string[]): Observable<Wake>;
}

/** One handler's settings for each of its partitions, and where the partitions' limits are gathered. */
export interface PartitionWiring {
  readonly plan: HandlerPlan;
  readonly version: number;
  readonly sortByKey: ReaderSettings['sortByKey'] | undefined;
  readonly confirmedByConsumer: boolean;
  readonly scripts: LuaScripts;
}

/**
 * What a partition of a handler keeps for as long as the handler is
 * registered, its loops parked or not (src/runtime/parked-looks.ts): its keys,
 * the looks of its dispatchers, its flow notices.
 */
export interface PartitionSpec {
  readonly shared: TypeKeys;
  /** The group's keys: the reader claims there. */
  readonly keys: TypeKeys;
  readonly flows: FlowSweep;
  /** The type's dispatcher's look, then a named group's own (its retries and expired leases). */
  readonly looks: readonly DispatchLook[];
  /** Resolves once its limits are stored (or given up: the service closes). */
  readonly limitsStored: Promise<void>;
}

/**
 * One partition (`shared`, number `p`) of a handler, once: its group
 * registered (and the default group, when one of its handlers runs here), its
 * limits stored, and what its dispatchers look at: the type's dispatcher moves
 * due events to every registered group, a named group's own handles its
 * retries and expired leases.
 */
export function registerPartition(host: PartitionHost, shared: TypeKeys, p: number, wiring: PartitionWiring): PartitionSpec {
  const { options: settings, layout, metrics } = host.parts;
  const { plan } = wiring;
  const { group } = plan;
  host.groups.register(shared, group);
  const limitsStored = host.registerLimits(layout.forGroup(shared, group), plan.partitionLimits[p]!);
  // The default group's handlers here keep getting events once the type has named groups.
  if (group !== DEFAULT_GROUP && host.handlesDefaultGroup(shared.type)) host.groups.register(shared, DEFAULT_GROUP);
  // The named groups here are this instance's to restore if Redis loses them: every look of the type's
  // dispatcher registers them again while the queue's marker is missing, before it moves anything.
  const registrations = host.groups.forDispatcher(shared, group);
  // Each group's dead letters are trimmed by its own handlers' looks (keepDead is a handler's option).
  const keepDead = plan.keepDead;
  // Notices of flow children settled here reach their parents through the type's dispatcher (since 0.6).
  const flows = new FlowSweep(host.flowStore, shared, metrics);
  const look = { batchSize: settings.dispatchBatchSize, pollIntervalMs: settings.pollIntervalMs };
  const keys = layout.forGroup(shared, group);
  const looks: DispatchLook[] = [{ ...look, keys: shared, defaultGroupHere: group === DEFAULT_GROUP, registrations, ...(group === DEFAULT_GROUP ? { keepDead } : {}) }];
  if (keys !== shared) looks.push({ ...look, keys, defaultGroupHere: false, keepDead });
  return { shared, keys, flows, looks, limitsStored };
}

/**
 * The loops of one partition of a handler, made when it is added and again
 * each time its parked queue wakes: the dispatchers of its looks and the
 * reader that claims for the consumer. Nothing starts here.
 */
export function wirePartition(host: PartitionHost, spec: PartitionSpec, wiring: PartitionWiring, running: () => boolean): { queue: ConsumerQueue; dispatchers: Dispatcher[] } {
  const { options: settings, metrics } = host.parts;
  const { plan, version, sortByKey, scripts } = wiring;
  const { shared, keys, flows } = spec;
  const onMoved = () => host.nudgeReaders(shared.tag);
  // Its looks go quiet once the queue is idle here (src/runtime/quiet-looks.ts); the reader is made below.
  const quiet = { listening: () => host.listening(), busy: () => running() || reader.holding };
  // The look of the dispatcher of this reader's own keys tells it of events left unclaimed (a word it missed).
  const onReadyWaiting = () => reader.nudgeIfQuiet();
  const [typeLook, ownLook] = spec.looks as [DispatchLook, DispatchLook | undefined];
  const typeDispatcher = new Dispatcher(typeLook, scripts, metrics, { quiet, onMoved, flows, ...(ownLook ? {} : { onReadyWaiting }) }, host.wakesOf([shared.tag, shared.queueTag]));
  const dispatchers = [typeDispatcher];
  let ownDispatcher = typeDispatcher;
  if (ownLook) {
    ownDispatcher = new Dispatcher(ownLook, scripts, metrics, { quiet, onMoved, onReadyWaiting }, host.wakesOf([keys.tag, keys.queueTag]));
    dispatchers.push(ownDispatcher);
  }
  const announce = () => host.announceReady(shared.tag);
  const reader = new ReadyReader(keys, scripts, metrics, {
    leaseMs: plan.leaseMs,
    heartbeatLeaseMs: plan.heartbeatLeaseMs,
    // An event held ahead is not renewed: it waits for a slot within its heartbeat lease too.
    graceMs: plan.heartbeatLeaseMs > 0 ? Math.min(settings.leaseGraceMs, plan.heartbeatLeaseMs) : settings.leaseGraceMs,
    maxAttempts: plan.retry.maxAttempts,
    blockMs: settings.readerBlockMs,
    activity: host.parts.activity?.of(plan.type),
    version,
    priorityAgingMs: plan.priorityAgingMs,
    onLeftForNewerVersion: announce,
    // Room freed, a trailing payload released into the type's schedule (lua/includes/burst-release.lua), or a flow notice queued.
    onFreed: (room, noticed) => {
      if (noticed) flows.poke();
      if (room) announce();
      if (room) typeDispatcher.nudge();
      else typeDispatcher.nudgeFlows();
    },
    ...(sortByKey ? { sortByKey } : {}),
    ...(wiring.confirmedByConsumer ? { confirmedByConsumer: true } : {}),
    listening: () => host.listening(),
    // Not while the service closes: then its beacon stops, and the others' looks find what it gave back.
    onGivenBack: () => host.parts.isClosing() || announce(),
    onClaimed: () => {
      typeDispatcher.check();
      ownDispatcher.check();
    },
  });
  // A dead letter may have queued a flow notice too (lua/dead-letter.lua).
  const onRetryScheduled = () => {
    flows.poke();
    ownDispatcher.nudge();
    if (ownDispatcher !== typeDispatcher) typeDispatcher.nudge();
  };
  return { queue: { keys, reader, onRetryScheduled }, dispatchers };
}
