import { filter, firstValueFrom } from 'rxjs';
import { METRIC } from '../src';
import { describe, expect, it } from 'vitest';
import { Address, PaymentCheck, Reminder } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

describe('delivery', () => {
  const redis = useRedis();

  it('hands a due event to its handler as an instance of its class', async () => {
    const service = redis.service();
    const seen: PaymentCheck[] = [];
    service.addHandler(PaymentCheck, (event) => (seen.push(event), true), 4);
    await firstValueFrom(service.enqueueWithDelay(new PaymentCheck('p-1', 42), 50));
    await waitFor(() => seen.length === 1, 'the handler call');
    expect(seen[0]).toBeInstanceOf(PaymentCheck);
    expect(seen[0]).toMatchObject({ id: 'p-1', amount: 42 });
  });

  it('keeps handling due events while the same instance stores a large batch', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const started: string[] = [];
    service.addHandler(PaymentCheck, (event) => (started.push(event.id), true), 1);
    await service.enqueue(new PaymentCheck('first', 1), 0);
    await waitFor(() => started.length === 1, 'the handler idle again');
    // 150,000 events an hour ahead (over a second of Redis time, so that a loaded machine still shows it): the calls
    // storing them leave all at once.
    let batchStored = false;
    const batch = firstValueFrom(service.enqueueBatch(Array.from({ length: 150_000 }, (_, i) => ({ event: new PaymentCheck(`later-${i}`, i), delay: 3_600_000 })))).then(() => {
      batchStored = true;
    });
    // Due now, straight into the ready list and said on the wake-up channel, as a dispatcher does: the waiting reader claims it.
    const client = redis.client();
    const now = Number((await client.time())[0]) * 1_000;
    await client.hset(`${prefix}:{test.payment-check}:m`, 'urgent', `0|${now}|${JSON.stringify([now, { amount: 7 }])}`);
    await client.rpush(`${prefix}:{test.payment-check}:r`, 'urgent');
    await client.publish(`${prefix}:wake`, 'test.payment-check|-1');
    await waitFor(() => started.includes('urgent'), 'the due event handled');
    // Its claim went on the handlers' own connection, not behind the batch's calls.
    expect(batchStored).toBe(false);
    await batch;
  });

  it('restores nested @Type objects and Dates', async () => {
    const service = redis.service();
    const seen: Reminder[] = [];
    service.addHandler(Reminder, (event) => (seen.push(event), true), 1);
    const reminder = new Reminder('r-1');
    reminder.address = new Address('Lyon', '69001');
    reminder.remindAt = new Date('2030-01-02T03:04:05.678Z');
    reminder.tags = ['a', 'ü'];
    await service.enqueue(reminder, 0);
    await waitFor(() => seen.length === 1, 'the handler call');
    const got = seen[0]!;
    expect(got.address).toBeInstanceOf(Address);
    expect(got.address.label()).toBe('69001 Lyon');
    expect(got.remindAt).toBeInstanceOf(Date);
    expect(got.remindAt.toISOString()).toBe('2030-01-02T03:04:05.678Z');
    expect(got.tags).toEqual(['a', 'ü']);
  });

  it('goes on after Redis lost its scripts (a restart, a failover to a replica that never ran them)', async () => {
    const service = redis.service();
    const seen: string[] = [];
    service.addHandler(PaymentCheck, (event) => (seen.push(event.id), true), 4);
    await service.enqueue(new PaymentCheck('before'), 0);
    await waitFor(() => seen.includes('before'), 'the event enqueued before the flush');
    await redis.flushScripts();
    // Every script runs again from scratch: enqueue, dispatch, claim and complete, and cancel.
    expect(await service.enqueue(new PaymentCheck('after'), 50)).toBe('scheduled');
    expect(await service.enqueue(new PaymentCheck('cancelled'), 60_000)).toBe('scheduled');
    await redis.flushScripts();
    expect(await service.cancel(PaymentCheck, 'cancelled')).toBe(true);
    await waitFor(() => seen.includes('after'), 'the event enqueued after the flush');
    expect(seen).toEqual(['before', 'after']);
  });

  it('does not hand an event over before its delay is up', async () => {
    const service = redis.service();
    const handledAt: number[] = [];
    service.addHandler(PaymentCheck, () => (handledAt.push(Date.now()), true), 1);
    const enqueuedAt = Date.now();
    await service.enqueue(new PaymentCheck('p-2'), 700);
    await waitFor(() => handledAt.length === 1, 'the handler call');
    expect(handledAt[0]! - enqueuedAt).toBeGreaterThanOrEqual(700);
  });

  it('wakes a sleeping dispatcher when an earlier event is enqueued', async () => {
    // A poll interval far above the delay: only the wake-up can deliver in time.
    const prefix = redis.prefix();
    const service = redis.service({ prefix, pollIntervalMs: 60_000 });
    const handled: string[] = [];
    const dispatchedLate = firstValueFrom(service.metrics$.pipe(filter((m) => m.name === METRIC.lateness)));
    service.addHandler(PaymentCheck, (e) => (handled.push(e.id), true), 1);
    // A first event proves the dispatcher is subscribed and asleep; then it plans around a late one.
    await service.enqueue(new PaymentCheck('first'), 0);
    await dispatchedLate;
    await service.enqueue(new PaymentCheck('late'), 50_000);
    const other = redis.service({ prefix });
    await other.enqueue(new PaymentCheck('early'), 100);
    await waitFor(() => handled.includes('early'), 'the early event', 5_000);
    expect(handled).toEqual(['first', 'early']);
  });
});
