import { InvalidOptionError } from '../core/errors';
import { type AllowedKeys, checkOptionKeys } from '../core/option-keys';
import type { StoredLimits } from '../redis/flow-limits';

/** HandlerOptions.rateLimit: at most `max` calls start per `perMs`, across every instance. */
export interface RateLimit {
  readonly max: number;
  readonly perMs: number;
}

/** HandlerOptions.perKey: each key's own limits. */
export interface PerKeyLimits {
  readonly rateLimit?: RateLimit;
  readonly globalConcurrency?: number;
}

/** The limits a handler asks for, checked. */
export interface FlowLimits {
  readonly rateLimit?: RateLimit;
  readonly globalConcurrency?: number;
  /** Events shared out per key (HandlerOptions.key), each key within these. */
  readonly perKey?: PerKeyLimits;
}

const RATE_LIMIT_KEYS = { max: true, perMs: true } as const satisfies AllowedKeys<RateLimit>;
const PER_KEY_KEYS = { rateLimit: true, globalConcurrency: true } as const satisfies AllowedKeys<PerKeyLimits>;

const MAX_LIMIT = 1_000_000;
const MAX_WINDOW_MS = 86_400_000;

/** Checks addHandler's `rateLimit` and `globalConcurrency`; an InvalidOptionError says what to fix. */
export function checkFlowLimits(options: { readonly rateLimit?: unknown; readonly globalConcurrency?: unknown; readonly key?: unknown; readonly perKey?: unknown }): FlowLimits {
  const own = checkLimits(options, '');
  if (options.key === undefined) {
    if (options.perKey !== undefined) throw new InvalidOptionError('perKey', 'needs key: (event) => string, which names the key (a tenant, a customer) each event is limited under');
    return own;
  }
  if (typeof options.key !== 'function') throw new InvalidOptionError('key', `must be a function (event) => string, got ${typeof options.key}`);
  const perKey = options.perKey ?? {};
  if (perKey === null || typeof perKey !== 'object') throw new InvalidOptionError('perKey', 'must be { rateLimit?, globalConcurrency? }');
  checkOptionKeys(perKey, PER_KEY_KEYS, 'perKey');
  return { ...own, perKey: checkLimits(perKey as { rateLimit?: unknown; globalConcurrency?: unknown }, 'perKey.') };
}

function checkLimits(options: { readonly rateLimit?: unknown; readonly globalConcurrency?: unknown }, path: string): { rateLimit?: RateLimit; globalConcurrency?: number } {
  const { rateLimit, globalConcurrency } = options;
  let rate: RateLimit | undefined;
  if (rateLimit !== undefined) {
    const given = rateLimit as { max?: unknown; perMs?: unknown } | null;
    if (given === null || typeof given !== 'object') throw new InvalidOptionError(`${path}rateLimit`, 'must be { max, perMs }, e.g. { max: 50, perMs: 1_000 } for 50 calls a second');
    checkOptionKeys(given, RATE_LIMIT_KEYS, `${path}rateLimit`);
    if (typeof given.max !== 'number' || !Number.isInteger(given.max) || given.max < 1 || given.max > MAX_LIMIT) {
      throw new InvalidOptionError(`${path}rateLimit.max`, `must be an integer from 1 to ${MAX_LIMIT}, got ${String(given.max)}`);
    }
    if (typeof given.perMs !== 'number' || !Number.isInteger(given.perMs) || given.perMs < 1 || given.perMs > MAX_WINDOW_MS) {
      throw new InvalidOptionError(`${path}rateLimit.perMs`, `must be an integer number of ms from 1 to ${MAX_WINDOW_MS} (a day), got ${String(given.perMs)}`);
    }
    rate = { max: given.max, perMs: given.perMs };
  }
  if (globalConcurrency !== undefined && (typeof globalConcurrency !== 'number' || !Number.isInteger(globalConcurrency) || globalConcurrency < 1 || globalConcurrency > MAX_LIMIT)) {
    throw new InvalidOptionError(`${path}globalConcurrency`, `must be an integer from 1 to ${MAX_LIMIT}, got ${String(globalConcurrency)}`);
  }
  return { ...(rate ? { rateLimit: rate } : {}), ...(globalConcurrency !== undefined ? { globalConcurrency: globalConcurrency as number } : {}) };
}

/** An even share of `total` for part `p` of `parts`: a partitioned type's limits are split over its partitions. */
function share(total: number, parts: number, p: number): number {
  return Math.floor(total / parts) + (p < total % parts ? 1 : 0);
}

/**
 * Each partition of a partitioned type enforces its share of the limits (one
 * claim cannot count across hash slots), so a limit below the number of
 * partitions cannot be kept: refused, saying what to fix.
 */
export function checkAgainstPartitions(limits: FlowLimits, partitions: number): void {
  if (partitions === 1) return;
  const check = (name: string, value: number | undefined) => {
    if (value !== undefined && value < partitions) {
      throw new InvalidOptionError(
        name,
        `is ${value}, below the type's ${partitions} partitions; each partition enforces its share of the limit, so it must be at least ${partitions} (or use fewer partitions)`,
      );
    }
  };
  check('rateLimit.max', limits.rateLimit?.max);
  check('globalConcurrency', limits.globalConcurrency);
  check('perKey.rateLimit.max', limits.perKey?.rateLimit?.max);
  check('perKey.globalConcurrency', limits.perKey?.globalConcurrency);
}

/**
 * The limits partition `p` of `partitions` enforces: the type's, split evenly
 * (each partition is its own hash slot, so one claim cannot count across
 * them); checkAgainstPartitions makes each share at least one.
 */
export function limitsOfPartition(limits: FlowLimits, partitions: number, p: number): StoredLimits {
  const perKey = limits.perKey;
  return {
    ...(limits.rateLimit ? { rate: { max: share(limits.rateLimit.max, partitions, p), perMs: limits.rateLimit.perMs } } : {}),
    ...(limits.globalConcurrency !== undefined ? { concurrency: share(limits.globalConcurrency, partitions, p) } : {}),
    ...(perKey
      ? {
          perKey: {
            ...(perKey.rateLimit ? { rate: { max: share(perKey.rateLimit.max, partitions, p), perMs: perKey.rateLimit.perMs } } : {}),
            ...(perKey.globalConcurrency !== undefined ? { concurrency: share(perKey.globalConcurrency, partitions, p) } : {}),
          },
        }
      : {}),
  };
}

export function isLimited(limits: FlowLimits): boolean {
  return limits.rateLimit !== undefined || limits.globalConcurrency !== undefined || limits.perKey !== undefined;
}

/** The longest key kept as it is: a longer one is shortened to a digest (it names Redis keys). */
const MAX_KEY = 200;

/**
 * The key an event is limited under, from the handler's key function (user
 * code: whatever it throws or returns that is not a string puts the event
 * under the key ''). Never throws.
 */
export function keyOf<T>(key: (event: T) => unknown, event: T, digest: (text: string) => string): string {
  try {
    const named = key(event);
    if (typeof named !== 'string') return '';
    return named.length <= MAX_KEY ? named : `#${digest(named)}`;
  } catch {
    return '';
  }
}
