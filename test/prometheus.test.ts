import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, METRIC, PermanentFailure, fixedBackoff } from '../src';
import { registerPrometheusMetrics } from '../src/integrations/prometheus';
import { PaymentCheck, WorkItem } from './support/events';
import { counter, recordMetrics, useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

@DelayedEvent('test.slow')
class SlowJob {
  constructor(readonly id: string = '') {}
}

@DelayedEvent('test.elsewhere')
class Elsewhere {
  constructor(readonly id: string = '') {}
}

interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** Parses Prometheus's text format: one sample per line, comments skipped. */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`unparsable line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one sample of `name` whose labels include `labels`; 0 when there is none. */
function value(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((sum, s) => sum + s.value, 0);
}

/** A histogram's or summary's samples belong to its family: name less _bucket, _sum, _count. */
function family(name: string, histograms: ReadonlySet<string>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suffix) && histograms.has(name.slice(0, -suffix.length))) return name.slice(0, -suffix.length);
  }
  return name;
}

describe('Prometheus', () => {
  // AOF: what is stored before the outage is still there after it.
  const redis = useRedis(['--appendonly', 'yes', '--appendfsync', 'always']);

  it('exports counters, histograms in seconds and state gauges, each metric with one label set, through an outage', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(2, 10), logger: false, commandTimeoutMs: 1_000 });
    const registry = new Registry();
    const registration = registerPrometheusMetrics(service, { registry });
    const metrics = recordMetrics(service);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    process.on('uncaughtException', onUnhandled);
    try {
      service.addHandler(
        PaymentCheck,
        (e) => {
          if (e.amount < 0) throw new PermanentFailure('negative');
          return e.amount > 0;
        },
        2,
      );
      service.addHandler(SlowJob, () => new Promise<void>((resolve) => setTimeout(resolve, 50)), 1);
      await service.enqueue(new PaymentCheck('ok', 1), 0);
      await service.enqueue(new PaymentCheck('ok', 1), 0);
      await service.enqueue(new PaymentCheck('retried', 0), 0);
      await service.enqueue(new PaymentCheck('permanent', -1), 0);
      await service.enqueue(new SlowJob('slow'), 0);
      await service.enqueue(new PaymentCheck('later', 1), 60_000);
      // A type this service never touched, stored by another service under the same prefix.
      await redis.service({ prefix, logger: false }).enqueue(new Elsewhere('e-1'), 60_000);
      await waitFor(() => counter(metrics, METRIC.deadLettered) === 2 && counter(metrics, METRIC.handled, { type: 'test.slow' }) === 1, 'handling done');

      await redis.server.kill();
      await waitFor(() => counter(metrics, METRIC.redisErrors, { loop: 'connection' }) > 0 && counter(metrics, METRIC.redisErrors, { loop: 'reader' }) > 0, 'the outage counted', 20_000);
      // A scrape during the outage answers (without the state gauges), and nothing throws.
      const during = parse(await registry.metrics());
      expect(value(during, 'delayed_events_redis_errors_total', { loop: 'connection', type: '' })).toBeGreaterThan(0);
      await redis.server.restart();
      await service.waitUntilReady({ timeoutMs: 10_000 });
      await service.enqueue(new PaymentCheck('after', 1), 0);
      await waitFor(() => counter(metrics, METRIC.handled, { type: 'test.payment-check', outcome: 'success' }) === 2, 'handling after the outage', 30_000);

      const text = await registry.metrics();
      const samples = parse(text);
      const histograms = new Set([...text.matchAll(/^# TYPE (\S+) histogram$/gm)].map((m) => m[1]!));
      const p = { prefix };
      expect(value(samples, 'delayed_events_events_total', { ...p, type: 'test.payment-check', direction: 'enqueue', group: '' })).toBe(5);
      expect(value(samples, 'delayed_events_duplicates_ignored_total', { ...p, type: 'test.payment-check' })).toBe(1);
      expect(value(samples, 'delayed_events_handled_total', { ...p, type: 'test.payment-check', group: 'default', outcome: 'success' })).toBe(2);
      expect(value(samples, 'delayed_events_handled_total', { ...p, type: 'test.payment-check', outcome: 'failure' })).toBe(3);
      expect(value(samples, 'delayed_events_retries_total', { ...p, type: 'test.payment-check' })).toBe(1);
      expect(value(samples, 'delayed_events_dead_lettered_total', { ...p, type: 'test.payment-check', reason: 'attempts-exhausted' })).toBe(1);
      expect(value(samples, 'delayed_events_dead_lettered_total', { ...p, type: 'test.payment-check', reason: 'permanent' })).toBe(1);
      // Which readers saw the outage depends on where each was when Redis went (a claim waits up to a second for it).
      expect(value(samples, 'delayed_events_redis_errors_total', { ...p, loop: 'reader' })).toBeGreaterThan(0);
      // Seconds: a 50 ms handler is over 25 ms and under 100 ms.
      const slow = { ...p, type: 'test.slow', group: 'default', outcome: 'success' };
      expect(value(samples, 'delayed_events_handler_duration_seconds_bucket', { ...slow, le: '0.025' })).toBe(0);
      expect(value(samples, 'delayed_events_handler_duration_seconds_bucket', { ...slow, le: '0.1' })).toBe(1);
      expect(value(samples, 'delayed_events_handler_duration_seconds_sum', slow)).toBeGreaterThan(0.045);
      expect(value(samples, 'delayed_events_handler_duration_seconds_sum', slow)).toBeLessThan(0.1);
      expect(value(samples, 'delayed_events_dispatch_lateness_seconds_count', { ...p, type: 'test.slow' })).toBe(1);
      expect(value(samples, 'delayed_events_dispatch_lateness_seconds_bucket', { ...p, type: 'test.slow', le: '600' })).toBe(1);
      // State gauges, read at scrape time: every type under the prefix, this service's or not.
      expect(value(samples, 'delayed_events_stored_events', { ...p, type: 'test.elsewhere', group: 'default', state: 'scheduled' })).toBe(1);
      expect(value(samples, 'delayed_events_stored_events', { ...p, type: 'test.payment-check', state: 'scheduled' })).toBe(1);
      expect(value(samples, 'delayed_events_stored_events', { ...p, type: 'test.payment-check', state: 'dead' })).toBe(2);
      expect(value(samples, 'delayed_events_paused', { ...p, type: 'test.elsewhere' })).toBe(0);

      // One label set per metric family.
      const labelSets = new Map<string, Set<string>>();
      for (const sample of samples) {
        const name = family(sample.name, histograms);
        const keys = Object.keys(sample.labels)
          .filter((k) => !(k === 'le' && sample.name.endsWith('_bucket')))
          .sort()
          .join(',');
        labelSets.set(name, (labelSets.get(name) ?? new Set()).add(keys));
      }
      for (const [name, sets] of labelSets) expect([...sets], name).toHaveLength(1);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      process.off('uncaughtException', onUnhandled);
      registration.unregister();
    }
    expect(await registry.getMetricsAsJSON()).toEqual([]);
  });

  it('serves several services in one process on one registry, and on two registries, without collisions', async () => {
    const first = redis.service({ logger: false });
    const second = redis.service({ logger: false });
    const shared = new Registry();
    const other = new Registry();
    const registrations = [registerPrometheusMetrics(first, { registry: shared }), registerPrometheusMetrics(second, { registry: shared }), registerPrometheusMetrics(first, { registry: other })];
    try {
      const metrics = recordMetrics(second);
      await first.enqueue(new WorkItem('a'), 60_000);
      await second.enqueue(new WorkItem('b'), 60_000);
      await second.enqueue(new WorkItem('c'), 60_000);
      await waitFor(() => counter(metrics, METRIC.events) === 2, 'the enqueues counted');
      const enqueued = (samples: Sample[], service: typeof first) => value(samples, 'delayed_events_events_total', { prefix: service.prefix, direction: 'enqueue' });
      const onShared = parse(await shared.metrics());
      expect(enqueued(onShared, first)).toBe(1);
      expect(enqueued(onShared, second)).toBe(2);
      expect(value(onShared, 'delayed_events_stored_events', { prefix: second.prefix, type: 'test.work', state: 'scheduled' })).toBe(2);
      const onOther = parse(await other.metrics());
      expect(enqueued(onOther, first)).toBe(1);
      expect(enqueued(onOther, second)).toBe(0);
      // The second registration on a registry shares its metrics: unregistering one service leaves them to the other.
      registrations[0]!.unregister();
      expect(enqueued(parse(await shared.metrics()), second)).toBe(2);
    } finally {
      for (const r of registrations) r.unregister();
    }
  });
});
