import { InvalidOptionError } from '../core/errors';
import type { StoredLimits } from '../redis/flow-limits';

/** HandlerOptions.rateLimit: at most `max` calls start per `perMs`, across every instance. */
export interface RateLimit {
  readonly max: number;
  readonly perMs: number;
}

/** The limits a handler asks for, checked. */
export interface FlowLimits {
  readonly rateLimit?: RateLimit;
  readonly globalConcurrency?: number;
}

const MAX_LIMIT = 1_000_000;
const MAX_WINDOW_MS = 86_400_000;

/** Checks addHandler's `rateLimit` and `globalConcurrency`; an InvalidOptionError says what to fix. */
export function checkFlowLimits(options: { readonly rateLimit?: unknown; readonly globalConcurrency?: unknown }): FlowLimits {
  const { rateLimit, globalConcurrency } = options;
  let rate: RateLimit | undefined;
  if (rateLimit !== undefined) {
    const given = rateLimit as { max?: unknown; perMs?: unknown } | null;
    if (given === null || typeof given !== 'object') throw new InvalidOptionError('rateLimit', 'must be { max, perMs }, e.g. { max: 50, perMs: 1_000 } for 50 calls a second');
    if (typeof given.max !== 'number' || !Number.isInteger(given.max) || given.max < 1 || given.max > MAX_LIMIT) {
      throw new InvalidOptionError('rateLimit.max', `must be an integer from 1 to ${MAX_LIMIT}, got ${String(given.max)}`);
    }
    if (typeof given.perMs !== 'number' || !Number.isInteger(given.perMs) || given.perMs < 1 || given.perMs > MAX_WINDOW_MS) {
      throw new InvalidOptionError('rateLimit.perMs', `must be an integer number of ms from 1 to ${MAX_WINDOW_MS} (a day), got ${String(given.perMs)}`);
    }
    rate = { max: given.max, perMs: given.perMs };
  }
  if (globalConcurrency !== undefined && (typeof globalConcurrency !== 'number' || !Number.isInteger(globalConcurrency) || globalConcurrency < 1 || globalConcurrency > MAX_LIMIT)) {
    throw new InvalidOptionError('globalConcurrency', `must be an integer from 1 to ${MAX_LIMIT}, got ${String(globalConcurrency)}`);
  }
  return { ...(rate ? { rateLimit: rate } : {}), ...(globalConcurrency !== undefined ? { globalConcurrency: globalConcurrency as number } : {}) };
}

/** An even share of `total` for part `p` of `parts`, at least 1: a partitioned type's limits are split over its partitions. */
function share(total: number, parts: number, p: number): number {
  return Math.max(1, Math.floor(total / parts) + (p < total % parts ? 1 : 0));
}

/**
 * The limits partition `p` of `partitions` enforces: the type's, split evenly
 * (each partition is its own hash slot, so one claim cannot count across
 * them); at least one call each.
 */
export function limitsOfPartition(limits: FlowLimits, partitions: number, p: number): StoredLimits {
  return {
    ...(limits.rateLimit ? { rate: { max: share(limits.rateLimit.max, partitions, p), perMs: limits.rateLimit.perMs } } : {}),
    ...(limits.globalConcurrency !== undefined ? { concurrency: share(limits.globalConcurrency, partitions, p) } : {}),
  };
}

export function isLimited(limits: FlowLimits): boolean {
  return limits.rateLimit !== undefined || limits.globalConcurrency !== undefined;
}
