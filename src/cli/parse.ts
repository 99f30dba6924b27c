import type { Delay } from '../index';

/** Bad input or no connection: exit code 2, with a message that says what to fix. */
export class UsageError extends Error {}

/** The type or event asked for is not there: exit code 1. */
export class NotFoundError extends Error {}

export const EXIT = { done: 0, notFound: 1, usage: 2 } as const;

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;
/** An ISO 8601 date: 2026-12-01, 2026-12-01T09:00Z, 2026-12-01T09:00:00.000+02:00. */
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** `90s`, `3h`, `1h30m`, `500ms`, `2d`, `now`, or an ISO date such as `2026-12-01T09:00Z`. */
export function parseDelay(text: string): Delay | Date {
  const trimmed = text.trim();
  if (trimmed === 'now') return 0;
  if (DURATION.test(trimmed)) {
    let ms = 0;
    for (const [, amount, unit] of trimmed.matchAll(PART)) ms += Number(amount) * UNIT_MS[unit!]!;
    return Math.ceil(ms);
  }
  if (ISO_DATE.test(trimmed)) {
    const date = new Date(trimmed);
    if (!Number.isNaN(date.getTime())) return date;
  }
  throw new UsageError(`cannot read ${JSON.stringify(text)} as a delay or a date: use a duration such as 90s, 3h, 1h30m or 500ms (units ms, s, m, h, d), 'now', or an ISO date such as 2026-12-01T09:00Z`);
}

/** A whole number option within bounds. */
export function parseWhole(option: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) throw new UsageError(`${option} must be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`);
  return Number(text);
}
