import { describe, expect, it } from 'vitest';
import { METRIC, METRIC_TAGS, type Metric, PermanentFailure, fixedBackoff } from '../src';
import { PaymentCheck, WorkItem } from './support/events';
import { counter, recordMetrics, useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

describe('metric tags', () => {
  // AOF: the groups registered before the outage are still registered after it.
  const redis = useRedis(['--appendonly', 'yes', '--appendfsync', 'always']);

  it('emits every metric name with one fixed set of tag keys, through retries, dead letters, fan-out and an outage', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, gaugeIntervalMs: 100, retry: fixedBackoff(2, 10), logger: false, commandTimeoutMs: 1_000 });
    const metrics: Metric[] = recordMetrics(service);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      service.addHandler(
        PaymentCheck,
        (e) => {
          if (e.amount < 0) throw new PermanentFailure('negative');
          return e.amount > 0;
        },
        2,
      );
      service.addHandler(WorkItem, () => true, 2, { group: 'audit' });
      service.addHandler(WorkItem, () => true, 2);
      await service.enqueue(new PaymentCheck('ok', 1), 0);
      await service.enqueue(new PaymentCheck('ok', 1), 0); // duplicate
      await service.enqueue(new PaymentCheck('retried', 0), 0);
      await service.enqueue(new PaymentCheck('permanent', -1), 0);
      await service.enqueue(new PaymentCheck('cancelled', 1), 60_000);
      await service.cancel(PaymentCheck, 'cancelled');
      await service.enqueue(new WorkItem('fan-out'), 0);
      await waitFor(() => counter(metrics, METRIC.deadLettered) === 2 && counter(metrics, METRIC.handled, { type: 'test.work' }) === 2, 'handling done');
      await waitFor(() => metrics.some((m) => m.kind === 'gauge' && m.name === METRIC.paused), 'gauges sampled');

      await redis.server.kill();
      await waitFor(() => ['connection', 'reader', 'dispatcher'].every((loop) => counter(metrics, METRIC.redisErrors, { loop }) > 0), 'connection, reader and dispatcher errors counted', 20_000);
      await redis.server.restart();
      await service.waitUntilReady({ timeoutMs: 10_000 });
      await service.enqueue(new WorkItem('after'), 0);
      await waitFor(() => counter(metrics, METRIC.handled, { type: 'test.work' }) === 4, 'handling after the restart', 30_000);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }

    const keysByName = new Map<string, Set<string>>();
    for (const m of metrics) {
      const keys = keysByName.get(m.name) ?? new Set<string>();
      keys.add(Object.keys(m.tags).sort().join(','));
      keysByName.set(m.name, keys);
    }
    // Every name seen was seen with exactly one key set: the one METRIC_TAGS declares.
    for (const [name, keySets] of keysByName) {
      expect([...keySets], name).toEqual([[...METRIC_TAGS[name as keyof typeof METRIC_TAGS]].sort().join(',')]);
    }
    // The scenario reached the metrics that used to differ.
    expect(keysByName.has(METRIC.redisErrors)).toBe(true);
    expect(metrics.some((m) => m.name === METRIC.events && m.tags.direction === 'enqueue' && m.tags.group === '')).toBe(true);
    expect(metrics.some((m) => m.name === METRIC.events && m.tags.direction === 'dequeue' && m.tags.group === 'audit')).toBe(true);
    expect(metrics.some((m) => m.name === METRIC.redisErrors && m.tags.loop === 'connection' && m.tags.type === '')).toBe(true);
  });
});
