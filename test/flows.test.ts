import { describe, expect, it } from 'vitest';
import { type ChildResult, DelayedEvent, type DelayedEventService, type Delivery, InvalidArgumentError, METRIC, PermanentFailure } from '../src';
import { partitionOf } from '../src/redis/redis-layout';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';

// Flows and dependencies (since 0.6; docs/flows.md): a parent waits for its
// children, across types (hash slots), and runs once every edge is done.

@DelayedEvent('test.flow-charge')
class Charge {
  constructor(
    readonly id: string = '',
    readonly amount: number = 0,
  ) {}
}

@DelayedEvent('test.flow-pack', { partitions: 3 })
class Pack {
  constructor(
    readonly id: string = '',
    readonly fail: boolean = false,
  ) {}
}

@DelayedEvent('test.flow-charge', { partitions: 4 })
class ChargeResized {
  constructor(
    readonly id: string = '',
    readonly amount: number = 0,
  ) {}
}

@DelayedEvent('test.flow-verify')
class Verify {
  constructor(
    readonly id: string = '',
    readonly fail: boolean = false,
  ) {}
}

interface Run {
  readonly type: string;
  readonly id: string;
  readonly children?: Readonly<Record<string, ChildResult>>;
}

describe('flows', () => {
  const redis = useRedis();

  /** A service handling the three types; a child whose payload says `fail` fails for good; each run recorded in order. */
  function handling(service: DelayedEventService = redis.service({ prefix: redis.prefix() })) {
    const runs: Run[] = [];
    const child = async (type: string, e: { id: string; fail: boolean }, d: Delivery) => {
      runs.push({ type, id: e.id });
      if (e.fail) throw new PermanentFailure(`${e.id} cannot`);
      d.result({ done: e.id });
    };
    service.addHandler(Pack, (e, _c, d) => child('test.flow-pack', e, d), { parallelism: 4 });
    service.addHandler(Verify, (e, _c, d) => child('test.flow-verify', e, d), { parallelism: 4 });
    service.addHandler(Charge, async (e, _c, d) => {
      runs.push({ type: 'test.flow-charge', id: e.id, children: await d.childResults() });
    });
    return { service, runs, ran: (id: string) => runs.filter((r) => r.id === id) };
  }

  it('a three-level flow across three types runs each event once, children before parents, and hands the results up', async () => {
    const { service, runs, ran } = handling();
    const status = await service.enqueueFlow({
      event: new Charge('order-1', 40),
      children: [
        { event: new Pack('pack-1'), children: [{ event: new Verify('label-1') }, { event: new Verify('stock-1') }] },
        { event: new Verify('address-1'), delay: 50 },
      ],
    });
    expect(status).toEqual({
      status: 'scheduled',
      children: [
        {
          status: 'scheduled',
          children: [
            { status: 'scheduled', children: [] },
            { status: 'scheduled', children: [] },
          ],
        },
        { status: 'scheduled', children: [] },
      ],
    });
    await waitFor(() => ran('order-1').length === 1, 'the root ran');
    const order = runs.map((r) => r.id);
    expect(order.indexOf('pack-1')).toBeGreaterThan(Math.max(order.indexOf('label-1'), order.indexOf('stock-1')));
    expect(order.indexOf('order-1')).toBe(order.length - 1);
    expect(ran('order-1')[0]!.children).toEqual({
      'test.flow-pack|pack-1': { outcome: 'handled', result: { done: 'pack-1' } },
      'test.flow-verify|address-1': { outcome: 'handled', result: { done: 'address-1' } },
    });
    // Each once, and nothing left of the flow.
    expect(order.sort()).toEqual(['address-1', 'label-1', 'order-1', 'pack-1', 'stock-1']);
    expect(await service.find(Charge, 'order-1')).toBeUndefined();
    // Handled, the parent's record and results go.
    await waitFor(async () => (await redis.client().exists(`${service.prefix}:{test.flow-charge}:fr:order-1`)) === 0, 'the results hash dropped');
    expect(await redis.client().hexists(`${service.prefix}:{test.flow-charge}:fl`, 'order-1')).toBe(0);
    // Obliterated, a type keeps no flow key.
    await service.enqueueFlow({ event: new Charge('order-1b'), children: [{ event: new Verify('verify-1b', true), onChildFailure: 'continue' }] });
    await waitFor(() => ran('order-1b').length === 1, 'a second parent ran');
    await service.enqueueFlow({ event: new Charge('order-1c'), delay: 60_000, children: [{ event: new Pack('pack-1c') }] });
    await waitFor(async () => (await redis.client().exists(`${service.prefix}:{test.flow-charge}:fr:order-1c`)) === 1, 'a result recorded');
    await service.removeHandler(Charge);
    await service.obliterate(Charge);
    // (Its tombstone stays, as for any obliterated type.)
    expect(await redis.keys(`${service.prefix}:{test.flow-charge}*`)).toEqual([`${service.prefix}:{test.flow-charge}:gone`]);
  });

  it("a parent waiting is in the state 'waiting': counts, list and find show it and the children it waits for", async () => {
    const service = redis.service({ prefix: redis.prefix() });
    await service.enqueueFlow({ event: new Charge('order-2'), delay: 60_000, children: [{ event: new Pack('pack-2') }, { event: new Verify('verify-2') }] });
    expect((await service.counts(Charge))?.waiting).toBe(1);
    expect((await service.counts(Charge))?.scheduled).toBe(0);
    expect((await service.list(Charge, 'waiting')).map((e) => e.id)).toEqual(['order-2']);
    const found = await service.find(Charge, 'order-2');
    expect(found?.state).toBe('waiting');
    expect(found?.waitingFor).toEqual(
      expect.arrayContaining([
        { type: 'test.flow-pack', id: 'pack-2' },
        { type: 'test.flow-verify', id: 'verify-2' },
      ]),
    );
    expect((await service.find(Pack, 'pack-2'))?.state).toBe('scheduled');
    expect(await service.explain(Charge, 'order-2')).toMatchObject({ state: 'waiting', gate: 'children', detail: { children: 2 } });
    // The children run; the parent then waits only for its own delay.
    handling(service);
    await waitFor(async () => (await service.find(Charge, 'order-2'))?.state === 'scheduled', 'the parent scheduled once its children are done');
    expect((await service.find(Charge, 'order-2'))?.waitingFor).toEqual([]);
    expect((await service.counts(Charge))?.waiting).toBe(0);
  });

  it("onChildFailure 'fail' (the default) dead-letters the parent with reason dependency; replaying the child and handling it releases the parent", async () => {
    const { service, ran } = handling();
    const metrics = recordMetrics(service);
    await service.enqueueFlow({ event: new Charge('order-3'), children: [{ event: new Verify('verify-3', true) }, { event: new Pack('pack-3') }] });
    const [letter] = await waitForDeadLetters(service, Charge);
    expect(letter!.id).toBe('order-3');
    expect(letter!.error).toMatch(/^dependency: test\.flow-verify\|verify-3 dead-lettered/);
    await waitFor(() => counter(metrics, METRIC.deadLettered, { type: 'test.flow-charge', reason: 'dependency' }) === 1, 'the dependency dead letter counted');
    expect(ran('order-3')).toEqual([]);
    // The payload fixed and replayed: handled, it releases the parent, which runs once.
    await service.enqueue(new Verify('verify-3', false), 0, { replace: true });
    await service.replayDeadLetters(Verify, ['verify-3']);
    await waitFor(() => ran('order-3').length === 1, 'the parent ran after the replay');
    expect(ran('order-3')[0]!.children?.['test.flow-verify|verify-3']).toEqual({ outcome: 'handled', result: { done: 'verify-3' } });
  });

  it("onChildFailure 'ignore' counts a failed child as done; 'continue' runs the parent with the failure in childResults()", async () => {
    const { service, ran } = handling();
    await service.enqueueFlow({
      event: new Charge('order-4'),
      children: [{ event: new Verify('verify-4', true), onChildFailure: 'ignore' }, { event: new Pack('pack-4', true), onChildFailure: 'continue' }, { event: new Pack('pack-4b') }],
    });
    await waitFor(() => ran('order-4').length === 1, 'the parent ran');
    const children = ran('order-4')[0]!.children!;
    expect(children['test.flow-verify|verify-4']).toEqual({ outcome: 'ignored', error: expect.stringMatching(/verify-4 cannot/) });
    expect(children['test.flow-pack|pack-4']).toEqual({ outcome: 'dead-lettered', error: expect.stringMatching(/pack-4 cannot/) });
    expect(children['test.flow-pack|pack-4b']).toEqual({ outcome: 'handled', result: { done: 'pack-4b' } });
    expect(await service.deadLetters(Charge)).toEqual([]);
  });

  it('cancelling a parent cancels the children it waits for, unless cascade: false; cancelling a child fails its edge', async () => {
    const service = redis.service({ prefix: redis.prefix() });
    const later = 60_000;
    await service.enqueueFlow({ event: new Charge('order-5'), children: [{ event: new Pack('pack-5'), delay: later, children: [{ event: new Verify('verify-5'), delay: later }] }] });
    expect(await service.cancel(Charge, 'order-5')).toBe(true);
    expect(await service.find(Pack, 'pack-5')).toBeUndefined();
    expect(await service.find(Verify, 'verify-5')).toBeUndefined();

    await service.enqueueFlow({ event: new Charge('order-6'), children: [{ event: new Pack('pack-6'), delay: later }] });
    expect(await service.cancel(Charge, 'order-6', { cascade: false })).toBe(true);
    expect((await service.find(Pack, 'pack-6'))?.state).toBe('scheduled');

    await service.enqueueFlow({
      event: new Charge('order-7'),
      children: [
        { event: new Pack('pack-7'), delay: later },
        { event: new Verify('verify-7'), delay: later },
      ],
    });
    expect(await service.cancel(Pack, 'pack-7')).toBe(true);
    await waitFor(async () => (await service.find(Charge, 'order-7'))?.state === 'dead', 'the parent dead-lettered');
    expect((await service.find(Charge, 'order-7'))?.lastError).toMatch(/^dependency: test\.flow-pack\|pack-7 cancelled/);
    // Purged, its flow record goes with it.
    expect(await redis.client().hexists(`${service.prefix}:{test.flow-charge}:fl`, 'order-7')).toBe(1);
    expect(await service.purgeDeadLetters(Charge, ['order-7'])).toBe(1);
    expect(await redis.client().hexists(`${service.prefix}:{test.flow-charge}:fl`, 'order-7')).toBe(0);
    expect(await redis.client().exists(`${service.prefix}:{test.flow-charge}:fr:order-7`)).toBe(0);
    const error = await service.cancel(Charge, 'x', { cascade: 'no' } as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    const misspelt = await service.cancel(Charge, 'x', { cascde: false } as never).catch((e: unknown) => e);
    expect(String(misspelt)).toMatch(/cascde/);
  });

  it('after: an event waits for events already stored, following each through replace; a missing id is an InvalidArgumentError and nothing is stored', async () => {
    const { service, ran } = handling(redis.service({ prefix: redis.prefix() }));
    const missing = await service.enqueue(new Charge('order-8'), 0, { after: [{ type: Verify, id: 'nobody' }] }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(InvalidArgumentError);
    expect(String(missing)).toMatch(/after\[0\].*test\.flow-verify\|nobody/);
    expect(await service.find(Charge, 'order-8')).toBeUndefined();

    await service.enqueue(new Verify('verify-8'), 300);
    await service.enqueue(new Pack('pack-8'), 300);
    expect(
      await service.enqueue(new Charge('order-8'), 0, {
        after: [
          { type: Verify, id: 'verify-8' },
          { type: 'test.flow-pack', id: 'pack-8' },
        ],
      }),
    ).toBe('scheduled');
    expect((await service.find(Charge, 'order-8'))?.state).toBe('waiting');
    // Replaced before it runs: the dependency follows the id, and the parent sees the new payload's result.
    await service.enqueue(new Verify('verify-8', false), 100, { replace: true });
    await waitFor(() => ran('order-8').length === 1, 'the parent ran');
    expect(Object.keys(ran('order-8')[0]!.children!).sort()).toEqual(['test.flow-pack|pack-8', 'test.flow-verify|verify-8']);
    // A dependency handled within the idempotency window counts as done at once.
    expect(await service.enqueue(new Charge('order-9'), 0, { after: [{ type: Verify, id: 'verify-8' }] })).toBe('scheduled');
    await waitFor(() => ran('order-9').length === 1, 'the parent of a handled dependency ran');
  });

  it('after: a dependency follows its id through a debounce, and the parent runs once after the one call', async () => {
    const { service, ran } = handling();
    expect(await service.enqueue(new Verify('verify-15'), 400, { debounce: { maxWaitMs: 5_000 } })).toBe('scheduled');
    expect(await service.enqueue(new Charge('order-15'), 0, { after: [{ type: Verify, id: 'verify-15' }] })).toBe('scheduled');
    expect(await service.enqueue(new Verify('verify-15'), 400, { debounce: { maxWaitMs: 5_000 } })).toBe('debounced');
    await waitFor(() => ran('order-15').length === 1, 'the parent ran');
    expect(ran('verify-15')).toHaveLength(1);
  });

  it('refuses a bad flow with InvalidArgumentError and stores nothing', async () => {
    const service = redis.service({ prefix: redis.prefix() });
    const children = Array.from({ length: 1_001 }, (_, i) => ({ event: new Pack(`p${i}`) }));
    const bad: Array<[string, () => Promise<unknown>, RegExp]> = [
      ['too many children', () => service.enqueueFlow({ event: new Charge('c'), children }), /at most 1000/],
      ['a misspelt key', () => service.enqueueFlow({ event: new Charge('c'), children: [{ event: new Pack('p'), onChildFailre: 'ignore' } as never] }), /onChildFailre/],
      ['a bad policy', () => service.enqueueFlow({ event: new Charge('c'), children: [{ event: new Pack('p'), onChildFailure: 'skip' as never }] }), /'fail', 'ignore' or 'continue'/],
      ['a window on a parent', () => service.enqueueFlow({ event: new Charge('c'), options: { debounce: {} }, children: [{ event: new Pack('p') }] }), /only context, priority and maxAttempts/],
      ['a bad leaf option', () => service.enqueueFlow({ event: new Charge('c'), children: [{ event: new Pack('p'), options: { priority: -1 } }] }), /priority/],
      ['after inside a flow', () => service.enqueueFlow({ event: new Charge('c'), children: [{ event: new Pack('p'), options: { after: [] } }] }), /after/],
      ['after not an array', () => service.enqueue(new Charge('c'), 0, { after: 'x' as never }), /after/],
      ['after with a misspelt key', () => service.enqueue(new Charge('c'), 0, { after: [{ type: Pack, idd: 'p' } as never] }), /idd/],
      ['after naming itself', () => service.enqueue(new Charge('c'), 0, { after: [{ type: Charge, id: 'c' }] }), /cannot wait for itself/],
      ['a node under itself', () => service.enqueueFlow({ event: new Charge('c'), children: [{ event: new Pack('p'), children: [{ event: new Charge('c') }] }] }), /own descendant/],
    ];
    for (const [what, call, message] of bad) {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, what).toBeInstanceOf(InvalidArgumentError);
      expect(String((error as Error).message), what).toMatch(message);
    }
    expect(await service.find(Charge, 'c')).toBeUndefined();
    expect(await service.find(Pack, 'p')).toBeUndefined();
    expect(await service.find(Pack, 'p0')).toBeUndefined();
  });

  it('the same flow sent again adds nothing twice: nodes already stored answer duplicate, and the flow still runs once', async () => {
    const service = redis.service({ prefix: redis.prefix() });
    const flow = {
      event: new Charge('order-10'),
      children: [
        { event: new Pack('pack-10'), delay: 200 },
        { event: new Verify('verify-10'), delay: 200 },
      ],
    };
    await service.enqueueFlow(flow);
    expect(await service.enqueueFlow(flow)).toEqual({
      status: 'duplicate',
      children: [
        { status: 'duplicate', children: [] },
        { status: 'duplicate', children: [] },
      ],
    });
    const { ran } = handling(service);
    await waitFor(() => ran('order-10').length === 1, 'the root ran');
    await waitFor(() => ran('pack-10').length === 1 && ran('verify-10').length === 1, 'each child ran');
  });

  it('health() names a parent waiting for a child that no longer exists', async () => {
    const service = redis.service({ prefix: redis.prefix() });
    await service.enqueueFlow({
      event: new Charge('order-11'),
      children: [
        { event: new Pack('pack-11'), delay: 60_000 },
        { event: new Verify('verify-11'), delay: 60_000 },
      ],
    });
    expect((await service.health()).orphanedParents).toBeUndefined();
    // Drained: the child goes without a word to its parent.
    await service.drain(Verify);
    expect((await service.health()).orphanedParents).toEqual([{ type: 'test.flow-charge', id: 'order-11', missing: [{ type: 'test.flow-verify', id: 'verify-11' }] }]);
  });

  it('a child delivered to several groups is done once every group handled it, and fails its edge when one group dead-letters it', async () => {
    const service = redis.service({ prefix: redis.prefix() });
    const seen: string[] = [];
    service.addHandler(Verify, (e) => void seen.push(`a:${e.id}`), { group: 'audit' });
    service.addHandler(
      Verify,
      async (e) => {
        seen.push(`b:${e.id}`);
        if (e.fail) throw new PermanentFailure('no');
      },
      { group: 'billing' },
    );
    const runs: string[] = [];
    service.addHandler(Charge, (e) => void runs.push(e.id));
    await service.waitUntilReady();
    await waitFor(async () => ((await service.types()).find((t) => t.type === 'test.flow-verify')?.groups.length ?? 0) >= 2, 'both groups registered');
    await service.enqueueFlow({ event: new Charge('order-12'), children: [{ event: new Verify('verify-12') }] });
    await waitFor(() => runs.includes('order-12'), 'the parent ran');
    expect(seen.filter((s) => s.endsWith('verify-12')).sort()).toEqual(['a:verify-12', 'b:verify-12']);
    await service.enqueueFlow({ event: new Charge('order-13'), children: [{ event: new Verify('verify-13', true) }] });
    await waitFor(async () => (await service.find(Charge, 'order-13'))?.state === 'dead', 'the parent dead-lettered');
    expect(runs).not.toContain('order-13');
  });

  it("a parent keeps waiting through a change of its type's partitions, and runs once its children are done", async () => {
    const prefix = redis.prefix();
    const before = redis.service({ prefix });
    before.addHandler(Charge, () => undefined);
    await before.enqueueFlow({
      event: new Charge('order-14'),
      children: [
        { event: new Pack('pack-14'), delay: 1_500 },
        { event: new Verify('verify-14'), delay: 1_500 },
      ],
    });
    await before.close();
    // The type now has 4 partitions: the parent moves, WAITING, with its record.
    const after = redis.service({ prefix });
    const runs: Run[] = [];
    after.addHandler(ChargeResized, async (e, _c, d) => {
      runs.push({ type: 'test.flow-charge', id: e.id, children: await d.childResults() });
    });
    await waitFor(async () => (await redis.client().zscore(`${prefix}:{test.flow-charge#${partitionOf('order-14', 4)}}:wt`, 'order-14')) !== null, 'the parent moved, still waiting');
    expect((await after.find(ChargeResized, 'order-14'))?.state).toBe('waiting');
    after.addHandler(Pack, () => undefined);
    after.addHandler(Verify, () => undefined);
    await waitFor(() => runs.length === 1, 'the parent ran once');
    expect(Object.keys(runs[0]!.children!).sort()).toEqual(['test.flow-pack|pack-14', 'test.flow-verify|verify-14']);
  });

  it("a failure two levels down reaches the root: under 'continue' the root runs with it, under 'fail' it is dead-lettered too", async () => {
    const { service, ran } = handling();
    const metrics = recordMetrics(service);
    await service.enqueueFlow({
      event: new Charge('order-16'),
      children: [{ event: new Pack('pack-16'), onChildFailure: 'continue', children: [{ event: new Verify('verify-16', true) }] }],
    });
    await waitFor(() => ran('order-16').length === 1, 'the root ran');
    expect(ran('order-16')[0]!.children?.['test.flow-pack|pack-16']).toEqual({ outcome: 'dead-lettered', error: expect.stringMatching(/^dependency: test\.flow-verify\|verify-16/) });
    expect(ran('pack-16')).toEqual([]);
    await service.enqueueFlow({ event: new Charge('order-17'), children: [{ event: new Pack('pack-17'), children: [{ event: new Verify('verify-17', true) }] }] });
    await waitFor(async () => (await service.find(Charge, 'order-17'))?.state === 'dead', 'the root dead-lettered');
    expect((await service.find(Charge, 'order-17'))?.lastError).toMatch(/^dependency: test\.flow-pack\|pack-17 dead-lettered/);
    await waitFor(() => counter(metrics, METRIC.deadLettered, { reason: 'dependency' }) === 3, 'three dependency dead letters counted');
  });

  it('after sent again while its event waits links the dependencies it adds; a parent replaced stops waiting and runs once', async () => {
    const { service, ran } = handling();
    await service.enqueue(new Verify('verify-18'), 60_000);
    await service.enqueue(new Pack('pack-18'), 60_000);
    expect(await service.enqueue(new Charge('order-18'), 0, { after: [{ type: Verify, id: 'verify-18' }] })).toBe('scheduled');
    expect(
      await service.enqueue(new Charge('order-18'), 0, {
        after: [
          { type: Verify, id: 'verify-18' },
          { type: Pack, id: 'pack-18' },
        ],
      }),
    ).toBe('duplicate');
    expect((await service.find(Charge, 'order-18'))?.waitingFor).toHaveLength(2);
    await service.runNow(Verify, 'verify-18');
    await waitFor(() => ran('verify-18').length === 1, 'the first dependency ran');
    expect((await service.find(Charge, 'order-18'))?.waitingFor).toEqual([{ type: 'test.flow-pack', id: 'pack-18' }]);
    await service.runNow(Pack, 'pack-18');
    await waitFor(() => ran('order-18').length === 1, 'the parent ran once both were done');

    await service.enqueueFlow({ event: new Charge('order-19'), children: [{ event: new Pack('pack-19'), delay: 300 }] });
    expect(await service.enqueue(new Charge('order-19', 5), 0, { replace: true })).toBe('replaced');
    expect((await service.counts(Charge))?.waiting).toBe(0);
    await waitFor(() => ran('order-19').length === 1 && ran('pack-19').length === 1, 'the replaced parent ran, and the child');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(ran('order-19')).toHaveLength(1);
  });

  it('a child the flow does not store (throttled) is done for its parent at once', async () => {
    // No idempotency marks: the handled id is no duplicate, only its throttle window holds it back.
    const { service, ran } = handling(redis.service({ prefix: redis.prefix(), idempotencyWindowMs: 0 }));
    expect(await service.enqueue(new Verify('verify-20'), 0, { throttle: { windowMs: 60_000 } })).toBe('scheduled');
    await waitFor(() => ran('verify-20').length === 1, 'the first call ran');
    const status = await service.enqueueFlow({ event: new Charge('order-20'), children: [{ event: new Verify('verify-20'), options: { throttle: { windowMs: 60_000 } } }] });
    expect(status.children[0]!.status).toBe('throttled');
    await waitFor(() => ran('order-20').length === 1, 'the parent ran');
  });
});
