import { Observable, Subject, defer, exhaustMap, from, merge, share, takeUntil, timer } from 'rxjs';

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
} as const;
export type MetricName = (typeof METRIC)[keyof typeof METRIC];

export interface GaugeSample {
  readonly name: MetricName;
  readonly value: number;
  readonly tags: Readonly<Record<string, string>>;
}

/**
 * Collects what the service does into one hot stream. Gauges cost Redis calls,
 * so they are sampled only while somebody is subscribed.
 */
export class Metrics {
  private readonly recorded = new Subject<Metric>();
  private readonly closed = new Subject<void>();
  readonly metrics$: Observable<Metric>;

  constructor(sampleGauges: () => Promise<GaugeSample[]>, gaugeIntervalMs: number) {
    const gauges$ = timer(0, gaugeIntervalMs).pipe(
      // A slow Redis must not pile up samples, and a failed sample must not end the stream.
      exhaustMap(() => defer(() => sampleGauges().catch(() => [] as GaugeSample[]))),
      exhaustMap((samples) => from(samples.map((s): Metric => ({ ...s, kind: 'gauge', at: Date.now() })))),
      takeUntil(this.closed),
    );
    this.metrics$ = merge(this.recorded, gauges$).pipe(share());
  }

  /** Whether anybody subscribed: hot paths skip building tags when not. */
  get listening(): boolean {
    return this.recorded.observed;
  }

  // Nobody listening is the common case on hot paths: then not even the record is built.
  count(name: MetricName, tags: Record<string, string>, value = 1): void {
    if (value !== 0 && this.recorded.observed) this.recorded.next({ name, kind: 'counter', value, tags, at: Date.now() });
  }

  timing(name: MetricName, tags: Record<string, string>, ms: number): void {
    if (this.recorded.observed) this.recorded.next({ name, kind: 'timing', value: ms, tags, at: Date.now() });
  }

  complete(): void {
    this.closed.next();
    this.recorded.complete();
  }
}
