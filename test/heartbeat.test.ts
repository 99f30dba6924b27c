import { describe, expect, it } from 'vitest';
import { type Delivery, DeliveryAbortedError, METRIC, fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { counter, recordMetrics, useRedis } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

// Heartbeat leases (since 0.6): a running call's lease is renewed every heartbeatMs and ends three
// heartbeats after the last renewal, whatever the handler timeout (docs/state-machine.md, "Heartbeats").
const HOUR_MS = 3_600_000;
const HEARTBEAT_MS = 250;
// The promise: a dead process's event runs again within 3 heartbeats of its last renewal, plus the
// rescuer's dispatcher waking at the lapse and its reader's claim. The slack is for a loaded CI machine.
const BOUND_MS = 3 * HEARTBEAT_MS + 2_000;

describe('heartbeat leases', () => {
  const redis = useRedis();
  const queue = (prefix: string) => `${prefix}:{test.work}`;

  it('a handler with a one-hour timeout whose process is killed (SIGKILL) mid-call runs again elsewhere within 3 heartbeats', async () => {
    const prefix = redis.prefix();
    const doomed = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'hang', HANDLER_TIMEOUT_MS: String(HOUR_MS), HEARTBEAT_MS: String(HEARTBEAT_MS) });
    try {
      await doomed.waitForLine((l) => l.ready === true);
      const producer = redis.service({ prefix });
      await producer.enqueue(new WorkItem('long', 1), 0);
      await doomed.waitForLine((l) => l.started === 'long');
      // Renewed while it runs: the call outlives its first heartbeat lease.
      const first = Number(
        await redis
          .client()
          .zrange(`${queue(prefix)}:hl`, '0', '0', 'WITHSCORES')
          .then((r) => r[1]),
      );
      await waitFor(async () => Number((await redis.client().zrange(`${queue(prefix)}:hl`, '0', '0', 'WITHSCORES'))[1]) > first, 'a renewal', 5_000);
      await doomed.kill('SIGKILL');
      const killedAt = Date.now();
      const rescuer = redis.service({ prefix, heartbeatMs: HEARTBEAT_MS });
      const handled: Array<{ id: string; attempt: number; at: number }> = [];
      rescuer.addHandler(WorkItem, (e, _c, d) => (handled.push({ id: e.id, attempt: d.attempt, at: Date.now() }), true));
      await waitFor(() => handled.length === 1, 'run again after the heartbeat lapsed', 10_000);
      expect(handled.map(({ id, attempt }) => ({ id, attempt }))).toEqual([{ id: 'long', attempt: 2 }]);
      expect(handled[0]!.at - killedAt).toBeLessThan(BOUND_MS);
      await waitFor(async () => (await redis.client().exists(`${queue(prefix)}:hl`, `${queue(prefix)}:f`)) === 0, 'no lease nor heartbeat left');
    } finally {
      await doomed.kill();
    }
  }, 30_000);

  it('a process frozen (SIGSTOP) past its lease has its call aborted (lease-lost); the event runs once elsewhere, and its late result changes nothing', async () => {
    const prefix = redis.prefix();
    const frozen = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'until-aborted', HANDLER_TIMEOUT_MS: String(HOUR_MS), HEARTBEAT_MS: String(HEARTBEAT_MS) });
    try {
      await frozen.waitForLine((l) => l.ready === true);
      const producer = redis.service({ prefix, keepHandled: { count: 10 } });
      await producer.enqueue(new WorkItem('frozen', 2), 0);
      await frozen.waitForLine((l) => l.started === 'frozen');
      process.kill(frozen.pid, 'SIGSTOP');
      let thawed = false;
      try {
        const rescuer = redis.service({ prefix, heartbeatMs: HEARTBEAT_MS, keepHandled: { count: 10 } });
        const handled: number[] = [];
        rescuer.addHandler(WorkItem, (_e, _c, d) => (handled.push(d.attempt), true));
        await waitFor(() => handled.length === 1, 'handled elsewhere while the first process is frozen', 10_000);
        expect(handled).toEqual([2]);
        await waitFor(async () => (await producer.find(WorkItem, 'frozen'))?.state === 'handled', 'recorded as handled');
        process.kill(frozen.pid, 'SIGCONT');
        thawed = true;
        // Its next renewal finds the lease gone: the call is aborted, and its result is stale.
        const aborted = await frozen.waitForLine((l) => l.aborted === 'frozen', 10_000);
        expect(aborted.code).toBe('lease-lost');
        await frozen.waitForLine((l) => l.metric === 'delayed.queue.stale.results', 10_000);
        const found = await producer.find(WorkItem, 'frozen');
        expect(found?.state).toBe('handled');
        expect(found?.attempt).toBe(2);
        expect(await producer.counts(WorkItem)).toMatchObject({ scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 });
        expect(handled).toEqual([2]);
      } finally {
        if (!thawed) process.kill(frozen.pid, 'SIGCONT');
      }
    } finally {
      await frozen.kill();
    }
  }, 30_000);

  it('close() past closeTimeoutMs aborts running calls (shutdown); their events come back within the heartbeat bound, attempts unspent', async () => {
    const prefix = redis.prefix();
    const closing = redis.service({ prefix, heartbeatMs: HEARTBEAT_MS, closeTimeoutMs: 200, handlerTimeoutMs: HOUR_MS, retry: fixedBackoff(3, 0) });
    const reasons: unknown[] = [];
    let running = 0;
    closing.addHandler(
      WorkItem,
      (_e, _c, d: Delivery) => {
        running++;
        d.signal.addEventListener('abort', () => reasons.push(d.signal.reason));
        // Ignores its signal: close() must not wait for it, nor write what it answers later.
        return new Promise<boolean>(() => undefined);
      },
      2,
    );
    await closing.enqueueMany([{ event: new WorkItem('a') }, { event: new WorkItem('b') }]);
    await waitFor(() => running === 2, 'both calls running');
    await closing.close();
    const closedAt = Date.now();
    expect(reasons).toHaveLength(2);
    for (const reason of reasons) {
      expect(reason).toBeInstanceOf(DeliveryAbortedError);
      expect((reason as DeliveryAbortedError).code).toBe('shutdown');
    }
    const next = redis.service({ prefix, heartbeatMs: HEARTBEAT_MS });
    const attempts: Array<[string, number]> = [];
    next.addHandler(WorkItem, (e, _c, d) => (attempts.push([e.id, d.attempt]), true), 2);
    await waitFor(() => attempts.length === 2, 'both events back', 10_000);
    expect(Date.now() - closedAt).toBeLessThan(BOUND_MS);
    expect(attempts.sort()).toEqual([
      ['a', 1],
      ['b', 1],
    ]);
  }, 30_000);

  it('cancel() reaches a running call: its signal aborts with lease-lost at the next renewal, and its result changes nothing', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, heartbeatMs: HEARTBEAT_MS, handlerTimeoutMs: HOUR_MS });
    const metrics = recordMetrics(service);
    let signal: AbortSignal | undefined;
    service.addHandler(WorkItem, (_e, _c, d) => {
      signal = d.signal;
      return new Promise<boolean>((resolve) => d.signal.addEventListener('abort', () => resolve(true)));
    });
    await service.enqueue(new WorkItem('called-off'), 0);
    await waitFor(() => signal !== undefined, 'the call started');
    expect(await service.cancel(WorkItem, 'called-off')).toBe(true);
    await waitFor(() => signal?.aborted === true, 'the call told', 5_000);
    expect((signal!.reason as DeliveryAbortedError).code).toBe('lease-lost');
    await waitFor(() => counter(metrics, METRIC.staleResults) === 1, 'its success fenced off');
    expect(await service.find(WorkItem, 'called-off')).toBeUndefined();
  });

  it('a handler timeout aborts the signal with code timeout', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(1, 0) });
    const reasons: unknown[] = [];
    service.addHandler(WorkItem, (_e, _c, d) => new Promise<boolean>(() => d.signal.addEventListener('abort', () => reasons.push(d.signal.reason))), { timeoutMs: 100 });
    await service.enqueue(new WorkItem('slow'), 0);
    await waitFor(() => reasons.length === 1, 'the timeout');
    expect(reasons[0]).toBeInstanceOf(DeliveryAbortedError);
    expect((reasons[0] as DeliveryAbortedError).code).toBe('timeout');
  });

  it('with heartbeatMs: false a claim writes no heartbeat entry, and the lease is timeout + leaseGraceMs as in 0.5', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, heartbeatMs: false, leaseGraceMs: 1_000, closeTimeoutMs: 100 });
    let started = false;
    service.addHandler(WorkItem, () => ((started = true), new Promise<boolean>(() => undefined)), { timeoutMs: 60_000 });
    const before = Number((await redis.client().time())[0]) * 1000;
    await service.enqueue(new WorkItem('plain'), 0);
    await waitFor(() => started, 'the call started');
    expect(await redis.client().exists(`${queue(prefix)}:hl`)).toBe(0);
    const [, score] = await redis.client().zrange(`${queue(prefix)}:f`, '0', '0', 'WITHSCORES');
    const expiry = Math.floor(Number(score) / 1000);
    expect(expiry).toBeGreaterThanOrEqual(before + 61_000);
    expect(expiry).toBeLessThan(before + 61_000 + 5_000);
  });
});
