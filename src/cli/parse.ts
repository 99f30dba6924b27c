import { DELAY_TEXT_HELP, type Delay, parseDelayText } from '../index';

/** Bad input or no connection: exit code 2, with a message that says what to fix. */
export class UsageError extends Error {}

/** The type or event asked for is not there: exit code 1. */
export class NotFoundError extends Error {}

/** Redis did not answer within the command's time, connecting or after: exit code 1. */
export class UnansweredError extends Error {}

export const EXIT = { done: 0, notFound: 1, usage: 2 } as const;

/** `90s`, `3h`, `1h30m`, `500ms`, `2d`, `now`, or an ISO date such as `2026-12-01T09:00Z`. */
export function parseDelay(text: string): Delay | Date {
  const parsed = parseDelayText(text);
  if (parsed === undefined) throw new UsageError(`cannot read ${JSON.stringify(text)} as a delay or a date: use ${DELAY_TEXT_HELP}`);
  return parsed;
}

/** A whole number option within bounds. */
export function parseWhole(option: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) throw new UsageError(`${option} must be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`);
  return Number(text);
}
