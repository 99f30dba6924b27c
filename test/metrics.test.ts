import { filter, firstValueFrom, toArray, take } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { METRIC, fixedBackoff } from '../src';
import { PaymentCheck, WorkItem } from './support/events';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';

describe('metrics$', () => {
  const redis = useRedis();

  it('counts what happens to events, with type and outcome tags', async () => {
    const service = redis.service({ retry: fixedBackoff(2, 10) });
    const metrics = recordMetrics(service);
    service.addHandler(PaymentCheck, (e) => e.amount > 0, 2);
    await service.enqueue(new PaymentCheck('ok', 1), 0);
    await service.enqueue(new PaymentCheck('ok', 1), 0);
    await service.enqueue(new PaymentCheck('bad', 0), 0);
    await waitFor(() => counter(metrics, METRIC.deadLettered) === 1 && counter(metrics, METRIC.handled) === 3, 'all outcomes');

    const type = 'test.payment-check';
    expect(counter(metrics, METRIC.events, { type, direction: 'enqueue' })).toBe(2);
    expect(counter(metrics, METRIC.duplicatesIgnored, { type })).toBe(1);
    expect(counter(metrics, METRIC.events, { type, direction: 'dequeue' })).toBe(3);
    expect(counter(metrics, METRIC.dispatched, { type })).toBe(3);
    expect(counter(metrics, METRIC.handled, { type, outcome: 'success' })).toBe(1);
    expect(counter(metrics, METRIC.handled, { type, outcome: 'failure' })).toBe(2);
    expect(counter(metrics, METRIC.retries, { type })).toBe(1);
    expect(counter(metrics, METRIC.deadLettered, { type, reason: 'attempts-exhausted' })).toBe(1);
    const timings = (name: string) => metrics.filter((m) => m.name === name && m.kind === 'timing');
    expect(timings(METRIC.lateness)).toHaveLength(3);
    expect(
      timings(METRIC.handlerDuration)
        .map((m) => m.tags.outcome)
        .sort(),
    ).toEqual(['failure', 'failure', 'success']);
    expect(await service.cancel(PaymentCheck, 'bad')).toBe(true);
    expect(counter(metrics, METRIC.cancelled, { type })).toBe(1);
  });

  it('samples gauges of each state from Redis while subscribed', async () => {
    const service = redis.service({ gaugeIntervalMs: 100, retry: fixedBackoff(1, 10) });
    let release: () => void = () => undefined;
    // Claiming only for the free slot: the event behind the running one stays ready.
    service.addHandler(WorkItem, (e) => (e.n === 0 ? false : new Promise<boolean>((resolve) => (release = () => resolve(true)))), 1, { prefetch: 0 });
    await service.enqueue(new WorkItem('dead', 0), 0);
    await waitForDeadLetters(service, WorkItem);
    await service.enqueue(new WorkItem('running', 1), 0);
    await service.enqueue(new WorkItem('waiting', 1), 0);
    for (let i = 0; i < 3; i++) await service.enqueue(new WorkItem(`later-${i}`, 1), 60_000);

    const expected = { [METRIC.scheduledCount]: 3, [METRIC.readyCount]: 1, [METRIC.inFlightCount]: 1, [METRIC.deadLetterCount]: 1 };
    await waitFor(async () => {
      const gauges = await firstValueFrom(
        service.metrics$.pipe(
          filter((m) => m.kind === 'gauge' && m.tags.type === 'test.work'),
          take(4),
          toArray(),
        ),
      );
      return gauges.every((g) => expected[g.name as keyof typeof expected] === g.value);
    }, 'gauges matching the queue');
    release();
  });

  it('samples how many masters may evict its keys, which would lose events without a trace', async () => {
    const service = redis.service({ gaugeIntervalMs: 100 });
    const masters = await redis.masters();
    const evicting = () => firstValueFrom(service.metrics$.pipe(filter((m) => m.name === METRIC.evictingMasters)));
    await waitFor(async () => {
      const gauge = await evicting();
      return gauge.value === 0 && gauge.tags.policy === 'noeviction';
    }, 'no master evicting under the default policy');
    const set = (name: string, value: string) => Promise.all(masters.map((master) => master.config('SET', name, value)));
    try {
      // Without a memory limit nothing is evicted, whatever the policy.
      await set('maxmemory-policy', 'allkeys-lru');
      await waitFor(async () => {
        const gauge = await evicting();
        return gauge.value === 0 && gauge.tags.policy === 'allkeys-lru';
      }, 'no limit, no eviction');
      await set('maxmemory', '1gb');
      await waitFor(async () => (await evicting()).value === masters.length, 'every master counted once it may evict keys without a TTL');
      // volatile-* policies only evict keys with a TTL, and the service sets none.
      await set('maxmemory-policy', 'volatile-lru');
      await waitFor(async () => (await evicting()).value === 0, 'volatile-lru is safe');
    } finally {
      await set('maxmemory-policy', 'noeviction');
      await set('maxmemory', '0');
    }
  });
});
