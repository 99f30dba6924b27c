import type { BodyExtras } from '../core/body-extras';
import { InvalidArgumentError, describe } from '../core/errors';
import { type AllowedKeys, checkArgumentKeys } from '../core/option-keys';
import type { DueSpec } from '../redis/lua-scripts';
import { type EnqueuePolicy, PLAIN_POLICY, REPLACE_POLICY } from '../redis/script-results';

/**
 * Debounce (since 0.6): an enqueue while the event with this id waits moves it
 * (its payload and context the new ones) to now + the delay, never later than
 * `maxWaitMs` after its burst began. With `leading`, the first of a burst runs
 * at once and the later ones fold into one trailing call (docs/windows.md).
 */
export interface DebounceOptions {
  /** The latest a burst's event runs, ms after the burst's first enqueue; the stored event's wins. At least the delay. */
  readonly maxWaitMs?: number;
  /** The first enqueue of a burst is due at once (default false). */
  readonly leading?: boolean;
  /** With `leading`: the last payload of the burst runs after the quiet period (default true). */
  readonly trailing?: boolean;
}

/** Throttle (since 0.6): the first enqueue stores the event; for `windowMs` after it the id answers 'throttled'. */
export interface ThrottleOptions {
  /** 1 ms to 30 days. */
  readonly windowMs: number;
}

/** Dedupe (since 0.6): this event's idempotency window, counted from its handling or cancel. */
export interface DedupeOptions {
  /** 0 to 7 days, instead of the service's idempotencyWindowMs. */
  readonly windowMs: number;
  /** A duplicate while the stored event is still scheduled replaces its payload and context (due time and attempts stay). */
  readonly keepLast?: boolean;
}

/** The window options of enqueue and of each enqueueBatch entry. */
export interface WindowOptions {
  readonly debounce?: DebounceOptions;
  readonly throttle?: ThrottleOptions;
  readonly dedupe?: DedupeOptions;
}

const DEBOUNCE_KEYS = { maxWaitMs: true, leading: true, trailing: true } as const satisfies AllowedKeys<DebounceOptions>;
const THROTTLE_KEYS = { windowMs: true } as const satisfies AllowedKeys<ThrottleOptions>;
const DEDUPE_KEYS = { windowMs: true, keepLast: true } as const satisfies AllowedKeys<DedupeOptions>;

const DAY_MS = 86_400_000;
/** Longest maxWaitMs and throttle window. */
const MOST_WINDOW_MS = 30 * DAY_MS;
/** Longest dedupe window. */
const MOST_DEDUPE_MS = 7 * DAY_MS;

/** What an enqueue's window options ask of the script, and what its body carries for them. */
export interface WindowPolicy {
  readonly policy: EnqueuePolicy;
  readonly extras: BodyExtras;
}

const PLAIN: WindowPolicy = Object.freeze({ policy: PLAIN_POLICY, extras: Object.freeze({}) });
const REPLACE: WindowPolicy = Object.freeze({ policy: REPLACE_POLICY, extras: Object.freeze({}) });

/**
 * The policy of one enqueue (or batch entry), checked: at most one of
 * replace, debounce, throttle and dedupe; `delayMs` is the call's delay, which
 * a maxWaitMs may not be below.
 */
export function windowPolicyOf(options: WindowOptions & { readonly replace?: unknown }, what: string, delayMs: () => number): WindowPolicy {
  const { debounce, throttle, dedupe, replace } = options;
  if (debounce === undefined && throttle === undefined && dedupe === undefined) return replace === true ? REPLACE : PLAIN;
  const given = [replace === true && 'replace', debounce !== undefined && 'debounce', throttle !== undefined && 'throttle', dedupe !== undefined && 'dedupe'].filter(Boolean);
  if (given.length > 1) throw new InvalidArgumentError(what, `takes at most one of replace, debounce, throttle and dedupe, got ${given.join(' and ')}: keep the one you mean`);
  if (debounce !== undefined) return debouncePolicy(debounce, `debounce of ${what}`, delayMs);
  if (throttle !== undefined) {
    checkObject(throttle, THROTTLE_KEYS, `throttle of ${what}`, '{ windowMs }');
    const windowMs = wholeMs(throttle.windowMs, `throttle.windowMs of ${what}`, 1, MOST_WINDOW_MS);
    return { policy: { mode: 't', ms: windowMs }, extras: {} };
  }
  const d = dedupe as DedupeOptions;
  checkObject(d, DEDUPE_KEYS, `dedupe of ${what}`, '{ windowMs, keepLast? }');
  const windowMs = wholeMs(d.windowMs, `dedupe.windowMs of ${what}`, 0, MOST_DEDUPE_MS);
  const keepLast = flag(d.keepLast, `dedupe.keepLast of ${what}`, false);
  return { policy: { mode: keepLast ? 'k' : 'i', ms: 0 }, extras: { dedupeWindowMs: windowMs } };
}

function debouncePolicy(debounce: DebounceOptions, what: string, delayMs: () => number): WindowPolicy {
  checkObject(debounce, DEBOUNCE_KEYS, what, '{ maxWaitMs?, leading?, trailing? }');
  const leading = flag(debounce.leading, `${what}: leading`, false);
  const trailing = flag(debounce.trailing, `${what}: trailing`, true);
  if (!leading && !trailing) throw new InvalidArgumentError(`${what}: trailing`, 'may be false only with leading: true; with neither, no call would ever run');
  let maxWaitMs = 0;
  if (debounce.maxWaitMs !== undefined) {
    maxWaitMs = wholeMs(debounce.maxWaitMs, `${what}: maxWaitMs`, 1, MOST_WINDOW_MS);
    const delay = delayMs();
    if (maxWaitMs < delay) throw new InvalidArgumentError(`${what}: maxWaitMs`, `is ${maxWaitMs} ms, below the delay (${delay} ms): raise it to the delay or more, or shorten the delay`);
  }
  return { policy: { mode: leading ? (trailing ? 'l' : 'L') : 'd', ms: maxWaitMs }, extras: { maxWaitMs } };
}

function checkObject(value: unknown, keys: Readonly<Record<string, true>>, what: string, shape: string): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new InvalidArgumentError(what, `must be an object ${shape}, got ${describe(value)}`);
  checkArgumentKeys(value, keys, what);
}

function wholeMs(value: unknown, what: string, least: number, most: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < least || value > most) {
    throw new InvalidArgumentError(what, `must be a whole number of ms from ${least.toLocaleString('en-US')} to ${most.toLocaleString('en-US')}, got ${describe(value)}`);
  }
  return value;
}

function flag(value: unknown, what: string, byDefault: boolean): boolean {
  if (value === undefined) return byDefault;
  if (typeof value !== 'boolean') throw new InvalidArgumentError(what, `must be true or false, got ${describe(value)}`);
  return value;
}

/** The window options of a call, checked once its due time is known (a maxWaitMs may not be below the delay). */
export function windowsOf(options: WindowOptions & { readonly replace?: unknown }, what: string): (dueSpec: DueSpec) => WindowPolicy {
  // The usual call has none: no closure built for it.
  if (options.debounce === undefined && options.throttle === undefined && options.dedupe === undefined) return options.replace === true ? replaceWindow : plainWindow;
  return (dueSpec) => windowPolicyOf(options, what, () => ('delayMs' in dueSpec ? dueSpec.delayMs : Math.max(0, dueSpec.atMs - Date.now())));
}
export const plainWindow = (): WindowPolicy => PLAIN;
const replaceWindow = (): WindowPolicy => REPLACE;

/** An entry's window options, and nothing else (so that its other fields are not read twice). */
export function pickWindows(entry: WindowOptions): WindowOptions {
  return {
    ...(entry.debounce !== undefined ? { debounce: entry.debounce } : {}),
    ...(entry.throttle !== undefined ? { throttle: entry.throttle } : {}),
    ...(entry.dedupe !== undefined ? { dedupe: entry.dedupe } : {}),
  };
}
