import type { BackgroundService } from './background-service';
import { type Observable, Subject, defer, exhaustMap, from, merge, share, takeUntil, timer } from 'rxjs';

export type MetricKind = 'counter' | 'gauge' | 'timing';

export interface Metric {
  readonly name: MetricName;
  readonly kind: MetricKind;
  /** Counter: increment. Gauge: current value. Timing: milliseconds. */
  readonly value: number;
  readonly tags: Readonly<Record<string, string>>;
  /** Local clock, ms. */
  readonly at: number;
}

/** Every metric the service emits; the README documents each. */
export const METRIC = {
  events: 'delayed.queue.events',
  scheduledCount: 'delayed.queue.scheduled.count',
  readyCount: 'delayed.queue.ready.for.handling.count',
  inFlightCount: 'delayed.queue.in.flight.count',
  deadLetterCount: 'delayed.queue.dead.letter.count',
  /** Since 0.6: parents waiting for their children (docs/flows.md). */
  waitingCount: 'delayed.queue.waiting.count',
  handled: 'delayed.queue.handled',
  retries: 'delayed.queue.retries',
  deadLettered: 'delayed.queue.dead.lettered',
  duplicatesIgnored: 'delayed.queue.duplicates.ignored',
  staleResults: 'delayed.queue.stale.results',
  dispatched: 'delayed.queue.dispatched',
  lateness: 'delayed.queue.dispatch.lateness',
  handlerDuration: 'delayed.queue.handler.duration',
  redisErrors: 'delayed.queue.redis.errors',
  watchdogResets: 'delayed.queue.reader.watchdog.resets',
  cancelled: 'delayed.queue.cancelled',
  evictingMasters: 'delayed.queue.redis.evicting.masters',
  claimsReleased: 'delayed.queue.claims.released',
  redisCallTimeouts: 'delayed.queue.redis.call.timeouts',
  wakeListenerResets: 'delayed.queue.wake.listener.resets',
  paused: 'delayed.queue.paused',
  leftForNewerVersion: 'delayed.queue.left.for.newer.version',
  repartitioned: 'delayed.queue.repartitioned',
  throttled: 'delayed.queue.throttled',
  rateLimited: 'delayed.queue.rate.limited',
  snoozed: 'delayed.queue.snoozed',
  batches: 'delayed.queue.batches',
  batchedEvents: 'delayed.queue.batched.events',
  instanceAnswersDropped: 'delayed.queue.instance.answers.dropped',
  callsAbandoned: 'delayed.queue.calls.abandoned',
  keyLateness: 'delayed.queue.key.lateness',
  enqueued: 'delayed.queue.enqueued',
} as const;
export type MetricName = (typeof METRIC)[keyof typeof METRIC];

/**
 * The tag keys of each metric: every metric is always emitted with exactly
 * these keys (a tag that does not apply is `''`, e.g. `group` on an enqueue or
 * `type` on a connection error), so it maps onto one fixed label set.
 */
export const METRIC_TAGS = {
  [METRIC.events]: ['type', 'group', 'direction'],
  [METRIC.scheduledCount]: ['type'],
  [METRIC.readyCount]: ['type'],
  [METRIC.inFlightCount]: ['type'],
  [METRIC.deadLetterCount]: ['type'],
  [METRIC.waitingCount]: ['type'],
  [METRIC.handled]: ['type', 'group', 'outcome'],
  [METRIC.retries]: ['type', 'group'],
  [METRIC.deadLettered]: ['type', 'group', 'reason'],
  [METRIC.duplicatesIgnored]: ['type'],
  [METRIC.enqueued]: ['type', 'status'],
  [METRIC.staleResults]: ['type', 'group'],
  [METRIC.dispatched]: ['type', 'group', 'reason'],
  [METRIC.lateness]: ['type', 'group'],
  [METRIC.handlerDuration]: ['type', 'group', 'outcome'],
  [METRIC.redisErrors]: ['loop', 'type'],
  [METRIC.watchdogResets]: ['type'],
  [METRIC.cancelled]: ['type'],
  [METRIC.evictingMasters]: ['policy'],
  [METRIC.claimsReleased]: ['type', 'group'],
  [METRIC.redisCallTimeouts]: ['connection'],
  [METRIC.wakeListenerResets]: [],
  [METRIC.paused]: ['type'],
  [METRIC.leftForNewerVersion]: ['type', 'group'],
  [METRIC.repartitioned]: ['type'],
  [METRIC.throttled]: ['type', 'group', 'reason'],
  [METRIC.rateLimited]: ['type', 'group'],
  [METRIC.snoozed]: ['type', 'group'],
  [METRIC.batches]: ['type', 'group'],
  [METRIC.batchedEvents]: ['type', 'group'],
  [METRIC.instanceAnswersDropped]: [],
  [METRIC.callsAbandoned]: ['type', 'group', 'reason'],
  [METRIC.keyLateness]: ['type', 'group', 'key'],
} as const satisfies Record<MetricName, readonly string[]>;

/** The tags a metric is emitted with: exactly its METRIC_TAGS keys. */
export type MetricTags<N extends MetricName> = { readonly [K in (typeof METRIC_TAGS)[N][number]]: string };

/**
 * Something rare that happened, with what the metric's tags cannot carry (an
 * id, an error): what the service's log is written from. `metric` forwards the
 * counts of outages, resets and timeouts as they are counted.
 */
export type Notice =
  | { readonly kind: 'metric'; readonly name: MetricName; readonly tags: Readonly<Record<string, string>>; readonly value: number }
  | {
      readonly kind: 'dead-letter';
      readonly type: string;
      readonly group: string;
      readonly id: string;
      readonly attempt: number;
      readonly reason: string;
      readonly error: string;
      /** The decoded event, or the stored body when it could not be decoded; logged only with logPayloads. */
      readonly payload?: unknown;
    }
  | {
      /** A handler asked for a hold out of range (rateLimited): the queue was held for a second. */
      readonly kind: 'hold-refused';
      readonly type: string;
      readonly group: string;
      /** What it asked for, as text. */
      readonly asked: string;
    };

/** Counters forwarded as notices: outages, connection resets and timeouts. */
const NOTICED: ReadonlySet<MetricName> = new Set([METRIC.redisErrors, METRIC.watchdogResets, METRIC.wakeListenerResets, METRIC.redisCallTimeouts, METRIC.claimsReleased, METRIC.callsAbandoned]);

export interface GaugeSample {
  readonly name: MetricName;
  readonly value: number;
  readonly tags: Readonly<Record<string, string>>;
}

/**
 * Collects what the service does into one hot stream. Gauges cost Redis calls,
 * so they are sampled only while somebody is subscribed.
 */
export class Metrics implements BackgroundService {
  private readonly recorded = new Subject<Metric>();
  private readonly closed = new Subject<void>();
  /** The gauge sample under way, if any: stop() waits for its Redis calls. */
  private sampling: Promise<unknown> | undefined;
  readonly metrics$: Observable<Metric>;

  constructor(
    sampleGauges: () => Promise<GaugeSample[]>,
    gaugeIntervalMs: number,
    /** Told of rare happenings (see Notice); undefined: nobody is. */
    private readonly onNotice?: (notice: Notice) => void,
  ) {
    const gauges$ = timer(0, gaugeIntervalMs).pipe(
      // A slow Redis must not pile up samples, and a failed sample must not end the stream.
      exhaustMap(() =>
        defer(() => {
          const sample = sampleGauges().catch(() => [] as GaugeSample[]);
          this.sampling = sample;
          return sample;
        }),
      ),
      exhaustMap((samples) => from(samples.map((s): Metric => ({ ...s, kind: 'gauge', at: Date.now() })))),
      takeUntil(this.closed),
    );
    this.metrics$ = merge(this.recorded, gauges$).pipe(share());
  }

  /** Gauges are sampled while somebody subscribes to metrics$, from the first subscriber on: nothing to start. */
  start(): void {}

  /** Whether anybody subscribed: hot paths skip building tags when not. */
  get listening(): boolean {
    return this.recorded.observed;
  }

  // Nobody listening is the common case on hot paths: then not even the record is built.
  count<N extends MetricName>(name: N, tags: MetricTags<N>, value = 1): void {
    if (value !== 0 && this.recorded.observed) this.recorded.next({ name, kind: 'counter', value, tags, at: Date.now() });
    if (value !== 0 && this.onNotice !== undefined && NOTICED.has(name)) this.onNotice({ kind: 'metric', name, tags, value });
  }

  /** Whether notices are wanted: callers skip building them when not. */
  get noticing(): boolean {
    return this.onNotice !== undefined;
  }

  notice(notice: Notice): void {
    this.onNotice?.(notice);
  }

  timing<N extends MetricName>(name: N, tags: MetricTags<N>, ms: number): void {
    if (this.recorded.observed) this.recorded.next({ name, kind: 'timing', value: ms, tags, at: Date.now() });
  }

  /**
   * Ends the stream; resolves once a gauge sample under way has had its
   * answers (or after `maxWaitMs`): its calls are Redis work of the service,
   * which close() promises is over when it resolves.
   */
  stop(maxWaitMs = 0): Promise<void> {
    this.closed.next();
    this.recorded.complete();
    const sampling = this.sampling;
    if (!sampling || maxWaitMs <= 0) return Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, maxWaitMs)));
    return Promise.race([sampling.then(() => undefined), late]).finally(() => clearTimeout(timer));
  }
}
