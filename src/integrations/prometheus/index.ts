import { Counter, Gauge, Histogram, type Registry, register as globalRegistry } from 'prom-client';
import type { Subscription } from 'rxjs';
import { type DelayedEventService, InvalidOptionError, METRIC, METRIC_TAGS, type Metric, type MetricName } from '../../index';

export interface PrometheusOptions {
  /** Where the metrics are registered; default prom-client's global `register`. */
  readonly registry?: Registry;
  /** Start of every metric name; default `delayed_events_`. */
  readonly prefix?: string;
  /** Histogram buckets, in seconds. */
  readonly buckets?: {
    /** From the due time to the claim; default 1 ms to 10 minutes. */
    readonly lateness?: readonly number[];
    /** Handler calls; default 1 ms to 2 minutes. */
    readonly handlerDuration?: readonly number[];
  };
  /**
   * Longest the state gauges may take to read Redis at a scrape; default 5 s.
   * When Redis does not answer in time they are left out of that scrape.
   */
  readonly collectTimeoutMs?: number;
}

/** Stops exporting this service's metrics; the last service of a registry removes the metrics from it. */
export interface PrometheusRegistration {
  unregister(): void;
}

/** Default buckets of `dispatch_lateness_seconds`: 1 ms to 10 minutes. */
export const LATENESS_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Default buckets of `handler_duration_seconds`: 1 ms to 2 minutes. */
export const HANDLER_DURATION_BUCKETS: readonly number[] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** How each metric of metrics$ is exported: its Prometheus name (after the prefix) and help. */
const COUNTERS: Partial<Record<MetricName, { readonly name: string; readonly help: string }>> = {
  [METRIC.events]: { name: 'events_total', help: 'Events stored by enqueues of this process (direction=enqueue) and claimed for its handlers (direction=dequeue).' },
  [METRIC.handled]: { name: 'handled_total', help: 'Handler calls, by outcome.' },
  [METRIC.retries]: { name: 'retries_total', help: 'Failed attempts scheduled again with backoff.' },
  [METRIC.deadLettered]: { name: 'dead_lettered_total', help: 'Events dead-lettered, by reason.' },
  [METRIC.duplicatesIgnored]: { name: 'duplicates_ignored_total', help: "Enqueues answered 'duplicate'." },
  [METRIC.staleResults]: { name: 'stale_results_total', help: 'Handler results fenced off because their attempt was no longer the one in flight.' },
  [METRIC.dispatched]: { name: 'dispatched_total', help: 'Events moved to READY by this process; reason=lease-expired are redeliveries.' },
  [METRIC.cancelled]: { name: 'cancelled_total', help: 'Events cancelled by this process.' },
  [METRIC.claimsReleased]: { name: 'claims_released_total', help: 'Events of a claim whose reply was lost, given back without spending an attempt.' },
  [METRIC.redisErrors]: { name: 'redis_errors_total', help: "Failed Redis calls of the service's loops (outages); type is empty for connection errors." },
  [METRIC.redisCallTimeouts]: { name: 'redis_call_timeouts_total', help: 'Redis calls that outlived commandTimeoutMs.' },
  [METRIC.watchdogResets]: { name: 'reader_watchdog_resets_total', help: 'Blocking connections replaced because a read hung.' },
  [METRIC.leftForNewerVersion]: {
    name: 'left_for_newer_version_total',
    help: 'Ready events this instance left for an instance with a newer event class version (no attempt spent).',
  },
  [METRIC.repartitioned]: { name: 'repartitioned_total', help: "Stored events this process moved to their partition after the type's partitions setting changed." },
  [METRIC.throttled]: { name: 'throttled_total', help: "Claims held back by the type's flow limits (reason=rate|concurrency), or a hold a handler asked for." },
  [METRIC.snoozed]: { name: 'snoozed_total', help: 'Handler calls that snoozed their event: back to SCHEDULED after the delay, attempt unspent.' },
  [METRIC.rateLimited]: { name: 'rate_limited_total', help: 'Handler calls that said their provider rate-limited them: the event went back to READY, attempt unspent, and the queue was held.' },
  [METRIC.batches]: { name: 'batches_total', help: 'Calls of batch handlers (addBatchHandler).' },
  [METRIC.batchedEvents]: { name: 'batched_events_total', help: 'Events handed to batch handlers: divided by batches_total, the mean batch size.' },
  [METRIC.callsAbandoned]: {
    name: 'calls_abandoned_total',
    help: 'Handler calls given up while running (since 0.6): reason lease-lost (its lease could not be renewed) or shutdown (close() stopped waiting); their signals were aborted.',
  },
  [METRIC.instanceAnswersDropped]: { name: 'instance_answers_dropped_total', help: 'Answers to instances() dropped as malformed: anyone who may publish on the wake-up channel can answer.' },
  [METRIC.enqueued]: { name: 'enqueued_total', help: 'Enqueues by what they did (since 0.6): status scheduled, replaced, duplicate, debounced or throttled.' },
  [METRIC.wakeListenerResets]: { name: 'wake_listener_resets_total', help: 'Wake-up subscriber connections replaced because a PING went unanswered.' },
};

const HISTOGRAMS: Partial<Record<MetricName, { readonly name: string; readonly help: string; readonly buckets: 'lateness' | 'handlerDuration' }>> = {
  [METRIC.lateness]: { name: 'dispatch_lateness_seconds', help: "From an event's due time to its claim, on Redis's clock.", buckets: 'lateness' },
  [METRIC.handlerDuration]: { name: 'handler_duration_seconds', help: 'How long handler calls took, by outcome.', buckets: 'handlerDuration' },
  [METRIC.keyLateness]: {
    name: 'key_lateness_seconds',
    help: 'Since 0.6, with HandlerOptions.keyMetrics: from due to claim per key, for the first keyMetrics keys seen (the rest labelled (other)).',
    buckets: 'lateness',
  },
};

/** Every metric carries the service's key prefix, so services with different prefixes in one process stay apart. */
const PREFIX_LABEL = 'prefix';

type Instrument = { readonly kind: 'counter'; readonly metric: Counter<string> } | { readonly kind: 'histogram'; readonly metric: Histogram<string> };

/** The metrics of one registry and name prefix, shared by every service registered there. */
class Exporter {
  readonly services = new Set<DelayedEventService>();
  private readonly instruments = new Map<MetricName, Instrument>();
  private readonly evicting: Gauge<string>;
  // biome-ignore lint/correctness/noUnusedPrivateClassMembers: the gauge collects through its registry; held for its lifetime beside the others
  private readonly state: Gauge<string>;
  private readonly paused: Gauge<string>;
  private readonly oldestReady: Gauge<string>;
  private readonly names: string[] = [];

  constructor(
    private readonly registry: Registry,
    prefix: string,
    options: PrometheusOptions,
  ) {
    const registers = [registry];
    for (const [metricName, spec] of Object.entries(COUNTERS) as Array<[MetricName, { name: string; help: string }]>) {
      const labelNames = [PREFIX_LABEL, ...METRIC_TAGS[metricName]];
      this.instruments.set(metricName, { kind: 'counter', metric: new Counter({ name: prefix + spec.name, help: spec.help, labelNames, registers }) });
      this.names.push(prefix + spec.name);
    }
    for (const [metricName, spec] of Object.entries(HISTOGRAMS) as Array<[MetricName, { name: string; help: string; buckets: 'lateness' | 'handlerDuration' }]>) {
      const labelNames = [PREFIX_LABEL, ...METRIC_TAGS[metricName]];
      const buckets = [...(options.buckets?.[spec.buckets] ?? (spec.buckets === 'lateness' ? LATENESS_BUCKETS : HANDLER_DURATION_BUCKETS))];
      this.instruments.set(metricName, { kind: 'histogram', metric: new Histogram({ name: prefix + spec.name, help: spec.help, labelNames, buckets, registers }) });
      this.names.push(prefix + spec.name);
    }
    this.evicting = new Gauge({
      name: `${prefix}redis_evicting_masters`,
      help: "Masters whose maxmemory-policy may evict the service's keys (allkeys-*): alert on anything above 0.",
      labelNames: [PREFIX_LABEL, 'policy'],
      registers,
    });
    const exporter = this;
    const timeoutMs = options.collectTimeoutMs ?? 5_000;
    this.state = new Gauge({
      name: `${prefix}stored_events`,
      help: 'Events stored in Redis by state (scheduled, ready, in_flight, dead), per type and subscriber group, read at scrape time for every type under the key prefix.',
      labelNames: [PREFIX_LABEL, 'type', 'group', 'state'],
      registers,
      async collect() {
        await exporter.collectStates(this, timeoutMs);
      },
    });
    this.paused = new Gauge({ name: `${prefix}paused`, help: 'Types paused for every instance (1), read at scrape time.', labelNames: [PREFIX_LABEL, 'type'], registers });
    this.oldestReady = new Gauge({
      name: `${prefix}oldest_ready_seconds`,
      help: 'How long the oldest READY event of each type and subscriber group has waited since it fell due (0 when none is ready), read at scrape time: alert when it grows, as it does when no instance consumes a group.',
      labelNames: [PREFIX_LABEL, 'type', 'group'],
      registers,
    });
    this.names.push(`${prefix}redis_evicting_masters`, `${prefix}stored_events`, `${prefix}paused`, `${prefix}oldest_ready_seconds`);
  }

  /** Records one metric of a service's metrics$; never throws. */
  record(servicePrefix: string, metric: Metric): void {
    try {
      if (metric.kind === 'gauge') {
        if (metric.name === METRIC.evictingMasters) {
          this.evicting.remove({ [PREFIX_LABEL]: servicePrefix });
          this.evicting.set({ [PREFIX_LABEL]: servicePrefix, policy: metric.tags.policy ?? '' }, metric.value);
        }
        return; // the state gauges are read at scrape time instead
      }
      const instrument = this.instruments.get(metric.name);
      if (!instrument) return;
      const labels: Record<string, string> = { [PREFIX_LABEL]: servicePrefix };
      for (const key of METRIC_TAGS[metric.name]) labels[key] = metric.tags[key] ?? '';
      if (instrument.kind === 'counter') instrument.metric.inc(labels, metric.value);
      else instrument.metric.observe(labels, metric.value / 1_000);
    } catch {
      // A metric that does not fit must never reach the subscriber's error path (which ends the process).
    }
  }

  /** At each scrape: every type under each key prefix, with its states per group, read through the inspection API. */
  private async collectStates(gauge: Gauge<string>, timeoutMs: number): Promise<void> {
    gauge.reset();
    this.paused.reset();
    this.oldestReady.reset();
    const byPrefix = new Map<string, DelayedEventService>();
    for (const service of this.services) if (!byPrefix.has(service.prefix)) byPrefix.set(service.prefix, service);
    await Promise.all(
      [...byPrefix].map(async ([servicePrefix, service]) => {
        try {
          const read = async () => {
            const types = await service.types();
            return Promise.all(types.map(async (info) => ({ info, counts: await service.counts(info.type) })));
          };
          const found = await withTimeout(read(), timeoutMs);
          if (!found) return;
          for (const { info, counts } of found) {
            this.paused.set({ [PREFIX_LABEL]: servicePrefix, type: info.type }, info.paused ? 1 : 0);
            if (!counts) continue;
            const groups = counts.groups && Object.keys(counts.groups).length > 0 ? counts.groups : { default: counts };
            for (const [group, states] of Object.entries(groups)) {
              const labels = { [PREFIX_LABEL]: servicePrefix, type: info.type, group };
              gauge.set({ ...labels, state: 'scheduled' }, states.scheduled);
              gauge.set({ ...labels, state: 'ready' }, states.ready);
              gauge.set({ ...labels, state: 'in_flight' }, states.inFlight);
              gauge.set({ ...labels, state: 'dead' }, states.dead);
              gauge.set({ ...labels, state: 'waiting' }, states.waiting ?? 0);
              this.oldestReady.set(labels, (states.oldestReadyMs ?? 0) / 1_000);
            }
          }
        } catch {
          // Redis out of reach: this prefix's gauges are missing from this scrape.
        }
      }),
    );
  }

  remove(): void {
    for (const name of this.names) this.registry.removeSingleMetric(name);
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    timer.unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

const exporters = new WeakMap<Registry, Map<string, Exporter>>();

/** The options, each once (the type checker holds the lists to PrometheusOptions): a misspelt one must not pass unnoticed. */
const OPTION_KEYS = { registry: true, prefix: true, buckets: true, collectTimeoutMs: true } as const satisfies Record<keyof Required<PrometheusOptions>, true>;
const BUCKET_KEYS = { lateness: true, handlerDuration: true } as const satisfies Record<keyof Required<NonNullable<PrometheusOptions['buckets']>>, true>;

/** Refuses a key `allowed` does not list, naming those it does. */
function checkKeys(options: object, allowed: Readonly<Record<string, true>>, what: string): void {
  const keys = Object.keys(allowed);
  for (const key of Object.keys(options)) if (!keys.includes(key)) throw new InvalidOptionError(JSON.stringify(key), `${what} has no such option; its options are ${keys.join(', ')}`);
}

/**
 * Exports a service's metrics to Prometheus (prom-client): counters as
 * `<prefix>…_total`, timings as histograms in seconds, and the events stored
 * in each state as gauges read at scrape time for every type under the
 * service's key prefix. Every metric has one fixed label set, the first being
 * `prefix` (the service's key prefix). Any number of services may register on
 * one registry: they share its metrics. Never throws from the metrics stream.
 */
export function registerPrometheusMetrics(service: DelayedEventService, options: PrometheusOptions = {}): PrometheusRegistration {
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', `must be an object such as { ${Object.keys(OPTION_KEYS).join(', ')} }`);
  checkKeys(options, OPTION_KEYS, 'registerPrometheusMetrics');
  if (options.buckets !== undefined && options.buckets !== null && typeof options.buckets === 'object') checkKeys(options.buckets, BUCKET_KEYS, 'buckets');
  const registry = options.registry ?? globalRegistry;
  const prefix = options.prefix ?? 'delayed_events_';
  let perRegistry = exporters.get(registry);
  if (!perRegistry) exporters.set(registry, (perRegistry = new Map()));
  let exporter = perRegistry.get(prefix);
  if (!exporter) perRegistry.set(prefix, (exporter = new Exporter(registry, prefix, options)));
  const shared = exporter;
  shared.services.add(service);
  const servicePrefix = service.prefix;
  const subscription: Subscription = service.metrics$.subscribe({
    next: (metric) => shared.record(servicePrefix, metric),
    error: () => undefined,
    // Closed: its counters stay; its prefix's gauges are read through another service registered here, if any.
    complete: () => shared.services.delete(service),
  });
  let registered = true;
  return {
    unregister() {
      if (!registered) return;
      registered = false;
      subscription.unsubscribe();
      shared.services.delete(service);
      if (shared.services.size === 0) {
        shared.remove();
        perRegistry.delete(prefix);
      }
    },
  };
}
