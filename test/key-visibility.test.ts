import { describe, expect, it } from 'vitest';
import { InvalidOptionError, METRIC, type Metric } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

// Per-key visibility for keyed types (since 0.6): waiting and running per key in limits(), and lateness per key
// in metrics when asked for, with bounded labels.
describe('per-key visibility', () => {
  const redis = useRedis();
  const tenant = (e: WorkItem) => `tenant-${e.n % 3}`;

  it('limits() lists each key with its events waiting and its calls running, busiest first', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    let release: () => void = () => undefined;
    const gate = new Promise<boolean>((resolve) => (release = () => resolve(true)));
    service.addHandler(WorkItem, () => gate, 10, { key: tenant, perKey: { globalConcurrency: 1 } });
    // tenant-0: 4 events, tenant-1: 2, tenant-2: 1; one call of each runs, the rest wait.
    await service.enqueueMany([0, 3, 6, 9, 1, 4, 2].map((n) => ({ event: new WorkItem(`k${n}`, n) })));
    const keys = await waitFor(async () => {
      const use = (await service.limits(WorkItem))?.default;
      const listed = use?.keys ?? [];
      return listed.reduce((sum, k) => sum + k.running, 0) === 3 && listed;
    }, 'one call running per key');
    expect(keys).toEqual([
      { key: 'tenant-0', waiting: 3, running: 1 },
      { key: 'tenant-1', waiting: 1, running: 1 },
      { key: 'tenant-2', waiting: 0, running: 1 },
    ]);
    release();
  });

  it('keyMetrics: lateness per key for the first keys seen, the rest as (other); checked as an option', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const seen: Metric[] = [];
    service.metrics$.subscribe((m) => seen.push(m));
    let handled = 0;
    service.addHandler(WorkItem, () => void handled++, 4, { key: tenant, keyMetrics: 2 });
    await service.enqueueMany([0, 1, 2, 3, 4, 5].map((n) => ({ event: new WorkItem(`m${n}`, n) })));
    await waitFor(() => handled === 6, 'all handled');
    const lateness = seen.filter((m) => m.name === METRIC.keyLateness);
    expect(lateness).toHaveLength(6);
    const labels = new Set(lateness.map((m) => m.tags.key));
    // Two keys of their own, the third counted as (other).
    expect(labels.size).toBe(3);
    expect(labels.has('(other)')).toBe(true);
    expect(lateness.every((m) => m.kind === 'timing' && m.tags.type === 'test.work' && m.tags.group === 'default' && m.value >= 0)).toBe(true);

    expect(() => service.addHandler(WorkItem, () => true, 1, { keyMetrics: 5, group: 'g1' })).toThrow(/keyMetrics: needs key/);
    for (const bad of [0, 10_001, 1.5]) expect(() => service.addHandler(WorkItem, () => true, 1, { key: tenant, keyMetrics: bad, group: 'g2' }), String(bad)).toThrow(InvalidOptionError);
    expect(() => service.addHandler(WorkItem, () => true, 1, { key: tenant, keyMetric: 5, group: 'g3' } as never)).toThrow(/did you mean keyMetrics/);
  });
});
