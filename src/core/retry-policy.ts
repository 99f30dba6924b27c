import { InvalidOptionError } from './errors';
import { type AllowedKeys, checkOptionKeys } from './option-keys';

/** How often an event is tried and how long to wait before each retry. */
export interface RetryPolicy {
  /** Total handler attempts, the first one included. */
  readonly maxAttempts: number;
  /**
   * Wait in ms before the next attempt, given the attempt (1-based) that just
   * failed, what it failed with (the value the handler threw or rejected with,
   * or an Error saying it returned false or timed out) and the event it was
   * handling. A result that is not a finite number > 0, or a throw, means no wait.
   */
  backoffMs(failedAttempt: number, error?: unknown, event?: unknown): number;
}

export function fixedBackoff(maxAttempts: number, delayMs: number): RetryPolicy {
  checkAttempts(maxAttempts);
  checkMs('delayMs', delayMs);
  return { maxAttempts, backoffMs: () => delayMs };
}

export interface ExponentialBackoffOptions {
  readonly maxAttempts: number;
  readonly initialMs: number;
  /** Growth per attempt; default 2. */
  readonly factor?: number;
  /** Cap of one wait; default 1 hour. */
  readonly maxMs?: number;
  /** Fraction of the wait drawn at random (0..1) so failing instances spread out; default 0.2. */
  readonly jitter?: number;
}

const EXPONENTIAL_BACKOFF_KEYS = { maxAttempts: true, initialMs: true, factor: true, maxMs: true, jitter: true } as const satisfies AllowedKeys<ExponentialBackoffOptions>;

export function exponentialBackoff(options: ExponentialBackoffOptions): RetryPolicy {
  if (options === undefined) throw new InvalidOptionError('exponentialBackoff', 'give { maxAttempts, initialMs, factor?, maxMs?, jitter? }');
  checkOptionKeys(options, EXPONENTIAL_BACKOFF_KEYS, 'exponentialBackoff');
  const { maxAttempts, initialMs, factor = 2, maxMs = 3_600_000, jitter = 0.2 } = options;
  checkAttempts(maxAttempts);
  checkMs('initialMs', initialMs);
  checkMs('maxMs', maxMs);
  if (!Number.isFinite(factor) || factor < 1) throw new InvalidOptionError('factor', 'must be a number >= 1');
  if (!(jitter >= 0 && jitter <= 1)) throw new InvalidOptionError('jitter', 'must be between 0 and 1');
  return {
    maxAttempts,
    backoffMs: (failedAttempt) => {
      const base = Math.min(maxMs, initialMs * factor ** (failedAttempt - 1));
      return Math.round(base * (1 - jitter * Math.random()));
    },
  };
}

/**
 * Any function of the failed attempt (1-based), the error it failed with and
 * the event: `customBackoff(5, (attempt, error, event) => ...)`. A function of
 * the attempt alone works as well. The error is what the handler threw or
 * rejected with, or an Error saying it returned false or timed out; the event
 * is the instance the handler got. Annotate `event` with your event class when
 * the policy is a handler's own.
 */
export function customBackoff<E = unknown>(maxAttempts: number, backoffMs: (failedAttempt: number, error: unknown, event: E) => number): RetryPolicy {
  checkAttempts(maxAttempts);
  return { maxAttempts, backoffMs: backoffMs as RetryPolicy['backoffMs'] };
}

/** 10 attempts over roughly 8.5 minutes: 1 s, 2 s, 4 s ... capped at 5 minutes. */
export const DEFAULT_RETRY_POLICY_OPTIONS: ExponentialBackoffOptions = { maxAttempts: 10, initialMs: 1_000, maxMs: 300_000 };

/** A policy's wait, made safe to send to Redis whatever a custom function returns or throws. */
export function safeBackoff(policy: RetryPolicy, failedAttempt: number, error?: unknown, event?: unknown): number {
  let ms: number;
  try {
    ms = policy.backoffMs(failedAttempt, error, event);
  } catch {
    // A bug in a custom function must not leave the event in flight until its lease runs out.
    return 0;
  }
  return Number.isFinite(ms) && ms > 0 ? Math.ceil(Math.min(ms, MAX_BACKOFF_MS)) : 0;
}

export function checkRetryPolicy(policy: RetryPolicy, option: string): RetryPolicy {
  if (policy === null || typeof policy !== 'object' || typeof policy.backoffMs !== 'function') {
    throw new InvalidOptionError(option, 'expected a RetryPolicy such as exponentialBackoff({ maxAttempts: 5, initialMs: 1000 })');
  }
  checkAttempts(policy.maxAttempts);
  return policy;
}

/** Most attempts a policy may allow: past this, 'retry for ever' is meant, and a dead letter never comes. */
export const MAX_ATTEMPTS_ALLOWED = 100_000;
/** Longest wait between attempts (a year): a due time further out is no retry. */
export const MAX_BACKOFF_MS = 365 * 24 * 3_600_000;

function checkAttempts(maxAttempts: number): void {
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > MAX_ATTEMPTS_ALLOWED) {
    throw new InvalidOptionError('maxAttempts', `must be an integer from 1 to ${MAX_ATTEMPTS_ALLOWED}, got ${maxAttempts}`);
  }
}

function checkMs(name: string, ms: number): void {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > MAX_BACKOFF_MS) {
    throw new InvalidOptionError(name, `must be a number of ms from 0 to ${MAX_BACKOFF_MS} (a year), got ${String(ms)}`);
  }
}
