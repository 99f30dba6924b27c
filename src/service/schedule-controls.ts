import type { EventRoute } from '../core/delayed-event.decorator';
import { InvalidArgumentError, describe } from '../core/errors';
import { type AllowedKeys, checkArgumentKeys } from '../core/option-keys';
import { occurrenceAtOrAfter } from '../core/recurrence';
import type { EnqueueStatus } from '../redis/lua-scripts';
import type { RecurringStore, ScheduleDefinition } from '../redis/recurring-store';
import { cancelAhead } from './policy-advance';
import { type CancelOccurrence, type Occurrence, occurrenceOf } from './recurring-definitions';
import { MOST_CAUGHT_UP } from '../core/schedule-policy';

/** backfill()'s range: the occurrences due from `from` (inclusive) to `to` (exclusive), both in the past. */
export interface BackfillRange {
  readonly from: Date;
  readonly to: Date;
}
const BACKFILL_KEYS = { from: true, to: true } as const satisfies AllowedKeys<BackfillRange>;

/** Schedule names end up in event ids (`<name>@<ms>`) and keys: no '@' or key separators. */
const SCHEDULE_NAME = /^[^\s@{}|#]{1,100}$/;

/** A schedule's name given to a call: an InvalidArgumentError saying the rule otherwise. */
export function checkScheduleName(name: unknown): string {
  if (typeof name !== 'string' || !SCHEDULE_NAME.test(name)) {
    throw new InvalidArgumentError('name', `a schedule's name is 1-100 characters without '@', braces, '|', '#' or whitespace; got ${describe(name)}`);
  }
  return name;
}

/** backfill()'s range, checked: Dates, `from` before `to`, `to` not in the future. */
export function checkBackfillRange(range: unknown, now: number): { from: number; to: number } {
  if (range === null || typeof range !== 'object' || Array.isArray(range)) throw new InvalidArgumentError('range of backfill', `must be { from: Date, to: Date }, got ${describe(range)}`);
  checkArgumentKeys(range, BACKFILL_KEYS, 'backfill');
  const { from, to } = range as { from?: unknown; to?: unknown };
  for (const [what, value] of [
    ['from', from],
    ['to', to],
  ] as const) {
    if (!(value instanceof Date) || Number.isNaN(value.getTime())) throw new InvalidArgumentError(`${what} of backfill`, `must be a valid Date, got ${describe(value)}`);
  }
  const start = (from as Date).getTime();
  const end = (to as Date).getTime();
  if (start >= end) throw new InvalidArgumentError('to of backfill', `must be after from (the range is [from, to)), got from ${new Date(start).toISOString()} and to ${new Date(end).toISOString()}`);
  if (end > now) throw new InvalidArgumentError('to of backfill', `is in the future (${new Date(end).toISOString()}): a backfill runs past occurrences; the schedule runs the rest`);
  return { from: start, to: end };
}

/** What pausing, resuming and backfilling a schedule need (src/service/delayed-event-service.ts gives them). */
export interface ScheduleControlParts {
  readonly store: RecurringStore;
  /** Compare-and-set of a definition (lua/advance-schedule.lua). */
  readonly replace: (definition: ScheduleDefinition, read: string, next: ScheduleDefinition) => Promise<boolean>;
  readonly cancel: CancelOccurrence;
  /** Stores an occurrence; with `after`, one that waits until that one settled (a flow edge, onChildFailure 'continue'). */
  readonly chain: (occurrence: Occurrence, after: Occurrence | undefined) => Promise<EnqueueStatus>;
  /** Tells the recurring loop to look now. */
  readonly wake: () => void;
}

/** Pauses, resumes and backfills one recurring schedule (since 0.6; docs/api.md, "Recurring schedules"). */
export class ScheduleControls {
  constructor(private readonly parts: ScheduleControlParts) {}

  /** Pauses a schedule (cancelling what it enqueued ahead) until resume(); false when there is no such schedule. */
  pause(route: EventRoute, name: string): Promise<boolean> {
    // What was decided and not yet stored, and the one waiting under 'buffer-one', do not run either.
    return this.change(
      route,
      name,
      (d, now) =>
        d.paused
          ? undefined
          : { ...d, paused: { at: now, reason: 'paused' }, ahead: [], pending: [], buffered: null, skipped: (d.skipped ?? 0) + (d.buffered !== null && d.buffered !== undefined ? 1 : 0) },
      cancelAhead,
    );
  }

  /**
   * Resumes a paused schedule from now on: the occurrences that fell while it
   * was paused do not run (they count as skipped); false when there is no such schedule.
   */
  resume(route: EventRoute, name: string): Promise<boolean> {
    return this.change(route, name, (d, now) => {
      if (!d.paused) return undefined;
      const { paused: _, ...rest } = d;
      let next = d.next;
      let skipped = 0;
      for (let steps = 0; next !== null && next < now && steps < 100_000; steps++) {
        skipped++;
        next = occurrenceAtOrAfter(d.spec, d.window, d.anchor, next + 1) ?? null;
      }
      // The dead letter that paused it is left to the dead letters: it no longer pauses the schedule.
      return { ...rest, next, watch: [], skipped: (d.skipped ?? 0) + skipped };
    });
  }

  /**
   * Enqueues the occurrences of a schedule due in [from, to) that no backfill
   * enqueued before, oldest first, each waiting for the one before it to
   * settle; resolves how many it stored.
   */
  async backfill(route: EventRoute, name: string, range: { from: number; to: number }): Promise<number> {
    const read = await this.parts.store.read(route, name);
    if (!read) throw new InvalidArgumentError('name', `no recurring schedule ${JSON.stringify(name)} of type '${route.type}': schedule() it first`);
    const d = read.definition;
    const due = occurrencesIn(d, range.from, range.to);
    if (due === undefined) {
      throw new InvalidArgumentError('range of backfill', `holds more than ${MOST_CAUGHT_UP.toLocaleString('en-US')} occurrences of ${JSON.stringify(name)}: backfill it in shorter ranges`);
    }
    const done = await this.parts.store.backfilled(route, name, due);
    const todo = due.filter((_, i) => !done[i]);
    let stored = 0;
    let previous: Occurrence | undefined;
    for (let i = 0; i < todo.length; i += 100) {
      const chunk = todo.slice(i, i + 100);
      for (const at of chunk) {
        const occurrence = occurrenceOf(d, route, at);
        if ((await this.parts.chain(occurrence, previous)) === 'scheduled') stored++;
        previous = occurrence;
      }
      // Recorded as it goes: a backfill cut short and called again stores only what it had not.
      await this.parts.store.markBackfilled(route, name, chunk);
    }
    return stored;
  }

  /** Applies `change` to a schedule by compare-and-set until it holds; `after` runs once it did. */
  private async change(
    route: EventRoute,
    name: string,
    change: (d: ScheduleDefinition, now: number) => ScheduleDefinition | undefined,
    after?: (parts: ScheduleControlParts, d: ScheduleDefinition, route: EventRoute, now: number) => Promise<void>,
  ): Promise<boolean> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const read = await this.parts.store.read(route, name);
      if (!read) return false;
      const now = Date.now();
      const next = change(read.definition, now);
      if (!next) return true;
      if (await this.parts.replace(read.definition, read.json, next)) {
        await after?.(this.parts, read.definition, route, now);
        this.parts.wake();
        return true;
      }
    }
    throw new InvalidArgumentError('name', `schedule ${JSON.stringify(name)} kept changing (20 tries); call again`);
  }
}

/** A schedule's nominal occurrences in [from, to), whatever its window; undefined past MOST_CAUGHT_UP. */
function occurrencesIn(d: ScheduleDefinition, from: number, to: number): number[] | undefined {
  const found: number[] = [];
  if ('every' in d.spec) {
    const every = d.spec.every;
    for (let at = d.anchor + Math.ceil((from - d.anchor) / every) * every; at < to; at += every) {
      if (found.length === MOST_CAUGHT_UP) return undefined;
      found.push(at);
    }
    return found;
  }
  for (let at = occurrenceAtOrAfter(d.spec, {}, d.anchor, from); at !== undefined && at < to; at = occurrenceAtOrAfter(d.spec, {}, d.anchor, at + 1)) {
    if (found.length === MOST_CAUGHT_UP) return undefined;
    found.push(at);
  }
  return found;
}
