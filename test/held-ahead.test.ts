import { describe, expect, it } from 'vitest';
import type { DelayedEventService } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/**
 * An event claimed ahead of a handler's free slots waits in the process; its
 * handler starts only once Redis confirmed that its claim still holds and
 * the type is not paused (docs/state-machine.md, "Claimed ahead"). So a
 * cancel, replace or pause that resolved before its slot freed means its
 * handler never starts, however long it waited.
 */
describe('events held ahead obey cancel, replace and pause', () => {
  const redis = useRedis();

  /**
   * 40 events due now and a handler at parallelism 1 whose tenth call waits
   * for release(): resolves once that call runs and the reader holds events
   * claimed ahead of it, with one of them (in flight in Redis, its handler
   * not started) as `held`.
   */
  async function holding(service: DelayedEventService, prefix: string) {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const starts: string[] = [];
    const ends: string[] = [];
    let gatedId = '';
    service.addHandler(
      WorkItem,
      async (e) => {
        starts.push(`${e.id}#${e.n}`);
        if (starts.length === 10) {
          gatedId = e.id;
          await gate;
        }
        ends.push(e.id);
      },
      1,
    );
    for (let i = 0; i < 40; i++) await service.enqueue(new WorkItem(`w${i}`, i), 0);
    await waitFor(() => gatedId !== '', 'the gated call running');
    let held = '';
    await waitFor(async () => {
      const inFlight = await redis.client().zrange(`${prefix}:{test.work}:f`, '0', '-1');
      held = inFlight.find((id) => id.startsWith('w') && id !== gatedId && !starts.some((s) => s.startsWith(`${id}#`))) ?? '';
      return held !== '';
    }, 'an event claimed ahead of the running call');
    expect((await service.find(WorkItem, held))?.state).toBe('in-flight');
    // A start confirmed in the 10 ms before a cancel, replace or pause resolved may still go ahead
    // (CONFIRMED_FOR_MS, docs/api.md): the calls that confirm also claim, complete or mark starts,
    // so once Redis shows none for a while, no confirmation is that fresh.
    let seen = '';
    let quietSince = Number.POSITIVE_INFINITY;
    await waitFor(async () => {
      const now = Date.now();
      const state = JSON.stringify(await Promise.all([redis.client().zrange(`${prefix}:{test.work}:f`, '0', '-1', 'WITHSCORES'), redis.client().llen(`${prefix}:{test.work}:r`)]));
      if (state !== seen) [seen, quietSince] = [state, now];
      return now - quietSince >= 100;
    }, 'the reader quiet for 100 ms');
    return { starts, ends, held, release: () => release() };
  }

  it('cancel: an event held ahead and cancelled never starts, however long it waited for the slot', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const { starts, ends, held, release } = await holding(service, prefix);
    expect(await service.cancel(WorkItem, held)).toBe(true);
    release();
    await waitFor(() => ends.length === 39, 'every other event handled');
    expect(starts.filter((s) => s.startsWith(`${held}#`))).toEqual([]);
    expect(await service.find(WorkItem, held)).toBeUndefined();
    await waitFor(async () => (await service.counts(WorkItem))?.inFlight === 0, 'nothing left in flight');
  });

  it('replace: the old payload of an event held ahead never starts; the new one runs once', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const { starts, ends, held, release } = await holding(service, prefix);
    expect(await service.enqueue(new WorkItem(held, 999), 0, { replace: true })).toBe('replaced');
    release();
    await waitFor(() => ends.length >= 40, 'every event handled, the replaced one in its new version').catch(async (error: unknown) => {
      // Which ids never ended, and where Redis has them: what a failure here needs to be understood.
      const missing = Array.from({ length: 40 }, (_, i) => `w${i}`).filter((id) => !ends.includes(id));
      const states = await Promise.all(missing.map(async (id) => `${id}: ${JSON.stringify(await service.find(WorkItem, id))}`));
      throw new Error(`${String(error)}; started ${starts.join(' ')}; not ended: ${states.join('; ')}`);
    });
    expect(starts.filter((s) => s.startsWith(`${held}#`))).toEqual([`${held}#999`]);
    expect([...ends].sort()).toEqual(Array.from({ length: 40 }, (_, i) => `w${i}`).sort());
  });

  it('pause: nothing held ahead starts while the type is paused; it goes back unstarted and runs once after resume', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const { starts, ends, release } = await holding(service, prefix);
    await service.pause(WorkItem);
    const startedBefore = starts.length;
    release();
    await waitFor(async () => (await service.counts(WorkItem))?.ready === 30, 'what was held ahead back in READY');
    expect(starts.length).toBe(startedBefore);
    expect(ends.length).toBe(10);
    await service.resume(WorkItem);
    await waitFor(() => ends.length === 40, 'every event handled after resume');
    expect(new Set(starts).size).toBe(40);
  });

  it('a batch handler: an event gathered for the next call and cancelled, or paused, is not in the call', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const calls: string[][] = [];
    service.addBatchHandler(
      WorkItem,
      (events) => {
        calls.push(events.map((e) => e.id));
      },
      { maxBatch: 100, maxWaitMs: 1_500 },
    );
    // Claimed, and waiting here for company until maxWaitMs.
    await service.enqueue(new WorkItem('gathered'), 0);
    await waitFor(async () => (await service.find(WorkItem, 'gathered'))?.state === 'in-flight', 'the event claimed and gathering');
    expect(await service.cancel(WorkItem, 'gathered')).toBe(true);
    await service.enqueue(new WorkItem('after'), 0);
    await waitFor(() => calls.flat().includes('after'), 'the next event handled');
    expect(calls.flat()).not.toContain('gathered');

    // Paused while gathering: back to READY, unstarted; after resume, in one call.
    await service.enqueue(new WorkItem('paused'), 0);
    await waitFor(async () => (await service.find(WorkItem, 'paused'))?.state === 'in-flight', 'the second event gathering');
    await service.pause(WorkItem);
    await waitFor(async () => (await service.find(WorkItem, 'paused'))?.state === 'ready', 'the paused event back in READY');
    expect(calls.flat()).not.toContain('paused');
    await service.resume(WorkItem);
    await waitFor(() => calls.flat().includes('paused'), 'the event handled after resume');
    expect(calls.flat().filter((id) => id === 'paused')).toEqual(['paused']);
  });
});
