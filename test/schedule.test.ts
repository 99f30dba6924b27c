import fc from 'fast-check';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { DelayedEventService } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { ScheduleView } from './support/schedule';
import { waitFor } from './support/wait-for';

const TYPE = 'test.work';

describe('the schedule, kept in small buckets', () => {
  const redis = useRedis();
  const scheduleOf = (prefix: string) => new ScheduleView(redis.client(), `${prefix}:{${TYPE}}`);

  it('keeps thousands of events, many due in the same millisecond, in compact buckets indexed by earliest due', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const hourAhead = Date.now() + 3_600_000;
    const sameDue = new Date(hourAhead);
    // One batch all due at once, one batch spread at random, and one event at a time with growing delays.
    await firstValueFrom(service.enqueueBatch(Array.from({ length: 1_500 }, (_, i) => ({ event: new WorkItem(`same-${i}`), at: sameDue }))));
    const spread = Array.from({ length: 1_500 }, (_, i) => ({ event: new WorkItem(`spread-${i}`), at: new Date(hourAhead + Math.floor(Math.random() * 600_000)) }));
    await firstValueFrom(service.enqueueBatch(spread));
    for (let i = 0; i < 300; i++) await service.enqueue(new WorkItem(`growing-${i}`), 60_000 + i * 10);

    const schedule = scheduleOf(prefix);
    expect(await schedule.violations()).toEqual([]);
    const entries = await schedule.entries();
    expect(entries.size).toBe(3_300);
    expect(entries.get('same-1499')).toBe(sameDue.getTime());
    for (const { event, at } of spread) expect(entries.get(event.id)).toBe(at.getTime());
  });

  // Counting commands reads one server's INFO; on a cluster they spread over three.
  it.skipIf(redis.topology === 'cluster')('adds to thousands of events due in the same millisecond with a few Redis commands, not one per bucket', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const client = redis.client();
    const at = new Date(Date.now() + 3_600_000);
    for (let b = 0; b < 5; b++) {
      await firstValueFrom(service.enqueueBatch(Array.from({ length: 1_000 }, (_, i) => ({ event: new WorkItem(`same-${b}-${i}`), at }))));
    }
    const commandsFor = async (action: () => Promise<unknown>) => {
      await client.config('RESETSTAT');
      await action();
      const stats = await client.info('commandstats');
      return [...stats.matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)].filter(([, name]) => !/^(info|config)/.test(name!)).reduce((sum, [, , calls]) => sum + Number(calls), 0);
    };
    const perEnqueue: number[] = [];
    for (let i = 0; i < 300; i++) perEnqueue.push(await commandsFor(() => firstValueFrom(service.enqueueAt(new WorkItem(`late-${i}`), at))));
    // One at a time, 300 more events fill the open bucket and open new ones: the
    // script call plus its commands (one of them the idempotency-mark look), never
    // a look at each of the ~80 buckets.
    expect(Math.max(...perEnqueue)).toBeLessThanOrEqual(13);
    expect(await service.cancel(WorkItem, 'same-2-500')).toBe(true);
    expect(await service.cancel(WorkItem, 'late-150')).toBe(true);
    const schedule = scheduleOf(prefix);
    expect(await schedule.violations()).toEqual([]);
    const entries = await schedule.entries();
    expect(entries.size).toBe(5_298);
    expect(new Set(entries.values())).toEqual(new Set([at.getTime()]));
  });

  it('agrees with a model under random batches, replaces and cancels (property)', async () => {
    const ids = fc.integer({ min: 0, max: 299 }).map((n) => `e${n}`);
    // Few distinct due times, so many events share one and buckets split inside a millisecond.
    const dueSlot = fc.integer({ min: 0, max: 7 });
    const operation = fc.oneof(
      fc.record({ kind: fc.constant('batch' as const), entries: fc.array(fc.tuple(ids, dueSlot), { minLength: 1, maxLength: 150 }), replace: fc.boolean() }),
      // More events due in one millisecond than a bucket holds.
      fc.record({
        kind: fc.constant('batch' as const),
        entries: fc.tuple(fc.array(ids, { minLength: 100, maxLength: 250 }), dueSlot).map(([burst, slot]) => burst.map((id) => [id, slot] as [string, number])),
        replace: fc.boolean(),
      }),
      fc.record({ kind: fc.constant('one' as const), id: ids, slot: dueSlot, replace: fc.boolean() }),
      fc.record({ kind: fc.constant('cancel' as const), id: ids }),
      // A dispatch at the moment of a due slot, taking at most `limit`.
      fc.record({ kind: fc.constant('take' as const), slot: dueSlot, limit: fc.integer({ min: 1, max: 200 }) }),
    );
    // One client and one service at a time: a failing property reruns many cases while it shrinks.
    const client = redis.client();
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 12 }), async (operations) => {
        const prefix = redis.prefix();
        // The model is of the schedule alone: no idempotency marks, so a cancelled id may be stored again.
        const service = redis.service({ prefix, idempotencyWindowMs: 0 });
        const schedule = new ScheduleView(client, `${prefix}:{${TYPE}}`);
        try {
          const base = Date.now() + 3_600_000;
          const dueAt = (slot: number) => base + slot * 1_000;
          const model = new Map<string, number>();
          const store = (id: string, due: number, replace: boolean) => {
            if (replace || !model.has(id)) model.set(id, due);
          };
          for (const op of operations) {
            if (op.kind === 'batch') {
              const entries = op.entries.map(([id, slot]) => ({ event: new WorkItem(id), at: new Date(dueAt(slot)) }));
              await firstValueFrom(service.enqueueBatch(entries, { replace: op.replace }));
              for (const [id, slot] of op.entries) store(id, dueAt(slot), op.replace);
            } else if (op.kind === 'one') {
              await firstValueFrom(service.enqueueAt(new WorkItem(op.id), new Date(dueAt(op.slot)), { replace: op.replace }));
              store(op.id, dueAt(op.slot), op.replace);
            } else if (op.kind === 'cancel') {
              expect(await service.cancel(WorkItem, op.id)).toBe(model.delete(op.id));
            } else {
              // Earliest first: the ids taken are the earliest due, ties in any order.
              const now = dueAt(op.slot);
              const taken = await schedule.takeDue(now, op.limit);
              const dues = [...model.values()].filter((due) => due <= now).sort((a, b) => a - b);
              expect(taken.length).toBe(Math.min(op.limit, dues.length));
              expect(taken.map((id) => model.get(id)!).sort((a, b) => a - b)).toEqual(dues.slice(0, taken.length));
              for (const id of taken) model.delete(id);
              // A dispatcher would move them to the ready list, which this model leaves out: their envelopes go too.
              for (const id of taken) await client.hdel(`${prefix}:{${TYPE}}:m`, id);
            }
          }
          expect(await schedule.violations()).toEqual([]);
          expect(await schedule.entries()).toEqual(model);
          expect((await client.hkeys(`${prefix}:{${TYPE}}:m`)).sort()).toEqual([...model.keys()].sort());
        } finally {
          await service.close();
        }
      }),
      { numRuns: 100 },
    );
  }, 120_000);

  // A bucket's entries may reach the next bucket's earliest due, inclusive. When
  // such a bucket comes to start there too, it joins that bucket's group, and
  // only the group's last bucket by name may hold later entries: otherwise a
  // bucket starting between them later leaves those entries where no cancel or
  // replace looks. Three ways a bucket comes to start where another does:
  const joinings: Array<[string, (at: (slot: number) => Date, schedule: ScheduleView, service: DelayedEventService) => Promise<unknown>]> = [
    // the one below is split by an insert, and its part due at the next start gets a bucket of its own;
    ['an insert splits the bucket below it', (at, _, service) => firstValueFrom(service.enqueueBatch(Array.from({ length: 10 }, (_, i) => ({ event: new WorkItem(`inserted-${i}`), at: at(5) }))))],
    // the one below loses its earliest entries, by a cancel or by a dispatch.
    ['the bucket below loses its earliest entries to a cancel', (_, __, service) => Promise.all([service.cancel(WorkItem, 'first-0'), service.cancel(WorkItem, 'first-1')])],
    ['the bucket below loses its earliest entries to a dispatch', (at, schedule) => schedule.takeDue(at(0).getTime(), 2)],
  ];
  it.each(joinings)('finds every event after a bucket joins the buckets starting at the same time when %s', async (_, join) => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const schedule = scheduleOf(prefix);
    const base = Date.now() + 3_600_000;
    const at = (slot: number) => new Date(base + slot * 1_000);
    const batch = (name: string, count: number, slot: number) => Array.from({ length: count }, (_, i) => ({ event: new WorkItem(`${name}-${i}`), at: at(slot) }));
    // One bucket named for slot 20 ends up starting at slot 0, holding two
    // events due then and 62 due at slot 10: its name sorts after those of
    // buckets that start at slot 10.
    await firstValueFrom(service.enqueueBatch(batch('named-late', 30, 20)));
    await firstValueFrom(service.enqueueBatch([...batch('first', 2, 0), ...batch('ten', 30, 10)]));
    for (let i = 0; i < 30; i++) await service.cancel(WorkItem, `named-late-${i}`);
    // It fills up with events due at slot 10; the rest, and events due at
    // slot 15, open a bucket starting at slot 10.
    await firstValueFrom(service.enqueueBatch([...batch('more-ten', 40, 10), ...batch('fifteen', 10, 15)]));
    expect(await schedule.violations()).toEqual([]);

    await join(at, schedule, service);
    expect(await schedule.violations()).toEqual([]);
    // Buckets starting between slot 10 and slot 15 leave the events due at 15 findable.
    await firstValueFrom(service.enqueueBatch(batch('twelve', 70, 12)));
    expect(await service.cancel(WorkItem, 'fifteen-0')).toBe(true);
    await service.enqueue(new WorkItem('fifteen-1'), 7_200_000, { replace: true });
    expect(await schedule.violations()).toEqual([]);
    const entries = await schedule.entries();
    expect(entries.has('fifteen-0')).toBe(false);
    expect(entries.get('fifteen-1')).toBeGreaterThan(at(15).getTime());
    expect(entries.get('fifteen-2')).toBe(at(15).getTime());
  });

  it('hands every event to its handler once, not before it is due, when due times spread over many buckets', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const now = Date.now();
    const dues = new Map<string, number>();
    const entries = Array.from({ length: 3_000 }, (_, i) => {
      // A third overdue, a third due over the next 1.5 s, a third due together in 0.5 s.
      const at = i % 3 === 0 ? now - Math.floor(Math.random() * 5_000) : i % 3 === 1 ? now + Math.floor(Math.random() * 1_500) : now + 500;
      dues.set(`w${i}`, at);
      return { event: new WorkItem(`w${i}`), at: new Date(at) };
    });
    await firstValueFrom(service.enqueueBatch(entries));
    const handled = new Map<string, number>();
    const early: string[] = [];
    service.addHandler(
      WorkItem,
      (e) => {
        handled.set(e.id, (handled.get(e.id) ?? 0) + 1);
        // Both clocks are this host's: Redis's TIME fixed the due time, Date.now() reads it here.
        if (Date.now() < dues.get(e.id)!) early.push(e.id);
        return true;
      },
      32,
    );
    await waitFor(() => handled.size === 3_000, 'every event handled');
    await waitFor(async () => (await redis.keys(`${prefix}:{${TYPE}}:b*`)).length === 0, 'no schedule key left');
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
    expect(early).toEqual([]);
  });

  it('replaces or cancels an event whose envelope was corrupted by hand without leaving it scheduled twice', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const client = redis.client();
    // Enough events around it that its bucket is not the only one.
    await firstValueFrom(service.enqueueBatch(Array.from({ length: 400 }, (_, i) => ({ event: new WorkItem(`n${i}`), delay: 3_600_000 + i * 1_000 }))));
    for (const id of ['broken-replaced', 'broken-cancelled']) {
      await service.enqueue(new WorkItem(id, 1), 3_600_000 + 200_000);
      await client.hset(`${prefix}:{${TYPE}}:m`, id, 'not an envelope');
    }
    expect(await service.enqueue(new WorkItem('broken-replaced', 2), 7_200_000, { replace: true })).toBe('replaced');
    expect(await service.cancel(WorkItem, 'broken-cancelled')).toBe(true);
    const schedule = scheduleOf(prefix);
    expect(await schedule.violations()).toEqual([]);
    const entries = await schedule.entries();
    expect(entries.has('broken-cancelled')).toBe(false);
    expect(entries.get('broken-replaced')).toBeGreaterThan(Date.now() + 7_000_000);
  });

  it('appends to, inserts into, cancels and replaces in a full bucket of 128 as 0.3.0 wrote them', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const client = redis.client();
    const queue = `${prefix}:{${TYPE}}`;
    const start = Date.now() + 3_600_000;
    const dueOf = (i: number) => start + i * 10;
    // 0.3.0 filled buckets up to 128 entries; 0.3.1 opens buckets of at most 64.
    const ids = Array.from({ length: 128 }, (_, i) => `old-${i}`);
    await firstValueFrom(service.enqueueBatch(ids.map((id, i) => ({ event: new WorkItem(id), at: new Date(dueOf(i)) }))));
    for (const id of ids) await scheduleOf(prefix).remove(id);
    await client.zadd(`${queue}:b:${start}`, ...ids.flatMap((id, i) => [dueOf(i), id]));
    await client.zadd(`${queue}:b`, start, `${start}`);
    expect(await client.object('ENCODING', `${queue}:b:${start}`)).toBe('listpack');

    await firstValueFrom(service.enqueueAt(new WorkItem('after-last'), new Date(dueOf(200))));
    await firstValueFrom(service.enqueueAt(new WorkItem('in-between'), new Date(dueOf(64) + 5)));
    expect(await service.cancel(WorkItem, 'old-10')).toBe(true);
    await firstValueFrom(service.enqueueAt(new WorkItem('old-100', 2), new Date(dueOf(300)), { replace: true }));

    const schedule = scheduleOf(prefix);
    expect(await schedule.violations()).toEqual([]);
    const entries = await schedule.entries();
    expect(entries.size).toBe(129);
    expect(entries.has('old-10')).toBe(false);
    expect(entries.get('old-0')).toBe(dueOf(0));
    expect(entries.get('old-127')).toBe(dueOf(127));
    expect(entries.get('in-between')).toBe(dueOf(64) + 5);
    expect(entries.get('after-last')).toBe(dueOf(200));
    expect(entries.get('old-100')).toBe(dueOf(300));
  });

  it('still hands out, cancels and replaces events that 0.1 scheduled in its single sorted set', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const client = redis.client();
    const queue = `${prefix}:{${TYPE}}`;
    // 0.1 stored the same envelope in the meta hash and scheduled the id in `<queue>:s`.
    const legacy = async (id: string, due: number) => {
      await service.enqueue(new WorkItem(id, 1), 3_600_000);
      await scheduleOf(prefix).remove(id);
      await client.zadd(`${queue}:s`, due, id);
    };
    await legacy('old-due', Date.now() - 1_000);
    await legacy('old-cancelled', Date.now() + 3_600_000);
    await legacy('old-replaced', Date.now() + 3_600_000);

    expect(await service.cancel(WorkItem, 'old-cancelled')).toBe(true);
    expect(await service.enqueue(new WorkItem('old-replaced', 2), 0, { replace: true })).toBe('replaced');
    const handled: Array<[string, number]> = [];
    service.addHandler(WorkItem, (e) => (handled.push([e.id, e.n]), true), 4);
    await waitFor(() => handled.length === 2, 'both remaining events handled');
    expect(handled.sort()).toEqual([
      ['old-due', 1],
      ['old-replaced', 2],
    ]);
    expect(await client.exists(`${queue}:s`)).toBe(0);
    expect(await client.hlen(`${queue}:m`)).toBe(0);
  });
});
