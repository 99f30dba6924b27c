import type { EventRoute } from '../core/delayed-event.decorator';
import type { EventContext } from '../core/event-context';
import { type AllowedKeys, checkArgumentKeys } from '../core/option-keys';
import { type CatchUp, type StoredSpec, type Window, occurrenceAtOrAfter } from '../core/recurrence';
import { versionedBody } from '../core/stored-body';
import type { RecurringStore, ScheduleDefinition } from '../redis/recurring-store';
import { type Overlap, type SchedulePolicyOptions, jitterOf } from '../core/schedule-policy';

// Recurring schedules' definitions as schedule() takes them and schedules()
// shows them, and what replacing or removing one settles
// (src/service/recurring-schedules.ts advances them).

export interface ScheduleOptions extends SchedulePolicyOptions {
  /** Context every occurrence carries. */
  readonly context?: EventContext;
  /** No occurrence before this; with `every`, the first occurrence (default: one interval from now). */
  readonly startAt?: Date;
  /** No occurrence after this. */
  readonly endAt?: Date;
  /** Occurrences missed while no instance ran: 'none', only the 'latest' (default), or 'all' (the latest 100). */
  readonly catchUp?: CatchUp;
}

/** schedule()'s options, each once (src/core/option-keys.ts). */
const SCHEDULE_OPTION_KEYS = {
  context: true,
  startAt: true,
  endAt: true,
  catchUp: true,
  overlap: true,
  catchUpWindowMs: true,
  limit: true,
  immediately: true,
  jitterMs: true,
  pauseOnFailure: true,
} as const satisfies AllowedKeys<ScheduleOptions>;
/** A spec is { every } or { cron, tz? }: checkSpec says which mixes are wrong. */
const SPEC_KEYS = { every: true, cron: true, tz: true } as const;

/** schedule()'s spec and options hold only keys it knows: an InvalidArgumentError names one it does not, before anything waits for Redis. */
export function checkScheduleKeys(spec: unknown, options: unknown): void {
  if (spec !== null && typeof spec === 'object') checkArgumentKeys(spec, SPEC_KEYS, 'a schedule spec');
  checkArgumentKeys(options, SCHEDULE_OPTION_KEYS, 'schedule');
}

/** A recurring schedule as `schedules()` lists it. */
export interface RecurringSchedule {
  /** The event type its occurrences are. */
  readonly type: string;
  readonly name: string;
  readonly spec: StoredSpec;
  /** The next occurrence not enqueued yet; undefined once the schedule has ended. */
  readonly next: Date | undefined;
  readonly startAt: Date | undefined;
  readonly endAt: Date | undefined;
  readonly catchUp: CatchUp;
  readonly context: EventContext;
  /** The latest occurrence enqueued (its nominal time); undefined before the first. */
  readonly last: Date | undefined;
  /** Since 0.6: the policy (src/service/schedule-policy.ts); each shown with its default when not given. */
  readonly overlap: Overlap;
  readonly catchUpWindowMs: number | undefined;
  readonly limit: number | undefined;
  readonly immediately: boolean;
  readonly jitterMs: number;
  readonly pauseOnFailure: boolean;
  /** Since 0.6: occurrences that did not run: missed while no instance ran and not caught up, or skipped by `overlap`. */
  readonly skipped: number;
  /** Since 0.6: paused by pauseSchedule() or by a dead-lettered occurrence (pauseOnFailure); `pausedReason` says which. */
  readonly paused: boolean;
  readonly pausedReason?: string;
  /** Since 0.6: with `limit`, the occurrences left to run; undefined without. */
  readonly remaining: number | undefined;
  /** Since 0.6, overlap 'buffer-one': the occurrence waiting for the running one to leave. */
  readonly waiting?: Date;
}

/** Stores occurrences: idempotently, or replacing what is stored. */
export type StoreOccurrences = (occurrences: readonly Occurrence[], replace: boolean) => Promise<void>;
/** Cancels an occurrence enqueued ahead. */
export type CancelOccurrence = (route: EventRoute, id: string) => Promise<boolean>;

/** One occurrence to store: an ordinary event of the schedule's type. */
export interface Occurrence {
  readonly route: EventRoute;
  readonly id: string;
  readonly body: string;
  readonly at: number;
}

/** The id of a schedule's occurrence: deterministic, so every instance that enqueues it enqueues the same event. */
export function occurrenceId(name: string, at: number): string {
  return `${name}@${at}`;
}

/**
 * What a replaced or removed definition enqueued ahead of its time: an
 * occurrence the new definition also has is stored again with its payload
 * (`replace`, so one the new definition stored meanwhile is not lost); any
 * other is cancelled, leaving no idempotency mark.
 */
export async function settleAhead(old: ScheduleDefinition, successor: ScheduleDefinition | undefined, store: StoreOccurrences | undefined, cancel: CancelOccurrence): Promise<void> {
  const route = { type: old.type, partitions: old.partitions };
  const now = Date.now();
  for (const at of old.ahead ?? []) {
    if (at + jitterOf(occurrenceId(old.name, at), old.policy?.jitterMs) <= now) continue;
    if (successor && store && occurrenceAtOrAfter(successor.spec, successor.window, successor.anchor, at) === at) {
      await store([occurrenceOf(successor, route, at)], true);
    } else {
      await cancel(route, occurrenceId(old.name, at));
    }
  }
}

/** Each schedule of a type as `schedules()` shows it. */
export async function describeSchedules(store: RecurringStore, route: EventRoute): Promise<RecurringSchedule[]> {
  return (await store.readAll(route)).map(({ definition: d }) => ({
    type: d.type,
    name: d.name,
    spec: 'every' in d.spec ? { every: d.spec.every } : { cron: d.spec.cron, tz: d.spec.tz },
    next: d.next === null ? undefined : new Date(d.next),
    startAt: d.window.startAt === undefined ? undefined : new Date(d.window.startAt),
    endAt: d.window.endAt === undefined ? undefined : new Date(d.window.endAt),
    catchUp: d.catchUp,
    context: d.context ?? {},
    last: d.last === undefined || d.last === null ? undefined : new Date(d.last),
    overlap: d.policy?.overlap ?? 'allow',
    catchUpWindowMs: d.policy?.catchUpWindowMs,
    limit: d.policy?.limit,
    immediately: d.policy?.immediately === true,
    jitterMs: d.policy?.jitterMs ?? 0,
    pauseOnFailure: d.policy?.pauseOnFailure === true,
    skipped: d.skipped ?? 0,
    paused: d.paused !== undefined && d.paused !== null,
    ...(d.paused ? { pausedReason: d.paused.reason } : {}),
    remaining: d.policy?.limit === undefined ? undefined : Math.max(0, d.policy.limit - (d.runs ?? 0)),
    ...(d.buffered !== undefined && d.buffered !== null ? { waiting: new Date(d.buffered) } : {}),
  }));
}

/** Every schedule of every type under the prefix, by type and name. */
export async function describeAllSchedules(store: RecurringStore): Promise<RecurringSchedule[]> {
  const all = await Promise.all((await store.routes()).map((route) => describeSchedules(store, route)));
  return all.flat().sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : a.name.localeCompare(b.name)));
}

/** Removes a schedule and cancels the occurrences it enqueued ahead; resolves whether it existed. */
export async function removeSchedule(store: RecurringStore, route: EventRoute, name: string, cancel: CancelOccurrence): Promise<boolean> {
  const previous = await store.remove(route, name);
  if (!previous) return false;
  await settleAhead(previous, undefined, undefined, cancel);
  return true;
}

/** An occurrence of `definition` at nominal time `at`: its id names that time; it is due `jitterMs` later at most. */
export function occurrenceOf(definition: ScheduleDefinition, route: EventRoute, at: number): Occurrence {
  const id = occurrenceId(definition.name, at);
  const payload = { ...definition.payload, id };
  const json = JSON.stringify(definition.context ? [Date.now(), payload, definition.context] : [Date.now(), payload]);
  // The template's version, not the class's here: an upgraded instance's upcasters read it.
  return { route, id, body: versionedBody(json, definition.eventVersion ?? 1), at: at + jitterOf(id, definition.policy?.jitterMs) };
}

/** The last `most` occurrences of an interval schedule from `from` up to (not including) `before`, oldest first, and how many fell there in all. */
export function missedEvery(every: number, window: Window, anchor: number, from: number, before: number, most: number): { missed: number[]; all: number } {
  let last = anchor + (Math.ceil((before - anchor) / every) - 1) * every;
  if (window.endAt !== undefined && last > window.endAt) last = anchor + Math.floor((window.endAt - anchor) / every) * every;
  const missed: number[] = [];
  for (let at = last; at >= from && missed.length < most; at -= every) missed.unshift(at);
  const all = last >= from ? Math.floor((last - from) / every) + 1 : 0;
  return { missed, all };
}

/** Whether two definitions describe the same schedule (what `schedule()` was given; not where it has got to). */
export function sameSchedule(a: ScheduleDefinition, b: ScheduleDefinition): boolean {
  // The policy is part of it; a pause, the counts and what waits are not (they survive a re-declaration).
  const given = (d: ScheduleDefinition) =>
    JSON.stringify([d.type, d.partitions, d.spec, d.window.startAt ?? null, d.window.endAt ?? null, d.catchUp, d.payload, d.eventVersion ?? 1, d.context ?? null, d.policy ?? null]);
  return given(a) === given(b);
}
