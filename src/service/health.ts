import type { EventRoute } from '../core/delayed-event.decorator';
import type { RedisConnectionError } from '../core/errors';
import { evictionSettings, evictsKeysWithoutTtl } from '../redis/eviction-policy';
import type { LuaScripts } from '../redis/lua-scripts';
import type { RedisConnections } from '../redis/redis-connections';
import { pingWithin } from '../redis/redis-readiness';
import { type GaugeSample, METRIC, type Metrics } from '../runtime/metrics';
import type { ServiceLog } from '../runtime/service-log';
import type { Inspector } from './inspector';
import type { ServiceHealth } from './instrumentation';

export interface HealthParts {
  readonly connections: RedisConnections;
  readonly scripts: LuaScripts;
  readonly inspector: Inspector;
  readonly metrics: Metrics;
  readonly log: ServiceLog;
  readonly commandTimeoutMs: number;
  readonly isClosing: () => boolean;
  /** The loops running here. */
  readonly loops: () => { dispatchers: number; readers: number; parked: number };
  /** The handlers running here (this instance answers instances() once its wake-up subscription is up). */
  readonly handlersHere: () => ReadonlyArray<{ readonly type: string; readonly group: string }>;
  /** The ACL refusal on the handlers' connection, if any. */
  readonly handlingRefusal: () => RedisConnectionError | undefined;
  /**
   * Says, for a type stored or handled here, which partitions setting this
   * instance uses (src/runtime/repartitioner.ts): at first, then with the
   * gauges, at most once a minute, so instances of another setting know to
   * move what this one stores.
   */
  readonly announce?: (route: EventRoute) => void;
  /** How long events may wait for a newer class version before health() warns (option newerVersionWarnMs). */
  readonly newerVersionWarnMs: number;
}

const ANNOUNCE_EVERY_MS = 60_000;

/**
 * What the service tells about itself: health() for readiness probes, the
 * gauges of every type it enqueued or handles, and what a stuck call means.
 */
export class Health {
  /** Types this instance enqueued or handles; their gauges are sampled. */
  private readonly knownTypes = new Map<string, EventRoute>();
  /** instances() as last asked, for a few seconds: a probe every second must not open a subscriber each time. */
  private instancesSeen: { at: number; handlers: ReadonlyArray<{ readonly type: string; readonly group: string }> } | undefined;
  /** When the last warning about a stuck call on a client handed in was given; they come at most once a minute. */
  private lastStuckWarning = Number.NEGATIVE_INFINITY;

  constructor(private readonly parts: HealthParts) {}

  /** A type enqueued or handled here: its gauges are sampled from now on. */
  know(route: EventRoute): void {
    if (this.knownTypes.get(route.type)?.partitions === route.partitions) return;
    this.knownTypes.set(route.type, route);
    this.announced.set(route.type, Date.now());
    this.parts.announce?.(route);
  }

  /** When each known type's setting was last announced. */
  private readonly announced = new Map<string, number>();

  /** Whether Redis answers a PING now (within `timeoutMs`), the loops running here, and the last Redis error seen. Never rejects. */
  async health(timeoutMs: number): Promise<ServiceHealth> {
    const { connections, scripts, log } = this.parts;
    // Waits for the connection with the calls' shared wait: health probes during an outage add no listeners.
    const up = !this.parts.isClosing() && (await pingWithin(connections.command, timeoutMs, () => scripts.gate.wait()));
    const last = log.lastError;
    const problem = scripts.refusal ?? this.parts.handlingRefusal();
    const unconsumed = up ? await this.unconsumed(timeoutMs) : [];
    const unread = up ? await this.unreadVersions(timeoutMs) : [];
    const orphaned = up ? await this.orphanedParents(timeoutMs) : [];
    const pausedSchedules = up ? await this.pausedSchedules(timeoutMs) : [];
    return {
      ready: up && !this.parts.isClosing() && !problem,
      redis: up ? 'up' : 'down',
      loops: this.parts.loops(),
      ...(last ? { lastError: { message: last.message, at: new Date(last.at) } } : {}),
      ...(problem ? { problem } : {}),
      ...(unconsumed.length > 0 ? { unconsumed } : {}),
      ...(unread.length > 0 ? { awaitingNewerVersion: unread } : {}),
      ...(orphaned.length > 0 ? { orphanedParents: orphaned } : {}),
      ...(pausedSchedules.length > 0 ? { pausedSchedules } : {}),
    };
  }

  /** Parents of the known types waiting for children that no longer exist (src/redis/flow-store.ts); none when Redis does not answer within `timeoutMs`. */
  private orphanedParents(timeoutMs: number): Promise<NonNullable<ServiceHealth['orphanedParents']>> {
    return readWithin(timeoutMs, async () => {
      const all = await Promise.all([...this.knownTypes.values()].map(async (route) => (await this.parts.inspector.flowOrphans(route)).map((o) => ({ type: route.type, ...o }))));
      return all.flat();
    });
  }

  /** Recurring schedules a dead-lettered occurrence paused (pauseOnFailure, since 0.6); none when Redis does not answer within `timeoutMs`. */
  private pausedSchedules(timeoutMs: number): Promise<NonNullable<ServiceHealth['pausedSchedules']>> {
    return readWithin(timeoutMs, async () =>
      (await this.parts.inspector.schedules())
        .filter((s) => s.paused && s.pausedReason !== undefined && s.pausedReason !== 'paused')
        .map((s) => ({ type: s.type, name: s.name, reason: s.pausedReason! })),
    );
  }

  /**
   * Events of the known types left for a newer class version that no
   * instance took for newerVersionWarnMs (the time a reader of that version
   * last took from them, or since they were first left); none when Redis does
   * not answer within `timeoutMs`.
   */
  private unreadVersions(timeoutMs: number): Promise<NonNullable<ServiceHealth['awaitingNewerVersion']>> {
    return readWithin(timeoutMs, async () => {
      const now = Date.now();
      const all = await Promise.all([...this.knownTypes.values()].map(async (route) => (await this.parts.inspector.newerVersionWaits(route)).map((w) => ({ type: route.type, ...w }))));
      return all
        .flat()
        .filter((w) => now - w.since >= this.parts.newerVersionWarnMs)
        .map((w) => ({ type: w.type, group: w.group, version: w.version, events: w.events, waitingMs: now - w.since }));
    });
  }

  /**
   * The groups of the known types with READY events and no live instance
   * handling them; none when Redis does not answer within `timeoutMs` (a
   * probe must not hang on this).
   */
  private unconsumed(timeoutMs: number): Promise<NonNullable<ServiceHealth['unconsumed']>> {
    // instances() waits for answers (on a Cluster, a fixed 300 ms): the probe allows for it.
    return readWithin(timeoutMs + 500, async () => {
      const routes = [...this.knownTypes.values()];
      const samples = await Promise.all(routes.map(async (route) => ({ type: route.type, counts: (await this.parts.inspector.gaugeSample(route)).counts })));
      const waiting = samples.flatMap(({ type, counts }) =>
        Object.entries(counts.groups && Object.keys(counts.groups).length > 0 ? counts.groups : { default: counts })
          .filter(([, c]) => c.ready > 0)
          .map(([group, c]) => ({ type, group, ready: c.ready, oldestReadyMs: c.oldestReadyMs ?? 0 })),
      );
      if (waiting.length === 0) return [];
      if (!this.instancesSeen || Date.now() - this.instancesSeen.at > 5_000) {
        this.instancesSeen = { at: Date.now(), handlers: (await this.parts.inspector.instances()).flatMap((i) => i.handlers) };
      }
      const handlers = [...this.parts.handlersHere(), ...this.instancesSeen.handlers];
      const consumed = new Set(handlers.map((h) => `${h.type}|${h.group}`));
      return waiting.filter((w) => !consumed.has(`${w.type}|${w.group}`));
    });
  }

  /**
   * A Redis call outlived commandTimeoutMs. The service's own connection is
   * reset; a client handed in stays as it is, so its owner is told.
   */
  commandStuck(): void {
    const { connections, metrics } = this.parts;
    const owned = connections.ownsCommandConnection;
    metrics.count(METRIC.redisCallTimeouts, { connection: owned ? 'owned' : 'passed-in' });
    if (owned) {
      connections.resetCommandConnection();
    } else if (performance.now() - this.lastStuckWarning > 60_000) {
      this.lastStuckWarning = performance.now();
      process.emitWarning(
        `a Redis call on the client passed to DelayedEventService took longer than commandTimeoutMs (${this.parts.commandTimeoutMs} ms); ` +
          'the service does not reset a client it does not own: give it ioredis commandTimeout and keepAlive settings so a half-open connection is replaced',
        { code: 'DELAYED_EVENTS_REDIS_CALL_TIMEOUT' },
      );
    }
  }

  /** The gauges: each known type's counts and pause (read as the Inspector's counts()), and the masters that may evict. */
  async sampleGauges(): Promise<GaugeSample[]> {
    // Not sampled until the command connection is ready (it keeps no offline queue).
    if (this.parts.connections.command.status !== 'ready') return [];
    const [queues, eviction] = await Promise.all([this.sampleQueueGauges(), this.sampleEviction()]);
    return [...queues, ...eviction];
  }

  /** How many masters may evict this service's keys, and under which policies; none when INFO is refused. */
  private async sampleEviction(): Promise<GaugeSample[]> {
    try {
      const masters = await evictionSettings(this.parts.connections.command);
      // A cluster client lists no masters until it has connected.
      if (masters.length === 0) return [];
      const tags = { policy: [...new Set(masters.map((m) => m.policy))].sort().join(',') };
      return [{ name: METRIC.evictingMasters, value: masters.filter(evictsKeysWithoutTtl).length, tags }];
    } catch {
      return [];
    }
  }

  private async sampleQueueGauges(): Promise<GaugeSample[]> {
    for (const route of this.knownTypes.values()) {
      if (Date.now() - (this.announced.get(route.type) ?? 0) < ANNOUNCE_EVERY_MS) continue;
      this.announced.set(route.type, Date.now());
      this.parts.announce?.(route);
    }
    const samples = await Promise.all(
      [...this.knownTypes.values()].map(async (route) => {
        const { counts, paused } = await this.parts.inspector.gaugeSample(route);
        const tags = { type: route.type };
        return [
          { name: METRIC.scheduledCount, value: counts.scheduled, tags },
          { name: METRIC.readyCount, value: counts.ready, tags },
          { name: METRIC.inFlightCount, value: counts.inFlight, tags },
          { name: METRIC.deadLetterCount, value: counts.dead, tags },
          { name: METRIC.waitingCount, value: counts.waiting, tags },
          { name: METRIC.paused, value: paused ? 1 : 0, tags },
        ];
      }),
    );
    return samples.flat();
  }
}

/** What `read` resolves within `timeoutMs`, or nothing: a health() check never waits on Redis longer, nor fails. */
async function readWithin<T>(timeoutMs: number, read: () => Promise<T[]>): Promise<T[]> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([read(), new Promise<T[]>((resolve) => (timer = setTimeout(() => resolve([]), timeoutMs)))]);
  } catch {
    return [];
  } finally {
    clearTimeout(timer);
  }
}
