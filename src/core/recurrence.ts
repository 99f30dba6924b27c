import { Cron } from 'croner';
import { type Delay, dateToMillis, delayToMillis } from './duration';
import { InvalidOptionError } from './errors';

/** When a recurring schedule's occurrences fall: every fixed interval, or on a cron expression in a time zone. */
export type RecurrenceSpec = { readonly every: Delay } | { readonly cron: string; readonly tz?: string };

/** What to do with occurrences missed while no instance ran: none of them, the latest only, or all (at most MAX_CATCH_UP). */
export type CatchUp = 'none' | 'latest' | 'all';

/** The most missed occurrences `catchUp: 'all'` enqueues after an outage: the latest ones. */
export const MAX_CATCH_UP = 100;

/** A validated spec, as stored: plain data, the same for every instance that reads it. */
export type StoredSpec = { readonly every: number } | { readonly cron: string; readonly tz: string };

/** Validates a spec at the call: a typed error says what to fix, and nothing is stored. */
export function checkSpec(spec: RecurrenceSpec): StoredSpec {
  if (spec === null || typeof spec !== 'object') throw new InvalidOptionError('spec', "expected { every: delay } or { cron: '0 9 * * 1-5', tz: 'Europe/Paris' }");
  if ('every' in spec && 'cron' in spec) throw new InvalidOptionError('spec', 'give either every or cron, not both');
  if ('every' in spec && 'tz' in spec) throw new InvalidOptionError('tz', 'goes with cron; an interval (every) needs no time zone');
  if ('every' in spec) {
    if (typeof spec.every !== 'number' && (spec.every === null || typeof spec.every !== 'object')) {
      throw new InvalidOptionError('every', `must be a delay in ms or a duration such as { minutes: 15 }, got ${JSON.stringify(spec.every)}`);
    }
    const every = delayToMillis(spec.every);
    if (!(every >= 1)) throw new InvalidOptionError('every', `must be a delay of at least 1 ms, got ${JSON.stringify(spec.every)}`);
    return { every };
  }
  if (!('cron' in spec) || typeof spec.cron !== 'string') throw new InvalidOptionError('spec', "expected { every: delay } or { cron: '0 9 * * 1-5', tz: 'Europe/Paris' }");
  const tz = spec.tz ?? 'UTC';
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new InvalidOptionError('tz', `${JSON.stringify(tz)} is not an IANA time zone; use a name such as 'Europe/Paris' or 'UTC'`);
  }
  let cron: Cron;
  try {
    cron = new Cron(spec.cron, { timezone: tz, paused: true });
  } catch (error) {
    throw new InvalidOptionError('cron', `${JSON.stringify(spec.cron)} is not a cron expression (${(error as Error).message})`);
  }
  if (!cron.nextRun(new Date())) throw new InvalidOptionError('cron', `${JSON.stringify(spec.cron)} never occurs`);
  return { cron: spec.cron, tz };
}

/** The window in which occurrences happen: from `startAt` (inclusive) until `endAt` (inclusive). */
export interface Window {
  readonly startAt?: number;
  readonly endAt?: number;
}

export function checkWindow(startAt: Date | undefined, endAt: Date | undefined, now: number): Window {
  const start = startAt === undefined ? undefined : dateToMillis(startAt);
  const end = endAt === undefined ? undefined : dateToMillis(endAt);
  if (start !== undefined && end !== undefined && end < start) throw new InvalidOptionError('endAt', `is before startAt (${new Date(end).toISOString()} < ${new Date(start).toISOString()})`);
  if (end !== undefined && end < now) throw new InvalidOptionError('endAt', `is in the past (${new Date(end).toISOString()}): the schedule would never run`);
  return { startAt: start, endAt: end };
}

/**
 * The first occurrence at or after `from` (ms), or undefined when none is left
 * before `endAt`. `every`: occurrences fall at `anchor + k × every`, the anchor
 * being `startAt`, or the time the schedule was stored plus one interval.
 * Cron: as the cron library computes them in the time zone, daylight-saving
 * changes included (docs/api.md says what happens to a skipped or repeated hour).
 */
export function occurrenceAtOrAfter(spec: StoredSpec, window: Window, anchor: number, from: number): number | undefined {
  const start = Math.max(from, window.startAt ?? Number.NEGATIVE_INFINITY);
  let at: number | undefined;
  if ('every' in spec) {
    const k = start <= anchor ? 0 : Math.ceil((start - anchor) / spec.every);
    at = anchor + k * spec.every;
  } else {
    const next = new Cron(spec.cron, { timezone: spec.tz, paused: true }).nextRun(new Date(start - 1));
    at = next ? next.getTime() : undefined;
  }
  if (at === undefined || (window.endAt !== undefined && at > window.endAt)) return undefined;
  return at;
}
