import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, InvalidArgumentError, InvalidOptionError, type Inspector, PermanentFailure, ServiceClosedError, createInspector, fixedBackoff } from '../src';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

@DelayedEvent('test.inspector')
class Charge {
  constructor(
    readonly id: string = '',
    readonly amount: number = 0,
  ) {}
}

@DelayedEvent('test.inspector-hot', { partitions: 3 })
class HotCharge {
  constructor(
    readonly id: string = '',
    readonly amount: number = 0,
  ) {}
}

/**
 * createInspector() is what tools stand on (the CLI, the dashboard, an
 * operator's script): it must see and steer everything a service stored with
 * none of the service's event classes, by type name alone.
 */
describe('createInspector: inspection without the event classes', () => {
  const redis = useRedis();

  function inspectorOn(prefix: string): Inspector {
    return createInspector({ redis: redis.connection(), prefix });
  }

  it('sees each state, the dead letters and the groups of what a service stored, and steers it by type name', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const inspector = inspectorOn(prefix);
    try {
      service.addHandler(
        Charge,
        (event) => {
          if (event.id === 'bad') throw new PermanentFailure('card declined');
          return true;
        },
        1,
        { retry: fixedBackoff(10, 1) },
      );
      await service.enqueue(new Charge('later', 5), { hours: 1 });
      await service.enqueue(new Charge('bad', 7), 0);
      await waitFor(async () => (await inspector.deadLetters('test.inspector')).length === 1, 'the dead letter');

      const [info] = (await inspector.types()).filter((t) => t.type === 'test.inspector');
      expect(info).toMatchObject({ type: 'test.inspector', partitions: 1, paused: false });
      expect(await inspector.counts('test.inspector')).toMatchObject({ scheduled: 1, ready: 0, inFlight: 0, dead: 1, waiting: 0 });

      const later = await inspector.find('test.inspector', 'later');
      expect(later).toMatchObject({ id: 'later', state: 'scheduled', attempt: 0, event: { id: 'later', amount: 5 } });
      expect((await inspector.list('test.inspector', 'scheduled')).map((e) => e.id)).toEqual(['later']);

      const [dead] = await inspector.deadLetters('test.inspector');
      expect(dead).toMatchObject({ id: 'bad', attempts: 1, event: { id: 'bad', amount: 7 } });
      expect(dead!.error).toContain('card declined');

      // Steering by name reaches the service's handlers.
      expect(await inspector.runNow('test.inspector', 'later')).toBe(true);
      await waitFor(async () => (await inspector.find('test.inspector', 'later')) === undefined, 'the event run now to be handled');
      expect(await inspector.replayDeadLetters('test.inspector')).toBe(1);
      await waitFor(async () => (await inspector.deadLetters('test.inspector')).length === 1 && (await inspector.counts('test.inspector'))?.scheduled === 0, 'the replayed event dead again');
      expect(await inspector.purgeDeadLetters('test.inspector', ['bad'])).toBe(1);
      // Nothing left under the name: it is no type in use any more.
      expect(await inspector.counts('test.inspector')).toBeUndefined();

      // Pause and cancel, seen by the service too.
      await service.enqueue(new Charge('held', 1), { hours: 1 });
      expect(await inspector.pause('test.inspector')).toBe(true);
      expect(await service.isPaused(Charge)).toBe(true);
      expect(await inspector.resume('test.inspector')).toBe(true);
      expect(await inspector.isPaused('test.inspector')).toBe(false);
      expect(await inspector.reschedule('test.inspector', 'held', { hours: 2 })).toBe(true);
      expect(await inspector.cancel('test.inspector', 'held')).toBe(true);
      expect(await service.find(Charge, 'held')).toBeUndefined();
      expect(await inspector.health()).toMatchObject({ ready: true, redis: 'up' });
    } finally {
      await inspector.close();
      await service.close();
    }
  });

  it('finds a partitioned type by name, counts its timeline and activity, and lists and removes its schedules', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const inspector = inspectorOn(prefix);
    try {
      for (let i = 0; i < 30; i++) await service.enqueue(new HotCharge(`h${i}`, i), 60_000 + i * 1_000);
      await service.schedule('nightly', new HotCharge('', 1), { cron: '0 3 * * *', tz: 'UTC' });

      const [info] = (await inspector.types()).filter((t) => t.type === 'test.inspector-hot');
      expect(info!.partitions).toBe(3);
      expect((await inspector.counts('test.inspector-hot'))?.scheduled).toBe(30);
      const page = await inspector.list('test.inspector-hot', 'scheduled', { limit: 10, offset: 5 });
      expect(page.map((e) => e.id)).toEqual(Array.from({ length: 10 }, (_, i) => `h${i + 5}`));
      const timeline = await inspector.dueTimeline('test.inspector-hot', { horizonMs: 120_000, slots: 2 });
      expect(timeline!.slots.reduce((n, s) => n + s.count, 0)).toBe(30);
      expect(Array.isArray(await inspector.activity('test.inspector-hot'))).toBe(true);

      const schedules = await inspector.schedules('test.inspector-hot');
      expect(schedules.map((s) => s.name)).toEqual(['nightly']);
      expect(await inspector.unschedule('test.inspector-hot', 'nightly')).toBe(true);
      expect(await service.schedules(HotCharge)).toEqual([]);
    } finally {
      await inspector.close();
      await service.close();
    }
  });

  it('answers undefined, false or empty for a type nothing is stored under, and refuses bad input with a typed error', async () => {
    const inspector = inspectorOn(redis.prefix());
    try {
      expect(await inspector.counts('test.nothing')).toBeUndefined();
      expect(await inspector.find('test.nothing', 'x')).toBeUndefined();
      expect(await inspector.list('test.nothing', 'ready')).toEqual([]);
      expect(await inspector.deadLetters('test.nothing')).toEqual([]);
      expect(await inspector.pause('test.nothing')).toBe(false);
      expect(await inspector.schedules('test.nothing')).toEqual([]);
      await expect(inspector.list('test.nothing', 'ready', { limit: 0 })).rejects.toThrow(InvalidArgumentError);
      await expect(inspector.deadLetters('test.nothing', { limit: 0 })).rejects.toThrow(InvalidArgumentError);
      await expect(inspector.list('test.nothing', 'ready', { group: 'a b' })).rejects.toThrow(InvalidArgumentError);
      await expect(inspector.replayDeadLetters('test.nothing', undefined, { group: 'a b' })).rejects.toThrow(InvalidArgumentError);
      await expect(inspector.find('bad{type}', 'x')).rejects.toThrow(InvalidArgumentError);
      expect(() => createInspector({ redis: 'http://127.0.0.1:1' })).toThrow(InvalidOptionError);
    } finally {
      await inspector.close();
    }
    await expect(inspector.counts('test.nothing')).rejects.toThrow(ServiceClosedError);
  });

  it("cancels as the service does: a late re-send of the cancelled event's enqueue is a duplicate", async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const inspector = inspectorOn(prefix);
    try {
      await service.enqueue(new Charge('sent-twice', 1), { hours: 1 });
      expect(await inspector.cancel('test.inspector', 'sent-twice')).toBe(true);
      expect(await service.enqueue(new Charge('sent-twice', 1), { hours: 1 })).toBe('duplicate');
      expect(await service.find(Charge, 'sent-twice')).toBeUndefined();
    } finally {
      await inspector.close();
      await service.close();
    }
  });

  it('leaves a client handed in open when it closes', async () => {
    const client = redis.client();
    const inspector = createInspector({ redis: client, prefix: redis.prefix() });
    expect(await inspector.types()).toEqual([]);
    await inspector.close();
    expect(await client.ping()).toBe('PONG');
  });
});
