import { describe, expect, it } from 'vitest';
import { DelayedEvent, InvalidArgumentError, InvalidOptionError, TypeInUseError, fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { Worker } from './support/worker';
import { waitFor } from './support/wait-for';

@DelayedEvent('test.chore')
class Chore {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
  ) {}
}

@DelayedEvent('test.chore-split', { partitions: 3 })
class SplitChore {
  constructor(readonly id: string = '') {}
}

@DelayedEvent('test.bystander')
class Bystander {
  constructor(readonly id: string = '') {}
}

/** A handler that holds each call until released, so that events wait READY behind it. */
function gate() {
  const started: string[] = [];
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const handled: string[] = [];
  return {
    started,
    handled,
    open,
    handler: async (event: { id: string }) => {
      started.push(event.id);
      await opened;
      handled.push(event.id);
    },
  };
}

/**
 * Housekeeping since 0.6: dead-letter retention (keepDead), and the bulk
 * clean-up a BullMQ user reaches for (drain, clean, obliterate), safe beside
 * running handlers and enqueues.
 */
describe('housekeeping', () => {
  const redis = useRedis();
  const quiet = { logger: false as const };
  const fail = () => {
    throw new Error('always fails');
  };

  it('keepDead.count keeps the newest dead letters, and their bodies go with the others', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, ...quiet, retry: fixedBackoff(1, 10), keepDead: { count: 5 } });
    service.addHandler(Chore, fail, { parallelism: 1 });
    for (let i = 0; i < 12; i++) {
      await service.enqueue(new Chore(`c${i}`, i), 0);
      // One at a time, so that the dead-lettering order is the enqueue order.
      await waitFor(async () => (await service.find(Chore, `c${i}`))?.state === 'dead', `c${i} dead-lettered`);
    }
    const kept = (await service.deadLetters(Chore)).map((l) => l.id).sort();
    expect(kept).toEqual(['c10', 'c11', 'c7', 'c8', 'c9']);
    const client = redis.client();
    expect(await client.hlen(`${prefix}:{test.chore}:m`)).toBe(5);
    expect(await client.hlen(`${prefix}:{test.chore}:e`)).toBe(5);
    expect(await client.hlen(`${prefix}:{test.chore}:el`)).toBe(5);
  }, 60_000);

  it('keepDead.ageMs drops old dead letters as time passes, with no new failure; a handler keepDead overrides the service', async () => {
    const prefix = redis.prefix();
    // The service keeps all; the handler's group keeps them 300 ms.
    const service = redis.service({ prefix, ...quiet, retry: fixedBackoff(1, 10) });
    service.addHandler(Chore, fail, { keepDead: { ageMs: 300 } });
    await service.enqueueMany([0, 1, 2].map((i) => ({ event: new Chore(`old${i}`) })));
    await waitFor(async () => (await service.counts(Chore))?.dead === 3, 'three dead letters');
    // Nothing fails any more: the dispatcher's looks drop them once older than 300 ms.
    await waitFor(async () => (await service.counts(Chore))?.dead === 0, 'the dead letters past their age dropped', 10_000);
    expect(await redis.client().hlen(`${prefix}:{test.chore}:m`)).toBe(0);
  }, 30_000);

  it('keepDead in a named group trims its own dead letters; the body stays while another group holds the event', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, ...quiet, retry: fixedBackoff(1, 10) });
    const slow = gate();
    service.addHandler(Chore, fail, { group: 'billing', keepDead: { count: 1 } });
    service.addHandler(Chore, slow.handler, { group: 'audit' });
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.chore}:groups`)) >= 2, 'groups registered');
    await service.enqueueMany([{ event: new Chore('a') }, { event: new Chore('b') }]);
    await waitFor(async () => (await service.deadLetters(Chore, { group: 'billing' })).length === 1 && slow.started.length >= 1, 'billing kept one dead letter');
    await waitFor(async () => (await service.counts(Chore))?.groups?.billing?.dead === 1, 'billing: one dead letter');
    // audit still holds both: their bodies stay.
    expect(await redis.client().hlen(`${prefix}:{test.chore}:m`)).toBe(2);
    slow.open();
    await waitFor(async () => slow.handled.length === 2, 'audit handled both');
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.chore}:m`)) === 1, 'only the kept dead letter keeps its body');
  }, 30_000);

  it('drain removes the schedule and every READY event, leaves the one in flight, dead letters and other types alone, and writes no mark', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, ...quiet, retry: fixedBackoff(1, 10) });
    const held = gate();
    service.addHandler(Chore, held.handler, { parallelism: 1, prefetch: 0 });
    await service.enqueue(new Chore('first'), 0);
    await waitFor(() => held.started.length === 1, 'first in flight');
    await service.enqueueMany(Array.from({ length: 300 }, (_, i) => ({ event: new Chore(`now${i}`) })));
    await service.enqueueMany(Array.from({ length: 2_500 }, (_, i) => ({ event: new Chore(`later${i}`), delay: 3_600_000 + i })));
    await service.enqueue(new Bystander('other'), 3_600_000);
    await waitFor(async () => (await service.counts(Chore))?.ready === 300, '300 ready');

    expect(await service.drain(Chore)).toBe(2_800);
    const counts = await service.counts(Chore);
    expect(counts).toMatchObject({ scheduled: 0, ready: 0, inFlight: 1, dead: 0, waiting: 0 });
    expect((await service.counts(Bystander))?.scheduled).toBe(1);
    held.open();
    await waitFor(() => held.handled.length === 1, 'the event in flight completed');
    expect(held.handled).toEqual(['first']);
    // No idempotency mark: a drained id may be enqueued again at once.
    expect(await service.enqueue(new Chore('later7'), 0)).toBe('scheduled');
    await waitFor(() => held.handled.includes('later7'), 'enqueued again and handled');
    expect(await redis.client().hlen(`${prefix}:{test.chore}:m`)).toBe(0);
  }, 60_000);

  it('drain with a group takes only its READY deliveries and retries; other groups keep theirs', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(5, 3_600_000) });
    service.addHandler(Chore, fail, { group: 'billing' });
    const audit = gate();
    service.addHandler(Chore, audit.handler, { group: 'audit', parallelism: 1, prefetch: 0 });
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.chore}:groups`)) >= 2, 'groups registered');
    await service.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ event: new Chore(`g${i}`) })));
    // billing fails each once: 20 retries an hour away; audit holds one in flight, 19 READY.
    await waitFor(async () => {
      const groups = (await service.counts(Chore))?.groups;
      return groups?.billing?.scheduled === 20 && groups?.audit?.ready === 19;
    }, 'billing retries scheduled, audit ready');
    expect(await service.drain(Chore, { group: 'billing' })).toBe(20);
    const groups = (await service.counts(Chore))?.groups;
    expect(groups?.billing).toMatchObject({ scheduled: 0, ready: 0 });
    expect(groups?.audit).toMatchObject({ ready: 19, inFlight: 1 });
    audit.open();
    await waitFor(() => audit.handled.length === 20, 'audit handled all 20');
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.chore}:m`)) === 0, 'bodies gone with the last group');
  }, 30_000);

  it('drain of the default group takes its READY events, retries and snoozed deliveries, and leaves what never ran', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, ...quiet, retry: fixedBackoff(5, 3_600_000) });
    const ran = new Set<string>();
    service.addHandler(Chore, (event: Chore, _context, delivery) => {
      ran.add(event.id);
      if (event.id.startsWith('snooze')) return delivery.snooze(3_600_000);
      throw new Error('not yet');
    });
    await service.enqueueMany([...Array.from({ length: 5 }, (_, i) => ({ event: new Chore(`retry${i}`) })), ...Array.from({ length: 3 }, (_, i) => ({ event: new Chore(`snooze${i}`) }))]);
    // Each ran once: five retries and three snoozes an hour away, in the type's schedule beside new events.
    // Every one ran (none is still waiting for its first dispatch) and its result is written (none in flight).
    await waitFor(async () => {
      const counts = await service.counts(Chore);
      return ran.size === 8 && counts?.scheduled === 8 && counts.inFlight === 0 && counts.ready === 0;
    }, 'ran once each');
    await service.enqueueMany(Array.from({ length: 600 }, (_, i) => ({ event: new Chore(`new${i}`), delay: 3_600_000 + i })));
    expect(await service.drain(Chore, { group: 'default' })).toBe(8);
    const left = await service.list(Chore, 'scheduled', { limit: 1_000 });
    expect(left).toHaveLength(600);
    expect(left.every((e) => e.id.startsWith('new'))).toBe(true);
  }, 30_000);

  it('drain under load: enqueues and handlers running; every event is handled once or drained, none twice', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const handled = new Map<string, number>();
    service.addHandler(
      Chore,
      async (event: Chore) => {
        handled.set(event.id, (handled.get(event.id) ?? 0) + 1);
      },
      { parallelism: 8 },
    );
    let stop = false;
    let enqueued = 0;
    const producing = (async () => {
      while (!stop) {
        await service.enqueueMany(Array.from({ length: 100 }, (_, i) => ({ event: new Chore(`l${enqueued + i}`), delay: i % 50 })));
        enqueued += 100;
      }
    })();
    await waitFor(() => handled.size > 500, 'handling under way');
    let drained = 0;
    for (let i = 0; i < 5; i++) drained += await service.drain(Chore);
    stop = true;
    await producing;
    await waitFor(
      async () => {
        const c = await service.counts(Chore);
        return c !== undefined && c.scheduled + c.ready + c.inFlight === 0;
      },
      'nothing left waiting',
      20_000,
    );
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
    expect(handled.size + drained).toBe(enqueued);
  }, 60_000);

  it('clean drops dead letters and history records older than olderThanMs, oldest first, at most limit', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, ...quiet, retry: fixedBackoff(1, 10), keepHandled: { count: 100 } });
    service.addHandler(Chore, (event: Chore) => {
      if (event.n < 0) throw new Error('negative');
    });
    await service.enqueueMany(Array.from({ length: 10 }, (_, i) => ({ event: new Chore(`bad${i}`, -1) })));
    await service.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ event: new Chore(`good${i}`, 1) })));
    await waitFor(async () => (await service.counts(Chore))?.dead === 10 && (await service.list(Chore, 'handled')).length === 6, 'ten dead, six handled');
    // Nothing is that old yet.
    expect(await service.clean(Chore, 'dead', { olderThanMs: 3_600_000 })).toBe(0);
    expect(await service.clean(Chore, 'dead', { olderThanMs: 0, limit: 4 })).toBe(4);
    expect((await service.counts(Chore))?.dead).toBe(6);
    expect(await service.clean(Chore, 'dead', { olderThanMs: 0 })).toBe(6);
    expect(await service.clean('test.chore', 'handled', { olderThanMs: 0 })).toBe(6);
    expect((await service.counts(Chore))?.dead).toBe(0);
    expect(await service.list(Chore, 'handled')).toEqual([]);
    expect(await redis.client().hlen(`${prefix}:{test.chore}:m`)).toBe(0);
  }, 30_000);

  it('obliterate refuses while an instance handles the type, and with force removes every key; running instances do not bring it back', async () => {
    const prefix = redis.prefix();
    const running = redis.service({ prefix, ...quiet, retry: fixedBackoff(1, 10) });
    running.addHandler(SplitChore, () => undefined, { group: 'billing', rateLimit: { max: 1000, perMs: 1000 } });
    const producer = redis.service({ prefix });
    await waitFor(async () => (await producer.types()).some((t) => t.type === 'test.chore-split'), 'type registered');
    await producer.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ event: new SplitChore(`s${i}`), delay: 3_600_000 })));
    await producer.schedule('nightly', new SplitChore(), { every: 3_600_000 });
    await producer.pause(SplitChore);

    const refused = await producer.obliterate(SplitChore).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TypeInUseError);
    expect((refused as TypeInUseError).code).toBe('TYPE_IN_USE');
    expect((await producer.counts(SplitChore))?.scheduled).toBeGreaterThan(0);

    expect(await producer.obliterate(SplitChore, { force: true })).toBe(true);
    const left = async () => (await redis.keys(`${prefix}:{test.chore-split*`)).filter((key) => !key.endsWith(':gone') && !/:c:/.test(key) && !key.endsWith(':fc') && !key.endsWith(':rl'));
    expect(await left()).toEqual([]);
    expect(await producer.types()).not.toContainEqual(expect.objectContaining({ type: 'test.chore-split' }));
    expect(await producer.schedules(SplitChore)).toEqual([]);

    // The running instance looks again and again: an event enqueued now reaches the default group's
    // ready list (no group is registered), which proves its dispatchers looked after the obliterate.
    await producer.enqueue(new SplitChore('after'), 0);
    await waitFor(async () => (await producer.counts(SplitChore))?.ready === 1, 'dispatched to the default group');
    expect(await redis.keys(`${prefix}:{test.chore-split*}:groups`)).toEqual([]);
    expect(await producer.schedules(SplitChore)).toEqual([]);

    // A handler added afterwards starts it again.
    const fresh = redis.service({ prefix });
    fresh.addHandler(SplitChore, () => undefined, { group: 'audit' });
    await waitFor(async () => (await redis.keys(`${prefix}:{test.chore-split*}:groups`)).length === 3, 'registered again in every partition');
    expect(await redis.keys(`${prefix}:{test.chore-split*}:gone`)).toEqual([]);
  }, 60_000);

  it('obliterate across processes: refused while another process handles the type, named with its pid; forced, that process does not bring it back; a process started after does', async () => {
    const prefix = redis.prefix();
    const env = { ...redis.workerEnv(), PREFIX: prefix, GROUP: 'billing' };
    const worker = new Worker(env);
    let restarted: Worker | undefined;
    try {
      await worker.waitForLine((line) => line.ready === true);
      const admin = redis.service({ prefix });
      const groups = () => redis.keys(`${prefix}:{test.work}:groups`);
      await waitFor(async () => (await groups()).length === 1, 'billing registered by the other process');
      await admin.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ event: new WorkItem(`later${i}`), delay: 3_600_000 })));

      const refused = await admin.obliterate(WorkItem).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(TypeInUseError);
      expect((refused as TypeInUseError).instances.join(' ')).toContain(String(worker.pid));
      expect((await admin.counts(WorkItem))?.scheduled).toBe(30);

      expect(await admin.obliterate(WorkItem, { force: true })).toBe(true);
      // The other process's dispatcher finds the marker gone; it moves this event (to the default group: none
      // is registered), which proves it looked, and registers nothing again.
      await admin.enqueue(new WorkItem('warm-after'), 0);
      await waitFor(async () => (await admin.counts(WorkItem))?.ready === 1, 'the other process dispatched after the obliterate');
      expect(await groups()).toEqual([]);
      expect(worker.lines.some((line) => line.started === 'warm-after')).toBe(false);

      // A process started afterwards adds its handler: the type starts again, and its group gets what falls due.
      await worker.kill();
      restarted = new Worker(env);
      await restarted.waitForLine((line) => line.ready === true);
      await waitFor(async () => (await groups()).length === 1, 'billing registered again by the new process');
      await admin.enqueue(new WorkItem('warm-new'), 0);
      await restarted.waitForLine((line) => line.started === 'warm-new');
    } finally {
      await worker.kill();
      await restarted?.kill();
    }
  }, 60_000);

  it('after obliterate, a handler added elsewhere starts the type again: instances still running register their groups, saying so, not as a data loss', async () => {
    const prefix = redis.prefix();
    const records: Array<{ level: string; message: string }> = [];
    const logger = {
      warn: (_: object, message: string) => void records.push({ level: 'warn', message }),
      error: (_: object, message: string) => void records.push({ level: 'error', message }),
      info: (_: object, message: string) => void records.push({ level: 'info', message }),
    };
    const running = redis.service({ prefix, logger });
    running.addHandler(Chore, () => undefined, { group: 'billing' });
    const groups = () => redis.client().hkeys(`${prefix}:{test.chore}:groups`);
    await waitFor(async () => (await groups()).includes('billing'), 'billing registered');
    const admin = redis.service({ prefix });
    expect(await admin.obliterate(Chore, { force: true })).toBe(true);
    const fresh = redis.service({ prefix });
    fresh.addHandler(Chore, () => undefined, { group: 'audit' });
    await waitFor(async () => (await groups()).sort().join() === 'audit,billing', 'both groups registered again');
    expect(records.some((r) => r.level === 'info' && /obliterated and a handler started it again/.test(r.message))).toBe(true);
    expect(records.filter((r) => /Redis lost what this instance had registered/.test(r.message))).toEqual([]);
  }, 30_000);

  it('a schedule defined after obliterate starts the type again and is restored after a data loss', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    await service.schedule('nightly', new Chore(), { every: 3_600_000 });
    expect(await service.obliterate(Chore, { force: true })).toBe(true);
    expect(await service.schedules(Chore)).toEqual([]);
    expect(await redis.client().exists(`${prefix}:{test.chore}:gone`)).toBe(1);
    await service.schedule('hourly', new Chore(), { every: 3_600_000 });
    expect(await redis.client().exists(`${prefix}:{test.chore}:gone`)).toBe(0);
    // Redis loses the type's data: the schedule defined after the obliterate is stored again by its instance.
    const keys = await redis.keys(`${prefix}:{test.chore}*`);
    await redis.client().del(...keys);
    await waitFor(async () => (await service.schedules(Chore)).map((s) => s.name).join() === 'hourly', 'hourly restored', 15_000);
  }, 30_000);

  it('keepDead.ageMs trims while the type is paused: a pause stops deliveries, not retention', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, ...quiet, retry: fixedBackoff(1, 10), keepDead: { ageMs: 300 } });
    service.addHandler(Chore, fail);
    await service.enqueueMany([{ event: new Chore('p0') }, { event: new Chore('p1') }]);
    await waitFor(async () => (await service.counts(Chore))?.dead === 2, 'two dead letters');
    await service.pause(Chore);
    await waitFor(async () => (await service.counts(Chore))?.dead === 0, 'trimmed while paused');
    expect(await service.isPaused(Chore)).toBe(true);
  }, 30_000);

  it('obliterate of a type nothing is stored under resolves false; after the handlers stop it needs no force', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    expect(await service.obliterate('test.nothing-here')).toBe(false);
    service.addHandler(Chore, () => undefined);
    await service.enqueue(new Chore('x'), 3_600_000);
    await expect(service.obliterate(Chore)).rejects.toBeInstanceOf(TypeInUseError);
    await service.removeHandler(Chore);
    expect(await service.obliterate(Chore)).toBe(true);
    expect(await service.counts('test.chore')).toBeUndefined();
  }, 30_000);

  it('enqueue takes a Date; enqueueMany is enqueueBatch as a Promise; addHandler takes parallelism in its options', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    expect(await service.enqueue(new Chore('dated'), new Date(Date.now() + 3_600_000))).toBe('scheduled');
    const found = await service.find(Chore, 'dated');
    expect(found?.dueAt.getTime()).toBeGreaterThan(Date.now() + 3_500_000);
    // A past date means now.
    const seen: string[] = [];
    let running = 0;
    let most = 0;
    let allThree: () => void = () => undefined;
    const threeRunning = new Promise<void>((resolve) => (allThree = resolve));
    service.addHandler(
      Chore,
      async (event: Chore) => {
        running++;
        most = Math.max(most, running);
        if (running === 3) allThree();
        // Each call waits for the other two: only three at once lets them end.
        await threeRunning;
        seen.push(event.id);
        running--;
      },
      { parallelism: 3, prefetch: 0 },
    );
    expect(await service.enqueue(new Chore('past'), new Date(Date.now() - 60_000))).toBe('scheduled');
    expect(await service.enqueueMany([{ event: new Chore('m1') }, { event: new Chore('m2'), at: new Date(0) }, { event: new Chore('past') }])).toEqual(['scheduled', 'scheduled', 'duplicate']);
    expect(await service.enqueueMany([])).toEqual([]);
    await waitFor(() => seen.length === 3, 'the three due now handled');
    expect(most).toBe(3);
  }, 30_000);

  it('bad input is a typed error that names what to fix, and nothing is stored or removed', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    await service.enqueue(new Chore('kept'), 3_600_000);
    const Bad = InvalidOptionError;
    expect(() => service.addHandler(Chore, () => undefined, 2, { parallelism: 2 })).toThrow(/parallelism.*given twice/);
    expect(() => service.addHandler(Chore, () => undefined, { parallelism: 0 })).toThrow(Bad);
    expect(() => service.addHandler(Chore, () => undefined, { keepDead: { cout: 5 } as never })).toThrow(/cout/);
    expect(() => service.addHandler(Chore, () => undefined, { keepDead: {} })).toThrow(/count, ageMs or both/);
    expect(() => service.addHandler(Chore, () => undefined, { keepDead: { count: 0 } })).toThrow(Bad);
    expect(() => service.addHandler(Chore, () => undefined, { keepDead: { count: 1_000_001 } })).toThrow(Bad);
    expect(() => service.addHandler(Chore, () => undefined, { keepDead: { ageMs: 1.5 } })).toThrow(Bad);
    expect(() => redis.service({ keepDead: { agems: 5 } as never })).toThrow(/agems/);
    expect(() => redis.service({ keepDead: 5 as never })).toThrow(Bad);
    // The ends of the ranges are taken.
    expect(() => redis.service({ keepDead: { count: 1_000_000, ageMs: 366 * 86_400_000 } })).not.toThrow();
    expect(() => redis.service({ keepDead: false })).not.toThrow();
    await expect(service.drain(Chore, { gruop: 'x' } as never)).rejects.toThrow(/gruop/);
    await expect(service.drain(Chore, { group: 'no spaces' })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.clean(Chore, 'dead', {} as never)).rejects.toThrow(/olderThanMs.*required/);
    await expect(service.clean(Chore, 'ready' as never, { olderThanMs: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.clean(Chore, 'dead', { olderThanMs: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.clean(Chore, 'dead', { olderThanMs: 0, limit: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.clean(Chore, 'dead', { olderThanMs: 0, limt: 5 } as never)).rejects.toThrow(/limt/);
    await expect(service.obliterate(Chore, { forse: true } as never)).rejects.toThrow(/forse/);
    await expect(service.obliterate(Chore, { force: 'yes' } as never)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.enqueueMany('x' as never)).rejects.toThrow(/enqueueMany entries/);
    await expect(service.enqueueMany([{ event: new Chore('y') }], { replce: true } as never)).rejects.toThrow(/enqueueMany/);
    await expect(service.enqueueMany([{ event: new Chore('y'), delai: 5 } as never])).rejects.toThrow(/delai/);
    await expect(service.enqueue(new Chore('z'), new Date(Number.NaN))).rejects.toThrow(/valid Date/);
    expect((await service.counts(Chore))?.scheduled).toBe(1);
  });
});
