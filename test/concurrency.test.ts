import { describe, expect, it } from 'vitest';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { leasedIds } from './support/leases';
import { waitFor } from './support/wait-for';

describe('parallelism and backpressure', () => {
  const redis = useRedis();

  it('runs at most `parallelism` handlers at once and claims no more events than free slots', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const service = redis.service({ prefix });
    let running = 0;
    let most = 0;
    let released = false;
    const waiting: Array<() => void> = [];
    service.addHandler(
      WorkItem,
      async () => {
        running++;
        most = Math.max(most, running);
        if (!released) await new Promise<void>((resolve) => waiting.push(resolve));
        running--;
        return true;
      },
      3,
    );
    for (let i = 0; i < 20; i++) await service.enqueue(new WorkItem(`w${i}`, i), 0);

    await waitFor(() => running === 3, 'three handlers running');
    await waitFor(async () => (await client.llen(`${prefix}:{test.work}:r`)) === 17, 'the rest waiting in the ready list');
    // The other 17 stay in Redis, claimable by any other instance, not buffered here.
    expect(await leasedIds(client, `${prefix}:{test.work}:f`)).toHaveLength(3);

    released = true;
    waiting.forEach((resume) => resume());
    await waitFor(async () => (await client.hlen(`${prefix}:{test.work}:m`)) === 0, 'all completed');
    expect(most).toBe(3);
  });

  it('three instances on one Redis handle 10,000 events, each exactly once', async () => {
    const prefix = redis.prefix();
    const instances = [1, 2, 3].map(() => redis.service({ prefix }));
    const counts = new Map<string, number>();
    const perInstance = [0, 0, 0];
    instances.forEach((service, i) =>
      service.addHandler(
        WorkItem,
        (e) => {
          counts.set(e.id, (counts.get(e.id) ?? 0) + 1);
          perInstance[i]!++;
          return true;
        },
        16,
      ),
    );
    const total = 10_000;
    const producer = instances[0]!;
    // Spread over the next second, with 64 enqueues in flight.
    for (let start = 0; start < total; start += 64) {
      await Promise.all(Array.from({ length: Math.min(64, total - start) }, (_, k) => producer.enqueue(new WorkItem(`e${start + k}`, start + k), ((start + k) * 7) % 1_000)));
    }
    await waitFor(() => counts.size === total, `${total} distinct events handled`, 60_000, 50);
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.work}:m`)) === 0, 'every event completed in Redis', 20_000);
    const duplicates = [...counts.values()].filter((n) => n !== 1).length;
    expect(duplicates).toBe(0);
    // Every instance took part: the queue is shared, not pinned to one consumer.
    expect(perInstance.every((n) => n > 0)).toBe(true);
  });
});
