import { describe, expect, it } from 'vitest';
import { METRIC, fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

describe('handler timeouts and fencing', () => {
  const redis = useRedis();

  it('a handler slower than its timeout fails the attempt, is retried, and its late result is dropped', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(3, 10) });
    const metrics = recordMetrics(service);
    const aborted: boolean[] = [];
    let releaseFirst: (ok: boolean) => void = () => undefined;
    service.addHandler(
      WorkItem,
      (_e, _c, delivery) => {
        delivery.signal.addEventListener('abort', () => aborted.push(true));
        if (delivery.attempt === 1) return new Promise<boolean>((resolve) => (releaseFirst = resolve));
        return false;
      },
      2,
      { timeoutMs: 200 },
    );
    await service.enqueue(new WorkItem('slow'), 0);
    // Attempts 2 and 3 fail at once, so it ends dead-lettered with the timeout of attempt 1 behind it.
    await waitForDeadLetters(service, WorkItem);
    releaseFirst(true);
    await new Promise((resolve) => setImmediate(resolve));
    const [letter] = await service.deadLetters(WorkItem);
    expect(letter!.attempts).toBe(3);
    expect(aborted.length).toBeGreaterThanOrEqual(1);
    expect(counter(metrics, METRIC.handled, { outcome: 'success' })).toBe(0);
    const durations = metrics.filter((m) => m.name === METRIC.handlerDuration && m.tags.outcome === 'failure');
    expect(durations[0]!.value).toBeGreaterThanOrEqual(195);
  });

  it('the timeout error is the recorded last error', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(1, 10) });
    service.addHandler(WorkItem, () => new Promise<boolean>(() => undefined), 1, { timeoutMs: 100 });
    await service.enqueue(new WorkItem('t'), 0);
    const [letter] = await waitForDeadLetters(service, WorkItem);
    expect(letter!.error).toMatch(/did not finish within 100 ms/);
  });

  it('a result from a stalled process whose lease expired cannot delete or alter the newer attempt', async () => {
    const prefix = redis.prefix();
    // The worker blocks its event loop for 2.5 s: its own timeout cannot fire, its 600 ms lease expires.
    const stalled = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'stall', STALL_MS: '2500', HANDLER_TIMEOUT_MS: '300', LEASE_GRACE_MS: '300' });
    try {
      await stalled.waitForLine((l) => l.ready === true);
      const service = redis.service({ prefix, retry: fixedBackoff(5, 10) });
      await service.enqueue(new WorkItem('fenced'), 0);
      await stalled.waitForLine((l) => l.started === 'fenced');

      // This instance takes over attempt 2 and holds it until the stalled worker's late result has landed.
      const attempts: number[] = [];
      service.addHandler(
        WorkItem,
        async (_e, _c, delivery) => {
          attempts.push(delivery.attempt);
          if (delivery.attempt === 2) {
            await stalled.waitForLine((l) => l.metric === METRIC.staleResults);
            return false; // must be retried: the stale success did not remove the event
          }
          return true;
        },
        1,
        { timeoutMs: 10_000 },
      );
      await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.work}:m`)) === 0, 'a later attempt completing the event', 20_000);
      // Attempt 2 failed after the stale success landed, and the event still got a later attempt, here or in the worker.
      const later = [...attempts.slice(1), ...stalled.lines.filter((l) => l.started === 'fenced' && l.attempt! > 2).map((l) => l.attempt!)];
      expect(attempts[0]).toBe(2);
      expect(later).toEqual([3]);
      expect(stalled.lines.some((l) => l.finished === 'fenced' && l.attempt === 1)).toBe(true);
    } finally {
      await stalled.kill();
    }
  });
});
