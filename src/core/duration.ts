import { InvalidDelayError } from './errors';

export interface Duration {
  readonly days?: number;
  readonly hours?: number;
  readonly minutes?: number;
  readonly seconds?: number;
  readonly milliseconds?: number;
}

/** Milliseconds, or a duration object such as `{ hours: 3 }`. */
export type Delay = number | Duration;

const UNIT_MS: Readonly<Record<keyof Duration, number>> = {
  days: 86_400_000,
  hours: 3_600_000,
  minutes: 60_000,
  seconds: 1_000,
  milliseconds: 1,
};

/** Far enough for any real schedule, and keeps due times exact in a double and in Lua. */
export const MAX_DELAY_MS = 100 * 365 * UNIT_MS.days;

export function delayToMillis(delay: Delay): number {
  let ms: number;
  if (typeof delay === 'number') {
    ms = checked(delay, 'delay');
  } else if (delay !== null && typeof delay === 'object') {
    ms = 0;
    for (const [unit, value] of Object.entries(delay)) {
      const factor = UNIT_MS[unit as keyof Duration];
      if (factor === undefined) throw new InvalidDelayError(`unknown duration unit '${unit}' (use ${Object.keys(UNIT_MS).join(', ')})`);
      ms += checked(value, unit) * factor;
    }
  } else {
    throw new InvalidDelayError(`expected a number or a duration object, got ${typeof delay}`);
  }
  if (ms > MAX_DELAY_MS) throw new InvalidDelayError(`${ms} ms is more than 100 years`);
  // Redis scores are whole milliseconds; rounding up never fires early.
  return Math.ceil(ms);
}

export function dateToMillis(date: Date): number {
  if (!(date instanceof Date) || Number.isNaN(date.getTime())) throw new InvalidDelayError('expected a valid Date');
  const ms = date.getTime();
  if (ms < 0 || ms > Date.now() + MAX_DELAY_MS) throw new InvalidDelayError(`date ${date.toISOString()} is out of range`);
  return Math.ceil(ms);
}

function checked(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new InvalidDelayError(`${what} is ${String(value)}, not a finite number`);
  if (value < 0) throw new InvalidDelayError(`${what} is negative (${value})`);
  return value;
}

const TEXT_UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION_TEXT = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/;
const DURATION_PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;
/** An ISO 8601 date: 2026-12-01, 2026-12-01T09:00Z, 2026-12-01T09:00:00.000+02:00. */
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** What delay texts look like, for messages that say what to fix. */
export const DELAY_TEXT_HELP = "a duration such as 90s, 3h, 1h30m or 500ms (units ms, s, m, h, d), 'now', or an ISO date such as 2026-12-01T09:00Z";

/** `90s`, `3h`, `1h30m`, `500ms`, `2d`, `now`, or an ISO date; undefined for anything else. */
export function parseDelayText(text: string): Delay | Date | undefined {
  const trimmed = text.trim();
  if (trimmed === 'now') return 0;
  if (DURATION_TEXT.test(trimmed)) {
    let ms = 0;
    for (const [, amount, unit] of trimmed.matchAll(DURATION_PART)) ms += Number(amount) * TEXT_UNIT_MS[unit!]!;
    return Math.ceil(ms);
  }
  if (ISO_DATE.test(trimmed)) {
    const date = new Date(trimmed);
    if (!Number.isNaN(date.getTime())) return date;
  }
  return undefined;
}
