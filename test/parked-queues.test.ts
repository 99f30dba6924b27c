import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, type DelayedEventService } from '../src';
import { QUIET_AFTER_MS, QUIET_LOOK_REGISTERED_MS } from '../src/runtime/quiet-looks';
import { PARK_PASS_MS } from '../src/service/queue-loops';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

@DelayedEvent('test.parked')
class Nap {
  constructor(readonly id: string = '') {}
}

/** Until every handler of `service` has its loops parked: quiet (QUIET_AFTER_MS), then the next pass. */
async function parked(service: DelayedEventService, handlers = 1): Promise<void> {
  await waitFor(async () => (await service.health()).loops.parked === handlers, 'the idle loops parked', QUIET_AFTER_MS + 2 * PARK_PASS_MS + 10_000, 200);
}

/**
 * A handler whose queue is idle has its loops parked (src/service/queue-loops.ts):
 * one scheduler of the instance makes their looks, and the handler keeps every
 * promise it made while its loops ran.
 */
describe('parked queues', () => {
  const redis = useRedis();

  it('an idle handler is parked, counted in health(), and an event enqueued then runs at once', async () => {
    const service = redis.service({ pollIntervalMs: 100, readerBlockMs: 200 });
    const handled: Array<{ id: string; late: number }> = [];
    service.addHandler(Nap, (event, _context, delivery) => void handled.push({ id: event.id, late: Date.now() - delivery.dueAt }));
    await parked(service);
    // Its loops are still counted: they still watch the queue.
    expect((await service.health()).loops).toEqual({ dispatchers: 1, readers: 1, parked: 1 });
    await service.enqueue(new Nap('now'), 0);
    await waitFor(() => handled.length === 1, 'the event handled', 5_000);
    expect(handled[0]!.late).toBeLessThan(1_000);
    // Made again by the enqueue's wake-up, and parked again once idle.
    expect((await service.health()).loops.parked).toBe(0);
    await parked(service);
  }, 90_000);

  it('an event due later, enqueued by another instance while parked, runs when due', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, pollIntervalMs: 100 });
    const producer = redis.service({ prefix });
    const handled: Array<{ id: string; late: number }> = [];
    service.addHandler(Nap, (event, _context, delivery) => void handled.push({ id: event.id, late: Date.now() - delivery.dueAt }));
    await parked(service);
    await producer.enqueue(new Nap('later'), 3_000);
    // The wake-up has the parked look come now, and the next at the due time: still parked meanwhile.
    await waitFor(async () => (await producer.find(Nap, 'later'))?.state === 'scheduled', 'the event scheduled');
    expect((await service.health()).loops.parked).toBe(1);
    await waitFor(() => handled.length === 1, 'the event handled', 10_000);
    expect(handled[0]!.late).toBeLessThan(1_000);
  }, 90_000);

  it("a parked named group's handler gets an event enqueued then, and parks again", async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, pollIntervalMs: 100 });
    const other = redis.service({ prefix, pollIntervalMs: 100 });
    const audited: string[] = [];
    const handled: string[] = [];
    service.addHandler(Nap, (event) => void audited.push(event.id), 1, { group: 'audit' });
    other.addHandler(Nap, (event) => void handled.push(event.id));
    await parked(service);
    await other.enqueue(new Nap('both'), 0);
    await waitFor(() => audited.length === 1 && handled.length === 1, 'the event handled in both groups', 10_000);
    await parked(service);
  }, 120_000);

  it.runIf(redis.topology === 'single')(
    'a parked queue with a named group notices a data loss within 10 s and registers its group again',
    async () => {
      const prefix = redis.prefix();
      const service = redis.service({ prefix, pollIntervalMs: 100 });
      service.addHandler(Nap, () => true, 1, { group: 'audit' });
      const client = redis.client();
      const registry = `${prefix}:{test.parked}:groups`;
      await waitFor(async () => (await client.hexists(registry, 'audit')) === 1, 'the group registered');
      await parked(service);
      await client.flushall();
      const lostAt = Date.now();
      await waitFor(async () => (await client.hexists(registry, 'audit')) === 1, 'the group registered again', QUIET_LOOK_REGISTERED_MS + 2_000);
      expect(Date.now() - lostAt).toBeLessThanOrEqual(QUIET_LOOK_REGISTERED_MS + 1_000);
    },
    90_000,
  );

  it('removeHandler and close() while parked: nothing is claimed after they resolve', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, pollIntervalMs: 100 });
    const producer = redis.service({ prefix });
    const handled: string[] = [];
    service.addHandler(Nap, (event) => void handled.push(event.id));
    await parked(service);
    await service.removeHandler(Nap);
    expect((await service.health()).loops).toEqual({ dispatchers: 0, readers: 0, parked: 0 });
    await producer.enqueue(new Nap('after-remove'), 0);
    // Another instance's handler gets it: this one, removed, never does.
    const other = redis.service({ prefix, pollIntervalMs: 100 });
    const otherHandled: string[] = [];
    other.addHandler(Nap, (event) => void otherHandled.push(event.id));
    await waitFor(() => otherHandled.length === 1, 'the event handled by the other instance', 10_000);
    expect(handled).toEqual([]);
    await parked(other);
    // Parked, it has no call to wait for: close() does not wait out closeTimeoutMs (5 s here).
    const closedAt = Date.now();
    await other.close();
    expect(Date.now() - closedAt).toBeLessThan(2_000);
    expect(otherHandled).toEqual(['after-remove']);
  }, 120_000);
});
