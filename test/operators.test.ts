import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, METRIC, PermanentFailure, createInspector, fixedBackoff } from '../src';
import { counter, recordMetrics, useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

@DelayedEvent('test.ops-order')
class OrderCheck {
  constructor(
    readonly id: string = '',
    readonly amount: number = 0,
  ) {}
}

@DelayedEvent('test.ops-split', { partitions: 3 })
class SplitOrder {
  constructor(readonly id: string = '') {}
}

@DelayedEvent('test.ops-report')
class Report {
  constructor(readonly id: string = '') {}
}

/**
 * What an operator asks first: what ran and when, what failed and how, who is
 * consuming, and whether anything waits with nobody to take it.
 */
describe('operators see everything', () => {
  const redis = useRedis();

  it('types() lists a type that only has a recurring schedule, and schedules() without a type lists every schedule', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const inspector = createInspector({ redis: redis.connection(), prefix });
    try {
      await service.schedule('weekly', new Report(''), { cron: '0 9 * * 1', tz: 'Europe/Paris' });
      await service.schedule('nightly', new Report(''), { cron: '0 3 * * *', tz: 'UTC' });
      await service.schedule('often', new OrderCheck('', 1), { every: 3_600_000 });
      const types = await inspector.types();
      expect(types.find((t) => t.type === 'test.ops-report')).toMatchObject({ type: 'test.ops-report', partitions: 1, schedules: 2 });
      expect(types.find((t) => t.type === 'test.ops-order')).toMatchObject({ schedules: 1 });
      const all = await inspector.schedules();
      expect(all.map((s) => `${s.type}/${s.name}`)).toEqual(['test.ops-order/often', 'test.ops-report/nightly', 'test.ops-report/weekly']);
      expect(all[2]).toMatchObject({ spec: { cron: '0 9 * * 1', tz: 'Europe/Paris' }, last: undefined });
      expect((await service.schedules()).length).toBe(3);
    } finally {
      await inspector.close();
    }
  });

  it('with keepHandled, find() answers handled (when, after which attempt) and list(type, "handled") pages them newest first, trimmed to count', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, keepHandled: { count: 5 } });
    let calls = 0;
    service.addHandler(
      OrderCheck,
      (e) => {
        // The first call of o1 fails: it is handled on its second attempt.
        if (e.id === 'o1' && calls++ === 0) throw new Error('gateway timeout');
      },
      1,
      { retry: fixedBackoff(5, 10) },
    );
    await service.enqueue(new OrderCheck('o1', 10), 0);
    await waitFor(async () => (await service.find(OrderCheck, 'o1'))?.state === 'handled', 'o1 handled');
    const o1 = await service.find(OrderCheck, 'o1');
    expect(o1).toMatchObject({ id: 'o1', state: 'handled', attempt: 2, event: { id: 'o1', amount: 10 } });
    expect(o1!.handledAt).toBeInstanceOf(Date);
    expect(await service.find('test.ops-order', 'o1')).toMatchObject({ state: 'handled', attempt: 2, event: { id: 'o1', amount: 10 } });

    for (let i = 2; i <= 7; i++) await service.enqueue(new OrderCheck(`o${i}`, i), 0);
    await waitFor(async () => (await service.list(OrderCheck, 'handled')).some((e) => e.id === 'o7'), 'o7 handled');
    const page = await service.list(OrderCheck, 'handled', { limit: 10 });
    expect(page.map((e) => e.id)).toEqual(['o7', 'o6', 'o5', 'o4', 'o3']);
    expect(page.every((e) => e.state === 'handled' && e.attempt === 1)).toBe(true);
    expect(await service.find(OrderCheck, 'o1')).toBeUndefined();
    expect((await service.list('test.ops-order', 'handled', { offset: 3, limit: 1 })).map((e) => e.id)).toEqual(['o4']);
  });

  it('finds what a partitioned type handled by type name alone, lists the type, and a lowered count trims the history', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, keepHandled: { count: 10 } });
    service.addHandler(SplitOrder, () => true, 4);
    for (let i = 0; i < 9; i++) await service.enqueue(new SplitOrder(`s${i}`), 0);
    await waitFor(async () => (await service.list('test.ops-split', 'handled', { limit: 100 })).length === 9, 'nine handled');
    const inspector = createInspector({ redis: redis.connection(), prefix });
    try {
      expect(await inspector.find('test.ops-split', 's4')).toMatchObject({ id: 's4', state: 'handled', attempt: 1 });
      // Nothing stored any more, only the history: still a type in use.
      expect((await inspector.types()).map((t) => t.type)).toContain('test.ops-split');
    } finally {
      await inspector.close();
    }
    await service.close();
    // A redeploy with a smaller count: the history shrinks as events complete.
    const smaller = redis.service({ prefix, keepHandled: { count: 2 } });
    smaller.addHandler(SplitOrder, () => true, 4);
    for (let i = 0; i < 6; i++) await smaller.enqueue(new SplitOrder(`t${i}`), 0);
    await waitFor(async () => (await smaller.list(SplitOrder, 'handled', { limit: 100 })).some((e) => e.id.startsWith('t')), 'the new ones handled');
    await waitFor(async () => (await smaller.list(SplitOrder, 'handled', { limit: 100 })).length <= 3 * 2, 'each partition trimmed to two');
  });

  it('without keepHandled a handled event leaves nothing to find', async () => {
    const service = redis.service();
    const handled: string[] = [];
    service.addHandler(OrderCheck, (e) => void handled.push(e.id), 1);
    await service.enqueue(new OrderCheck('gone', 1), 0);
    await waitFor(() => handled.includes('gone'), 'handled');
    await waitFor(async () => (await service.find(OrderCheck, 'gone')) === undefined, 'nothing left');
    expect(await service.list(OrderCheck, 'handled')).toEqual([]);
  });

  it('find() gives the last errors, each with its attempt, time and message; a group dead letter shows the group attempts and error', async () => {
    const service = redis.service();
    const before = Date.now();
    service.addHandler(
      OrderCheck,
      (e, _context, delivery) => {
        throw new Error(`declined ${e.id} on ${delivery.attempt}`);
      },
      1,
      { retry: fixedBackoff(12, 1), group: 'billing' },
    );
    await service.enqueue(new OrderCheck('failing', 3), 0);
    await waitFor(async () => (await service.deadLetters(OrderCheck, { group: 'billing' })).length === 1, 'dead in billing', 20_000);
    const found = await service.find(OrderCheck, 'failing');
    expect(found).toMatchObject({ state: 'dead', attempt: 12, groups: { billing: 'dead' } });
    expect(found!.lastError).toContain('declined failing on 12');
    // The last ten of twelve failures, oldest first.
    expect(found!.errors!.map((e) => e.attempt)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(found!.errors![9]!.message).toContain('declined failing on 12');
    expect(found!.errors![0]!.at.getTime()).toBeGreaterThanOrEqual(before - 1_000);
  });

  it('instances() lists each live instance with its handlers, and forgets one that closed', async () => {
    const prefix = redis.prefix();
    const a = redis.service({ prefix });
    const b = redis.service({ prefix });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    a.addHandler(OrderCheck, () => gate, 3);
    await a.enqueue(new OrderCheck('slow', 1), 0);
    // Running before 'audit' exists: a group registered later gets only what falls due after it.
    await waitFor(async () => (await a.find(OrderCheck, 'slow'))?.state === 'in-flight', 'a running the slow event');
    b.addHandler(OrderCheck, () => true, 2, { group: 'audit' });
    b.addHandler(Report, () => true, 1);
    const inspector = createInspector({ redis: redis.connection(), prefix });
    try {
      await waitFor(
        async () => (await inspector.instances()).some((i) => i.handlers.some((h) => h.type === 'test.ops-order' && h.group === 'default' && h.running === 1)),
        'a answering that it runs the slow event',
      );
      const listed = await inspector.instances();
      expect(listed).toHaveLength(2);
      const handlers = listed.flatMap((i) => i.handlers.map((h) => `${h.type}/${h.group}/${h.parallelism}`)).sort();
      expect(handlers).toEqual(['test.ops-order/audit/2', 'test.ops-order/default/3', 'test.ops-report/default/1']);
      for (const instance of listed) {
        expect(instance.pid).toBe(process.pid);
        expect(typeof instance.host).toBe('string');
        expect(instance.lastSeen.getTime()).toBeGreaterThanOrEqual(instance.startedAt.getTime());
      }
      expect((await a.instances()).length).toBe(2);
      release();
      await b.close();
      expect((await inspector.instances()).flatMap((i) => i.handlers.map((h) => h.group))).toEqual(['default']);
    } finally {
      release();
      await inspector.close();
    }
  });

  it('instances() is advisory and safe: malformed answers are dropped and counted, strings are made safe, real instances still listed', async () => {
    const prefix = redis.prefix();
    const real = redis.service({ prefix });
    real.addHandler(OrderCheck, () => true, 2);
    const asker = redis.service({ prefix });
    const metrics = recordMetrics(asker);
    // Anyone who may publish on the wake-up channel can answer: this one answers each question four times.
    const impostor = redis.client().duplicate();
    const publisher = redis.client();
    const wake = `${prefix}:wake`;
    await impostor.subscribe(wake);
    impostor.on('message', (_channel: string, message: string) => {
      const question = /^#instances\|(\d+)$/.exec(message)?.[1];
      if (!question) return;
      const answer = (body: unknown) => publisher.publish(wake, `#instances-answer|${question}|${JSON.stringify(body)}`);
      void answer({ id: 'fake1', host: 'h', pid: 1, startedAt: Date.now(), handlers: 'a string' });
      void answer({ id: 'fake2', host: 'h', pid: 1, startedAt: null, handlers: [] });
      void publisher.publish(wake, `#instances-answer|${question}|{not json`);
      // The valid one last: an asker stops listening once it has as many answers as listeners, and the
      // malformed ones, sent before on this connection, are then all counted (a race this test once lost).
      void answer({ id: 'fake3', host: 'evil\u001b]0;pwned\u0007\u001b[2J', pid: 7, startedAt: Date.now(), handlers: [{ type: 't\u202e', group: 'default', parallelism: 1, running: 0 }] });
    });
    try {
      let listed: Awaited<ReturnType<typeof asker.instances>> = [];
      await waitFor(async () => {
        listed = await asker.instances();
        return listed.some((i) => i.handlers.some((h) => h.type === 'test.ops-order'));
      }, 'the real instance listed beside the impostor');
      const fake = listed.find((i) => i.id === 'fake3')!;
      expect(fake.host).toBe('evil\\u001b]0;pwned\\u0007\\u001b[2J');
      expect(fake.handlers[0]!.type).toBe('t\\u202e');
      expect(listed.map((i) => i.id)).not.toContain('fake1');
      expect(listed.map((i) => i.id)).not.toContain('fake2');
      for (const instance of listed) expect(Number.isNaN(instance.startedAt.getTime())).toBe(false);
      expect(counter(metrics, METRIC.instanceAnswersDropped)).toBeGreaterThanOrEqual(3);
    } finally {
      impostor.disconnect();
    }
  });

  it('counts() tells how long the oldest READY event has waited, per group, and health() names a group nobody consumes', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    // 'audit' registered, then its only handler stopped: its events wait with nobody to take them.
    service.addHandler(OrderCheck, () => gate, 1);
    service.addHandler(OrderCheck, () => true, 1, { group: 'audit' });
    await service.removeHandler(OrderCheck, 'audit');
    try {
      for (let i = 0; i < 3; i++) await service.enqueue(new OrderCheck(`w${i}`, i), 0);
      await waitFor(async () => ((await service.counts(OrderCheck))?.groups?.audit?.ready ?? 0) === 3, 'three ready in audit');
      const first = await service.counts(OrderCheck);
      await waitFor(async () => ((await service.counts(OrderCheck))?.groups?.audit?.oldestReadyMs ?? 0) > (first?.groups?.audit?.oldestReadyMs ?? 0) + 100, 'the oldest ready event ageing');
      const counts = await service.counts(OrderCheck);
      expect(counts!.groups!.audit!.oldestReadyMs).toBeGreaterThan(100);
      // The default group's handler holds one event; two wait for it, and it consumes them.
      expect(counts!.groups!.default!.ready).toBe(2);
      const health = await service.health();
      expect(health.unconsumed).toEqual([expect.objectContaining({ type: 'test.ops-order', group: 'audit', ready: 3 })]);
    } finally {
      release();
    }
    await waitFor(async () => (await service.counts(OrderCheck))?.groups?.default?.ready === 0, 'the default group drained');
    expect((await service.counts(OrderCheck))!.groups!.default!.oldestReadyMs).toBeUndefined();
  });

  it('a PermanentFailure is in the error log too', async () => {
    const service = redis.service();
    service.addHandler(
      OrderCheck,
      () => {
        throw new PermanentFailure('unknown account');
      },
      1,
    );
    await service.enqueue(new OrderCheck('perm', 1), 0);
    await waitFor(async () => (await service.find(OrderCheck, 'perm'))?.state === 'dead', 'dead');
    const found = await service.find(OrderCheck, 'perm');
    expect(found!.errors).toHaveLength(1);
    expect(found!.errors![0]).toMatchObject({ attempt: 1 });
    expect(found!.errors![0]!.message).toContain('unknown account');
  });
});
