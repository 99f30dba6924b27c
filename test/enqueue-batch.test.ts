import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { InvalidEventError, NotReplicatedError } from '../src';
import { EARLY_FLUSH } from '../src/service/enqueue-batcher';
import { PaymentCheck, WorkItem } from './support/events';
import { TOPOLOGY, useRedis } from './support/harness';
import { ScheduleView } from './support/schedule';
import { waitFor } from './support/wait-for';

describe('enqueueBatch', () => {
  const redis = useRedis();

  it('stores events of several types in one go and reports a status per entry, in order', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const client = redis.client();
    await service.enqueue(new WorkItem('w-1'), 60_000);
    const at = new Date(Date.now() + 3_600_000);
    const batch$ = service.enqueueBatch([
      { event: new PaymentCheck('p-1'), delay: { minutes: 5 } },
      { event: new WorkItem('w-1'), delay: 10 },
      { event: new WorkItem('w-2'), at },
      { event: new PaymentCheck('p-2') },
    ]);
    expect(await redis.keys(`${prefix}:{test.payment-check}:*`)).toEqual([]);
    expect(await firstValueFrom(batch$)).toEqual(['scheduled', 'duplicate', 'scheduled', 'scheduled']);
    expect(await client.hlen(`${prefix}:{test.payment-check}:m`)).toBe(2);
    expect(await new ScheduleView(client, `${prefix}:{test.work}`).dueOf('w-2')).toBe(at.getTime());
  });

  it('gives each entry of a batch its own delay, however the delays alternate', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const delays = [60_000, 120_000, 60_000, 180_000, 180_000, 60_000];
    const before = Date.now();
    await firstValueFrom(service.enqueueBatch(delays.map((delay, i) => ({ event: new WorkItem(`d${i}`), delay }))));
    const after = Date.now();
    const client = redis.client();
    const schedule = await new ScheduleView(client, `${prefix}:{test.work}`).entries();
    for (const [i, delay] of delays.entries()) {
      const due = schedule.get(`d${i}`)!;
      expect(due).toBeGreaterThanOrEqual(before + delay - 50);
      expect(due).toBeLessThanOrEqual(after + delay + 50);
      // The envelope's header carries the same due time: cancel and replace find the event by it.
      expect(await client.hget(`${prefix}:{test.work}:m`, `d${i}`)).toMatch(new RegExp(`^0\\|${due}\\|`));
    }
  });

  it('handles a batch larger than one script call', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const handled = new Set<string>();
    service.addHandler(WorkItem, (e) => (handled.add(e.id), true), 32);
    const entries = Array.from({ length: 2_500 }, (_, i) => ({ event: new WorkItem(`b${i}`, i), delay: i % 200 }));
    const statuses = await firstValueFrom(service.enqueueBatch(entries));
    expect(statuses.filter((s) => s === 'scheduled')).toHaveLength(2_500);
    await waitFor(() => handled.size === 2_500, 'every batched event handled');
  });

  it('rejects the whole batch when one entry is invalid, and writes nothing', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const batch$ = service.enqueueBatch([{ event: new WorkItem('fine') }, { event: new WorkItem('') }]);
    await expect(firstValueFrom(batch$)).rejects.toBeInstanceOf(InvalidEventError);
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
  });

  /** Script calls the server has run so far (single server: commandstats are per node). */
  const scriptCalls = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await redis.client().info('commandstats'))?.[1] ?? 0);

  it.runIf(TOPOLOGY === 'single')('coalesces enqueues made in the same tick into a few script calls, each caller getting its own status', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    await service.enqueue(new WorkItem('warm-up'), 60_000); // loads the script
    const before = await scriptCalls();
    // 150 distinct ids, then 50 of them again: the later callers must hear 'duplicate'.
    const statuses = await Promise.all(Array.from({ length: 200 }, (_, i) => service.enqueue(new WorkItem(`c${i % 150}`, i), 60_000)));
    // Calls leave as they fill, each as large as all that left before it in the tick:
    // 32, 32, 64, then the last 72 at the end of the tick.
    expect(EARLY_FLUSH).toBe(32);
    expect(await scriptCalls()).toBe(before + 4);
    expect(statuses.slice(0, 150).every((s) => s === 'scheduled')).toBe(true);
    expect(statuses.slice(150).every((s) => s === 'duplicate')).toBe(true);
    expect(await redis.client().hlen(`${prefix}:{test.work}:m`)).toBe(151);
    // The stored payload is the first caller's, not the duplicate's.
    expect(await redis.client().hget(`${prefix}:{test.work}:m`, 'c0')).toContain('"n":0');
  });

  it.runIf(TOPOLOGY === 'single')('rejects every caller of a coalesced call that failed', async () => {
    const service = redis.service({ prefix: redis.prefix(), durableEnqueue: { replicas: 1, timeoutMs: 50 } });
    const outcomes = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => service.enqueue(new WorkItem(`r${i}`), 60_000)));
    for (const outcome of outcomes) {
      expect(outcome.status).toBe('rejected');
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(NotReplicatedError);
    }
  });
});
