import { type EventClass, type EventRoute, eventRouteOf } from '../core/delayed-event.decorator';
import { ServiceClosedError } from '../core/errors';
import type { EventCodec } from '../core/event-codec';
import type { DeadLetterStep, EnqueueStatus, LuaScripts } from '../redis/lua-scripts';
import type { Occurrence } from './recurring-definitions';
import { checkGroupArgument } from '../core/arguments';
import { checkIdArgument, checkTypeName } from '../core/names';
import { checkArgumentKeys } from '../core/option-keys';
import { applyInChunks, idsByQueue } from './dead-letter-chunks';
import { checkTarget } from './inspection-checks';
import { typedConnectionError } from '../redis/ready-gate';
import { FlowStore } from '../redis/flow-store';
import { RecurringStore } from '../redis/recurring-store';
import type { RedisClient } from '../redis/redis-client';
import type { RedisConnections } from '../redis/redis-connections';
import type { RedisLayout, TypeKeys } from '../redis/redis-layout';
import { StoredEvents } from '../redis/stored-events';
import { type EventTarget, GROUP_OPTION_KEYS } from './inspection-types';

/** What an Inspector runs on: the service hands in its own, createInspector() opens them. */
export interface InspectorParts {
  readonly client: RedisClient;
  readonly layout: RedisLayout;
  readonly scripts: LuaScripts;
  readonly codec: EventCodec;
  /** Set when the Inspector owns its connection (createInspector from a URL or a client). */
  readonly connections?: RedisConnections;
  /** Whether calls are refused (the service that made it is closing). */
  readonly closed?: () => boolean;
  /** Told of each event cancel() removed. */
  readonly onCancelled?: (type: string) => void;
  /** The services' keepHandled.ageMs, when known: older records of the history are not read. */
  readonly handledAgeMs?: number;
  /** Told how many answers instances() dropped as malformed (anyone who may publish can answer). */
  readonly onDroppedAnswers?: (count: number) => void;
  /** The service that made it has the outcomes option off: waitFor() says so (since 0.6). */
  readonly outcomesOff?: boolean;
  /** The types the service that made it handles: known at once, before its answer to instances() can be heard. */
  readonly handledHere?: () => readonly string[];
  /** The service's way to store a backfilled occurrence, waiting for the one before it (since 0.6; backfill() needs it). */
  readonly chainOccurrence?: (occurrence: Occurrence, after: Occurrence | undefined) => Promise<EnqueueStatus>;
  /** Told when a schedule was paused or resumed: the service's recurring loop looks at once. */
  readonly onScheduleChanged?: () => void;
}

/** A type as the caller named it: its keys per partition (only those found, for a name). */
export interface Resolved {
  readonly route: EventRoute;
  readonly eventClass: EventClass | undefined;
  readonly queues: readonly TypeKeys[];
  /** The partitions are known (a class); for a name, `queues` are the partitions found. */
  readonly exact: boolean;
}

/**
 * How an Inspector call runs: its arguments checked at once, refused once
 * closed, sent once the connection is ready, under a deadline, a failure of
 * the connection typed; and how a type, as the caller named it, resolves to
 * its queues. The calls themselves are Inspector's (src/service/inspector.ts).
 */
export abstract class InspectorCalls {
  protected readonly stored: StoredEvents;
  protected readonly recurring: RecurringStore;
  /** Flows' records (since 0.6): cancel cascades through them. */
  readonly flowStore: FlowStore;
  private closing: Promise<void> | undefined;

  constructor(protected readonly parts: InspectorParts) {
    this.stored = new StoredEvents(parts.client, parts.layout, parts.handledAgeMs);
    this.recurring = new RecurringStore(parts.client, parts.layout);
    this.flowStore = new FlowStore(parts.client, parts.layout, parts.scripts, parts.layout.wakeChannel);
  }

  /** Parents of `route` waiting for children that no longer exist (health(), since 0.6). */
  flowOrphans(route: EventRoute): ReturnType<FlowStore['orphans']> {
    return this.flowStore.orphans(this.parts.layout.partitionsOf(route));
  }

  /** The route of a type with recurring schedules: a class's own, or a name's as the schedules index records it. */
  async recurringRoute(target: EventTarget): Promise<EventRoute | undefined> {
    return typeof target === 'string' ? this.recurring.routeOf(checkTypeName(target)) : eventRouteOf(target);
  }

  /** Where a recurring schedule's occurrence is (since 0.6): held live by any group, held dead by any. */
  occurrenceState(route: EventRoute, id: string): Promise<{ live: boolean; dead: boolean }> {
    return this.parts.scripts.bounded('occurrence state', () => this.stored.liveness(this.parts.layout.forEvent(route, id), id));
  }

  /** Where event `id` of `target` is stored, or would be: for a name, the partition holding it, else its own among those found. */
  async eventKeys(target: EventTarget, id: string): Promise<TypeKeys | undefined> {
    const resolved = await this.resolve(target);
    return resolved && ((await this.queueOf(resolved, id)) ?? this.parts.layout.forEvent(resolved.route, id));
  }

  /** Releases the connection createInspector() opened, once; a client handed in stays open. */
  protected closeConnection(): Promise<void> {
    this.closing ??= this.parts.connections?.close() ?? Promise.resolve();
    return this.closing;
  }

  /** A class's route, or a type name's partitions as found in Redis. */
  protected async resolve(target: EventTarget): Promise<Resolved | undefined> {
    if (typeof target !== 'string') {
      const route = eventRouteOf(target);
      return { route, eventClass: target, queues: this.parts.layout.partitionsOf(route), exact: true };
    }
    const found = await this.stored.typeByName(target);
    return found && { ...found, eventClass: undefined };
  }

  /** For a class, the id's partition; for a name, the partition found holding it (undefined: none). */
  protected async queueOf(resolved: Resolved, id: string): Promise<TypeKeys | undefined> {
    if (resolved.exact) return this.parts.layout.forEvent(resolved.route, id);
    return this.stored.queueHolding(resolved.queues, id);
  }

  protected isClosed(): boolean {
    return this.closing !== undefined || (this.parts.closed?.() ?? false);
  }

  /**
   * A bounded call: its arguments checked at once (bad input is a typed error
   * whatever the state of Redis), refused once closed, sent once the
   * connection is ready, failing with RedisCallTimeoutError after commandTimeoutMs.
   */
  protected bounded<C, R>(name: string, check: () => C, work: (checked: C) => Promise<R>): Promise<R> {
    let checked: C;
    try {
      checked = check();
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.isClosed()) return Promise.reject(new ServiceClosedError());
    return this.parts.scripts.bounded(name, () => work(checked));
  }

  /** As bounded(), for calls of scripts (they have their own deadlines) and types() (unbounded): waits for the connection, or fails unsent within about a second. */
  protected whenReady<C, R>(check: () => C, work: (checked: C) => Promise<R>): Promise<R> {
    let checked: C;
    try {
      checked = check();
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.isClosed()) return Promise.reject(new ServiceClosedError());
    const waiting = this.parts.scripts.gate.wait();
    return (waiting ? waiting.then(() => work(checked)) : work(checked)).then(undefined, (error: unknown) => {
      throw typedConnectionError(error, 'an inspection call');
    });
  }

  /**
   * Runs `step` on each of the type's queues in `group`, in chunks of
   * DEAD_LETTER_CHUNK: on the given ids that live there, or on all of them.
   * For a type name, each partition found takes every id given: one stored
   * elsewhere is not in its set and is skipped.
   */
  protected eachDeadQueue(
    target: EventTarget,
    ids: readonly string[] | undefined,
    options: { readonly group?: string },
    step: (keys: TypeKeys, ids: readonly string[], limit: number) => Promise<DeadLetterStep>,
  ): Promise<number> {
    const check = () => {
      checkTarget(target);
      if (ids !== undefined) ids.forEach((id, i) => checkIdArgument(id, `ids[${i}]`));
      checkArgumentKeys(options, GROUP_OPTION_KEYS, 'replayDeadLetters and purgeDeadLetters');
      return checkGroupArgument(options.group);
    };
    return this.whenReady(check, async (group) => {
      const resolved = await this.resolve(target);
      if (!resolved) return 0;
      const queues = idsByQueue(this.parts.layout, resolved.route, resolved.queues, resolved.eventClass !== undefined, ids);
      const counts = await Promise.all(queues.map(({ keys, ids: queueIds }) => applyInChunks(this.parts.layout.forGroup(keys, group), queueIds, step)));
      return counts.reduce((a, b) => a + b, 0);
    });
  }
}
