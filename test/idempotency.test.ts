import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { METRIC } from '../src';
import { counter, recordMetrics, useRedis } from './support/harness';
import { PaymentCheck, WorkItem } from './support/events';
import { waitFor } from './support/wait-for';

describe('an enqueue takes effect once', () => {
  const redis = useRedis();

  /** A service that handles WorkItem and lists the ids (with attempts) it handled. */
  function handling(options: Parameters<typeof redis.service>[0] = {}) {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, ...options });
    const handled: string[] = [];
    service.addHandler(
      WorkItem,
      (event, _context, delivery) => {
        handled.push(`${event.id}#${delivery.attempt}`);
        return true;
      },
      4,
    );
    return { service, handled, prefix };
  }

  it('re-sending an enqueue after its event was handled answers duplicate and stores nothing', async () => {
    const { service, handled, prefix } = handling();
    const metrics = recordMetrics(service);
    expect(await service.enqueue(new WorkItem('order-42'), 0)).toBe('scheduled');
    await waitFor(() => handled.length === 1, 'the first handling');
    const meta = `${prefix}:{test.work}:m`;
    await waitFor(async () => (await redis.client().hexists(meta, 'order-42')) === 0, 'the success recorded');

    expect(await service.enqueue(new WorkItem('order-42'), 0)).toBe('duplicate');
    expect(await firstValueFrom(service.enqueueBatch([{ event: new WorkItem('order-42') }, { event: new WorkItem('order-43') }]))).toEqual(['duplicate', 'scheduled']);
    await waitFor(() => handled.includes('order-43#1'), 'the new event of the batch');
    expect(await redis.client().hexists(meta, 'order-42')).toBe(0);
    expect(handled.filter((h) => h.startsWith('order-42'))).toEqual(['order-42#1']);
    expect(counter(metrics, METRIC.duplicatesIgnored, { type: 'test.work' })).toBe(2);
  });

  it('once the window has ended, the same id is scheduled and handled again, and its mark is gone from Redis', async () => {
    const { service, handled, prefix } = handling({ idempotencyWindowMs: 300 });
    await service.enqueue(new WorkItem('nightly'), 0);
    await waitFor(() => handled.length === 1, 'the first handling');
    // Polling with enqueue itself is safe: within the window it stores nothing.
    await waitFor(async () => (await service.enqueue(new WorkItem('nightly'), 0)) === 'scheduled', 'the window to end', 5_000);
    await waitFor(() => handled.length === 2, 'the second handling');
    expect(handled).toEqual(['nightly#1', 'nightly#1']);
    // The dispatcher drops marks whose window ended; nothing is left behind.
    await waitFor(async () => (await redis.keys(`${prefix}:*`)).length === 0, 'every key gone', 5_000);
  });

  it('a cancelled id stays cancelled when its enqueue is re-sent; replace: true stores it again', async () => {
    const service = redis.service();
    expect(await service.enqueue(new PaymentCheck('p1', 10), 60_000)).toBe('scheduled');
    expect(await service.cancel(PaymentCheck, 'p1')).toBe(true);
    expect(await service.enqueue(new PaymentCheck('p1', 10), 60_000)).toBe('duplicate');
    expect(await service.cancel(PaymentCheck, 'p1')).toBe(false);
    expect(await service.enqueue(new PaymentCheck('p1', 20), 60_000, { replace: true })).toBe('scheduled');
    expect(await service.cancel(PaymentCheck, 'p1')).toBe(true);
  });

  it('replace: true stores a handled id again within the window', async () => {
    const { service, handled } = handling();
    await service.enqueue(new WorkItem('again'), 0);
    await waitFor(() => handled.length === 1, 'the first handling');
    await waitFor(async () => (await service.enqueue(new WorkItem('again'), 0, { replace: true })) === 'scheduled', 'the replace to store');
    await waitFor(() => handled.length === 2, 'the second handling');
  });

  it('with idempotencyWindowMs: 0 no mark is kept: a handled id is scheduled again at once', async () => {
    const { service, handled, prefix } = handling({ idempotencyWindowMs: 0 });
    await service.enqueue(new WorkItem('fresh'), 0);
    await waitFor(() => handled.length === 1, 'the first handling');
    await waitFor(async () => (await redis.client().hexists(`${prefix}:{test.work}:m`, 'fresh')) === 0, 'the success recorded');
    expect(await redis.client().exists(`${prefix}:{test.work}:i`)).toBe(0);
    expect(await service.enqueue(new WorkItem('fresh'), 0)).toBe('scheduled');
    await waitFor(() => handled.length === 2, 'the second handling');
  });

  it('refuses an idempotency window that is not a whole number of ms from 0 to 7 days', () => {
    for (const bad of [-1, 1.5, Number.NaN, 8 * 24 * 3_600_000]) {
      expect(() => redis.service({ idempotencyWindowMs: bad })).toThrow(/idempotencyWindowMs/);
    }
  });
});
