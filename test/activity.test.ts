import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, InvalidArgumentError, PermanentFailure } from '../src';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

@DelayedEvent('test.timeline', { partitions: 3 })
class Reminder {
  constructor(readonly id: string = '') {}
}

@DelayedEvent('test.activity')
class Charge {
  constructor(readonly id: string = '') {}
}

describe('what falls due, and what the fleet did', () => {
  const redis = useRedis();

  it('dueTimeline counts the events falling due in each slot, across partitions, whatever the buckets', async () => {
    const service = redis.service();
    // 1,500 events over the next 50 minutes: many schedule buckets per partition, split at odd places.
    const delays = Array.from({ length: 1_500 }, (_, i) => 60_000 + ((i * 7_919) % 3_000_000));
    for (let i = 0; i < delays.length; i += 500) {
      await Promise.all(delays.slice(i, i + 500).map((delay, k) => service.enqueue(new Reminder(`r-${i + k}`), delay)));
    }
    const stored = [...(await service.list(Reminder, 'scheduled', { limit: 1_000 })), ...(await service.list(Reminder, 'scheduled', { offset: 1_000, limit: 1_000 }))];
    const dues = stored.map((e) => e.dueAt.getTime());
    expect(dues).toHaveLength(1_500);
    const timeline = (await service.dueTimeline(Reminder, { horizonMs: 3_600_000, slots: 12 }))!;
    expect(timeline.partial).toBe(false);
    expect(timeline.overdue).toBe(0);
    const expected = timeline.slots.map((slot) => dues.filter((due) => due >= slot.from.getTime() && due < slot.to.getTime()).length);
    expect(timeline.slots.map((s) => s.count)).toEqual(expected);
    expect(expected.reduce((a, b) => a + b, 0)).toBe(1_500);

    // By name, from another service: the same.
    const byName = (await redis.service({ prefix: service.prefix }).dueTimeline('test.timeline', { horizonMs: 3_600_000, slots: 12 }))!;
    expect(byName.slots.reduce((n, s) => n + s.count, 0)).toBe(1_500);
    expect(await service.dueTimeline('no.such.type')).toBeUndefined();
    await expect(service.dueTimeline(Reminder, { slots: 0 })).rejects.toThrow(InvalidArgumentError);
    await expect(service.dueTimeline(Reminder, { horizonMs: 10 })).rejects.toThrow(InvalidArgumentError);
  });

  it('dueTimeline counts what is overdue, for a paused type', async () => {
    const service = redis.service();
    await service.enqueue(new Charge('soon'), 10);
    await service.pause(Charge);
    service.addHandler(Charge, async () => undefined, 1);
    await waitFor(async () => (await service.dueTimeline(Charge))?.overdue === 1, 'one overdue event');
  });

  it('activity adds up what every instance enqueued, handled, failed and dead-lettered, per 10 s', async () => {
    const prefix = redis.prefix();
    const a = redis.service({ prefix });
    const b = redis.service({ prefix });
    for (const service of [a, b]) {
      service.addHandler(
        Charge,
        async (event) => {
          if (event.id.startsWith('bad')) throw new PermanentFailure('declined');
        },
        4,
      );
    }
    for (let i = 0; i < 20; i++) await (i % 2 ? a : b).enqueue(new Charge(`ok-${i}`), 0);
    for (let i = 0; i < 4; i++) await a.enqueue(new Charge(`bad-${i}`), 0);
    await waitFor(async () => {
      const counts = await a.counts(Charge);
      return counts?.dead === 4 && counts.scheduled + counts.ready + counts.inFlight === 0;
    }, 'all handled');
    // Each instance writes its counts every 10 s and when it closes.
    await a.close();
    await b.close();
    const reader = redis.service({ prefix });
    const slots = await reader.activity('test.activity', 60_000);
    const sum = (field: 'enqueued' | 'handled' | 'failed' | 'deadLettered') => slots.reduce((n, s) => n + s[field], 0);
    expect({ enqueued: sum('enqueued'), handled: sum('handled'), failed: sum('failed'), deadLettered: sum('deadLettered') }).toEqual({ enqueued: 24, handled: 20, failed: 4, deadLettered: 4 });
    expect(slots.length).toBeGreaterThanOrEqual(6);
    expect(slots.every((s, i) => i === 0 || s.at.getTime() - slots[i - 1]!.at.getTime() === 10_000)).toBe(true);
    const late = slots.filter((s) => s.latenessP99Ms !== undefined);
    expect(late.length).toBeGreaterThan(0);
    for (const s of late) expect(s.latenessP50Ms!).toBeLessThanOrEqual(s.latenessP99Ms!);
    await expect(reader.activity(Charge, 2 * 3_600_000)).rejects.toThrow(InvalidArgumentError);
  });

  it('with recordActivity false, an instance writes nothing of it', async () => {
    const service = redis.service({ recordActivity: false });
    service.addHandler(Charge, async () => undefined, 1);
    await service.enqueue(new Charge('quiet'), 0);
    await waitFor(async () => (await service.counts(Charge))?.scheduled === 0 && (await service.counts(Charge))?.ready === 0 && (await service.counts(Charge))?.inFlight === 0, 'handled');
    const prefix = service.prefix;
    await service.close();
    expect(await redis.keys(`${prefix}:*:a:*`)).toEqual([]);
  });
});
