import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import 'reflect-metadata';
import { DelayedEvent, InvalidArgumentError, InvalidOptionError, fixedBackoff } from '../src';
import { RedisLayout } from '../src/redis/redis-layout';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/**
 * Priorities (docs/api.md, "Priorities"): among READY events of a type, the
 * lowest number first (0, the default, is the best); equal ones by due time;
 * never before an event is due; an event waiting longer than priorityAgingMs
 * is served as the best, so none starves.
 */
@DelayedEvent('test.split', { partitions: 3 })
class Split {
  constructor(readonly id: string = '') {}
}

describe('priorities', () => {
  const redis = useRedis();

  /** Stores events paused, due in the order given (1 ms apart, in the past), then lets a one-at-a-time handler run them. */
  async function runInOrder(entries: Array<[string, number | undefined]>, options: { group?: string; batch?: boolean; limited?: boolean } = {}) {
    const service = redis.service({ pollIntervalMs: 20 });
    await service.pause(WorkItem);
    const now = Date.now();
    await firstValueFrom(service.enqueueBatch(entries.map(([id, priority], i) => ({ event: new WorkItem(id, 1), at: new Date(now - 1_000 + i), ...(priority === undefined ? {} : { priority }) }))));
    const order: string[] = [];
    if (options.batch) {
      service.addBatchHandler(WorkItem, (events) => void order.push(...events.map((e) => e.id)), { maxBatch: 3, maxWaitMs: 10 });
    } else {
      service.addHandler(WorkItem, (event) => void order.push(event.id), 1, {
        ...(options.group ? { group: options.group } : {}),
        ...(options.limited ? { globalConcurrency: 1, rateLimit: { max: 1_000, perMs: 1_000 } } : {}),
      });
    }
    await service.resume(WorkItem);
    await waitFor(() => order.length === entries.length, 'every event handled');
    return { service, order };
  }

  it('claims the best priority first, then by due time; priority 0 is the default and the best', async () => {
    const { order } = await runInOrder([
      ['low-1', 5],
      ['plain-1', undefined],
      ['mid', 3],
      ['zero', 0],
      ['low-2', 5],
      ['high', 1],
      ['plain-2', undefined],
    ]);
    expect(order).toEqual(['plain-1', 'zero', 'plain-2', 'high', 'mid', 'low-1', 'low-2']);
  });

  it('orders a batch handler’s calls and a named group’s deliveries the same way', async () => {
    const entries: Array<[string, number]> = [
      ['c', 9],
      ['a', 0],
      ['b', 4],
      ['d', 9],
    ];
    expect((await runInOrder(entries, { batch: true })).order).toEqual(['a', 'b', 'c', 'd']);
    expect((await runInOrder(entries, { group: 'audit' })).order).toEqual(['a', 'b', 'c', 'd']);
    // Flow limits bound how many a claim takes, not which.
    expect((await runInOrder(entries, { limited: true })).order).toEqual(['a', 'b', 'c', 'd']);
  });

  it('orders each partition of a partitioned type the same way', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    await service.pause(Split);
    const now = Date.now();
    const ids = Array.from({ length: 24 }, (_, i) => `s-${i}`);
    const priorityOf = (i: number) => (i * 7) % 5;
    await firstValueFrom(service.enqueueBatch(ids.map((id, i) => ({ event: new Split(id), at: new Date(now - 1_000 + i), priority: priorityOf(i) }))));
    const order: string[] = [];
    service.addHandler(Split, (event) => void order.push(event.id), 1);
    await service.resume(Split);
    await waitFor(() => order.length === ids.length, 'every event handled');
    const layout = new RedisLayout(service.prefix);
    const route = { type: 'test.split', partitions: 3 };
    for (let p = 0; p < 3; p++) {
      const tag = layout.forType('test.split', p).tag;
      const handledHere = order.filter((id) => layout.forEvent(route, id).tag === tag);
      const expected = [...handledHere].sort((x, y) => priorityOf(ids.indexOf(x)) - priorityOf(ids.indexOf(y)) || ids.indexOf(x) - ids.indexOf(y));
      expect(handledHere, `partition ${p}`).toEqual(expected);
    }
  });

  it('within a key (the key option), takes the best priority first', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    await service.pause(WorkItem);
    const now = Date.now();
    const entries: Array<[string, number]> = [
      ['k-late', 8],
      ['k-first', 0],
      ['k-mid', 4],
    ];
    await firstValueFrom(service.enqueueBatch(entries.map(([id, priority], i) => ({ event: new WorkItem(id, 1), at: new Date(now - 1_000 + i), priority }))));
    const order: string[] = [];
    service.addHandler(WorkItem, (event) => void order.push(event.id), 1, { key: () => 'tenant-1', perKey: { globalConcurrency: 1 } });
    await service.resume(WorkItem);
    await waitFor(() => order.length === 3, 'every event handled');
    expect(order).toEqual(['k-first', 'k-mid', 'k-late']);
  });

  it('moves a dispatch of 5,000 events with priorities at once into READY, and claims them all', async () => {
    const service = redis.service({ pollIntervalMs: 20, dispatchBatchSize: 5_000 });
    await service.pause(WorkItem);
    const count = 5_000;
    for (let first = 0; first < count; first += 1_000) {
      await firstValueFrom(service.enqueueBatch(Array.from({ length: 1_000 }, (_, i) => ({ event: new WorkItem(`bulk-${first + i}`, 1), priority: 1 + ((first + i) % 7) }))));
    }
    let handled = 0;
    service.addHandler(WorkItem, () => void handled++, 32);
    await service.resume(WorkItem);
    await waitFor(() => handled === count, 'every event handled', 20_000);
  });

  it('never runs an event before it is due, whatever its priority', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    const order: string[] = [];
    await service.enqueue(new WorkItem('urgent-later', 1), 300, { priority: 0 });
    await service.enqueue(new WorkItem('minor-now', 1), 0, { priority: 1_000_000 });
    service.addHandler(WorkItem, (event) => void order.push(event.id), 1);
    await waitFor(() => order.length === 2, 'both handled');
    expect(order).toEqual(['minor-now', 'urgent-later']);
  });

  it('keeps it through a retry and a snooze, shows it in find(), list() and counts(); a replace takes the new one', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    await service.pause(WorkItem);
    await service.enqueue(new WorkItem('kept', 1), 0, { priority: 7 });
    await service.enqueue(new WorkItem('replaced', 1), 0, { priority: 7 });
    await service.enqueue(new WorkItem('replaced', 2), 0, { priority: 2, replace: true });
    expect((await service.find(WorkItem, 'kept'))?.priority).toBe(7);
    expect((await service.find(WorkItem, 'replaced'))?.priority).toBe(2);
    // Paused, nothing is dispatched: once resumed and due, both wait READY by priority.
    const seen: Array<[string, number, number]> = [];
    let release: (() => void) | undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    service.addHandler(
      WorkItem,
      async (event, _context, delivery) => {
        seen.push([event.id, delivery.attempt, delivery.snoozes]);
        await gate;
        if (event.id === 'kept' && delivery.attempt === 1) return false;
        if (event.id === 'kept' && delivery.snoozes === 0) return delivery.snooze(20);
        return true;
      },
      1,
      { retry: fixedBackoff(3, 20), prefetch: 0 },
    );
    await service.resume(WorkItem);
    await waitFor(() => seen.length === 1, 'the first running');
    // One runs, the other waits READY with its priority, listed and counted.
    expect((await service.counts(WorkItem))?.ready).toBe(1);
    const [waiting] = await service.list(WorkItem, 'ready');
    expect(waiting?.id).toBe('kept');
    expect(waiting?.priority).toBe(7);
    expect((await service.find(WorkItem, 'kept'))?.state).toBe('ready');
    release?.();
    await waitFor(() => seen.length === 4, 'retried and snoozed');
    expect(seen).toEqual([
      ['replaced', 1, 0],
      ['kept', 1, 0],
      ['kept', 2, 0],
      ['kept', 2, 1],
    ]);
  });

  it('serves an event waiting longer than priorityAgingMs before a stream of more urgent ones, and with 0 never', async () => {
    for (const agingMs of [300, 0]) {
      const service = redis.service({ pollIntervalMs: 20, priorityAgingMs: agingMs });
      const started = new Map<string, number>();
      let stream = true;
      service.addHandler(
        WorkItem,
        async (event) => {
          started.set(event.id, Date.now());
          // Each urgent call enqueues two more: READY never empties of urgent events while the stream runs, whatever
          // the dispatch's latency (one each would leave a gap now and then, in which the patient one would run).
          if (event.id.startsWith('urgent') && stream) {
            await service.enqueue(new WorkItem(`urgent-${started.size}-a`, 1), 0);
            await service.enqueue(new WorkItem(`urgent-${started.size}-b`, 1), 0);
          }
          await new Promise((resolve) => setTimeout(resolve, 5));
        },
        1,
        { prefetch: 0 },
      );
      for (let i = 0; i < 3; i++) await service.enqueue(new WorkItem(`urgent-seed-${i}`, 1), 0);
      const dueAt = Date.now();
      await service.enqueue(new WorkItem('patient', 1), 0, { priority: 1_000 });
      if (agingMs > 0) {
        await waitFor(() => started.has('patient'), 'the patient event served while urgent ones keep coming', 5_000);
        // Within the aging and a few calls of the stream.
        expect(started.get('patient')! - dueAt).toBeLessThan(agingMs + 700);
        expect(started.get('patient')! - dueAt).toBeGreaterThanOrEqual(agingMs - 50);
      } else {
        // Strict priorities: while the stream runs, it waits.
        await waitFor(() => Date.now() > dueAt + 800, 'the stream running for a while');
        expect(started.has('patient')).toBe(false);
      }
      stream = false;
      await waitFor(() => started.has('patient'), 'the patient event served once the stream ends', 20_000);
      await service.close();
    }
  });

  it('refuses a priority out of range or not whole, or a misspelt option, naming it, and stores nothing', async () => {
    const service = redis.service();
    for (const bad of [-1, 1.5, 1_000_001, Number.NaN, '3', null]) {
      await expect(service.enqueue(new WorkItem('bad', 1), 0, { priority: bad as number })).rejects.toThrow(/priority of enqueue: must be a whole number from 0 \(the best\) to 1,000,000/);
    }
    await expect(service.enqueue(new WorkItem('bad', 1), 0, { priorty: 3 } as never)).rejects.toThrow(InvalidArgumentError);
    await expect(service.enqueue(new WorkItem('bad', 1), 0, { priorty: 3 } as never)).rejects.toThrow(/did you mean priority/);
    await expect(firstValueFrom(service.enqueueBatch([{ event: new WorkItem('bad', 1), priority: -1 }]))).rejects.toThrow(/priority of enqueueBatch entry 0/);
    expect(await service.find(WorkItem, 'bad')).toBeUndefined();
    expect(() => redis.service({ priorityAgingMs: -1 })).toThrow(InvalidOptionError);
    expect(() => service.addHandler(WorkItem, () => true, 1, { priorityAgingMs: 1.5 })).toThrow(InvalidOptionError);
    expect(await service.enqueue(new WorkItem('edge', 1), 60_000, { priority: 1_000_000 })).toBe('scheduled');
  });
});
