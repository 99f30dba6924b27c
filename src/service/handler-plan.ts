import type { EventRoute } from '../core/delayed-event.decorator';
import { checkGroupOption } from '../core/names';
import { checkOptionKeys } from '../core/option-keys';
import { type RetryPolicy, checkRetryPolicy } from '../core/retry-policy';
import type { StoredLimits } from '../redis/flow-limits';
import { DEFAULT_GROUP } from '../redis/redis-layout';
import { type FlowLimits, checkAgainstPartitions, checkFlowLimits, isLimited, limitsOfPartition } from './flow-control';
import { DEFAULT_PREFETCH, HANDLER_OPTION_KEYS, type HandlerOptions } from './handler-options';
import { DEFAULT_PRIORITY_AGING_MS, MAX_PRIORITY_AGING_MS } from '../core/body-extras';
import { type DeadRetention, HEARTBEATS_PER_LEASE, checkHeartbeat, checkKeepDead, integer, positive } from './service-options';
import { InvalidOptionError } from '../core/errors';

/** A batch handler's call shape, as addBatchHandler checked it. */
export interface BatchShape {
  /** Most events in one call. */
  readonly maxBatch: number;
  /** How long the first event of a batch waits for more before the call. */
  readonly maxWaitMs: number;
  /** Most calls at once. */
  readonly calls: number;
}

/** What a handler registration is, decided from its options alone: no Redis, no loops. */
export interface HandlerPlan {
  readonly type: string;
  readonly group: string;
  /** The handler's calls at once, as given (a batch handler's: its calls). */
  readonly parallelism: number;
  /** Slots the readers and limits count: events, so a batch call holds one per event. */
  readonly slots: number;
  /** Events claimed ahead of the free slots (0 with limits or a batch handler). */
  readonly prefetch: number;
  readonly timeoutMs: number;
  /** How long a claim's lease lasts at most: what the handler may take, and the grace. */
  readonly leaseMs: number;
  /** Keys with a lateness series of their own (keyMetrics; 0: none). */
  readonly keyMetrics: number;
  /** How often its instance renews a running call's lease (0: never; since 0.6). */
  readonly heartbeatMs: number;
  /** A lease not renewed for this long ends (HEARTBEATS_PER_LEASE heartbeats; 0 without heartbeats). */
  readonly heartbeatLeaseMs: number;
  readonly retry: RetryPolicy;
  /** Snoozes an event may take before it is dead-lettered. */
  readonly maxSnoozes: number;
  /** How long an event with a priority waits before it is served as the best (0: never). */
  readonly priorityAgingMs: number;
  /** Dead letters the group keeps (keepDead; 0: no limit). */
  readonly keepDead: DeadRetention;
  readonly limits: FlowLimits;
  /** Limits that bound claims: then claims are for free slots only, and wait for the limits to be stored. */
  readonly limited: boolean;
  /** Limits that count calls running (global concurrency, per key): results free room. */
  readonly countsRunning: boolean;
  /** The limits each partition stores: its share of the type's. */
  readonly partitionLimits: readonly StoredLimits[];
}

/** The service-wide settings a plan reads. */
export interface PlanDefaults {
  readonly handlerTimeoutMs: number;
  /** The service's priorityAgingMs. */
  readonly priorityAgingMs?: number;
  readonly leaseGraceMs: number;
  /** The service's heartbeatMs (false: off). */
  readonly heartbeatMs?: number | false;
  readonly retry: RetryPolicy;
  /** The service's keepDead. */
  readonly keepDead?: DeadRetention;
}

/** keyMetrics checked: how many keys get a lateness series of their own (0: the option is not given). */
function checkKeyMetrics(options: { readonly keyMetrics?: unknown; readonly key?: unknown }): number {
  if (options.keyMetrics === undefined) return 0;
  if (options.key === undefined) throw new InvalidOptionError('keyMetrics', 'needs key: (event) => string, which names the key each lateness is reported under');
  return integer('keyMetrics', options.keyMetrics as number, 0, 1, 10_000);
}

/** Validates a group option; undefined is the default group. */
export function groupName(group: string | undefined): string {
  if (group === undefined) return DEFAULT_GROUP;
  return checkGroupOption(group);
}

/**
 * The plan of addHandler (or, with `batch`, addBatchHandler, whose own
 * options were checked against their list): every option checked, with an
 * InvalidOptionError that says what to fix, and the lease arithmetic. An event
 * of a batch may wait maxWaitMs to gather, and for every call running to end
 * once (calls + 1 timeouts), before its own call starts: its lease covers that.
 */
/** Snoozes an event may take by default: enough for a poll every minute for most of a day. */
export const DEFAULT_MAX_SNOOZES = 1_000;

export function planHandler<T>(
  route: EventRoute,
  parallelismGiven: number | undefined,
  options: HandlerOptions<T>,
  defaults: PlanDefaults,
  batch?: BatchShape,
  /** Asked once the group is known, before the other options are checked: a handler already registered in it throws first, as in 0.4. */
  checkGroup: (group: string) => void = () => undefined,
): HandlerPlan {
  // Left out (from JavaScript), one call at a time: not NaN free slots, which would never claim.
  if (!batch) checkOptionKeys(options, HANDLER_OPTION_KEYS, `addHandler(${route.type})`);
  const inOptions = batch ? undefined : options.parallelism;
  if (inOptions !== undefined && parallelismGiven !== undefined) {
    throw new InvalidOptionError('parallelism', 'is given twice: as the third argument and in the options; give it once');
  }
  const parallelism = integer('parallelism', parallelismGiven ?? inOptions, 1, 1, 10_000);
  const group = groupName(options.group);
  checkGroup(group);
  const timeoutMs = positive('timeoutMs', options.timeoutMs, defaults.handlerTimeoutMs);
  const limits = checkFlowLimits(options);
  checkAgainstPartitions(limits, route.partitions);
  const limited = isLimited(limits);
  // Claimed ahead, an event would count against the limits without running: with limits, claims are for free slots only.
  const prefetch = limited || batch ? 0 : integer('prefetch', options.prefetch, DEFAULT_PREFETCH, 0, 10_000);
  const leaseMs = (batch ? (batch.calls + 1) * timeoutMs + batch.maxWaitMs : timeoutMs) + defaults.leaseGraceMs;
  const heartbeat = checkHeartbeat(options.heartbeatMs, 'heartbeatMs') ?? defaults.heartbeatMs ?? false;
  const heartbeatMs = heartbeat === false ? 0 : heartbeat;
  return {
    type: route.type,
    group,
    parallelism,
    slots: batch ? batch.maxBatch * batch.calls : parallelism,
    prefetch,
    timeoutMs,
    leaseMs,
    keyMetrics: checkKeyMetrics(options),
    heartbeatMs,
    heartbeatLeaseMs: heartbeatMs * HEARTBEATS_PER_LEASE,
    retry: checkRetryPolicy(options.retry ?? defaults.retry, 'retry'),
    maxSnoozes: integer('maxSnoozes', options.maxSnoozes, DEFAULT_MAX_SNOOZES, 0, 1_000_000),
    priorityAgingMs: integer('priorityAgingMs', options.priorityAgingMs, defaults.priorityAgingMs ?? DEFAULT_PRIORITY_AGING_MS, 0, MAX_PRIORITY_AGING_MS),
    keepDead: checkKeepDead(options.keepDead, 'keepDead') ?? defaults.keepDead ?? { count: 0, ageMs: 0 },
    limits,
    limited,
    countsRunning: limits.globalConcurrency !== undefined || limits.perKey !== undefined,
    partitionLimits: Array.from({ length: route.partitions }, (_, p) => limitsOfPartition(limits, route.partitions, p)),
  };
}
