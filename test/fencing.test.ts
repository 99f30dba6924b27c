import { describe, expect, it } from 'vitest';
import { type Delivery, PermanentFailure, fixedBackoff } from '../src';
import { counter, recordMetrics, useRedis } from './support/harness';
import { WorkItem } from './support/events';
import { waitFor } from './support/wait-for';

/** How the old payload is taken away while its handler still runs. */
type Change = 'replace' | 'cancel and enqueue';
/** What the handler still running the old payload ends with. */
type OldOutcome = 'success' | 'failure' | 'permanent failure';

interface Scenario {
  readonly change: Change;
  readonly oldOutcome: OldOutcome;
  /** Both payloads in one instance (parallelism 2), or the new one in a second instance. */
  readonly sameInstance: boolean;
  readonly group?: string;
  /** The new payload's first call fails (and must be retried), or succeeds. */
  readonly newFirstCall: 'fails' | 'succeeds';
}

/**
 * A handler still running an old payload (n = 1) while the event is replaced,
 * or cancelled and enqueued again (n = 2). The old call's result arrives after
 * the new payload was claimed: it must change nothing. Each scenario is one
 * the 0.4 fence (the attempt number) let through.
 */
describe('results are fenced by the claim they belong to', () => {
  const redis = useRedis();

  async function run(scenario: Scenario): Promise<void> {
    const prefix = redis.prefix();
    const options = scenario.group ? { group: scenario.group } : {};
    // A cancelled id is a duplicate within the idempotency window: the scenario that enqueues it again runs without one.
    const window = scenario.change === 'cancel and enqueue' ? { idempotencyWindowMs: 0 } : {};
    const a = redis.service({ prefix, handlerTimeoutMs: 10_000, ...window });
    const b = scenario.sameInstance ? a : redis.service({ prefix, handlerTimeoutMs: 10_000, ...window });
    const metricsOfA = recordMetrics(a);
    let releaseOld!: () => void;
    const oldReleased = new Promise<void>((resolve) => (releaseOld = resolve));
    let oldReturned = false;
    const newCalls: Array<Pick<Delivery, 'attempt'>> = [];
    let newHandled = false;
    let oldCalls = 0;

    const handler = async (event: WorkItem, _context: unknown, delivery: Delivery): Promise<boolean> => {
      if (event.n === 1) {
        oldCalls++;
        await oldReleased;
        oldReturned = true;
        if (scenario.oldOutcome === 'success') return true;
        if (scenario.oldOutcome === 'permanent failure') throw new PermanentFailure('the old payload is refused');
        return false;
      }
      newCalls.push({ attempt: delivery.attempt });
      if (newCalls.length === 1) {
        // The old call ends, and its result reaches Redis, while this one runs.
        releaseOld();
        await waitFor(() => oldReturned && counter(metricsOfA, 'delayed.queue.stale.results') >= 1, "the old call's result, counted as stale");
        if (scenario.newFirstCall === 'fails') return false;
      }
      newHandled = true;
      return true;
    };

    a.addHandler(WorkItem, handler, scenario.sameInstance ? 2 : 1, { ...options, retry: fixedBackoff(3, 50) });
    await a.enqueue(new WorkItem('x', 1), 0);
    await waitFor(() => oldCalls === 1, 'the old payload running');
    if (!scenario.sameInstance) b.addHandler(WorkItem, handler, 1, { ...options, retry: fixedBackoff(3, 50) });
    if (scenario.change === 'replace') {
      expect(await a.enqueue(new WorkItem('x', 2), 0, { replace: true })).toBe('replaced');
    } else {
      expect(await a.cancel(WorkItem, 'x')).toBe(true);
      expect(await a.enqueue(new WorkItem('x', 2), 0)).toBe('scheduled');
    }
    await waitFor(() => newHandled, 'the new payload handled', 15_000);
    expect(newCalls.map((c) => c.attempt)).toEqual(scenario.newFirstCall === 'fails' ? [1, 2] : [1]);
    await waitFor(async () => (await a.find(WorkItem, 'x')) === undefined, 'the event completed');
    expect(await a.deadLetters(WorkItem, scenario.group ? { group: scenario.group } : {})).toEqual([]);
    expect(oldCalls).toBe(1);
  }

  it('a success of the old payload does not complete the replacement claimed by another instance', () => run({ change: 'replace', oldOutcome: 'success', sameInstance: false, newFirstCall: 'fails' }));

  it('a success of the old payload does not complete the replacement running in the same instance', () => run({ change: 'replace', oldOutcome: 'success', sameInstance: true, newFirstCall: 'fails' }));

  it('a permanent failure of the old payload does not dead-letter the replacement', () => run({ change: 'replace', oldOutcome: 'permanent failure', sameInstance: false, newFirstCall: 'succeeds' }));

  it('a failure of the old payload does not schedule a retry of the replacement', () => run({ change: 'replace', oldOutcome: 'failure', sameInstance: false, newFirstCall: 'succeeds' }));

  it('in a named group too', () => run({ change: 'replace', oldOutcome: 'success', sameInstance: false, group: 'billing', newFirstCall: 'fails' }));

  it('after cancel and a new enqueue of the same id', () => run({ change: 'cancel and enqueue', oldOutcome: 'success', sameInstance: false, newFirstCall: 'fails' }));

  it('a stale success leaves the replacement in flight, so its lease still brings it back, and writes no idempotency mark', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const a = redis.service({ prefix, handlerTimeoutMs: 10_000 });
    const b = redis.service({ prefix, handlerTimeoutMs: 10_000 });
    let releaseOld!: () => void;
    const oldReleased = new Promise<void>((resolve) => (releaseOld = resolve));
    let releaseNew!: () => void;
    const newReleased = new Promise<void>((resolve) => (releaseNew = resolve));
    let newStarted = false;
    const staleA = recordMetrics(a);
    a.addHandler(WorkItem, async () => (await oldReleased, true), 1);
    await a.enqueue(new WorkItem('x', 1), 0);
    await waitFor(async () => (await a.find(WorkItem, 'x'))?.state === 'in-flight', 'the old payload in flight');
    b.addHandler(WorkItem, async () => ((newStarted = true), await newReleased, true), 1);
    await a.enqueue(new WorkItem('x', 2), 0, { replace: true });
    await waitFor(() => newStarted, 'the replacement running in the second instance');
    releaseOld();
    await waitFor(() => counter(staleA, 'delayed.queue.stale.results') >= 1, 'the old success counted as stale');
    const held = await a.find(WorkItem, 'x');
    expect(held?.state).toBe('in-flight');
    expect((held?.event as WorkItem | undefined)?.n).toBe(2);
    // No idempotency mark was written for the old success.
    expect(await client.zscore(`${prefix}:{test.work}:i`, 'x')).toBeNull();
    releaseNew();
    await waitFor(async () => (await a.find(WorkItem, 'x')) === undefined, 'the replacement completed');
  });

  it('a replacement held ahead (claimed before a slot freed) is still handled after the old success', async () => {
    const prefix = redis.prefix();
    const a = redis.service({ prefix, handlerTimeoutMs: 10_000, leaseGraceMs: 20_000 });
    const b = redis.service({ prefix, handlerTimeoutMs: 10_000, leaseGraceMs: 20_000 });
    const staleA = recordMetrics(a);
    let releaseOld!: () => void;
    const oldReleased = new Promise<void>((resolve) => (releaseOld = resolve));
    const handled: number[] = [];
    a.addHandler(WorkItem, async (e) => (e.n === 1 ? await oldReleased : undefined, handled.push(e.n), true), 1);
    await a.enqueue(new WorkItem('x', 1), 0);
    await waitFor(async () => (await a.find(WorkItem, 'x'))?.state === 'in-flight', 'the old payload in flight');
    // B learns a quick pace, then runs a slow call while it claims ahead: the replacement waits in B, claimed.
    let releaseSlow!: () => void;
    const slowReleased = new Promise<void>((resolve) => (releaseSlow = resolve));
    b.addHandler(WorkItem, async (e) => (e.id === 'slow' ? await slowReleased : undefined, handled.push(e.n), true), 1);
    for (let i = 0; i < 20; i++) await b.enqueue(new WorkItem(`warm${i}`, 100 + i), 0);
    await waitFor(() => handled.length >= 20, 'warm-up handled');
    await b.enqueue(new WorkItem('slow', 3), 0);
    await waitFor(async () => (await b.find(WorkItem, 'slow'))?.state === 'in-flight', 'the slow call running');
    await a.enqueue(new WorkItem('x', 2), 0, { replace: true });
    // Both instances' slots are busy: only B's claim ahead can hold the replacement in flight.
    await waitFor(async () => (await a.find(WorkItem, 'x'))?.state === 'in-flight', 'the replacement claimed ahead by B');
    releaseOld();
    await waitFor(() => counter(staleA, 'delayed.queue.stale.results') >= 1, 'the old success counted as stale');
    releaseSlow();
    await waitFor(() => handled.includes(2), 'the replacement handled', 15_000);
    await waitFor(async () => (await a.find(WorkItem, 'x')) === undefined, 'the replacement completed');
  });
});
