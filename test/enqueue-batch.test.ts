import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { InvalidEventError } from '../src';
import { PaymentCheck, WorkItem } from './support/events';
import { useRedis } from './support/harness';
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
    expect(Number(await client.zscore(`${prefix}:{test.work}:s`, 'w-2'))).toBe(at.getTime());
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
});
