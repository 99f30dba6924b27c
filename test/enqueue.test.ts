import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { METRIC } from '../src';
import { PaymentCheck } from './support/events';
import { counter, recordMetrics, useRedis } from './support/harness';
import { ScheduleView } from './support/schedule';
import { waitFor } from './support/wait-for';

const TYPE = 'test.payment-check';

describe('enqueue', () => {
  const redis = useRedis();
  const keysOf = (prefix: string) => ({ meta: `${prefix}:{${TYPE}}:m` });
  const scheduleOf = (prefix: string) => new ScheduleView(redis.client(), `${prefix}:{${TYPE}}`);
  /** The event is due `delayMs` after `anchor` (host clock, the same as Redis's here), not later. */
  const expectDueAfter = async (prefix: string, id: string, anchor: number, delayMs: number) => {
    const due = await scheduleOf(prefix).dueOf(id);
    expect(due).toBeGreaterThanOrEqual(anchor + delayMs - 50);
    expect(due).toBeLessThan(anchor + delayMs + 150);
  };

  it('is cold: nothing reaches Redis until the Observable is subscribed', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const client = redis.client();
    const enqueue$ = service.enqueueWithDelay(new PaymentCheck('cold'), 60_000);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
    await firstValueFrom(enqueue$);
    expect(await client.hexists(keysOf(prefix).meta, 'cold')).toBe(1);
  });

  it('stores the event once in the type hash and schedules it by due time in ms', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const client = redis.client();
    const before = Date.now();
    await firstValueFrom(service.enqueueWithDelay(new PaymentCheck('p', 7), { hours: 3 }));
    const after = Date.now();
    const due = await scheduleOf(prefix).dueOf('p');
    expect(due).toBeGreaterThanOrEqual(before + 3 * 3_600_000 - 50);
    expect(due).toBeLessThanOrEqual(after + 3 * 3_600_000 + 50);
    expect(await client.hlen(keysOf(prefix).meta)).toBe(1);
    expect(await client.hget(keysOf(prefix).meta, 'p')).toContain('"amount":7');
  });

  it('counts a delay from the call: a stalled event loop before the call leaves does not make the event late', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const calledAt = Date.now();
    const stored = service.enqueue(new PaymentCheck('prompt'), 60_000);
    // The event loop is busy for 300 ms before the gathered enqueues can leave.
    const busyUntil = performance.now() + 300;
    while (performance.now() < busyUntil);
    await stored;
    await expectDueAfter(prefix, 'prompt', calledAt, 60_000);
  });

  it('counts the delay of the cold form from its subscription', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const enqueue$ = service.enqueueWithDelay(new PaymentCheck('later'), 60_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const subscribedAt = Date.now();
    await firstValueFrom(enqueue$);
    await expectDueAfter(prefix, 'later', subscribedAt, 60_000);
  });

  it('schedules at an absolute date with enqueueAt', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const at = new Date(Date.now() + 86_400_000);
    await firstValueFrom(service.enqueueAt(new PaymentCheck('at'), at));
    expect(await scheduleOf(prefix).dueOf('at')).toBe(at.getTime());
  });

  it('leaves an already stored event as it is and counts the duplicate', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const metrics = recordMetrics(service);
    const client = redis.client();
    expect(await service.enqueue(new PaymentCheck('d', 1), 60_000)).toBe('scheduled');
    const dueBefore = await scheduleOf(prefix).dueOf('d');
    expect(await service.enqueue(new PaymentCheck('d', 2), 1_000)).toBe('duplicate');
    expect(await scheduleOf(prefix).dueOf('d')).toBe(dueBefore);
    expect(await client.hget(keysOf(prefix).meta, 'd')).toContain('"amount":1');
    expect(counter(metrics, METRIC.duplicatesIgnored, { type: TYPE })).toBe(1);
  });

  it('replaces payload and due time when asked to', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const client = redis.client();
    await service.enqueue(new PaymentCheck('r', 1), 60_000);
    expect(await service.enqueue(new PaymentCheck('r', 2), 120_000, { replace: true })).toBe('replaced');
    expect(await client.hget(keysOf(prefix).meta, 'r')).toContain('"amount":2');
    expect((await scheduleOf(prefix).dueOf('r')) ?? 0).toBeGreaterThan(Date.now() + 100_000);
  });

  it('replaced payloads are what the handler gets', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const seen: number[] = [];
    service.addHandler(PaymentCheck, (e) => (seen.push(e.amount), true), 1);
    await service.enqueue(new PaymentCheck('rr', 1), 300);
    await service.enqueue(new PaymentCheck('rr', 2), 0, { replace: true });
    await waitFor(async () => seen.length === 1 && (await redis.client().hlen(keysOf(prefix).meta)) === 0, 'the replaced event handled and completed');
    expect(seen).toEqual([2]);
  });

  it('cancel removes a scheduled event, says whether it existed, and it is never handled', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const handled: string[] = [];
    service.addHandler(PaymentCheck, (e) => (handled.push(e.id), true), 1);
    await service.enqueue(new PaymentCheck('c'), 300);
    await service.enqueue(new PaymentCheck('kept'), 300);
    expect(await service.cancel(PaymentCheck, 'c')).toBe(true);
    expect(await service.cancel(PaymentCheck, 'c')).toBe(false);
    expect(await service.cancel(PaymentCheck, 'never-enqueued')).toBe(false);
    // Both were due together, so once 'kept' is handled 'c' would have been too.
    await waitFor(() => handled.includes('kept'), 'the event that was kept');
    expect(handled).toEqual(['kept']);
    expect(await redis.client().hexists(keysOf(prefix).meta, 'c')).toBe(0);
  });

  it('cancel removes an event that is already waiting in the ready list', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    await service.enqueue(new PaymentCheck('waiting'), 0);
    // No handler runs here; put the event where a dispatcher would, into the ready list.
    const client = redis.client();
    await scheduleOf(prefix).remove('waiting');
    await client.rpush(`${prefix}:{${TYPE}}:r`, 'waiting');
    expect(await service.cancel(PaymentCheck, 'waiting')).toBe(true);
    expect(await client.llen(`${prefix}:{${TYPE}}:r`)).toBe(0);
  });
});
