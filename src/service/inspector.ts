import { type DelayedEventInstance, type EventClass, type EventRoute, eventRouteOf } from '../core/delayed-event.decorator';
import { type Delay, dateToMillis, delayToMillis } from '../core/duration';
import { checkGroupArgument, checkIntegerArgument, checkStateArgument } from '../core/arguments';
import type { JsonEvent } from '../core/stored-body';
import { noCheck, checkTarget, checkEvent, checkVerifyOptions, type CancelOptions, cascadeOf } from './inspection-checks';
import { type DueTimeline, readDueTimeline } from '../redis/due-timeline';
import type { DueSpec } from '../redis/lua-scripts';
import { type InstanceInfo, askInstances } from '../redis/instance-registry';
import { reportedOn } from '../redis/call-records';
import { pingWithin } from '../redis/redis-readiness';
import { purgeDead, replayDead } from '../redis/housekeeping';
import type { TypeKeys } from '../redis/redis-layout';
import type { EventCounts, EventState, EventTypeInfo } from '../redis/stored-events';
import { type LimitUse, limitsOf } from '../redis/flow-limits';
import { newerVersionWaits } from '../redis/waiting-events';
import { ACTIVITY_RETENTION_MS, type ActivitySlot, readActivity } from '../runtime/activity-log';
import type { ServiceHealth } from './instrumentation';
import { positive } from './service-options';
import { type RecurringSchedule, describeAllSchedules, describeSchedules, removeSchedule } from './recurring-schedules';
import { type StoredVersions, type UpgradeReport, type VerifyOptions, type VerifyReport, storedVersions, upgradeStored, verifyStored } from './stored-versions';

import {
  type DeadLetter,
  type DeadLetterPage,
  type DueTimelineOptions,
  type EventTarget,
  type InspectedEvent,
  type ListOptions,
  DEAD_LETTER_PAGE_KEYS,
  DUE_TIMELINE_OPTION_KEYS,
  LIST_OPTION_KEYS,
  MAX_DEAD_LETTER_PAGE,
  MAX_PAGE,
  TIMEOUT_OPTION_KEYS,
  deadLetterOf,
  inspectedEvent,
} from './inspection-types';
import { checkArgumentKeys } from '../core/option-keys';
import { ScheduleInspectorCalls } from './schedule-inspector-calls';

export type { InspectorParts } from './inspector-calls';

/**
 * Reads and steers what is stored (docs/api.md, "Inspection"): which types
 * exist, how many events are in each state, one event, a page of a state, the
 * dead letters and recurring schedules; moves an event's due time, pauses a
 * type. Every call but types() is bounded: counts are O(1) commands per queue,
 * find is single-key lookups, a page at most 1,000 events, and each fails with
 * RedisCallTimeoutError after commandTimeoutMs. The storage format is read by
 * src/redis/ alone; this class checks arguments and decodes what it returns.
 */
export class Inspector extends ScheduleInspectorCalls {
  /** The namespace of the keys read (the services' `prefix`). */
  get prefix(): string {
    return this.parts.layout.prefix;
  }

  /** Every event type with stored events, registered groups or a pause under the prefix, whichever instance stored them. Unbounded: its SCAN takes as long as the keyspace is large. */
  types(): Promise<EventTypeInfo[]> {
    return this.whenReady(noCheck, () => this.stored.types());
  }

  /**
   * The live instances of the prefix that handle events, each as it answers
   * now (id, host, pid, start, and per handler its type, group, parallelism
   * and calls running): asked on the wake-up channel, so an instance that
   * stopped, crashed or was cut off is not listed, and no key is written.
   * Advisory: anyone who may publish on the channel can answer. Each answer
   * is checked (a malformed one is dropped) and its strings made safe to print.
   */
  instances(): Promise<InstanceInfo[]> {
    // Not under commandTimeoutMs: the wait for answers has its own bound (1 s), and a stuck call would reset the connection.
    return this.whenReady(noCheck, async () => {
      const { instances, dropped } = await askInstances(this.parts.client, this.parts.layout.wakeChannel);
      if (dropped > 0) this.parts.onDroppedAnswers?.(dropped);
      return instances;
    });
  }

  /** Events in each state (and per group, where groups are registered); undefined for a type name nothing is stored under. */
  counts(target: EventTarget): Promise<EventCounts | undefined> {
    return this.bounded(
      'counts',
      () => checkTarget(target),
      async () => {
        const resolved = await this.resolve(target);
        return resolved && (await this.stored.counts(resolved.queues)).counts;
      },
    );
  }

  // Changing an event class (docs/changing-event-classes.md): not bounded by commandTimeoutMs, they read every stored event.

  /** Reads every stored event and schedule template of the type with the class and its upcasters; reports what it cannot read, changes nothing. */
  verifyStored<T extends DelayedEventInstance>(eventClass: EventClass<T>, options: VerifyOptions = {}): Promise<VerifyReport> {
    return this.whenReady(
      () => checkVerifyOptions(eventClass, options),
      (checked) => verifyStored(this.versionParts(), eventClass, checked),
    );
  }

  /** Rewrites stored bodies and templates older than the class's version at its version, in fenced steps; resumable after a crash. */
  upgradeStored<T extends DelayedEventInstance>(eventClass: EventClass<T>): Promise<UpgradeReport> {
    return this.whenReady(
      () => eventRouteOf(eventClass),
      () => upgradeStored(this.versionParts(), eventClass),
    );
  }

  /** How many of a type's stored events (and schedule templates) each class version wrote; needs no class. Undefined for a name nothing is stored under. */
  versions(target: EventTarget): Promise<StoredVersions | undefined> {
    return this.whenReady(
      () => checkTarget(target),
      async () => {
        const resolved = await this.resolve(target);
        return resolved && storedVersions(this.versionParts(), resolved.queues, resolved.route);
      },
    );
  }

  private versionParts() {
    return { client: this.parts.client, layout: this.parts.layout, stored: this.stored, recurring: this.recurring, scripts: this.parts.scripts, codec: this.parts.codec };
  }

  /** Each group's flow limits (docs/api.md, "Flow control") and their use now; groups without limits left out. Undefined for a name nothing is stored under. */
  limits(target: EventTarget): Promise<Record<string, LimitUse> | undefined> {
    return this.bounded(
      'limits',
      () => checkTarget(target),
      async () => {
        const resolved = await this.resolve(target);
        return resolved && limitsOf(this.parts.client, this.parts.layout, resolved.queues);
      },
    );
  }

  /** What waits in a type's queues for an instance of a newer class version, per group and version (health()). */
  newerVersionWaits(route: EventRoute) {
    return newerVersionWaits(this.parts.client, this.parts.layout, this.parts.layout.partitionsOf(route));
  }

  /** What the gauges report of a type: its counts and whether it is paused, read as counts() reads them. */
  gaugeSample(route: EventRoute): Promise<{ counts: EventCounts; paused: boolean }> {
    return this.stored.counts(this.parts.layout.partitionsOf(route));
  }

  /** One stored event and its state, or undefined. */
  find<T extends DelayedEventInstance>(target: EventClass<T>, id: string): Promise<InspectedEvent<T> | undefined>;
  find(target: string, id: string): Promise<InspectedEvent<JsonEvent> | undefined>;
  find<T extends DelayedEventInstance>(target: EventTarget<T>, id: string): Promise<InspectedEvent<T | JsonEvent> | undefined>;
  find<T extends DelayedEventInstance>(target: EventTarget<T>, id: string): Promise<InspectedEvent<T | JsonEvent> | undefined> {
    return this.bounded(
      'find',
      () => checkEvent(target, id),
      async () => {
        const resolved = await this.resolve(target);
        const keys = resolved && (await this.queueOf(resolved, id));
        const stored = keys && (await this.stored.read(keys, id));
        if (!stored) return undefined;
        const reported = await reportedOn(this.parts.client, this.parts.layout, keys, stored);
        return { ...inspectedEvent(this.parts.codec, resolved!.eventClass, stored), ...reported } as InspectedEvent<T | JsonEvent>;
      },
    );
  }

  /**
   * One page (limit 1..1,000) of the events in `state`: scheduled in due order,
   * ready in dispatch order, in flight by lease expiry, dead oldest first.
   */
  list<T extends DelayedEventInstance>(target: EventClass<T>, state: EventState, options?: ListOptions): Promise<Array<InspectedEvent<T>>>;
  list(target: string, state: EventState, options?: ListOptions): Promise<Array<InspectedEvent<JsonEvent>>>;
  list<T extends DelayedEventInstance>(target: EventTarget<T>, state: EventState, options?: ListOptions): Promise<Array<InspectedEvent<T | JsonEvent>>>;
  list<T extends DelayedEventInstance>(target: EventTarget<T>, state: EventState, options: ListOptions = {}): Promise<Array<InspectedEvent<T | JsonEvent>>> {
    const check = () => {
      checkTarget(target);
      checkStateArgument(state);
      checkArgumentKeys(options, LIST_OPTION_KEYS, 'list');
      return {
        offset: checkIntegerArgument('offset', options.offset, 0, 0, Number.MAX_SAFE_INTEGER),
        limit: checkIntegerArgument('limit', options.limit, 100, 1, MAX_PAGE),
        group: checkGroupArgument(options.group),
      };
    };
    return this.bounded('list', check, async ({ offset, limit, group }) => {
      const resolved = await this.resolve(target);
      if (!resolved) return [];
      const queues = resolved.queues.map((keys) => this.parts.layout.forGroup(keys, group));
      const page = await this.stored.page(queues, state, offset, limit);
      return page.map((stored) => inspectedEvent(this.parts.codec, resolved.eventClass, stored) as InspectedEvent<T | JsonEvent>);
    });
  }

  /** Moves a scheduled or ready event to a new due time (a delay from now, or a Date), keeping payload, context and attempts; false when it is not stored, in flight or dead. */
  reschedule(target: EventTarget, id: string, delayOrDate: Delay | Date): Promise<boolean> {
    try {
      const due: DueSpec = delayOrDate instanceof Date ? { atMs: dateToMillis(delayOrDate) } : { delayMs: delayToMillis(delayOrDate) };
      return this.moveDue(target, id, due);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Makes a scheduled or ready event due at once; false when it is not stored, in flight or dead. */
  runNow(target: EventTarget, id: string): Promise<boolean> {
    return this.moveDue(target, id, { delayMs: 0 });
  }

  /** Removes a stored event in any state; resolves whether it existed. */
  cancel(target: EventTarget, id: string, options?: CancelOptions): Promise<boolean> {
    return this.whenReady(
      () => (checkEvent(target, id), cascadeOf(options)),
      async (cascade) => {
        const resolved = await this.resolve(target);
        const keys = resolved && (await this.queueOf(resolved, id));
        if (!keys) return false;
        // A flow's parent takes the children it still waits for along, unless `cascade: false` (since 0.6).
        return this.flowStore.cancel(keys, id, cascade, async (at, one) => {
          const existed = await this.parts.scripts.cancel(at, one);
          if (existed) this.parts.onCancelled?.(at.type);
          return existed;
        });
      },
    );
  }

  /**
   * Stops dispatching and claiming the type in every instance, across restarts,
   * until resume(); enqueues still store. False for a type name nothing is stored under.
   */
  pause(target: EventTarget): Promise<boolean> {
    return this.bounded(
      'pause',
      () => checkTarget(target),
      () => this.setPaused(target, true),
    );
  }

  /** Undoes pause(); false for a type name nothing is stored under. */
  resume(target: EventTarget): Promise<boolean> {
    return this.bounded(
      'resume',
      () => checkTarget(target),
      () => this.setPaused(target, false),
    );
  }

  /** Whether the type is paused (in every partition). */
  isPaused(target: EventTarget): Promise<boolean> {
    return this.bounded(
      'isPaused',
      () => checkTarget(target),
      async () => {
        const resolved = await this.resolve(target);
        return resolved !== undefined && (await this.stored.isPaused(resolved.queues));
      },
    );
  }

  /** How many scheduled events fall due in each slot from now to a horizon (default an hour in 60 slots); undefined for a type name nothing is stored under. */
  dueTimeline(target: EventTarget, options: DueTimelineOptions = {}): Promise<DueTimeline | undefined> {
    const check = () => {
      checkTarget(target);
      checkArgumentKeys(options, DUE_TIMELINE_OPTION_KEYS, 'dueTimeline');
      return {
        horizonMs: checkIntegerArgument('horizonMs', options.horizonMs, 3_600_000, 1_000, 30 * 86_400_000),
        slots: checkIntegerArgument('slots', options.slots, 60, 1, 500),
        group: checkGroupArgument(options.group),
      };
    };
    return this.bounded('dueTimeline', check, async ({ horizonMs, slots, group }) => {
      const resolved = await this.resolve(target);
      if (!resolved) return undefined;
      const queues = resolved.queues.map((keys) => this.parts.layout.forGroup(keys, group));
      return readDueTimeline(this.parts.client, queues, Date.now(), horizonMs, slots);
    });
  }

  /** What the whole fleet enqueued, handled, failed and dead-lettered of the type, and its lateness, per 10 s over the last `windowMs` (default 15 min, at most 1 h). */
  activity(target: EventTarget, windowMs?: number): Promise<ActivitySlot[]> {
    const check = () => ({ window: checkIntegerArgument('windowMs', windowMs, 900_000, 10_000, ACTIVITY_RETENTION_MS), type: checkTarget(target) });
    return this.bounded('activity', check, async ({ window, type }) => {
      const now = Date.now();
      return readActivity(this.parts.client, this.parts.layout, type, now - window, now);
    });
  }

  /** One page of the dead letters of a type in `group` (default: the default group), oldest first. */
  deadLetters<T extends DelayedEventInstance>(target: EventClass<T>, page?: DeadLetterPage): Promise<Array<DeadLetter<T>>>;
  deadLetters(target: string, page?: DeadLetterPage): Promise<Array<DeadLetter<JsonEvent>>>;
  deadLetters<T extends DelayedEventInstance>(target: EventTarget<T>, page?: DeadLetterPage): Promise<Array<DeadLetter<T | JsonEvent>>>;
  deadLetters<T extends DelayedEventInstance>(target: EventTarget<T>, page: DeadLetterPage = {}): Promise<Array<DeadLetter<T | JsonEvent>>> {
    const check = () => {
      checkTarget(target);
      checkArgumentKeys(page, DEAD_LETTER_PAGE_KEYS, 'deadLetters');
      return {
        offset: checkIntegerArgument('offset', page.offset, 0, 0, Number.MAX_SAFE_INTEGER),
        limit: checkIntegerArgument('limit', page.limit, 100, 1, MAX_DEAD_LETTER_PAGE),
        group: checkGroupArgument(page.group),
      };
    };
    return this.bounded('deadLetters', check, async ({ offset, limit, group }) => {
      const resolved = await this.resolve(target);
      if (!resolved) return [];
      const queues = resolved.queues.map((keys) => this.parts.layout.forGroup(keys, group));
      return (await this.stored.deadLetters(queues, offset, limit)).map((letter) => deadLetterOf(this.parts.codec, resolved.eventClass, letter) as DeadLetter<T | JsonEvent>);
    });
  }

  /** Moves dead letters back to scheduled in their group (due now, attempts reset); no ids means all of the group's. Resolves how many moved. */
  replayDeadLetters(target: EventTarget, ids?: readonly string[], options: { readonly group?: string } = {}): Promise<number> {
    return this.eachDeadQueue(target, ids, options, (keys, someIds, limit) => replayDead(this.parts.scripts, keys, someIds, limit, this.parts.layout.wakeChannel));
  }

  /** Deletes dead letters of a group; no ids means all of the group's. Resolves how many were deleted. */
  purgeDeadLetters(target: EventTarget, ids?: readonly string[], options: { readonly group?: string } = {}): Promise<number> {
    return this.eachDeadQueue(target, ids, options, (keys, someIds, limit) => purgeDead(this.parts.scripts, keys, someIds, limit));
  }

  /** The recurring schedules of a type, each with its spec, next and last occurrence; without a type, every schedule of the prefix. */
  schedules(target?: EventTarget): Promise<RecurringSchedule[]> {
    return this.bounded(
      'schedules',
      () => target === undefined || checkTarget(target),
      async () => {
        if (target === undefined) return describeAllSchedules(this.recurring);
        const route = await this.recurringRoute(target);
        return route ? describeSchedules(this.recurring, route) : [];
      },
    );
  }

  /** Removes a recurring schedule (and the occurrence it had enqueued ahead); resolves whether it existed. */
  unschedule(target: EventTarget, name: string): Promise<boolean> {
    return this.whenReady(
      () => checkTarget(target),
      async () => {
        const route = await this.recurringRoute(target);
        return route ? removeSchedule(this.recurring, route, name, (r, id) => this.parts.scripts.cancel(this.parts.layout.forEvent(r, id), id, false)) : false;
      },
    );
  }

  /** The type's partitions: all of them for a class, those holding anything for a name; undefined for a name nothing is stored under. */
  async queuesOf(target: EventTarget): Promise<readonly TypeKeys[] | undefined> {
    return (await this.resolve(target))?.queues;
  }

  /**
   * Whether Redis answers a PING within `timeoutMs` (default 1 s). An Inspector
   * runs no loops: `loops` are 0. The service's health() adds its own. Rejects only for
   * bad options (an InvalidArgumentError), never for the state of Redis.
   */
  async health(options: { readonly timeoutMs?: number } = {}): Promise<ServiceHealth> {
    checkArgumentKeys(options, TIMEOUT_OPTION_KEYS, 'health');
    const timeoutMs = positive('timeoutMs', options.timeoutMs, 1_000);
    const up = !this.isClosed() && (await pingWithin(this.parts.client, timeoutMs, () => this.parts.scripts.gate.wait()));
    const problem = this.parts.scripts.refusal;
    return { ready: up && !problem, redis: up ? 'up' : 'down', loops: { dispatchers: 0, readers: 0, parked: 0 }, ...(problem ? { problem } : {}) };
  }

  /** Releases the connection createInspector() opened; a client handed in stays open. Later calls fail with ServiceClosedError. */
  close(): Promise<void> {
    return this.closeConnection();
  }

  private async setPaused(target: EventTarget, paused: boolean): Promise<boolean> {
    const resolved = await this.resolve(target);
    if (!resolved) return false;
    await this.stored.setPaused(resolved.queues, paused);
    return true;
  }

  private moveDue(target: EventTarget, id: string, due: DueSpec): Promise<boolean> {
    return this.whenReady(
      () => checkEvent(target, id),
      async () => {
        const resolved = await this.resolve(target);
        const keys = resolved && (await this.queueOf(resolved, id));
        if (!keys) return false;
        return (await this.parts.scripts.reschedule(keys, id, due)) !== undefined;
      },
    );
  }
}
