import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

/**
 * `enqueue(event, delay, { maxAttempts })` (docs/api.md): the event's own
 * attempts, in every group, instead of its handler's; the backoff is the
 * handler's still. A lease that runs out counts against them as against the
 * handler's.
 */
describe('attempts per event', () => {
  const redis = useRedis();

  it('fewer or more than the handler allows: dead-lettered after its own, delivery and find() say so', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    const attempts: Record<string, Array<[number, number]>> = {};
    service.addHandler(
      WorkItem,
      (event, _context, delivery) => {
        (attempts[event.id] ??= []).push([delivery.attempt, delivery.maxAttempts]);
        return false;
      },
      2,
      { retry: fixedBackoff(3, 10) },
    );
    await service.enqueue(new WorkItem('two', 1), 60_000, { maxAttempts: 2 });
    expect((await service.find(WorkItem, 'two'))?.maxAttempts).toBe(2);
    await service.runNow(WorkItem, 'two');
    await firstValueFrom(service.enqueueBatch([{ event: new WorkItem('five', 1), maxAttempts: 5 }]));
    await service.enqueue(new WorkItem('handlers', 1), 0);
    const dead = await waitFor(async () => {
      const letters = await service.deadLetters(WorkItem);
      return letters.length === 3 ? letters : undefined;
    }, 'all three dead-lettered');
    expect(attempts.two).toEqual([
      [1, 2],
      [2, 2],
    ]);
    expect(attempts.five?.map(([a]) => a)).toEqual([1, 2, 3, 4, 5]);
    expect(attempts.five?.every(([, most]) => most === 5)).toBe(true);
    expect(attempts.handlers?.map(([a, most]) => `${a}/${most}`)).toEqual(['1/3', '2/3', '3/3']);
    const byId = Object.fromEntries(dead.map((d) => [d.id, d]));
    expect(byId.two?.error).toMatch(/attempt 2 of 2/);
    expect(byId.five?.attempts).toBe(5);
  });

  it('a lease that runs out counts against the event’s own attempts: redelivered past the handler’s, dead at its own', async () => {
    const prefix = redis.prefix();
    // The first instance, a process, takes both and is killed mid-call: their leases (1,000 + 100 ms) run out.
    const stuck = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'hang', HANDLER_TIMEOUT_MS: '1000', LEASE_GRACE_MS: '100', MAX_ATTEMPTS: '1' });
    await stuck.waitForLine((l) => l.ready === true);
    const producer = redis.service({ prefix });
    await producer.enqueue(new WorkItem('more', 1), 0, { maxAttempts: 2 });
    await producer.enqueue(new WorkItem('fewer', 1), 0, { maxAttempts: 1 });
    await stuck.waitForLine((l) => l.started === 'more');
    await stuck.waitForLine((l) => l.started === 'fewer');
    await stuck.kill('SIGKILL');

    // The second instance's handler allows one attempt; 'more' has two, 'fewer' one.
    const next = redis.service({ prefix, pollIntervalMs: 20, leaseGraceMs: 100 });
    const handled: Array<[string, number]> = [];
    next.addHandler(
      WorkItem,
      (event, _context, delivery) => {
        handled.push([event.id, delivery.attempt]);
      },
      2,
      { timeoutMs: 200, retry: fixedBackoff(1, 10) },
    );
    await waitFor(async () => (await next.deadLetters(WorkItem)).length === 1 && handled.length === 1, 'one redelivered, one dead');
    expect(handled).toEqual([['more', 2]]);
    const [dead] = await next.deadLetters(WorkItem);
    expect(dead?.id).toBe('fewer');
    expect(dead?.error).toMatch(/lease expired on attempt 1 of 1/);
  });

  it('refuses a count out of range or not whole, naming the option, and stores nothing', async () => {
    const service = redis.service();
    for (const bad of [0, -1, 1.5, 100_001, Number.NaN, '3', null]) {
      await expect(service.enqueue(new WorkItem(`bad-${String(bad)}`, 1), 0, { maxAttempts: bad as number })).rejects.toThrow(InvalidArgumentError);
      await expect(service.enqueue(new WorkItem('bad', 1), 0, { maxAttempts: bad as number })).rejects.toThrow(/maxAttempts of enqueue: must be a whole number from 1 to 100,000/);
    }
    await expect(firstValueFrom(service.enqueueBatch([{ event: new WorkItem('ok', 1) }, { event: new WorkItem('bad', 1), maxAttempts: 0 }]))).rejects.toThrow(/maxAttempts of enqueueBatch entry 1/);
    expect(await service.counts(WorkItem)).toMatchObject({ scheduled: 0, ready: 0 });
    expect(await service.enqueue(new WorkItem('edge', 1), 60_000, { maxAttempts: 100_000 })).toBe('scheduled');
  });
});
