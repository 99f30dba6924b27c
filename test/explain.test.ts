import { describe, expect, it } from 'vitest';
import { fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { OrderCheckV1, OrderCheckV3, VERSIONED_TYPE } from './support/versioned-events';
import { waitFor } from './support/wait-for';

// "Why has it not run?" (since 0.6): explain() names the gate that holds an event back, in each group.
describe('explain', () => {
  const redis = useRedis();

  it('not-due, paused, ready (its place in line), in-flight, dead and handled', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, keepHandled: { count: 10 }, retry: fixedBackoff(1, 0) });
    expect(await service.explain(WorkItem, 'nothing')).toBeUndefined();
    await service.enqueue(new WorkItem('later'), 3_600_000);
    const later = await service.explain(WorkItem, 'later');
    expect(later).toMatchObject({ id: 'later', type: 'test.work', group: 'default', state: 'scheduled', gate: 'not-due' });
    expect(later!.until!.getTime()).toBeGreaterThan(Date.now() + 3_500_000);
    expect(later!.text).toMatch(/^not due until \d\d:\d\d:\d\d\.\d{3} \(in 3600 s\)$/);
    await service.pause(WorkItem);
    await service.enqueueMany([{ event: new WorkItem('first') }, { event: new WorkItem('second') }]);
    // Paused, due events are not moved: still scheduled, but the gate is the pause.
    expect(await service.explain(WorkItem, 'second')).toMatchObject({ state: 'scheduled', gate: 'paused' });
    await service.resume(WorkItem);
    // No handler yet: a dispatcher of this instance moves them once one is added; until then, the due time has passed.
    expect((await service.explain(WorkItem, 'second'))?.text).toMatch(/due since .*dispatcher/);
    let release: () => void = () => undefined;
    const held = new Promise<boolean>((resolve) => (release = () => resolve(true)));
    service.addHandler(WorkItem, (e) => (e.id === 'first' ? held : e.id !== 'doomed'), { prefetch: 0 });
    const second = await waitFor(async () => {
      const e = await service.explain(WorkItem, 'second');
      return e?.gate === 'ready' && e;
    }, 'second ready behind the running first');
    expect(second.detail).toEqual({ before: 0 });
    expect(second.text).toMatch(/first in line.*free slot/);
    const first = await service.explain(WorkItem, 'first');
    expect(first).toMatchObject({ state: 'in-flight', gate: 'in-flight', detail: { attempt: 1 } });
    expect(first!.until).toBeInstanceOf(Date);
    release();
    await service.enqueue(new WorkItem('doomed'), 0);
    const dead = await waitFor(async () => {
      const e = await service.explain(WorkItem, 'doomed');
      return e?.gate === 'dead' && e;
    }, 'dead');
    expect(dead.text).toMatch(/dead-lettered after attempt 1: handler returned false.*replayDeadLetters/);
    await waitFor(async () => (await service.explain(WorkItem, 'first'))?.gate === 'handled', 'handled');
  });

  it('rate-limit (a full window, and a hold), concurrency and key-turn, with the figures', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    let releaseAll: () => void = () => undefined;
    const gate = new Promise<boolean>((resolve) => (releaseAll = () => resolve(true)));
    service.addHandler(WorkItem, () => gate, 10, { rateLimit: { max: 2, perMs: 60_000 }, globalConcurrency: 5 });
    await service.enqueueMany(['r1', 'r2', 'r3'].map((id) => ({ event: new WorkItem(id) })));
    const limited = await waitFor(async () => {
      const waiting = (await Promise.all(['r1', 'r2', 'r3'].map((id) => service.explain(WorkItem, id)))).find((e) => e?.state === 'ready');
      return waiting?.gate === 'rate-limit' && waiting;
    }, 'the third held by the window');
    expect(limited.detail).toEqual({ started: 2, max: 2, perMs: 60_000 });
    expect(limited.text).toMatch(/^held by a rate limit until \d\d:\d\d:\d\d\.\d{3}; 2 of 2 calls started in the last 60000 ms$/);
    expect(limited.until!.getTime()).toBeGreaterThan(Date.now() + 50_000);
    releaseAll();

    const prefix2 = redis.prefix();
    const other = redis.service({ prefix: prefix2 });
    let release2: () => void = () => undefined;
    const gate2 = new Promise<boolean>((resolve) => (release2 = () => resolve(true)));
    other.addHandler(WorkItem, () => gate2, 10, { globalConcurrency: 1 });
    await other.enqueueMany(['c1', 'c2'].map((id) => ({ event: new WorkItem(id) })));
    const busy = await waitFor(async () => {
      const waiting = (await Promise.all(['c1', 'c2'].map((id) => other.explain(WorkItem, id)))).find((e) => e?.state === 'ready');
      return waiting?.gate === 'concurrency' && waiting;
    }, 'the second held by the concurrency limit');
    expect(busy.detail).toEqual({ running: 1, max: 1 });
    expect(busy.text).toBe('1 of 1 calls run (globalConcurrency): it starts when one ends');
    release2();

    const prefix3 = redis.prefix();
    const keyed = redis.service({ prefix: prefix3 });
    let release3: () => void = () => undefined;
    const gate3 = new Promise<boolean>((resolve) => (release3 = () => resolve(true)));
    keyed.addHandler(WorkItem, () => gate3, 10, { key: (e: WorkItem) => (e.n === 1 ? 'acme' : 'other'), perKey: { globalConcurrency: 1 } });
    await keyed.enqueueMany([{ event: new WorkItem('k1', 1) }, { event: new WorkItem('k2', 1) }]);
    const turn = await waitFor(async () => {
      const waiting = (await Promise.all(['k1', 'k2'].map((id) => keyed.explain(WorkItem, id)))).find((e) => e?.state === 'ready');
      return waiting?.gate === 'key-turn' && waiting;
    }, 'the second waiting for its key');
    expect(turn.detail).toMatchObject({ key: 'acme', running: 1, max: 1 });
    expect(turn.text).toBe("waits for its key 'acme': 1 of 1 of its calls run");
    release3();

    const prefix4 = redis.prefix();
    const paced = redis.service({ prefix: prefix4 });
    paced.addHandler(WorkItem, () => true, 10, { key: (e: WorkItem) => (e.n === 1 ? 'acme' : 'other'), perKey: { rateLimit: { max: 1, perMs: 60_000 } } });
    await paced.enqueueMany([{ event: new WorkItem('p1', 1) }, { event: new WorkItem('p2', 1) }]);
    const windowFull = await waitFor(async () => {
      const waiting = (await Promise.all(['p1', 'p2'].map((id) => paced.explain(WorkItem, id)))).find((e) => e?.state === 'ready');
      return waiting?.gate === 'key-turn' && waiting;
    }, "the second held by its key's rate window");
    expect(windowFull.detail).toMatchObject({ key: 'acme', started: 1, max: 1, perMs: 60_000 });
    expect(windowFull.text).toMatch(/^waits for its key 'acme' until \d\d:\d\d:\d\d\.\d{3}: 1 of 1 of its calls started in the last 60000 ms$/);
    expect(windowFull.until!.getTime()).toBeGreaterThan(Date.now() + 50_000);
  });

  it('a hold a handler asked for (rateLimited) and each group of a fan-out type', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    let calls = 0;
    service.addHandler(
      WorkItem,
      (_e, _c, d) => {
        calls++;
        d.rateLimited(60_000);
        return true;
      },
      1,
      { group: 'billing' },
    );
    service.addHandler(WorkItem, () => new Promise<boolean>(() => undefined), 1, { group: 'audit' });
    await service.enqueue(new WorkItem('fan'), 0);
    const explained = await waitFor(async () => {
      const e = await service.explain(WorkItem, 'fan');
      return calls > 0 && e?.groups.find((g) => g.group === 'billing')?.gate === 'rate-limit' && e;
    }, 'billing held');
    const billing = explained.groups.find((g) => g.group === 'billing')!;
    expect(billing.text).toMatch(/held by a rate limit until .*provider rate-limited it/);
    expect(billing.until!.getTime()).toBeGreaterThan(Date.now() + 50_000);
    expect(explained.groups.find((g) => g.group === 'audit')).toMatchObject({ state: 'in-flight', gate: 'in-flight' });
  });

  it('newer-version: an event a newer class wrote waits for a reader of that version', async () => {
    const prefix = redis.prefix();
    const oldDeploy = redis.service({ prefix });
    oldDeploy.addHandler(OrderCheckV1, () => true);
    const newDeploy = redis.service({ prefix });
    await newDeploy.enqueue(new OrderCheckV3('v3-order', { cents: 5, currency: 'EUR' }), 0);
    const waiting = await waitFor(async () => {
      const e = await newDeploy.explain(VERSIONED_TYPE, 'v3-order');
      return e?.gate === 'newer-version' && e;
    }, 'left for version 3');
    expect(waiting).toMatchObject({ state: 'ready', detail: { version: 3 } });
    expect(waiting.text).toMatch(/written by class version 3/);
  });
});
