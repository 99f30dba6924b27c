import { lastValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, type EnqueueStatus, InvalidArgumentError, METRIC } from '../src';
import { WorkItem } from './support/events';
import { counter, recordMetrics, useRedis } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

@DelayedEvent('test.window-partitioned', { partitions: 4 })
class Digest {
  constructor(
    readonly id: string = '',
    readonly tenant: string = '',
    readonly n: number = 0,
  ) {}
}

interface Call {
  readonly id: string;
  readonly n: number;
  /** ms since the test's first enqueue. */
  readonly at: number;
  readonly attempt: number;
}

/** Waits until `ms` have passed since `t0`: the tests below enqueue on a timeline. */
const until = (t0: number, ms: number) => waitFor(() => Date.now() - t0 >= ms, `${ms} ms into the timeline`, ms + 5_000, 5);

// Debounce, throttle and dedupe windows on enqueue (since 0.6; docs/windows.md).
describe('enqueue windows', () => {
  const redis = useRedis();

  function handling(options: Parameters<typeof redis.service>[0] = {}, handle?: (e: WorkItem) => Promise<boolean | undefined> | boolean | undefined) {
    const service = redis.service({ prefix: redis.prefix(), ...options });
    const calls: Call[] = [];
    let t0 = Date.now();
    service.addHandler(
      WorkItem,
      async (e, _c, d) => {
        calls.push({ id: e.id, n: e.n, at: Date.now() - t0, attempt: d.attempt });
        return (await handle?.(e)) ?? true;
      },
      4,
    );
    return { service, calls, start: () => (t0 = Date.now()), now: () => Date.now() - t0 };
  }

  it('refuses a bad window with InvalidArgumentError that says what to change, and stores nothing', async () => {
    const service = redis.service({ prefix: redis.prefix() });
    const bad: Array<[string, () => Promise<unknown>, RegExp]> = [
      ['two windows', () => service.enqueue(new WorkItem('a'), 100, { debounce: {}, throttle: { windowMs: 10 } }), /at most one of replace, debounce, throttle and dedupe, got debounce and throttle/],
      ['replace and debounce', () => service.enqueue(new WorkItem('a'), 100, { replace: true, debounce: {} }), /got replace and debounce/],
      ['maxWaitMs below the delay', () => service.enqueue(new WorkItem('a'), 1_000, { debounce: { maxWaitMs: 500 } }), /maxWaitMs.*below the delay \(1000 ms\)/],
      ['maxWaitMs below the delay of enqueueAt', () => lastValueFrom(service.enqueueAt(new WorkItem('a'), new Date(Date.now() + 60_000), { debounce: { maxWaitMs: 1_000 } })), /below the delay/],
      ['a misspelt key', () => service.enqueue(new WorkItem('a'), 100, { debounce: { maxWait: 500 } as never }), /maxWait/],
      ['a misspelt window', () => service.enqueue(new WorkItem('a'), 100, { debounse: {} } as never), /debounse/],
      ['trailing false alone', () => service.enqueue(new WorkItem('a'), 100, { debounce: { trailing: false } }), /trailing.*only with leading: true/],
      ['leading not a boolean', () => service.enqueue(new WorkItem('a'), 100, { debounce: { leading: 'yes' as never } }), /leading.*true or false/],
      ['a fractional maxWaitMs', () => service.enqueue(new WorkItem('a'), 100, { debounce: { maxWaitMs: 150.5 } }), /maxWaitMs.*whole number/],
      ['throttle without windowMs', () => service.enqueue(new WorkItem('a'), 100, { throttle: {} as never }), /throttle.windowMs.*whole number of ms from 1/],
      ['throttle of 0', () => service.enqueue(new WorkItem('a'), 100, { throttle: { windowMs: 0 } }), /from 1 to/],
      ['dedupe over 7 days', () => service.enqueue(new WorkItem('a'), 100, { dedupe: { windowMs: 8 * 86_400_000 } }), /dedupe.windowMs.*from 0 to 604,800,000/],
      ['keepLast not a boolean', () => service.enqueue(new WorkItem('a'), 100, { dedupe: { windowMs: 10, keepLast: 1 as never } }), /keepLast.*true or false/],
      ['dedupe not an object', () => service.enqueue(new WorkItem('a'), 100, { dedupe: 5 as never }), /dedupe of enqueue.*must be an object/],
      ['a batch entry', () => service.enqueueMany([{ event: new WorkItem('b') }, { event: new WorkItem('a'), delay: 100, throttle: { windowMs: -1 } }]), /enqueueMany entry 1/],
      ['a batch replacing with windows', () => service.enqueueMany([{ event: new WorkItem('a'), debounce: {} }], { replace: true }), /got replace and debounce/],
    ];
    for (const [what, call, message] of bad) {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, what).toBeInstanceOf(InvalidArgumentError);
      expect(String((error as Error).message), what).toMatch(message);
    }
    expect(await service.find(WorkItem, 'a')).toBeUndefined();
    expect(await service.find(WorkItem, 'b')).toBeUndefined();
  });

  it('debounce (trailing): enqueues at 0, 200 and 400 ms with a 1,000 ms delay make one call, at 1,400 ms, with the third payload', async () => {
    const { service, calls, start } = handling();
    const t0 = Date.now();
    start();
    const statuses: EnqueueStatus[] = [await service.enqueue(new WorkItem('digest', 1), 1_000, { debounce: {} })];
    const firstStored = Date.now();
    await until(t0, 200);
    statuses.push(await service.enqueue(new WorkItem('digest', 2), 1_000, { debounce: {} }));
    await until(t0, 400);
    statuses.push(await service.enqueue(new WorkItem('digest', 3), 1_000, { debounce: {} }));
    const stored = await service.find(WorkItem, 'digest');
    expect(stored?.event?.n).toBe(3);
    expect(stored?.attempt).toBe(0);
    // The burst began with the first enqueue; without maxWaitMs it has no bound.
    expect(stored!.burstStartedAt!.getTime()).toBeGreaterThanOrEqual(t0 - 20);
    expect(stored!.burstStartedAt!.getTime()).toBeLessThanOrEqual(firstStored + 20);
    expect(stored?.dueBy).toBeUndefined();
    expect(statuses).toEqual(['scheduled', 'debounced', 'debounced']);
    await waitFor(() => calls.length === 1, 'the call');
    expect(calls[0]).toMatchObject({ n: 3, attempt: 1 });
    expect(calls[0]!.at).toBeGreaterThanOrEqual(1_390);
    // Handled: nothing is left to make a second call.
    await waitFor(async () => (await service.find(WorkItem, 'digest')) === undefined, 'nothing stored');
    expect(calls).toHaveLength(1);
  });

  it('debounce with maxWaitMs: a steady stream of enqueues is handled by the bound, with the latest payload, and find shows the burst', async () => {
    const { service, calls } = handling();
    const t0 = Date.now();
    let n = 0;
    // The quiet period (600 ms) is six intervals of the stream: a loaded machine's pause between two
    // enqueues does not end the burst early; the bound (1.5 s) comes first.
    const options = { debounce: { maxWaitMs: 1_500 } };
    expect(await service.enqueue(new WorkItem('score', ++n), 600, options)).toBe('scheduled');
    const first = await service.find(WorkItem, 'score');
    expect(first!.dueBy!.getTime() - first!.burstStartedAt!.getTime()).toBe(1_500);
    // One enqueue every 100 ms: without the bound the event would never come due.
    while (calls.length === 0 && Date.now() - t0 < 8_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const status = await service.enqueue(new WorkItem('score', ++n), 600, options);
      if (calls.length === 0) expect(['debounced', 'scheduled']).toContain(status);
    }
    expect(calls.length).toBeGreaterThan(0);
    const call = calls[0]!;
    // Due at the burst's start + 1.5 s: the payload then stored, the latest before the call.
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(call.n).toBeGreaterThan(5);
  });

  it('the stored maxWaitMs wins: a later enqueue of the burst with another one does not move its bound', async () => {
    const service = redis.service({ prefix: redis.prefix() });
    await service.enqueue(new WorkItem('bound', 1), 300, { debounce: { maxWaitMs: 800 } });
    const first = await service.find(WorkItem, 'bound');
    expect(await service.enqueue(new WorkItem('bound', 2), 300, { debounce: { maxWaitMs: 60_000 } })).toBe('debounced');
    const second = await service.find(WorkItem, 'bound');
    expect(second?.event?.n).toBe(2);
    expect(second?.burstStartedAt?.getTime()).toBe(first?.burstStartedAt?.getTime());
    expect(second?.dueBy?.getTime()).toBe(first!.burstStartedAt!.getTime() + 800);
    // One without a bound joins the burst under its bound too.
    await service.enqueue(new WorkItem('bound', 3), 300, { debounce: {} });
    expect((await service.find(WorkItem, 'bound'))?.dueBy?.getTime()).toBe(first!.dueBy!.getTime());
  });

  it('debounce while the event runs stores a new event, which the running call cannot delete; a handled or dead-lettered id is stored anew', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { service, calls } = handling({ idempotencyWindowMs: 3_600_000 }, async (e) => {
      if (e.n === 1) await gate;
      return e.id !== 'doomed';
    });
    await service.enqueue(new WorkItem('job', 1), 0, { debounce: {} });
    await waitFor(() => calls.length === 1, 'the first call running');
    expect(await service.enqueue(new WorkItem('job', 2), 200, { debounce: {} })).toBe('scheduled');
    release();
    await waitFor(() => calls.length === 2, 'the second call');
    expect(calls.map((c) => c.n)).toEqual([1, 2]);
    // Handled within the service's idempotency window: a plain enqueue is a duplicate, a debounce schedules the next.
    await waitFor(async () => (await service.find(WorkItem, 'job')) === undefined, 'job handled');
    expect(await service.enqueue(new WorkItem('job', 3), 0)).toBe('duplicate');
    expect(await service.enqueue(new WorkItem('job', 4), 0, { debounce: {} })).toBe('scheduled');
    await waitFor(() => calls.some((c) => c.n === 4), 'the third call');
    // A dead letter is replaced by a new event.
    await service.enqueue(new WorkItem('doomed', 5), 0, { maxAttempts: 1 });
    await waitFor(async () => (await service.find(WorkItem, 'doomed'))?.state === 'dead', 'dead-lettered');
    expect(await service.enqueue(new WorkItem('doomed', 6), 60_000, { debounce: {} })).toBe('scheduled');
    const stored = await service.find(WorkItem, 'doomed');
    expect(stored).toMatchObject({ state: 'scheduled', attempt: 0, event: { n: 6 } });
  });

  it('leading + trailing: enqueues at 0, 200 and 400 ms with a 1,000 ms delay: the first runs at once, the third at 1,400 ms', async () => {
    const { service, calls, start } = handling();
    const t0 = Date.now();
    start();
    const options = { debounce: { leading: true } };
    const statuses = [await service.enqueue(new WorkItem('lt', 1), 1_000, options)];
    await until(t0, 200);
    statuses.push(await service.enqueue(new WorkItem('lt', 2), 1_000, options));
    await until(t0, 400);
    statuses.push(await service.enqueue(new WorkItem('lt', 3), 1_000, options));
    expect(statuses).toEqual(['scheduled', 'debounced', 'debounced']);
    await waitFor(() => calls.length === 2, 'two calls');
    expect(calls.map((c) => c.n)).toEqual([1, 3]);
    expect(calls[0]!.at).toBeLessThan(1_000);
    expect(calls[1]!.at).toBeGreaterThanOrEqual(1_390);
    await waitFor(async () => (await service.find(WorkItem, 'lt')) === undefined, 'nothing stored');
    expect(calls).toHaveLength(2);
  });

  it('leading only: the first runs at once; later enqueues answer debounced, change nothing and extend the quiet period', async () => {
    const { service, calls } = handling();
    const t0 = Date.now();
    const options = { debounce: { leading: true, trailing: false } };
    expect(await service.enqueue(new WorkItem('lo', 1), 1_000, options)).toBe('scheduled');
    await until(t0, 200);
    expect(await service.enqueue(new WorkItem('lo', 2), 1_000, options)).toBe('debounced');
    await until(t0, 400);
    expect(await service.enqueue(new WorkItem('lo', 3), 1_000, options)).toBe('debounced');
    // At 1,100 ms the quiet period, extended to 1,400 or later by the third call, still runs.
    await until(t0, 1_100);
    expect(await service.enqueue(new WorkItem('lo', 4), 1_000, options)).toBe('debounced');
    const quietFrom = Date.now();
    expect(calls.map((c) => c.n)).toEqual([1]);
    // Quiet for the delay since the fourth call: the next burst begins.
    await waitFor(() => Date.now() > quietFrom + 1_050, 'a quiet period over', 5_000, 5);
    expect(await service.enqueue(new WorkItem('lo', 5), 1_000, options)).toBe('scheduled');
    await waitFor(() => calls.length === 2, 'the next burst');
    expect(calls.map((c) => c.n)).toEqual([1, 5]);
  });

  it('leading + trailing never runs the trailing call beside the leading one: it waits, shown by find, until the leading call ends; cancel drops it', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { service, calls } = handling({}, async (e) => {
      if (e.n === 1) await gate;
      return true;
    });
    const options = { debounce: { leading: true } };
    await service.enqueue(new WorkItem('slow', 1), 1_000, options);
    await waitFor(() => calls.length === 1, 'the leading call running');
    expect(await service.enqueue(new WorkItem('slow', 2), 1_000, options)).toBe('debounced');
    // Its quiet period ends while the leading call still runs: the trailing payload waits for it.
    const held = await service.find(WorkItem, 'slow');
    expect(held?.state).toBe('in-flight');
    expect(held?.trailingDueAt).toBeInstanceOf(Date);
    await waitFor(() => Date.now() > held!.trailingDueAt!.getTime() + 300, 'the trailing due time well past');
    expect(calls).toHaveLength(1);
    release();
    await waitFor(() => calls.length === 2, 'the trailing call');
    expect(calls[1]!.n).toBe(2);

    // Cancel ends the burst: a payload held behind a running call never runs.
    let releaseAgain: () => void = () => {};
    const gateAgain = new Promise<void>((resolve) => (releaseAgain = resolve));
    let ended = false;
    const other = handling({}, async (e) => {
      if (e.n === 1) await gateAgain;
      ended = true;
      return true;
    });
    const metrics = recordMetrics(other.service);
    await other.service.enqueue(new WorkItem('gone', 1), 100, options);
    await waitFor(() => other.calls.length === 1, 'its leading call running');
    await other.service.enqueue(new WorkItem('gone', 2), 100, options);
    expect(await other.service.cancel(WorkItem, 'gone')).toBe(true);
    releaseAgain();
    // Its result comes back fenced off (the cancel removed the event), and releases nothing.
    await waitFor(() => ended && counter(metrics, METRIC.staleResults) === 1, 'the leading call ended, its result stale');
    expect(await other.service.find(WorkItem, 'gone')).toBeUndefined();
    expect(await other.service.enqueue(new WorkItem('gone', 3), 100, options)).toBe('scheduled');
    await waitFor(() => other.calls.length === 2, 'a new burst');
    expect(other.calls.map((c) => c.n)).toEqual([1, 3]);
  });

  it('leading + trailing through a crash: the instance running the leading call is killed; the call comes back, and the trailing one runs after it, once', async () => {
    const prefix = redis.prefix();
    const crashing = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'hang', HEARTBEAT_MS: '250' });
    try {
      await crashing.waitForLine((l) => l.ready === true);
      const producer = redis.service({ prefix });
      // A quiet period long enough that the second enqueue falls within it however slowly the worker reports its start.
      const options = { debounce: { leading: true, maxWaitMs: 4_000 } };
      await producer.enqueue(new WorkItem('crash', 1), 2_000, options);
      await crashing.waitForLine((l) => l.started === 'crash');
      expect(await producer.enqueue(new WorkItem('crash', 2), 2_000, options)).toBe('debounced');
      await crashing.kill();
      const calls: number[] = [];
      let running = 0;
      let overlapped = false;
      producer.addHandler(
        WorkItem,
        async (e) => {
          overlapped ||= running > 0;
          running++;
          calls.push(e.n);
          await new Promise((resolve) => setTimeout(resolve, 50));
          running--;
          return true;
        },
        4,
      );
      await waitFor(() => calls.length === 2, 'the leading call again, then the trailing one', 20_000);
      await waitFor(async () => (await producer.find(WorkItem, 'crash')) === undefined && running === 0, 'nothing left');
      expect(calls).toEqual([1, 2]);
      expect(overlapped).toBe(false);
    } finally {
      await crashing.kill();
    }
  }, 30_000);

  it('a leading event dead-lettered gives way to the trailing payload it held, which runs', async () => {
    const { service, calls } = handling({}, (e) => e.n !== 1);
    const options = { debounce: { leading: true } };
    await service.enqueue(new WorkItem('dl', 1), 300, { ...options, maxAttempts: 1 });
    expect(await service.enqueue(new WorkItem('dl', 2), 300, options)).toBe('debounced');
    await waitFor(() => calls.some((c) => c.n === 2), 'the trailing call');
    expect(calls.map((c) => c.n)).toEqual([1, 2]);
    await waitFor(async () => (await service.find(WorkItem, 'dl')) === undefined, 'handled');
  });

  it('throttle: the first enqueue stores the event; for exactly windowMs the id answers throttled, handled or not, whatever the idempotency window', async () => {
    const { service, calls } = handling({ idempotencyWindowMs: 0 });
    const metrics = recordMetrics(service);
    const t0 = Date.now();
    expect(await service.enqueue(new WorkItem('hook', 1), 0, { throttle: { windowMs: 1_000 } })).toBe('scheduled');
    // The window opened when the script ran: between t0 and now.
    const opened = Date.now();
    await waitFor(() => calls.length === 1, 'handled');
    await waitFor(async () => (await service.find(WorkItem, 'hook')) === undefined, 'gone');
    let throttled = 0;
    while (Date.now() - t0 < 900) {
      expect(await service.enqueue(new WorkItem('hook', 2), 0, { throttle: { windowMs: 1_000 } })).toBe('throttled');
      throttled++;
    }
    // A plain enqueue is not throttled: the window is the throttle's.
    expect(await service.enqueue(new WorkItem('plain', 2), 0)).toBe('scheduled');
    await until(opened, 1_050);
    expect(await service.enqueue(new WorkItem('hook', 3), 0, { throttle: { windowMs: 1_000 } })).toBe('scheduled');
    await waitFor(() => calls.filter((c) => c.id === 'hook').length === 2, 'the next window handled');
    expect(calls.filter((c) => c.id === 'hook').map((c) => c.n)).toEqual([1, 3]);
    expect(counter(metrics, METRIC.enqueued, { type: 'test.work', status: 'throttled' })).toBe(throttled);
    expect(counter(metrics, METRIC.enqueued, { type: 'test.work', status: 'scheduled' })).toBe(3);
  });

  it("dedupe: the call's own window counts from the handling, instead of the service's; keepLast replaces a scheduled duplicate's payload, not its due time", async () => {
    const { service, calls } = handling({ idempotencyWindowMs: 0 });
    expect(await service.enqueue(new WorkItem('pay', 1), 0, { dedupe: { windowMs: 1_000 } })).toBe('scheduled');
    await waitFor(() => calls.length === 1, 'handled');
    await waitFor(async () => (await service.find(WorkItem, 'pay')) === undefined, 'gone');
    // Completed (and marked) by now: the window ends a second after, at the latest.
    const handledAt = Date.now();
    expect(await service.enqueue(new WorkItem('pay', 2), 0, { dedupe: { windowMs: 1_000 } })).toBe('duplicate');
    // The service's window (0) still applies to an event enqueued without one.
    expect(await service.enqueue(new WorkItem('other', 1), 0)).toBe('scheduled');
    await waitFor(() => calls.some((c) => c.id === 'other'), 'other handled');
    await waitFor(async () => (await service.find(WorkItem, 'other')) === undefined, 'other gone');
    expect(await service.enqueue(new WorkItem('other', 2), 0)).toBe('scheduled');
    await waitFor(() => Date.now() - handledAt > 1_100, 'the window over');
    expect(await service.enqueue(new WorkItem('pay', 3), 0, { dedupe: { windowMs: 1_000 } })).toBe('scheduled');

    // keepLast: the payload and context change; due time and attempts stay.
    expect(await service.enqueue(new WorkItem('kl', 1), 60_000, { dedupe: { windowMs: 1_000, keepLast: true } })).toBe('scheduled');
    const before = await service.find(WorkItem, 'kl');
    expect(await service.enqueue(new WorkItem('kl', 2), 1_000, { dedupe: { windowMs: 1_000, keepLast: true }, context: { who: 'second' } })).toBe('duplicate');
    const after = await service.find(WorkItem, 'kl');
    expect(after).toMatchObject({ state: 'scheduled', attempt: 0, event: { n: 2 }, context: { who: 'second' } });
    expect(after!.dueAt.getTime()).toBe(before!.dueAt.getTime());
    // Without keepLast the duplicate changes nothing.
    expect(await service.enqueue(new WorkItem('kl', 3), 0, { dedupe: { windowMs: 1_000 } })).toBe('duplicate');
    expect((await service.find(WorkItem, 'kl'))?.event?.n).toBe(2);
  });

  it('a cancelled id with its own dedupe window is marked for that window', async () => {
    const { service } = handling({ idempotencyWindowMs: 0 });
    await service.enqueue(new WorkItem('c', 1), 60_000, { dedupe: { windowMs: 60_000 } });
    expect(await service.cancel(WorkItem, 'c')).toBe(true);
    expect(await service.enqueue(new WorkItem('c', 2), 0)).toBe('duplicate');
  });

  it('enqueueMany takes a window per entry, one policy per call; the statuses come back in order and are counted by status', async () => {
    const { service, calls } = handling();
    const metrics = recordMetrics(service);
    const statuses = await service.enqueueMany([
      { event: new WorkItem('m1', 1), delay: 500, debounce: { maxWaitMs: 1_000 } },
      { event: new WorkItem('m2', 1), throttle: { windowMs: 60_000 } },
      { event: new WorkItem('m1', 2), delay: 500, debounce: { maxWaitMs: 1_000 } },
      { event: new WorkItem('m2', 2), throttle: { windowMs: 60_000 } },
      { event: new WorkItem('m3', 1), delay: 60_000 },
    ]);
    expect(statuses).toEqual(['scheduled', 'scheduled', 'debounced', 'throttled', 'scheduled']);
    await waitFor(() => calls.some((c) => c.id === 'm1'), 'm1 handled');
    expect(calls.filter((c) => c.id === 'm1').map((c) => c.n)).toEqual([2]);
    expect(counter(metrics, METRIC.enqueued, { type: 'test.work', status: 'debounced' })).toBe(1);
    expect(counter(metrics, METRIC.enqueued, { type: 'test.work', status: 'throttled' })).toBe(1);
  });

  it('on a partitioned type with per-key limits and priorities, each id makes one call with its last payload and priority', async () => {
    const service = redis.service({ prefix: redis.prefix() });
    const seen: Array<{ id: string; n: number }> = [];
    const ids = Array.from({ length: 12 }, (_, i) => `digest-${i}`);
    for (let n = 1; n <= 4; n++) {
      const statuses = await service.enqueueMany(ids.map((id, i) => ({ event: new Digest(id, `t${i % 3}`, n), delay: 1_000, priority: n, debounce: { maxWaitMs: 5_000 } })));
      expect(new Set(statuses)).toEqual(new Set([n === 1 ? 'scheduled' : 'debounced']));
    }
    expect(await service.find(Digest, 'digest-5')).toMatchObject({ state: 'scheduled', priority: 4, event: { n: 4 } });
    service.addHandler(Digest, (e) => void seen.push({ id: e.id, n: e.n }), 4, { key: (e) => e.tenant, perKey: { globalConcurrency: 4 } });
    await waitFor(() => seen.length === ids.length, 'one call per id', 10_000);
    await waitFor(async () => (await Promise.all(ids.map((id) => service.find(Digest, id)))).every((e) => e === undefined), 'all handled');
    expect(seen.map((c) => c.id).sort()).toEqual([...ids].sort());
    expect(seen.every((c) => c.n === 4)).toBe(true);
  });

  it('a debounced event reaches each registered group once, with the last payload', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const seen: Record<string, number[]> = { billing: [], audit: [] };
    for (const group of ['billing', 'audit']) {
      service.addHandler(WorkItem, (e) => void seen[group]!.push(e.n), 2, { group });
    }
    for (const group of ['billing', 'audit']) await waitFor(async () => (await redis.client().hexists(`${prefix}:{test.work}:groups`, group)) === 1, `group ${group} registered`);
    for (let n = 1; n <= 5; n++) await service.enqueue(new WorkItem('g', n), 300, { debounce: { maxWaitMs: 2_000 } });
    await waitFor(() => seen.billing!.length === 1 && seen.audit!.length === 1, 'each group handled it');
    await waitFor(async () => (await service.find(WorkItem, 'g')) === undefined, 'done in both');
    expect(seen).toEqual({ billing: [5], audit: [5] });
  });
});
