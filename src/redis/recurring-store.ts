import type { EventRoute } from '../core/delayed-event.decorator';
import type { EventContext } from '../core/event-context';
import type { CatchUp, StoredSpec, Window } from '../core/recurrence';
import type { StoredPolicy } from '../core/schedule-policy';
import { newMarkerValue } from './lua-scripts';
import type { RedisClient } from './redis-client';
import type { RedisLayout } from './redis-layout';

/** A recurring schedule as stored in Redis: plain JSON, so any instance can advance it without the event's class. */
export interface ScheduleDefinition {
  readonly name: string;
  readonly type: string;
  readonly partitions: number;
  readonly spec: StoredSpec;
  readonly window: Window;
  readonly catchUp: CatchUp;
  /** `every` occurrences fall at anchor + k × every. */
  readonly anchor: number;
  /** The template's payload (its id is replaced per occurrence) and the context each occurrence carries. */
  readonly payload: Record<string, unknown>;
  /** The event class's version the payload was written at; absent for version 1 (and in definitions before 0.5). */
  readonly eventVersion?: number;
  readonly context?: EventContext;
  /** The first occurrence not enqueued yet; null when the schedule has ended. */
  readonly next: number | null;
  /** Occurrences enqueued ahead of their time, so replacing or removing the schedule can cancel them. */
  readonly ahead: number[];
  /** Set anew by each save: tells an advanced definition from a replaced one. */
  readonly version: string;
  /** The latest occurrence enqueued; absent before the first (and in definitions 0.4 wrote). */
  readonly last?: number | null;
  /** Since 0.6: the policy, only what differs from the defaults (src/service/schedule-policy.ts); absent without one. */
  readonly policy?: StoredPolicy;
  /** Since 0.6: occurrences enqueued (immediately's included), for `limit`; kept across re-declarations. */
  readonly runs?: number;
  /** Since 0.6: occurrences that did not run (missed, not caught up; skipped by overlap). */
  readonly skipped?: number;
  /** Since 0.6: set while the schedule is paused: when, and why ('paused', or the dead-lettered occurrence's id). */
  readonly paused?: { readonly at: number; readonly reason: string } | null;
  /** Since 0.6, overlap 'buffer-one': the occurrence waiting for the previous one to leave. */
  readonly buffered?: number | null;
  /**
   * Since 0.6: occurrences this definition says run, not yet known stored.
   * With a policy the decision is stored first (of several instances, one
   * decides) and the occurrences after: any instance sends them again (an
   * enqueue of a stored id is a duplicate) until one clears the list.
   */
  readonly pending?: number[];
  /** Since 0.6, pauseOnFailure: occurrences enqueued and not yet seen settled (the last 100). */
  readonly watch?: number[];
}

/** A definition and the JSON it was read from (the compare-and-set of lua/advance-schedule.lua compares the text). */
export interface StoredDefinition {
  readonly json: string;
  readonly definition: ScheduleDefinition;
}

function parsed(json: string): StoredDefinition {
  return { json, definition: JSON.parse(json) as ScheduleDefinition };
}

/**
 * Where recurring schedules are kept: per type, a hash of definitions by name
 * (in partition 0 of a partitioned type) and a marker; under the prefix, an
 * index of the types that have any. The plain reads and writes of schedules;
 * advancing one is a script (LuaScripts.advanceSchedule).
 */
export class RecurringStore {
  /**
   * `bound` runs each Redis call under the service's call deadline (LuaScripts.bounded):
   * a call on a connection that went silent fails in time, so the recurring loop
   * that waits on it stops in time too (src/runtime/background-service.ts).
   */
  constructor(
    private readonly client: RedisClient,
    private readonly layout: RedisLayout,
    private readonly bound: <R>(name: string, work: () => Promise<R>) => Promise<R> = (_name, work) => work(),
  ) {}

  async read(route: EventRoute, name: string): Promise<StoredDefinition | undefined> {
    const json = await this.bound('recurring-store', () => this.client.hget(this.layout.recurringOf(route).recurring, name));
    return json === null ? undefined : parsed(json);
  }

  /** A type's definitions, by name. */
  async readAll(route: EventRoute): Promise<StoredDefinition[]> {
    const stored = await this.bound('recurring-store', () => this.client.hgetall(this.layout.recurringOf(route).recurring));
    return Object.values(stored)
      .map(parsed)
      .sort((a, b) => a.definition.name.localeCompare(b.definition.name));
  }

  /** The routes of every type with schedules under the prefix. */
  async routes(): Promise<EventRoute[]> {
    const types = await this.bound('recurring-store', () => this.client.hgetall(this.layout.recurringIndex));
    return Object.entries(types).map(([type, partitions]) => ({ type, partitions: Number(partitions) }));
  }

  /** The route of a type that has schedules, by name; undefined when it has none. */
  async routeOf(type: string): Promise<EventRoute | undefined> {
    const partitions = await this.bound('recurring-store', () => this.client.hget(this.layout.recurringIndex, type));
    return partitions === null ? undefined : { type, partitions: Number(partitions) };
  }

  /**
   * The queue's marker (gone or changed: Redis lost what was stored), the
   * names of the schedules stored and whether the type was obliterated (its
   * schedules removed on purpose), in one transaction: read apart, a flush
   * between the two would pass for schedules removed on purpose.
   */
  async markerAndNames(route: EventRoute): Promise<{ marker: string | null; names: string[]; obliterated: boolean }> {
    const keys = this.layout.recurringOf(route);
    const replies = await this.bound('recurring-store', () => this.client.multi().get(keys.recurringMarker).hkeys(keys.recurring).exists(keys.tombstone).exec());
    for (const [error] of replies ?? []) if (error) throw error;
    return {
      marker: (replies?.[0]?.[1] as string | null | undefined) ?? null,
      names: (replies?.[1]?.[1] as string[] | undefined) ?? [],
      obliterated: replies?.[2]?.[1] === 1,
    };
  }

  /** Sets the marker if it is missing, and reads it. */
  async ensureMarker(route: EventRoute): Promise<string | null> {
    const keys = this.layout.recurringOf(route);
    const replies = await this.bound('recurring-store', () => this.client.multi().set(keys.recurringMarker, newMarkerValue(), 'NX').get(keys.recurringMarker).exec());
    return (replies?.[1]?.[1] as string | null | undefined) ?? null;
  }

  /**
   * Stores `definition`, reading the one it replaces in the same transaction,
   * sets the marker if missing, removes the tombstone of an obliterate, and
   * lists the type in the index.
   */
  async write(definition: ScheduleDefinition): Promise<{ previous: StoredDefinition | undefined; marker: string | null }> {
    const route = { type: definition.type, partitions: definition.partitions };
    const keys = this.layout.recurringOf(route);
    const replies = await this.bound('recurring-store', () =>
      this.client
        .multi()
        .hget(keys.recurring, definition.name)
        .hset(keys.recurring, definition.name, JSON.stringify(definition))
        .set(keys.recurringMarker, newMarkerValue(), 'NX')
        .get(keys.recurringMarker)
        // A schedule defined by hand starts an obliterated type again: the schedules defined after are restored after a loss.
        .del(keys.tombstone)
        .exec(),
    );
    const previous = replies?.[0]?.[1] as string | null | undefined;
    const marker = (replies?.[3]?.[1] as string | null | undefined) ?? null;
    await this.bound('recurring-store', () => this.client.hset(this.layout.recurringIndex, definition.type, String(definition.partitions)));
    return { previous: previous ? parsed(previous) : undefined, marker };
  }

  /**
   * What write() does beside storing the definition, for one stored by
   * compare-and-set (LuaScripts.advanceSchedule): sets the marker if missing
   * (and reads it), removes an obliterate's tombstone, lists the type in the index.
   */
  async register(definition: ScheduleDefinition): Promise<string | null> {
    const route = { type: definition.type, partitions: definition.partitions };
    const keys = this.layout.recurringOf(route);
    const replies = await this.bound('recurring-store', () => this.client.multi().set(keys.recurringMarker, newMarkerValue(), 'NX').get(keys.recurringMarker).del(keys.tombstone).exec());
    await this.bound('recurring-store', () => this.client.hset(this.layout.recurringIndex, definition.type, String(definition.partitions)));
    return (replies?.[1]?.[1] as string | null | undefined) ?? null;
  }

  /** Removes a schedule (and its record of backfilled occurrences), reading it in the same transaction; what it was, if it existed. */
  async remove(route: EventRoute, name: string): Promise<ScheduleDefinition | undefined> {
    const keys = this.layout.recurringOf(route);
    const replies = await this.bound('recurring-store', () => this.client.multi().hget(keys.recurring, name).hdel(keys.recurring, name).exec());
    const previous = replies?.[0]?.[1] as string | null | undefined;
    if (previous) await this.bound('recurring-store', () => this.client.del(backfilledKey(keys.recurring, name)));
    return previous ? parsed(previous).definition : undefined;
  }

  /** Which of a schedule's occurrences (nominal ms) a backfill enqueued already. */
  async backfilled(route: EventRoute, name: string, at: readonly number[]): Promise<boolean[]> {
    if (at.length === 0) return [];
    const key = backfilledKey(this.layout.recurringOf(route).recurring, name);
    const scores = await this.bound('recurring-store', () => this.client.zmscore(key, ...at.map(String)));
    return scores.map((score) => score !== null);
  }

  /** Records occurrences a backfill enqueued (the record a later backfill of the range reads). */
  async markBackfilled(route: EventRoute, name: string, at: readonly number[]): Promise<void> {
    if (at.length === 0) return;
    const key = backfilledKey(this.layout.recurringOf(route).recurring, name);
    await this.bound('recurring-store', () => this.client.zadd(key, ...at.flatMap((ms) => [Date.now(), String(ms)])));
  }
}

/**
 * Sorted set (since 0.6): a schedule's occurrences a backfill enqueued (nominal ms -> when), in the
 * slot of its definition; removed with the schedule, and by obliterate (lua/obliterate.lua).
 */
export function backfilledKey(recurring: string, name: string): string {
  return `${recurring}:bf:${name}`;
}
