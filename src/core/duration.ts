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
