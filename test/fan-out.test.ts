import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, HandlerAlreadyRegisteredError, InvalidOptionError, METRIC, type DelayedEventService, fixedBackoff } from '../src';
import { LuaScripts } from '../src/redis/lua-scripts';
import { RedisLayout } from '../src/redis/redis-layout';
import { WorkItem } from './support/events';
import { counter, recordMetrics, useRedis } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

@DelayedEvent('test.spread', { partitions: 4 })
class Spread {
  constructor(readonly id: string = '') {}
}

/**
 * Subscriber groups: every registered group receives every event of the type
 * that falls due after it registered; instances of one group share its events.
 */
describe('fan-out to subscriber groups', () => {
  const redis = useRedis();

  /** Handled ids (with the attempt) per group, across all the instances of each. */
  function recorder() {
    const seen = new Map<string, string[]>();
    const handler =
      (group: string, answer: (id: string, attempt: number) => boolean | Promise<boolean> = () => true) =>
      (event: WorkItem, _context: unknown, delivery: { attempt: number }) => {
        const list = seen.get(group) ?? [];
        list.push(`${event.id}#${delivery.attempt}#${event.n}`);
        seen.set(group, list);
        return answer(event.id, delivery.attempt);
      };
    const of = (group: string) => seen.get(group) ?? [];
    return { handler, of };
  }

  /** Resolves once `group` is registered in Redis for the unpartitioned WorkItem type. */
  const registered = (prefix: string, group: string) => waitFor(async () => (await redis.client().hexists(`${prefix}:{test.work}:groups`, group)) === 1, `group ${group} registered`);

  /** Keys left under the prefix, but for idempotency marks, the group registry and its marker (they persist while groups are registered). */
  // What a type keeps for good: idempotency marks (until their window ends), its group registry and marker, and a
  // partitioned type's partitions setting (src/runtime/repartitioner.ts).
  const leftovers = async (prefix: string) => (await redis.keys(`${prefix}:*`)).filter((key) => !key.endsWith(':i') && !key.endsWith(':groups') && !key.endsWith(':here') && !key.endsWith(':layout'));

  it('three groups of two instances each handle every one of 5,000 events exactly once per group, and the payload goes after the last group', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const groups = ['billing', 'audit', 'notifications'];
    for (const group of groups) {
      for (let instance = 0; instance < 2; instance++) redis.service({ prefix }).addHandler(WorkItem, seen.handler(group), 16, { group });
    }
    for (const group of groups) await registered(prefix, group);
    const producer = redis.service({ prefix });
    const statuses = await firstValueFrom(producer.enqueueBatch(Array.from({ length: 5_000 }, (_, i) => ({ event: new WorkItem(`e${i}`, i), delay: i % 200 }))));
    expect(statuses.every((s) => s === 'scheduled')).toBe(true);

    await waitFor(() => groups.every((g) => seen.of(g).length >= 5_000), 'every group handled every event', 60_000);
    for (const group of groups) {
      const ids = seen.of(group).map((h) => h.split('#')[0]);
      expect(new Set(ids).size).toBe(5_000);
      expect(ids).toHaveLength(5_000);
    }
    await waitFor(async () => (await leftovers(prefix)).length === 0, 'no payload, header or group state left', 20_000);
  }, 120_000);

  it('a group whose instances are all down gets what fell due meanwhile when one comes back; a group registered later gets only what falls due after', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const billing = redis.service({ prefix });
    billing.addHandler(WorkItem, seen.handler('billing'), 4, { group: 'billing' });
    const audit = redis.service({ prefix });
    audit.addHandler(WorkItem, seen.handler('audit'), 4, { group: 'audit' });
    await registered(prefix, 'billing');
    await registered(prefix, 'audit');
    await billing.close();

    const producer = redis.service({ prefix });
    for (let i = 0; i < 20; i++) await producer.enqueue(new WorkItem(`early${i}`), 0);
    await waitFor(() => seen.of('audit').length === 20, 'audit handled the early events');
    expect(seen.of('billing')).toEqual([]);

    redis.service({ prefix }).addHandler(WorkItem, seen.handler('billing'), 4, { group: 'billing' });
    await waitFor(() => seen.of('billing').length === 20, 'billing caught up when it came back');

    const late = redis.service({ prefix });
    late.addHandler(WorkItem, seen.handler('late'), 4, { group: 'late' });
    await registered(prefix, 'late');
    for (let i = 0; i < 5; i++) await producer.enqueue(new WorkItem(`after${i}`), 0);
    await waitFor(() => seen.of('audit').length === 25 && seen.of('billing').length === 25 && seen.of('late').length === 5, 'the later events in every group');
    expect(seen.of('late').every((h) => h.startsWith('after'))).toBe(true);
    await waitFor(async () => (await leftovers(prefix)).length === 0, 'nothing left behind');
  });

  it('each group has its own retries and dead letters; replay and purge act on one group; one failing group does not hold the payload back from the others', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    let billingWorks = false;
    const service = redis.service({ prefix, retry: fixedBackoff(2, 20) });
    const metrics = recordMetrics(service);
    service.addHandler(
      WorkItem,
      seen.handler('billing', () => billingWorks),
      2,
      { group: 'billing' },
    );
    service.addHandler(WorkItem, seen.handler('audit'), 2, { group: 'audit' });
    await registered(prefix, 'billing');
    await registered(prefix, 'audit');
    await service.enqueue(new WorkItem('card', 1), 0);
    await service.enqueue(new WorkItem('wire', 2), 0);

    const dead = await waitFor(async () => {
      const letters = await service.deadLetters(WorkItem, { group: 'billing' });
      return letters.length === 2 && letters;
    }, 'both dead-lettered in billing');
    expect(dead.map((d) => [d.id, d.attempts, d.event?.n]).sort()).toEqual([
      ['card', 2, 1],
      ['wire', 2, 2],
    ]);
    expect(seen.of('audit').sort()).toEqual(['card#1#1', 'wire#1#2']);
    expect(await service.deadLetters(WorkItem, { group: 'audit' })).toEqual([]);
    expect(await service.deadLetters(WorkItem)).toEqual([]);
    expect(counter(metrics, METRIC.retries, { type: 'test.work', group: 'billing' })).toBe(2);
    expect(counter(metrics, METRIC.deadLettered, { type: 'test.work', group: 'billing', reason: 'attempts-exhausted' })).toBe(2);
    // The dead letters still hold the payload: it stays until they are replayed and handled, or purged.
    expect(await redis.client().hlen(`${prefix}:{test.work}:m`)).toBe(2);

    billingWorks = true;
    expect(await service.replayDeadLetters(WorkItem, ['card'], { group: 'billing' })).toBe(1);
    await waitFor(() => seen.of('billing').includes('card#1#1') && seen.of('billing').filter((h) => h.startsWith('card')).length === 3, 'card handled again in billing alone');
    expect(seen.of('audit')).toHaveLength(2);
    expect(await service.purgeDeadLetters(WorkItem, undefined, { group: 'billing' })).toBe(1);
    await waitFor(async () => (await leftovers(prefix)).length === 0, 'both payloads gone');
  });

  it('one dispatch of 5,000 due events reaches every group whole', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const registrar = redis.service({ prefix });
    for (const group of ['a', 'b']) registrar.addHandler(WorkItem, () => true, 1, { group });
    for (const group of ['a', 'b']) await registered(prefix, group);
    for (const group of ['a', 'b']) await registrar.removeHandler(WorkItem, group);
    await firstValueFrom(registrar.enqueueBatch(Array.from({ length: 6_000 }, (_, i) => ({ event: new WorkItem(`big${i}`) }))));
    for (const group of ['a', 'b']) redis.service({ prefix, dispatchBatchSize: 5_000 }).addHandler(WorkItem, seen.handler(group), 32, { group });
    await waitFor(() => seen.of('a').length >= 6_000 && seen.of('b').length >= 6_000, 'every event in both groups', 30_000);
    await waitFor(async () => (await leftovers(prefix)).length === 0, 'nothing left');
  });

  it('a partitioned type fans out from every partition, each group getting every event once', async () => {
    const prefix = redis.prefix();
    const handled = new Map<string, string[]>();
    for (const group of ['left', 'right']) {
      redis.service({ prefix }).addHandler(Spread, (event) => void handled.set(group, [...(handled.get(group) ?? []), event.id]), 8, { group });
    }
    await waitFor(async () => {
      const client = redis.client();
      const counts = await Promise.all([0, 1, 2, 3].map((p) => client.hlen(`${prefix}:{test.spread#${p}}:groups`)));
      return counts.every((n) => n === 2);
    }, 'both groups registered in every partition');
    const producer = redis.service({ prefix });
    await firstValueFrom(producer.enqueueBatch(Array.from({ length: 200 }, (_, i) => ({ event: new Spread(`s${i}`) }))));
    await waitFor(() => ['left', 'right'].every((g) => (handled.get(g) ?? []).length >= 200), 'both groups handled every event');
    for (const g of ['left', 'right']) expect(new Set(handled.get(g)).size).toBe(200);
    await waitFor(async () => (await leftovers(prefix)).length === 0, 'nothing left');
  });

  it('a slow group never delays another', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const service = redis.service({ prefix, closeTimeoutMs: 200 });
    service.addHandler(
      WorkItem,
      seen.handler('slow', () => new Promise<boolean>(() => undefined)),
      1,
      { group: 'slow', timeoutMs: 60_000 },
    );
    service.addHandler(WorkItem, seen.handler('fast'), 4, { group: 'fast' });
    await registered(prefix, 'slow');
    await registered(prefix, 'fast');
    for (let i = 0; i < 50; i++) await service.enqueue(new WorkItem(`x${i}`), 0);
    await waitFor(() => seen.of('fast').length === 50, 'the fast group handled all 50 while the slow one holds its first');
    expect(seen.of('slow')).toHaveLength(1);
  });

  it('removeGroup unregisters a group for good and drops what waited for it; the payload goes once the other groups are done', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const service = redis.service({ prefix });
    service.addHandler(WorkItem, seen.handler('gone'), 1, { group: 'gone' });
    await registered(prefix, 'gone');
    await service.removeHandler(WorkItem, 'gone');
    service.addHandler(WorkItem, seen.handler('kept'), 4, { group: 'kept' });
    await registered(prefix, 'kept');
    for (let i = 0; i < 10; i++) await service.enqueue(new WorkItem(`w${i}`), 0);
    await waitFor(() => seen.of('kept').length === 10, 'the kept group handled everything');
    // The stopped group is still registered: the payloads wait for it.
    expect(await redis.client().hlen(`${prefix}:{test.work}:m`)).toBe(10);

    expect(await service.removeGroup(WorkItem, 'gone')).toBe(true);
    expect(await service.removeGroup(WorkItem, 'gone')).toBe(false);
    await waitFor(async () => (await leftovers(prefix)).length === 0, 'payloads and the group keys gone');
    expect(await redis.client().hkeys(`${prefix}:{test.work}:groups`)).toEqual(['kept']);
    expect(seen.of('gone')).toEqual([]);
  });

  it('a group removed in several calls while one of its handlers still runs an event leaves that event to the other groups', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const billing = redis.service({ prefix, closeTimeoutMs: 100 });
    const billingMetrics = recordMetrics(billing);
    billing.addHandler(
      WorkItem,
      seen.handler('billing', async (id) => (id === 'held' ? (await held, true) : true)),
      1,
      { group: 'billing', timeoutMs: 60_000 },
    );
    const audit = redis.service({ prefix });
    audit.addHandler(WorkItem, seen.handler('audit'), 4, { group: 'audit' });
    await registered(prefix, 'billing');
    await registered(prefix, 'audit');
    await audit.removeHandler(WorkItem, 'audit');
    await billing.enqueue(new WorkItem('held'), 0);
    await waitFor(() => seen.of('billing').length === 1, 'billing running the held event');
    await firstValueFrom(billing.enqueueBatch(Array.from({ length: 99 }, (_, i) => ({ event: new WorkItem(`w${i}`) }))));
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.work}:g:billing:m`)) === 100, 'all delivered to billing');

    // The first of two removal calls, as for a group holding more than a call takes: it takes 99 of
    // the 100 events billing holds (the held one among them, but for a 1-in-100 chance).
    const layout = new RedisLayout(prefix);
    const scripts = new LuaScripts(redis.client(), layout.wakeChannel, { ms: 10_000, onStuck: () => undefined }, 0);
    const keys = layout.forType('test.work');
    let left = (await scripts.removeGroup(keys, 'billing', 99)).left;
    expect(left).toBe(1);
    // One time in 100 the first call leaves the held event: a second call takes it, still before its handler returns.
    if ((await redis.client().hexists(`${prefix}:{test.work}:g:billing:m`, 'held')) === 1) left = (await scripts.removeGroup(keys, 'billing', 1)).left;
    release();
    // The held event's success in billing is fenced off: it must not count down audit's hold on it.
    await waitFor(
      async () => counter(billingMetrics, METRIC.staleResults, { group: 'billing' }) === 1 || (await redis.client().hexists(`${prefix}:{test.work}:n`, 'held')) === 0,
      'billing to have written its result',
    );
    while (left > 0) left = (await scripts.removeGroup(keys, 'billing', 1)).left;
    redis.service({ prefix }).addHandler(WorkItem, seen.handler('audit'), 4, { group: 'audit' });
    const auditIds = () => seen.of('audit').map((h) => h.split('#')[0]);
    await waitFor(() => ['held', 'w0', 'w98'].every((id) => auditIds().includes(id)) && auditIds().length === 100, 'audit handled every event, the held one too');
    await waitFor(async () => (await leftovers(prefix)).length === 0, 'nothing left');
  });

  it('cancel and replace act on every group, before and after the event fell due', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const service = redis.service({ prefix });
    service.addHandler(WorkItem, seen.handler('up'), 4, { group: 'up' });
    const down = redis.service({ prefix });
    down.addHandler(WorkItem, seen.handler('down'), 4, { group: 'down' });
    await registered(prefix, 'up');
    await registered(prefix, 'down');
    await down.removeHandler(WorkItem, 'down');

    // Before due: nobody gets it.
    await service.enqueue(new WorkItem('never'), 60_000);
    expect(await service.cancel(WorkItem, 'never')).toBe(true);
    // After due: 'up' handled it, 'down' has it waiting; cancel takes it from 'down' too.
    await service.enqueue(new WorkItem('cancelled', 1), 0);
    await waitFor(() => seen.of('up').length === 1, 'up handled it');
    expect(await service.cancel(WorkItem, 'cancelled')).toBe(true);
    // After due, replaced: 'down' gets only the new payload.
    await service.enqueue(new WorkItem('replaced', 1), 0);
    await waitFor(() => seen.of('up').length === 2, 'up handled the first payload');
    expect(await service.enqueue(new WorkItem('replaced', 2), 0, { replace: true })).toBe('replaced');
    await waitFor(() => seen.of('up').length === 3, 'up handled the replacement too');

    down.addHandler(WorkItem, seen.handler('down'), 4, { group: 'down' });
    await waitFor(() => seen.of('down').length >= 1, 'down back');
    await waitFor(async () => (await leftovers(prefix)).length === 0, 'nothing left');
    expect(seen.of('down')).toEqual(['replaced#1#2']);
    expect(seen.of('up')).toEqual(['cancelled#1#1', 'replaced#1#1', 'replaced#1#2']);
  });

  // MONITOR shows the order one server runs commands in; on a cluster the type's keys are on one master of three.
  it.skipIf(redis.topology === 'cluster')('registers a group before an enqueue sent right after addHandler, even when Redis forgot the scripts (restart, failover)', async () => {
    const prefix = redis.prefix();
    const producer = redis.service({ prefix });
    // The enqueue script cached again after the flush, the registration's not: as after a restart.
    await redis.flushScripts();
    await producer.enqueue(new WorkItem('warm-up'), 3_600_000);
    const monitor = await redis.client().monitor();
    const ran: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args[0]?.toUpperCase() === 'HSETNX') ran.push(`${args[1]} ${args[2]}`);
    });
    const seen = recorder();
    producer.addHandler(WorkItem, seen.handler('billing'), 1, { group: 'billing' });
    // Not waiting for the registration: addHandler promises the group every event falling due after it.
    await producer.enqueue(new WorkItem('right-after'), 0);
    await waitFor(() => seen.of('billing').length === 1, 'the group handling the event');
    expect(seen.of('billing')[0]).toMatch(/^right-after#1/);
    expect(ran.indexOf(`${prefix}:{test.work}:groups billing`)).toBeLessThan(ran.indexOf(`${prefix}:{test.work}:m right-after`));
    monitor.disconnect();
  });

  it('a type that only uses the default group keeps no registry and no per-event bookkeeping', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const service = redis.service({ prefix });
    service.addHandler(WorkItem, seen.handler('default'), 4);
    for (let i = 0; i < 20; i++) await service.enqueue(new WorkItem(`d${i}`), 0);
    await waitFor(() => seen.of('default').length === 20, 'all handled');
    await waitFor(async () => (await redis.keys(`${prefix}:*`)).every((key) => key.endsWith(':i')), 'only idempotency marks left');
  });

  it('the default group keeps getting events once the type has named groups', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const service: DelayedEventService = redis.service({ prefix });
    service.addHandler(WorkItem, seen.handler('default'), 4);
    await service.enqueue(new WorkItem('before'), 0);
    await waitFor(() => seen.of('default').length === 1, 'handled before groups');
    service.addHandler(WorkItem, seen.handler('extra'), 4, { group: 'extra' });
    await registered(prefix, 'extra');
    await registered(prefix, 'default');
    for (let i = 0; i < 10; i++) await service.enqueue(new WorkItem(`g${i}`), 0);
    await waitFor(() => seen.of('default').length === 11 && seen.of('extra').length === 10, 'both groups handled the new events');
    await waitFor(async () => (await leftovers(prefix)).length === 0, 'nothing left');
  });

  it('refuses a bad group name and the same class and group twice; the same class in two groups is fine', () => {
    const service = redis.service();
    for (const bad of ['', 'a b', '{tag}', 'x'.repeat(65), 'a|b', 'a:b']) {
      expect(() => service.addHandler(WorkItem, () => true, 1, { group: bad })).toThrow(InvalidOptionError);
    }
    service.addHandler(WorkItem, () => true, 1, { group: 'one' });
    service.addHandler(WorkItem, () => true, 1, { group: 'two' });
    expect(() => service.addHandler(WorkItem, () => true, 1, { group: 'one' })).toThrow(HandlerAlreadyRegisteredError);
    return expect(service.removeGroup(WorkItem, 'default')).rejects.toThrow(InvalidOptionError);
  });

  it('an instance killed (SIGKILL) in one group has its events redelivered within that group only', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const doomed = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'hang', GROUP: 'billing', HANDLER_TIMEOUT_MS: '1000', LEASE_GRACE_MS: '300' });
    try {
      await doomed.waitForLine((l) => l.ready === true);
      const audit = redis.service({ prefix });
      audit.addHandler(WorkItem, seen.handler('audit'), 4, { group: 'audit' });
      await registered(prefix, 'billing');
      await registered(prefix, 'audit');
      await audit.enqueue(new WorkItem('survivor', 3), 0);
      await doomed.waitForLine((l) => l.started === 'survivor');
      await doomed.kill('SIGKILL');

      redis.service({ prefix }).addHandler(WorkItem, seen.handler('billing'), 4, { group: 'billing' });
      await waitFor(() => seen.of('billing').length === 1, 'redelivered in billing', 10_000);
      expect(seen.of('billing')).toEqual(['survivor#2#3']);
      expect(seen.of('audit')).toEqual(['survivor#1#3']);
      await waitFor(async () => (await leftovers(prefix)).length === 0, 'nothing left');
    } finally {
      await doomed.kill();
    }
  });
});
