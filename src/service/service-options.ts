import type { DeadRetention } from '../redis/script-results';
import type { EventEmitter } from 'node:events';
import type { Cluster, Redis } from 'ioredis';
import { InvalidOptionError } from '../core/errors';
import { DEFAULT_PRIORITY_AGING_MS, MAX_PRIORITY_AGING_MS } from '../core/body-extras';
import { type AllowedKeys, checkOptionKeys } from '../core/option-keys';
import type { EventContext } from '../core/event-context';
import type { ContextHandler } from '../runtime/handler-invocation';
import { type Logger, consoleLogger } from '../runtime/service-log';
import type { EnqueueInstrumentation } from './instrumentation';
import type { Durability } from '../redis/lua-scripts';
import { DEFAULT_RETRY_POLICY_OPTIONS, type RetryPolicy, checkRetryPolicy, exponentialBackoff } from '../core/retry-policy';

/**
 * An ioredis client, Redis or Cluster, of ioredis 5 or 6 (the peer dependency's
 * range). ioredis's classes have private members, so to TypeScript an ioredis 5
 * client is no ioredis 6 `Redis`, though it takes the same commands: this shape,
 * which the clients of both have, lets either in. The service drives it as an
 * ioredis 6 client.
 */
export interface IORedisClient extends EventEmitter {
  readonly isCluster: boolean;
  readonly status: string;
  duplicate(): IORedisClient;
  pipeline(): unknown;
  evalsha(sha1: string, numberOfKeys: number, ...args: Array<string | number>): Promise<unknown>;
  quit(): Promise<unknown>;
  disconnect(): void;
}

export interface DelayedEventServiceOptions {
  /**
   * A connection URL (`redis://`, `rediss://`), or an ioredis Redis or Cluster
   * (ioredis 5 or 6). A client you pass stays yours: close() does not quit it.
   */
  readonly redis: string | Redis | Cluster | IORedisClient;
  /** Namespace of every key; default `dq`. */
  readonly prefix?: string;
  /** Longest a dispatcher sleeps without looking at Redis, whatever wake-ups say; default 1000 ms. */
  readonly pollIntervalMs?: number;
  /** Most due events one dispatch call moves; default 1000. */
  readonly dispatchBatchSize?: number;
  /** A handler call running longer is a failed attempt; default 30 s. Per handler: HandlerOptions.timeoutMs. */
  readonly handlerTimeoutMs?: number;
  /** A claimed event's lease outlasts the handler timeout by this much before another instance may take it; default 5 s. */
  readonly leaseGraceMs?: number;
  /**
   * Since 0.6: while a call runs, its instance renews its lease every this
   * many ms (250 to 60,000; default 5,000), and a lease not renewed for three
   * of them ends: the events of a process that died run again within about
   * `3 × heartbeatMs`, however long the handler timeout. `false`: leases last
   * `timeout + leaseGraceMs`, as before 0.6. Per handler: HandlerOptions.heartbeatMs.
   */
  readonly heartbeatMs?: number | false;
  /**
   * Since 0.6: the settling scripts of this instance's handlers (and its
   * cancels) append each call's outcome to a capped stream per type and
   * partition, which outcomes$() and waitFor() read from any process.
   * `{ maxLen }`: each stream keeps about its last `maxLen` entries (100 to
   * 10,000,000; default 10,000). Default `false`: nothing is written.
   */
  readonly outcomes?: { readonly maxLen?: number } | false;
  /** Default retry policy; default exponential from 1 s, doubling, capped at 5 min, 10 attempts, 20% jitter. */
  readonly retry?: RetryPolicy;
  /**
   * An event with a priority that has been due this long is served as the
   * best priority, in due order (no starvation); 0 never (strict
   * priorities); default 60 s, at most 30 days (since 0.6). Per handler:
   * HandlerOptions.priorityAgingMs.
   */
  readonly priorityAgingMs?: number;
  /** Largest serialized event (payload and context); default 512 KiB. */
  readonly maxPayloadBytes?: number;
  /**
   * Longest a Redis call may take before it fails like an outage; default 10 s.
   * On a connection the service opened itself it also forces a reconnect.
   */
  readonly commandTimeoutMs?: number;
  /** How long close() waits for running handlers; default 10 s. */
  readonly closeTimeoutMs?: number;
  /** Longest a reader blocks in Redis in one call; default 5 s. */
  readonly readerBlockMs?: number;
  /** How long past readerBlockMs a blocking call may hang before its connection is replaced; default 3 s. */
  readonly watchdogGraceMs?: number;
  /**
   * How long events an instance of an older event class left for a newer
   * version may wait, with no instance of that version taking them, before
   * health() lists them under `awaitingNewerVersion`; default 5 minutes.
   */
  readonly newerVersionWarnMs?: number;
  /** How often gauges are sampled while metrics$ is subscribed; default 5 s. */
  readonly gaugeIntervalMs?: number;
  /**
   * Adds this instance's counts (enqueued, handled, failed, dead-lettered,
   * lateness) per type to a small Redis hash per 10 seconds, kept an hour, which
   * `activity()` and the dashboard chart for the whole fleet; default true.
   */
  readonly recordActivity?: boolean;
  /**
   * Enqueue completes only when this many replicas confirmed the write (Redis WAIT),
   * else it fails with NotReplicatedError. Off by default: Redis replicates
   * asynchronously, so a master that fails right after an enqueue may lose it.
   */
  readonly durableEnqueue?: Durability;
  /**
   * How long after an event was handled or cancelled enqueueing its type and id
   * again (without `replace`) answers 'duplicate' and stores nothing, so that
   * re-sending an enqueue whose reply was lost is safe; default 5 minutes, 0 turns
   * it off. Costs Redis memory for each id handled within the window (docs/reliability.md).
   */
  readonly idempotencyWindowMs?: number;
  /**
   * History of what ran: per type and subscriber group, keep the events
   * handled successfully (with when, after how many attempts, and their
   * payload), so that find() answers state 'handled' and list(type,
   * 'handled') pages them, newest first. `count` is the most kept per type
   * and group (default 1,000), `ageMs` how long (default: no age limit).
   * Default false: a handled event leaves only its idempotency mark
   * (benchmarks/RESULTS.md shows what keeping costs).
   */
  readonly keepHandled?: { readonly count?: number; readonly ageMs?: number } | false;
  /**
   * Dead-letter retention (since 0.6): per type and subscriber group, keep the
   * newest `count` dead letters (1 to 1,000,000) and none older than `ageMs`
   * (1 ms to 366 days); either or both. Trimmed as events are dead-lettered
   * (at most 250 a call) and by age at each dispatcher look, so a type that
   * stops failing still loses its old ones. Default false: every dead letter
   * is kept until purged or replayed. A handler's keepDead overrides it for its group.
   */
  readonly keepDead?: KeepDead | false;
  /**
   * Context captured at enqueue when the call gives none; default: the context
   * of the handler running now (`current`), if any.
   */
  readonly contextProvider?: (current: EventContext | undefined) => EventContext | undefined;
  /** Wraps every handler call (e.g. logging fields, tracing spans). */
  readonly contextHandler?: ContextHandler;
  /**
   * Called at each enqueued event, for instrumentation: a tracing span around
   * the enqueue (see reactive-delayed-events/opentelemetry). Off by default.
   */
  readonly instrumentEnqueue?: EnqueueInstrumentation;
  /**
   * Where outages, recoveries, connection resets and dead letters are logged,
   * rate-limited (one warning per loop and outage, one record when Redis is
   * back): any logger with pino's `warn(fields, message)` shape. Default: one
   * line each on the console; `false`: nothing.
   */
  readonly logger?: Logger | false;
  /** Put event payloads into dead-letter log records; default false (ids, types and errors only). */
  readonly logPayloads?: boolean;
}

/** Dead-letter retention (keepDead): the newest `count`, none older than `ageMs`; either or both. */
export interface KeepDead {
  readonly count?: number;
  readonly ageMs?: number;
}

export type { DeadRetention };

export type ResolvedOptions = Required<
  Omit<DelayedEventServiceOptions, 'contextProvider' | 'contextHandler' | 'durableEnqueue' | 'redis' | 'instrumentEnqueue' | 'logger' | 'keepHandled' | 'keepDead' | 'outcomes'>
> & {
  readonly keepDead: DeadRetention;
  /** outcomes as the scripts take it: each stream's cap, 0 when off. */
  readonly outcomesMaxLen: number;
  /** keepHandled as the scripts take it: count 0 keeps nothing; ageMs 0 has no age limit. */
  readonly keepHandled: { readonly count: number; readonly ageMs: number };
} & Pick<DelayedEventServiceOptions, 'contextProvider' | 'contextHandler' | 'durableEnqueue' | 'instrumentEnqueue'> & { readonly redis: string | Redis | Cluster; readonly logger: Logger | false };

/** How long an id handled or cancelled stays marked by default, and at most (the idempotencyWindowMs option). */
export const DEFAULT_IDEMPOTENCY_WINDOW_MS = 300_000;
export const MAX_IDEMPOTENCY_WINDOW_MS = 7 * 24 * 3_600_000;

/** The key prefix when none is given. */
export const DEFAULT_PREFIX = 'dq';

/** The `redis` option of the service and of createInspector(): a redis:// URL, or an ioredis client. */
export function checkRedisOption(redis: unknown): void {
  if (redis === undefined || redis === null) throw new InvalidOptionError('redis', 'give a URL such as redis://127.0.0.1:6379, an ioredis Redis or an ioredis Cluster');
  if (typeof redis === 'string') checkRedisUrl(redis);
  else if (typeof redis !== 'object') throw new InvalidOptionError('redis', `give a URL such as redis://127.0.0.1:6379, an ioredis Redis or an ioredis Cluster; got ${typeof redis}`);
}

/** The service's options, each once. */
export const SERVICE_OPTION_KEYS = {
  redis: true,
  prefix: true,
  pollIntervalMs: true,
  dispatchBatchSize: true,
  handlerTimeoutMs: true,
  priorityAgingMs: true,
  leaseGraceMs: true,
  heartbeatMs: true,
  outcomes: true,
  retry: true,
  maxPayloadBytes: true,
  commandTimeoutMs: true,
  closeTimeoutMs: true,
  readerBlockMs: true,
  watchdogGraceMs: true,
  newerVersionWarnMs: true,
  gaugeIntervalMs: true,
  recordActivity: true,
  durableEnqueue: true,
  idempotencyWindowMs: true,
  keepHandled: true,
  keepDead: true,
  contextProvider: true,
  contextHandler: true,
  instrumentEnqueue: true,
  logger: true,
  logPayloads: true,
} as const satisfies AllowedKeys<DelayedEventServiceOptions>;
const KEEP_HANDLED_KEYS = { count: true, ageMs: true } as const satisfies AllowedKeys<Exclude<DelayedEventServiceOptions['keepHandled'], false | undefined>>;
const KEEP_DEAD_KEYS = { count: true, ageMs: true } as const satisfies AllowedKeys<KeepDead>;
const OUTCOMES_KEYS = { maxLen: true } as const satisfies AllowedKeys<Exclude<DelayedEventServiceOptions['outcomes'], false | undefined>>;
const DURABILITY_KEYS = { replicas: true, timeoutMs: true } as const satisfies AllowedKeys<Durability>;

export function resolveOptions(options: DelayedEventServiceOptions): ResolvedOptions {
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', 'expected an object with at least { redis }');
  checkOptionKeys(options, SERVICE_OPTION_KEYS, 'DelayedEventService');
  checkRedisOption(options.redis);
  if (options.durableEnqueue) checkOptionKeys(options.durableEnqueue, DURABILITY_KEYS, 'durableEnqueue');
  return {
    ...options,
    // An ioredis 5 client is driven as the ioredis 6 one it is to everything the service calls.
    redis: options.redis as string | Redis | Cluster,
    prefix: options.prefix ?? DEFAULT_PREFIX,
    pollIntervalMs: positive('pollIntervalMs', options.pollIntervalMs, 1_000, HOUR_MS),
    dispatchBatchSize: integer('dispatchBatchSize', options.dispatchBatchSize, 1_000, 1, 5_000),
    handlerTimeoutMs: positive('handlerTimeoutMs', options.handlerTimeoutMs, 30_000),
    leaseGraceMs: positive('leaseGraceMs', options.leaseGraceMs, 5_000),
    heartbeatMs: checkHeartbeat(options.heartbeatMs, 'heartbeatMs') ?? DEFAULT_HEARTBEAT_MS,
    outcomesMaxLen: checkOutcomes(options.outcomes),
    retry: checkRetryPolicy(options.retry ?? exponentialBackoff(DEFAULT_RETRY_POLICY_OPTIONS), 'retry'),
    priorityAgingMs: integer('priorityAgingMs', options.priorityAgingMs, DEFAULT_PRIORITY_AGING_MS, 0, MAX_PRIORITY_AGING_MS),
    maxPayloadBytes: integer('maxPayloadBytes', options.maxPayloadBytes, 512 * 1024, 64, 256 * 1024 * 1024),
    closeTimeoutMs: positive('closeTimeoutMs', options.closeTimeoutMs, 10_000),
    commandTimeoutMs: positive('commandTimeoutMs', options.commandTimeoutMs, 10_000),
    readerBlockMs: positive('readerBlockMs', options.readerBlockMs, 5_000, HOUR_MS),
    watchdogGraceMs: positive('watchdogGraceMs', options.watchdogGraceMs, 3_000, HOUR_MS),
    gaugeIntervalMs: positive('gaugeIntervalMs', options.gaugeIntervalMs, 5_000, HOUR_MS),
    newerVersionWarnMs: positive('newerVersionWarnMs', options.newerVersionWarnMs, 5 * 60_000, 24 * HOUR_MS),
    recordActivity: flag('recordActivity', options.recordActivity, true),
    logger: checkLogger(options.logger),
    logPayloads: options.logPayloads === true,
    idempotencyWindowMs: integer('idempotencyWindowMs', options.idempotencyWindowMs, DEFAULT_IDEMPOTENCY_WINDOW_MS, 0, MAX_IDEMPOTENCY_WINDOW_MS),
    keepHandled: checkKeepHandled(options.keepHandled),
    keepDead: checkKeepDead(options.keepDead, 'keepDead') ?? { count: 0, ageMs: 0 },
    durableEnqueue: options.durableEnqueue && {
      replicas: integer('durableEnqueue.replicas', options.durableEnqueue.replicas, 1, 1, 100),
      timeoutMs: positive('durableEnqueue.timeoutMs', options.durableEnqueue.timeoutMs, 1_000),
    },
  };
}

/**
 * ioredis guesses at any string (`http://host:1` connects to a host named
 * `http`, `6379` is a port, `/x` a socket path); a mistake would surface only
 * as a connection that never works. Only a redis: or rediss: URL with a host
 * is taken.
 */
function checkRedisUrl(url: string): void {
  let instead = 'write a URL such as redis://127.0.0.1:6379 (rediss:// for TLS, redis://user:password@host:6379/2 for a user and database 2)';
  if (url.startsWith('/')) instead += ', or pass an ioredis Redis made with { path } for a Unix socket';
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    // Not a URL at all: reported below like any other scheme.
  }
  if (parsed?.protocol !== 'redis:' && parsed?.protocol !== 'rediss:') {
    throw new InvalidOptionError('redis', `${JSON.stringify(url)} is not a redis:// or rediss:// URL; ${instead}`);
  }
  if (parsed.hostname === '') throw new InvalidOptionError('redis', `${JSON.stringify(url)} names no host; ${instead}`);
  // ioredis takes '/x' for database 0; a database Redis does not have is checked on connect (src/redis/redis-connections.ts).
  if (!/^\/?(\d{1,5})?$/.test(parsed.pathname)) throw new InvalidOptionError('redis', `${JSON.stringify(url)}: the path must be a database number, such as /2; ${instead}`);
}

/** The most handled events a type and group may keep (keepHandled.count). */
const MAX_KEPT = 1_000_000;

function checkKeepHandled(keep: DelayedEventServiceOptions['keepHandled']): { count: number; ageMs: number } {
  if (keep === undefined || keep === false) return { count: 0, ageMs: 0 };
  if (keep === null || typeof keep !== 'object') throw new InvalidOptionError('keepHandled', `give { count?, ageMs? } or false, got ${JSON.stringify(keep)}`);
  checkOptionKeys(keep, KEEP_HANDLED_KEYS, 'keepHandled');
  return {
    count: integer('keepHandled.count', keep.count, 1_000, 1, MAX_KEPT),
    ageMs: keep.ageMs === undefined ? 0 : positive('keepHandled.ageMs', keep.ageMs, 0, 366 * 86_400_000),
  };
}

/** A keepDead option checked (undefined: not given); `false` keeps every dead letter. */
export function checkKeepDead(keep: KeepDead | false | undefined, name: string): DeadRetention | undefined {
  if (keep === undefined) return undefined;
  if (keep === false) return { count: 0, ageMs: 0 };
  if (keep === null || typeof keep !== 'object') throw new InvalidOptionError(name, `give { count?, ageMs? } or false, got ${JSON.stringify(keep)}`);
  checkOptionKeys(keep, KEEP_DEAD_KEYS, name);
  if (keep.count === undefined && keep.ageMs === undefined) throw new InvalidOptionError(name, 'give count, ageMs or both (false keeps every dead letter)');
  return {
    count: keep.count === undefined ? 0 : integer(`${name}.count`, keep.count, 0, 1, MAX_KEPT),
    ageMs: keep.ageMs === undefined ? 0 : integer(`${name}.ageMs`, keep.ageMs, 0, 1, 366 * 86_400_000),
  };
}

function checkLogger(logger: Logger | false | undefined): Logger | false {
  if (logger === undefined) return consoleLogger;
  if (logger === false) return false;
  if (logger === null || typeof logger !== 'object' || typeof logger.warn !== 'function' || typeof logger.error !== 'function') {
    throw new InvalidOptionError('logger', 'give an object with warn(fields, message) and error(fields, message) methods (pino, console), or false');
  }
  return logger;
}

function flag(name: string, value: boolean | undefined, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new InvalidOptionError(name, `must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

/** The longest a Node timer waits (about 24.8 days): a longer duration would fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;
const HOUR_MS = 3_600_000;

/** A duration in ms: above 0, at most `max` (by default the longest a timer can wait). */
export function positive(name: string, value: number | undefined, fallback: number, max = MAX_TIMER_MS): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new InvalidOptionError(name, `must be a finite number > 0, got ${String(value)}`);
  if (value > max) throw new InvalidOptionError(name, `must be at most ${max} ms${max === MAX_TIMER_MS ? ' (about 24.8 days, the longest a timer can wait)' : ''}, got ${String(value)}`);
  return value;
}

/** The outcomes option's maxLen by default, and its range. */
export const DEFAULT_OUTCOMES_MAX_LEN = 10_000;

/** The outcomes option checked: each stream's cap, 0 when off (the default). */
function checkOutcomes(outcomes: DelayedEventServiceOptions['outcomes']): number {
  if (outcomes === undefined || outcomes === false) return 0;
  if (outcomes === null || typeof outcomes !== 'object' || Array.isArray(outcomes)) throw new InvalidOptionError('outcomes', `must be { maxLen? } or false; got ${String(outcomes)}`);
  checkOptionKeys(outcomes, OUTCOMES_KEYS, 'outcomes');
  return integer('outcomes.maxLen', outcomes.maxLen, DEFAULT_OUTCOMES_MAX_LEN, 100, 10_000_000);
}

/** heartbeatMs by default, and its range (ms). */
export const DEFAULT_HEARTBEAT_MS = 5_000;
export const MIN_HEARTBEAT_MS = 250;
export const MAX_HEARTBEAT_MS = 60_000;
/** A lease not renewed for this many heartbeats ends. */
export const HEARTBEATS_PER_LEASE = 3;

/** A heartbeatMs option checked (undefined: not given); `false` turns heartbeats off. */
export function checkHeartbeat(value: number | false | undefined, name: string): number | false | undefined {
  if (value === undefined || value === false) return value;
  if (!Number.isInteger(value) || value < MIN_HEARTBEAT_MS || value > MAX_HEARTBEAT_MS) {
    throw new InvalidOptionError(
      name,
      `must be an integer from ${MIN_HEARTBEAT_MS} to ${MAX_HEARTBEAT_MS} (ms between lease renewals), or false for leases of timeout + leaseGraceMs; got ${String(value)}`,
    );
  }
  return value;
}

export function integer(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) throw new InvalidOptionError(name, `must be an integer from ${min} to ${max}, got ${String(value)}`);
  return value;
}
