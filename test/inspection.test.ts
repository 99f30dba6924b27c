import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, type DelayedEventService, InvalidArgumentError, InvalidDelayError, METRIC, type Metric, PermanentFailure, fixedBackoff } from '../src';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

@DelayedEvent('test.inspect')
class Inspected {
  constructor(
    readonly id: string = '',
    readonly amount: number = 0,
  ) {}
}

@DelayedEvent('test.inspect-hot', { partitions: 4 })
class HotInspected {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
  ) {}
}

@DelayedEvent('test.inspect-other')
class Sentinel {
  constructor(readonly id: string = '') {}
}

describe('inspection and control', () => {
  const redis = useRedis();

  const snapshot = (prefix: string) => redis.snapshot(prefix);

  /**
   * One event in each state: 'dead' dead-lettered, 'running' in flight (its
   * handler waits on `release`), 'r1' and 'r2' ready (the one slot is taken),
   * 's1' scheduled an hour ahead.
   */
  async function eachState(service: DelayedEventService) {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let running = false;
    service.addHandler(
      Inspected,
      async (event) => {
        if (event.id === 'dead') throw new PermanentFailure('declined');
        if (event.id === 'running') {
          running = true;
          await gate;
        }
      },
      1,
      // Claiming only for the free slot: the events behind the running one stay ready.
      { retry: fixedBackoff(3, 10), prefetch: 0 },
    );
    await service.enqueue(new Inspected('dead', 1), 0, { context: { tenant: 'acme' } });
    await waitFor(async () => (await service.counts(Inspected))?.dead === 1, 'the dead letter');
    await service.enqueue(new Inspected('running', 2), 0);
    await waitFor(() => running, 'the handler running');
    await service.enqueue(new Inspected('r1', 3), 0);
    await service.enqueue(new Inspected('r2', 4), 1);
    await waitFor(async () => (await service.counts(Inspected))?.ready === 2, 'two ready events');
    await service.enqueue(new Inspected('s1', 5), 3_600_000, { context: { trace: 't-1' } });
    return release;
  }

  it('counts, finds and lists an event in every state, by class and by type name', async () => {
    const service = redis.service({ pollIntervalMs: 100 });
    const release = await eachState(service);
    // With events ready, how long the oldest of them has waited since it fell due.
    const expected = { scheduled: 1, ready: 2, inFlight: 1, dead: 1, waiting: 0, oldestReadyMs: expect.any(Number) };
    expect(await service.counts(Inspected)).toEqual(expected);
    expect(await service.counts('test.inspect')).toEqual(expected);

    const s1 = await service.find(Inspected, 's1');
    expect(s1).toMatchObject({ id: 's1', state: 'scheduled', attempt: 0, context: { trace: 't-1' }, lastError: undefined });
    expect(s1?.event).toBeInstanceOf(Inspected);
    expect(s1?.event?.amount).toBe(5);
    expect(s1!.dueAt.getTime()).toBeGreaterThan(Date.now() + 3_500_000);
    expect(Math.abs(s1!.enqueuedAt!.getTime() - Date.now())).toBeLessThan(60_000);
    expect((await service.find(Inspected, 'r1'))?.state).toBe('ready');
    const running = await service.find(Inspected, 'running');
    expect(running).toMatchObject({ state: 'in-flight', attempt: 1 });
    expect(running!.leaseExpiresAt!.getTime()).toBeGreaterThan(Date.now());
    const dead = await service.find(Inspected, 'dead');
    expect(dead).toMatchObject({ state: 'dead', attempt: 1, context: { tenant: 'acme' } });
    expect(dead?.lastError).toMatch(/declined/);
    expect(dead?.deadLetteredAt).toBeInstanceOf(Date);

    // By type name: the payload as parsed JSON, with its id.
    const byName = await service.find('test.inspect', 's1');
    expect(byName).toMatchObject({ state: 'scheduled', event: { id: 's1', amount: 5 }, context: { trace: 't-1' } });
    expect(byName?.event).not.toBeInstanceOf(Inspected);
    expect(await service.find('test.inspect', 'nope')).toBeUndefined();
    expect(await service.find(Inspected, 'nope')).toBeUndefined();
    expect(await service.find('test.no-such-type', 's1')).toBeUndefined();

    expect((await service.list(Inspected, 'scheduled')).map((e) => e.id)).toEqual(['s1']);
    expect((await service.list(Inspected, 'ready')).map((e) => e.id)).toEqual(['r1', 'r2']);
    const inFlight = await service.list('test.inspect', 'in-flight');
    expect(inFlight.map((e) => [e.id, e.state, e.attempt])).toEqual([['running', 'in-flight', 1]]);
    expect(inFlight[0]!.leaseExpiresAt!.getTime()).toBeGreaterThan(Date.now());
    const deadList = await service.list('test.inspect', 'dead');
    expect(deadList.map((e) => [e.id, e.event?.amount])).toEqual([['dead', 1]]);
    expect(deadList[0]!.lastError).toMatch(/declined/);
    expect((await service.list(Inspected, 'ready', { offset: 1, limit: 1 })).map((e) => e.id)).toEqual(['r2']);
    expect(await service.list('test.no-such-type', 'ready')).toEqual([]);

    const types = await service.types();
    expect(types).toEqual([{ type: 'test.inspect', partitions: 1, groups: [], paused: false }]);

    release();
    await waitFor(async () => (await service.counts(Inspected))?.ready === 0 && (await service.counts(Inspected))?.inFlight === 0, 'the ready events handled');
    // Cancel and dead-letter calls take a type name too.
    expect((await service.deadLetters('test.inspect')).map((d) => [d.id, d.event?.amount])).toEqual([['dead', 1]]);
    expect(await service.cancel('test.inspect', 's1')).toBe(true);
    expect(await service.cancel('test.inspect', 's1')).toBe(false);
    expect(await service.replayDeadLetters('test.inspect', ['nope'])).toBe(0);
    expect(await service.purgeDeadLetters('test.inspect')).toBe(1);
    expect(await service.counts('test.inspect')).toBeUndefined();
  });

  it('pages through a partitioned type’s schedule in due order, across buckets and partitions', async () => {
    const service = redis.service();
    // 300 distinct due times in a scrambled order: more than a bucket (64) per partition.
    const delays = Array.from({ length: 300 }, (_, i) => 600_000 + ((i * 7919) % 300) * 1_000);
    const statuses = await new Promise<unknown[]>((resolve, reject) =>
      service.enqueueBatch(delays.map((delay, i) => ({ event: new HotInspected(`h${i}`, i), delay }))).subscribe({ next: resolve, error: reject }),
    );
    expect(statuses.every((s) => s === 'scheduled')).toBe(true);
    const expected = delays
      .map((delay, i) => ({ id: `h${i}`, delay }))
      .sort((a, b) => a.delay - b.delay)
      .map((e) => e.id);

    expect(await service.counts(HotInspected)).toEqual({ scheduled: 300, ready: 0, inFlight: 0, dead: 0, waiting: 0 });
    expect(await service.counts('test.inspect-hot')).toEqual({ scheduled: 300, ready: 0, inFlight: 0, dead: 0, waiting: 0 });
    const pages: string[] = [];
    for (let offset = 0; offset < 300; offset += 70) pages.push(...(await service.list(HotInspected, 'scheduled', { offset, limit: 70 })).map((e) => e.id));
    expect(pages).toEqual(expected);
    const byName = await service.list('test.inspect-hot', 'scheduled', { offset: 250, limit: 1_000 });
    expect(byName.map((e) => e.id)).toEqual(expected.slice(250));
    expect(byName[0]!.event).toMatchObject({ id: expected[250] });
    const dues = byName.map((e) => e.dueAt.getTime());
    expect([...dues].sort((a, b) => a - b)).toEqual(dues);

    expect((await service.find(HotInspected, 'h17'))?.event?.n).toBe(17);
    expect((await service.find('test.inspect-hot', 'h17'))?.event).toEqual({ id: 'h17', n: 17 });
    const types = await service.types();
    expect(types).toEqual([{ type: 'test.inspect-hot', partitions: 4, groups: [], paused: false }]);
  });

  it('reschedules an event and runs one now: each is handled at its new time, with its payload, context and attempts', async () => {
    const prefix = redis.prefix();
    const producer = redis.service({ prefix });
    await producer.enqueue(new Inspected('far', 7), 3_600_000, { context: { tenant: 'acme' } });
    await producer.enqueue(new Inspected('soon', 8), 300);
    await producer.enqueue(new Inspected('later', 9), 3_600_000);

    // Nothing handles yet: move them first.
    expect(await producer.reschedule(Inspected, 'soon', { hours: 2 })).toBe(true);
    const soon = await producer.find(Inspected, 'soon');
    expect(soon?.state).toBe('scheduled');
    expect(soon!.dueAt.getTime()).toBeGreaterThan(Date.now() + 7_000_000);
    const at = new Date(Date.now() + 400);
    expect(await producer.reschedule('test.inspect', 'later', at)).toBe(true);
    expect((await producer.find(Inspected, 'later'))?.dueAt.getTime()).toBe(Math.ceil(at.getTime()));

    const handled = new Map<string, { at: number; amount: number; tenant?: string; attempt: number }>();
    const consumer = redis.service({ prefix });
    consumer.addHandler(Inspected, (event, context, delivery) => void handled.set(event.id, { at: Date.now(), amount: event.amount, tenant: context.tenant, attempt: delivery.attempt }), 4);
    await waitFor(() => handled.has('later'), 'the rescheduled event handled at its new time');
    expect(handled.get('later')!.at).toBeGreaterThanOrEqual(at.getTime() - 50);

    const before = Date.now();
    expect(await producer.runNow(Inspected, 'far')).toBe(true);
    await waitFor(() => handled.has('far'), 'the far-future event handled at once', 5_000);
    expect(handled.get('far')).toMatchObject({ amount: 7, tenant: 'acme', attempt: 1 });
    expect(handled.get('far')!.at - before).toBeLessThan(3_000);
    expect(handled.has('soon')).toBe(false);
    expect((await producer.find(Inspected, 'soon'))?.state).toBe('scheduled');
    expect(await producer.runNow(Inspected, 'gone')).toBe(false);
    expect(await producer.runNow('test.inspect', 'far')).toBe(false);
  });

  it('moves a ready event back to the schedule, and leaves in-flight and dead events, unknown ids and bad input alone', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, pollIntervalMs: 100 });
    const release = await eachState(service);
    const unchanged = await snapshot(prefix);
    expect(await service.reschedule(Inspected, 'running', 60_000)).toBe(false);
    expect(await service.runNow(Inspected, 'dead')).toBe(false);
    expect(await service.reschedule(Inspected, 'nope', 60_000)).toBe(false);
    expect(await service.reschedule('test.no-such-type', 's1', 60_000)).toBe(false);
    await expect(service.reschedule(Inspected, 's1', -5)).rejects.toBeInstanceOf(InvalidDelayError);
    await expect(service.reschedule(Inspected, 's1', new Date(Number.NaN))).rejects.toBeInstanceOf(InvalidDelayError);
    await expect(service.list(Inspected, 'done' as never)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.list(Inspected, 'ready', { offset: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.list(Inspected, 'ready', { limit: 1_001 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.list(Inspected, 'ready', { limit: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.counts('')).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.find('', 'x')).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.pause('')).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(service.find(Inspected, '')).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(await service.pause('test.no-such-type')).toBe(false);
    expect(await snapshot(prefix)).toEqual(unchanged);

    // A ready event goes back to the schedule, with its attempts.
    expect(await service.reschedule(Inspected, 'r2', { hours: 1 })).toBe(true);
    expect(await service.find(Inspected, 'r2')).toMatchObject({ state: 'scheduled', attempt: 0 });
    expect(await service.counts(Inspected)).toEqual({ scheduled: 2, ready: 1, inFlight: 1, dead: 1, waiting: 0, oldestReadyMs: expect.any(Number) });
    release();
  });

  it('pauses a type for every instance and across a restart; enqueues still store, and resume hands everything out', async () => {
    const prefix = redis.prefix();
    const handled: string[] = [];
    const sentinels: string[] = [];
    const start = (): DelayedEventService => {
      const service = redis.service({ prefix, pollIntervalMs: 100, gaugeIntervalMs: 100 });
      service.addHandler(Inspected, (e) => void handled.push(e.id), 4);
      service.addHandler(Sentinel, (e) => void sentinels.push(e.id), 4);
      return service;
    };
    const a = start();
    const b = start();
    const gauges: Metric[] = [];
    b.metrics$.subscribe((m) => m.name === METRIC.paused && gauges.push(m));

    expect(await a.isPaused(Inspected)).toBe(false);
    expect(await a.pause(Inspected)).toBe(true);
    expect(await b.isPaused(Inspected)).toBe(true);
    expect(await b.isPaused('test.inspect')).toBe(true);
    for (let i = 0; i < 5; i++) expect(await b.enqueue(new Inspected(`p${i}`, i), 0)).toBe('scheduled');
    // Dispatchers of both instances have run past the paused events' due time when a later sentinel is handled.
    await a.enqueue(new Sentinel('one'), 300);
    await waitFor(() => sentinels.includes('one'), 'the sentinel handled');
    expect(handled).toEqual([]);
    expect((await a.counts(Inspected))!.scheduled + (await a.counts(Inspected))!.ready).toBe(5);
    await waitFor(() => gauges.some((m) => m.value === 1 && m.tags.type === 'test.inspect'), 'the paused gauge at 1');
    expect((await a.types()).find((t) => t.type === 'test.inspect')?.paused).toBe(true);

    // The instance that paused restarts: the pause is in Redis, not in it.
    await a.close();
    const again = start();
    expect(await again.isPaused(Inspected)).toBe(true);
    await again.enqueue(new Inspected('p5', 5), 0);
    await again.enqueue(new Sentinel('two'), 300);
    await waitFor(() => sentinels.includes('two'), 'the second sentinel handled');
    expect(handled).toEqual([]);

    expect(await again.resume('test.inspect')).toBe(true);
    expect(await b.isPaused(Inspected)).toBe(false);
    await waitFor(() => handled.length === 6, 'every paused event handled after resume');
    expect([...handled].sort()).toEqual(['p0', 'p1', 'p2', 'p3', 'p4', 'p5']);
    await waitFor(() => gauges.some((m) => m.value === 0 && m.tags.type === 'test.inspect' && m.at > Date.now() - 1_000), 'the paused gauge back at 0');
  });

  it('counts, finds and lists per subscriber group', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    await service.enqueue(new Inspected('undelivered', 1), 3_600_000);
    await service.enqueue(new Inspected('e2', 2), 3_600_000);
    await service.enqueue(new Inspected('e3', 3), 3_600_000);
    await service.enqueue(new Inspected('e4', 4), 3_600_000);
    // Delivered to group 'audit' alone, as lua/dispatch-due.lua leaves them: the
    // body stays in the type's meta hash, the group holds a header and its state.
    const client = redis.client();
    const base = `${prefix}:{test.inspect}`;
    const group = `${base}:g:audit`;
    const now = Date.now();
    for (const id of ['e2', 'e3', 'e4']) await service.cancel(Inspected, id);
    for (const [id, amount] of [
      ['e2', 2],
      ['e3', 3],
      ['e4', 4],
    ] as const) {
      await client.hset(`${base}:m`, id, `0|${now}|${JSON.stringify([now, { amount }])}`);
    }
    await client.hset(`${base}:groups`, 'audit', String(now));
    await client.hset(`${base}:n`, 'e2', '1', 'e3', '1', 'e4', '1');
    await client.hset(`${group}:m`, 'e2', `0|${now}|`, 'e3', `0|${now}|`, 'e4', `2|${now}|`);
    await client.rpush(`${group}:r`, 'e2');
    await client.zadd(`${group}:f`, String((now + 60_000) * 1000 + 1), 'e3');
    await client.zadd(`${group}:d`, String(now), 'e4');
    await client.hset(`${group}:e`, 'e4', 'boom');

    expect(await service.counts(Inspected)).toEqual({
      scheduled: 1,
      ready: 0,
      inFlight: 0,
      dead: 0,
      waiting: 0,
      groups: { audit: { scheduled: 0, ready: 1, inFlight: 1, dead: 1, waiting: 0, oldestReadyMs: expect.any(Number) } },
    });
    expect(await service.find(Inspected, 'undelivered')).toMatchObject({ state: 'scheduled', groups: { audit: 'scheduled' } });
    expect(await service.find('test.inspect', 'e2')).toMatchObject({ state: 'ready', groups: { audit: 'ready' }, event: { id: 'e2', amount: 2 } });
    expect(await service.find(Inspected, 'e3')).toMatchObject({ state: 'in-flight', groups: { audit: 'in-flight' } });
    expect((await service.list(Inspected, 'ready', { group: 'audit' })).map((e) => [e.id, e.event?.amount])).toEqual([['e2', 2]]);
    const inFlight = await service.list(Inspected, 'in-flight', { group: 'audit' });
    expect(inFlight.map((e) => [e.id, e.attempt, e.leaseExpiresAt?.getTime()])).toEqual([['e3', 1, now + 60_000]]);
    expect((await service.list('test.inspect', 'dead', { group: 'audit' })).map((e) => [e.id, e.attempt, e.lastError])).toEqual([['e4', 2, 'boom']]);
    expect((await service.list(Inspected, 'scheduled')).map((e) => e.id)).toEqual(['undelivered']);
    expect(await service.list(Inspected, 'ready', { group: 'nobody' })).toEqual([]);
    await expect(service.list(Inspected, 'ready', { group: 'no such' })).rejects.toBeInstanceOf(InvalidArgumentError);
    expect((await service.types()).find((t) => t.type === 'test.inspect')?.groups).toEqual(['audit']);
  });
});
