import { describe, expect, it } from 'vitest';
import { type DelayedEventService, type HandlerOptions, InvalidOptionError, METRIC } from '../src';
import { CONFIRMED_FOR_MS, ClaimedAhead } from '../src/runtime/claimed-ahead';
import { HandlerSlots } from '../src/runtime/handler-slots';
import { WorkItem } from './support/events';
import { counter, recordMetrics, useRedis } from './support/harness';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor } from './support/wait-for';

/** Leases in flight of test.work under `prefix` (the in-flight set's pin is no lease). */
async function leasesInFlight(client: { zcard(key: string): Promise<number> }, prefix: string): Promise<number> {
  const key = `${prefix}:{test.work}:f`;
  const size = await client.zcard(key);
  return size === 0 ? 0 : size - 1;
}

describe('claiming ahead of free handler slots (prefetch)', () => {
  const redis = useRedis();

  /**
   * A handler that is quick for its first `quick` calls and makes the next
   * one wait for the returned release(): by then its pace is known, so its
   * reader claims ahead while that call runs.
   */
  function gatedHandler(quick: number) {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const state = { handled: [] as Array<{ id: string; attempt: number }>, calls: 0, running: 0, most: 0, gatedId: '' };
    const handler = async (e: WorkItem, _context: unknown, delivery: { attempt: number }) => {
      state.running++;
      state.most = Math.max(state.most, state.running);
      if (++state.calls === quick + 1) {
        state.gatedId = e.id;
        await gate;
      }
      state.handled.push({ id: e.id, attempt: delivery.attempt });
      state.running--;
    };
    return { handler, state, release: () => release() };
  }

  /**
   * 40 events due now, then a handler at parallelism 1 whose tenth call waits for
   * release(): resolves once that call runs and the reader holds events claimed ahead.
   */
  async function holdingAhead(service: DelayedEventService, prefix: string, options: HandlerOptions = {}) {
    const gated = gatedHandler(9);
    for (let i = 0; i < 40; i++) await service.enqueue(new WorkItem(`w${i}`), 0);
    service.addHandler(WorkItem, gated.handler, 1, options);
    await waitFor(() => gated.state.gatedId !== '', 'the gated call running');
    await waitFor(async () => (await leasesInFlight(redis.client(), prefix)) > 1, 'events claimed ahead of the running call');
    return gated;
  }

  it('holds events claimed ahead while a quick handler runs, yet never runs more calls than its parallelism', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    // The one slot is taken, and the reader still claimed what follows: it waits here to start.
    const { state, release } = await holdingAhead(service, prefix);
    release();
    await waitFor(() => state.handled.length === 40, 'every event handled');
    expect(state.most).toBe(1);
    expect(new Set(state.handled.map((h) => h.id)).size).toBe(40);
    expect(state.handled.every((h) => h.attempt === 1)).toBe(true);
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.work}:m`)) === 0, 'all completed in Redis');
  });

  it('with prefetch 0 claims only for free slots', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const { handler, state, release } = gatedHandler(9);
    for (let i = 0; i < 40; i++) await service.enqueue(new WorkItem(`w${i}`), 0);
    service.addHandler(WorkItem, handler, 1, { prefetch: 0 });
    await waitFor(() => state.gatedId !== '', 'the gated call running');
    // The events behind the running call stay in READY, for any instance: none is claimed ahead.
    await waitFor(async () => (await service.counts(WorkItem))?.ready === 30, 'the rest ready');
    expect(await leasesInFlight(redis.client(), prefix)).toBe(1);
    release();
    await waitFor(() => state.handled.length === 40, 'every event handled');
  });

  it('gives back unstarted, without spending an attempt, events that waited half of leaseGraceMs, and claims no more ahead while the handler is stuck', async () => {
    const prefix = redis.prefix();
    // Half the grace: events claimed ahead may wait 300 ms for a slot.
    const stuck = redis.service({ prefix, leaseGraceMs: 600 });
    const metrics = recordMetrics(stuck);
    const { release } = await holdingAhead(stuck, prefix, { timeoutMs: 30_000 });
    // They go back, and the stuck instance keeps only its running call in flight.
    await waitFor(async () => (await stuck.counts(WorkItem))?.ready === 30, 'the events held ahead back in READY');
    expect(await leasesInFlight(redis.client(), prefix)).toBe(1);
    expect(counter(metrics, METRIC.claimsReleased, { type: 'test.work' })).toBe(30);

    // Another instance handles them, each on its first attempt.
    const healthy = redis.service({ prefix });
    const handledThere: Array<{ id: string; attempt: number }> = [];
    healthy.addHandler(WorkItem, (e, _c, d) => (handledThere.push({ id: e.id, attempt: d.attempt }), true), 4);
    await waitFor(() => handledThere.length === 30, 'the other instance handling them');
    expect(handledThere.every((h) => h.attempt === 1)).toBe(true);
    expect(await leasesInFlight(redis.client(), prefix)).toBe(1);
    release();
  });

  // The proxy stands in front of one redis-server.
  it.skipIf(redis.topology === 'cluster')('a give-back that fails while Redis is out of reach is made once it answers, not when the leases run out', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      const prefix = redis.prefix();
      // Events held ahead may wait 4 s for a slot (time enough to black-hole them first, on a loaded machine);
      // their leases last 38 s, far past this test's deadline. No loop looks by itself meanwhile.
      const stuck = redis.service({ redis: proxy.url, prefix, leaseGraceMs: 8_000, commandTimeoutMs: 400, pollIntervalMs: 60_000, readerBlockMs: 60_000 });
      const metrics = recordMetrics(stuck);
      const { release } = await holdingAhead(stuck, prefix, { timeoutMs: 30_000 });
      // Their give-back goes out on connections that no longer answer, and fails at its deadline.
      expect(proxy.blackholeAll()).toBeGreaterThan(0);
      // Not given back yet: they still hold their leases.
      expect(await leasesInFlight(redis.client(), prefix)).toBeGreaterThan(1);
      await waitFor(async () => (await redis.client().llen(`${prefix}:{test.work}:r`)) === 30, 'the events held ahead back in READY', 15_000);
      // The outage bit: the give-back failed at its deadline, or a call ahead of it on the handlers' connection
      // did (the instance's beacon, once a second), and the give-back went out on the connection that replaced it.
      const timedOut = counter(metrics, METRIC.redisCallTimeouts, { connection: 'owned' });
      expect(counter(metrics, METRIC.redisErrors, { loop: 'reader', type: 'test.work' }) + timedOut).toBeGreaterThan(0);
      // Counted when the give-back's reply reaches the service, which may come after Redis moved them.
      await waitFor(() => counter(metrics, METRIC.claimsReleased, { type: 'test.work' }) === 30, 'the give-back counted', 5_000);
      release();
    } finally {
      await proxy.stop();
    }
  });

  it('on close gives back what it holds ahead, so another instance handles it at once on its first attempt', async () => {
    const prefix = redis.prefix();
    // Leases far longer than the test: only the give-back can bring the events back in time.
    const closing = redis.service({ prefix, leaseGraceMs: 120_000, closeTimeoutMs: 200 });
    const { state, release } = await holdingAhead(closing, prefix);
    await closing.close();
    release();

    const next = redis.service({ prefix });
    const handledThere: Array<{ id: string; attempt: number }> = [];
    next.addHandler(WorkItem, (e, _c, d) => (handledThere.push({ id: e.id, attempt: d.attempt }), true), 4);
    await waitFor(() => handledThere.length === 30, 'what was held ahead handled by the next instance');
    expect(handledThere.every((h) => h.attempt === 1)).toBe(true);
    expect(handledThere.map((h) => h.id)).not.toContain(state.gatedId);
  });

  it('gives back only the claims it holds: an event replaced and claimed again by another instance stays with it', async () => {
    const prefix = redis.prefix();
    // Holding as many ahead as it may: it claims nothing more.
    const holding = redis.service({ prefix, closeTimeoutMs: 200 });
    const { state, release } = await holdingAhead(holding, prefix, { prefetch: 30 });
    const held = (await redis.client().zrange(`${prefix}:{test.work}:f`, '0', '-1')).find((id) => id.startsWith('w') && id !== state.gatedId)!;
    // Replaced while held here: its lease goes, it is due again, and another instance claims it on the same attempt.
    expect(await holding.enqueue(new WorkItem(held, 99), 0, { replace: true })).toBe('replaced');
    let releaseOther!: () => void;
    const otherGate = new Promise<void>((resolve) => (releaseOther = resolve));
    const otherStarts: string[] = [];
    const other = redis.service({ prefix });
    other.addHandler(
      WorkItem,
      async (e, _context, delivery) => {
        otherStarts.push(`${e.id}#${e.n}#${delivery.attempt}`);
        if (e.id === held) await otherGate;
      },
      1,
      { prefetch: 0 },
    );
    await waitFor(() => otherStarts.includes(`${held}#99#1`), 'the replaced event running in the other instance');
    // Closing gives back what the first instance holds, but not the other instance's claim of that id.
    await holding.close();
    expect(await redis.client().zscore(`${prefix}:{test.work}:f`, held)).not.toBeNull();
    expect(await redis.client().lrange(`${prefix}:{test.work}:r`, 0, -1)).not.toContain(held);
    releaseOther();
    release();
    // The other 29 held there come back and are handled here; the replaced one only once.
    await waitFor(() => otherStarts.length === 30, 'what the first instance held handled by the other');
    expect(otherStarts.filter((s) => s.startsWith(`${held}#`))).toEqual([`${held}#99#1`]);
  });

  it('gives back what it holds ahead when the type is paused', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const { state, release } = await holdingAhead(service, prefix);
    await service.pause(WorkItem);
    await waitFor(async () => (await service.counts(WorkItem))?.ready === 30, 'the events held ahead back in READY');
    release();
    await waitFor(async () => (await leasesInFlight(redis.client(), prefix)) === 0, 'the running call completed');
    expect(state.handled.length).toBe(10);
    expect((await service.counts(WorkItem))?.ready).toBe(30);
  });

  it('holds nothing ahead for a handler slower than a quarter of leaseGraceMs', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, leaseGraceMs: 400 });
    // At parallelism 1 a call of 150 ms starts less than one event within 100 ms: none is claimed ahead.
    const seenInFlight: number[] = [];
    let handled = 0;
    service.addHandler(
      WorkItem,
      async () => {
        seenInFlight.push(await leasesInFlight(redis.client(), prefix));
        await new Promise((resolve) => setTimeout(resolve, 150));
        handled++;
      },
      1,
    );
    for (let i = 0; i < 8; i++) await service.enqueue(new WorkItem(`s${i}`), 0);
    await waitFor(() => handled === 8, 'every event handled');
    expect(Math.max(...seenInFlight)).toBe(1);
  });

  it('starts events claimed for free slots even when the claim took longer than half of leaseGraceMs', async () => {
    // A grace of 2 ms: every claim's round trip is longer than the 1 ms an event may wait for a slot.
    const service = redis.service({ leaseGraceMs: 2 });
    const handled = new Set<string>();
    service.addHandler(WorkItem, (e) => void handled.add(e.id), 4);
    for (let i = 0; i < 20; i++) await service.enqueue(new WorkItem(`g${i}`), 0);
    await waitFor(() => handled.size === 20, 'every event handled');
  });

  it('refuses a prefetch that is no count', () => {
    const service = redis.service();
    for (const prefetch of [-1, 1.5, 10_001]) {
      expect(() => service.addHandler(WorkItem, () => true, 1, { prefetch })).toThrow(InvalidOptionError);
    }
  });
});

describe('HandlerSlots', () => {
  it("lets a handler's readers together hold ahead no more than it is expected to start", () => {
    const slots = new HandlerSlots(4, 250);
    for (let r = 0; r < 8; r++) slots.join({ startOne: () => false, freed: () => undefined });
    slots.take(1);
    slots.give(1, 50);
    // 4 slots, 50 ms a call: 100 events start within 1,250 ms, shared by the 8 readers.
    expect(8 * slots.aheadAllowed(1_250)).toBeLessThanOrEqual(100);
    expect(slots.aheadAllowed(1_250)).toBeGreaterThan(0);
  });
});

describe('ClaimedAhead', () => {
  it('starts events in claim order and sets aside those that waited too long', () => {
    const ahead = new ClaimedAhead<string>(100, false);
    ahead.add(['a', 'b'], 0, 2);
    ahead.add(['c'], 50, 1);
    expect(ahead.next(80)).toBe('a');
    expect(ahead.length).toBe(2);
    // At 120 'b' (claimed at 0) waited too long; 'c' (at 50) has not.
    expect(ahead.next(120)).toBe('c');
    expect(ahead.anyLate).toBe(true);
    expect(ahead.takeLate()).toEqual(['b']);
    expect(ahead.next(120)).toBeUndefined();
  });

  it('tells how long until the first waiting event would be late, and hands every event back when asked', () => {
    const ahead = new ClaimedAhead<string>(100);
    expect(ahead.sweep(0)).toBe(Infinity);
    ahead.add(['a'], 10, 1);
    ahead.add(['b'], 40, 1);
    expect(ahead.sweep(60)).toBe(50);
    expect(ahead.sweep(120)).toBe(20);
    expect(ahead.takeAll()).toEqual(['a', 'b']);
    expect(ahead.length).toBe(0);
  });

  it('starts an event only within CONFIRMED_FOR_MS of its confirmation, and never one Redis refused', () => {
    const ahead = new ClaimedAhead<string>(1_000);
    // Claimed for a free slot: confirmed by the claim. Claimed ahead: not yet.
    ahead.add(['free'], 0, 1);
    ahead.add(['x', 'y', 'z'], 0, 0);
    expect(ahead.next(1)).toBe('free');
    expect(ahead.next(2)).toBeUndefined();
    expect(ahead.needsConfirmation(2)).toBe(true);
    // The next call asks about the first two in line; while it runs, nobody asks again.
    const asked = ahead.toConfirm(2, 2);
    expect(asked.map((h) => h.event)).toEqual(['x', 'y']);
    expect(ahead.needsConfirmation(3)).toBe(false);
    expect(ahead.toConfirm(2, 3)).toEqual([]);
    // Redis refused 'x' (cancelled meanwhile): it never starts; 'y' does.
    ahead.settleConfirmations(asked, new Set([0]), 5);
    expect(ahead.length).toBe(2);
    expect(ahead.next(6)).toBe('y');
    // 'z' confirmed, then waits past CONFIRMED_FOR_MS (a slow call ahead of it): it is confirmed again first.
    const again = ahead.toConfirm(1, 6);
    ahead.settleConfirmations(again, new Set(), 7);
    expect(ahead.next(7 + CONFIRMED_FOR_MS + 1)).toBeUndefined();
    expect(ahead.needsConfirmation(7 + CONFIRMED_FOR_MS + 1)).toBe(true);
    // A failed call asks again; the refused one is not handed back at stop: its lease is no longer ours.
    ahead.confirmationsFailed(ahead.toConfirm(1, 20));
    expect(ahead.needsConfirmation(20)).toBe(true);
    expect(ahead.takeAll()).toEqual(['z']);
  });
});
