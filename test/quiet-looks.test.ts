import 'reflect-metadata';
import { connect } from 'node:net';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { DelayedEvent, METRIC } from '../src';
import { BEACON_EVERY_MS } from '../src/runtime/instance-beacon';
import { QUIET_AFTER_MS, QUIET_LOOK_REGISTERED_MS } from '../src/runtime/quiet-looks';
import { counter, recordMetrics, useRedis } from './support/harness';
import { OrderCheckV1, orderCheck } from './support/versioned-events';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

@DelayedEvent('test.quiet')
class Ping {
  constructor(readonly id: string = '') {}
}

/**
 * Script calls (EVALSHA and EVAL) on keys under `prefix` that every master
 * ran over `ms`, seen by MONITOR on a plain socket of its own: only this
 * test's, whatever else a busy machine's Redis serves.
 */
async function scriptCallsOver(masters: readonly Redis[], prefix: string, ms: number): Promise<number> {
  let calls = 0;
  const sockets = masters.map((master) => {
    const socket = connect(Number(master.options.port), '127.0.0.1');
    let buffer = '';
    socket.setEncoding('utf8');
    socket.on('error', () => undefined);
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      for (let end = buffer.indexOf('\r\n'); end >= 0; end = buffer.indexOf('\r\n')) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (/"eval(?:sha)?"/i.test(line) && line.includes(`"${prefix}:`)) calls++;
      }
    });
    socket.write('MONITOR\r\n');
    return socket;
  });
  await until(ms);
  for (const socket of sockets) socket.destroy();
  return calls;
}

/** Resolves once `ms` passed on the clock (a deadline polled, not a sleep that synchronises anything). */
function until(ms: number): Promise<void> {
  const end = Date.now() + ms;
  return waitFor(() => Date.now() >= end, `${ms} ms to pass`, ms + 5_000, 100).then(() => undefined);
}

/**
 * Idle queues go quiet (src/runtime/quiet-looks.ts): their looks in Redis
 * drop to one per QUIET_LOOK_MS, and every safety net the per-pollIntervalMs
 * look was keeps its bound.
 */
describe('quiet looks at idle queues', () => {
  const redis = useRedis();
  const workers: Worker[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.kill()));
  });

  it('an idle queue stops looking every pollIntervalMs, and an enqueue still runs on time', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, pollIntervalMs: 100, readerBlockMs: 200 });
    const handled: Array<{ id: string; late: number }> = [];
    service.addHandler(Ping, (event, _context, delivery) => void handled.push({ id: event.id, late: Date.now() - delivery.dueAt }));
    await service.enqueue(new Ping('warm'), 0);
    await waitFor(() => handled.length === 1, 'the first event handled');
    const masters = await redis.masters();
    // Active: a look every 100 ms and a claim every 200 ms.
    expect(await scriptCallsOver(masters, prefix, 1_000)).toBeGreaterThanOrEqual(8);
    await until(QUIET_AFTER_MS);
    // Quiet from QUIET_AFTER_MS after its last activity on (a loaded machine may run a look or two late).
    await waitFor(async () => (await scriptCallsOver(masters, prefix, 1_500)) === 0, 'a window with no look', 15_000, 0);
    // Quiet: at most a look (one per 15-30 s) and the claim it may nudge, against ~45 calls before.
    expect(await scriptCallsOver(masters, prefix, 3_000)).toBeLessThanOrEqual(2);
    // The enqueue's wake-up reaches the quiet dispatcher: the event runs when due, not at the next quiet look.
    await service.enqueue(new Ping('later'), 500);
    await waitFor(() => handled.length === 2, 'the event enqueued while quiet handled', 5_000);
    expect(handled[1]!.late).toBeLessThan(1_000);
  }, 60_000);

  it('resume() wakes a quiet queue at once', async () => {
    const service = redis.service({ pollIntervalMs: 100 });
    const handled: string[] = [];
    service.addHandler(Ping, (event) => void handled.push(event.id));
    await service.pause(Ping);
    await service.enqueue(new Ping('held'), 0);
    await until(QUIET_AFTER_MS + 2_000);
    expect(handled).toEqual([]);
    const resumedAt = Date.now();
    await service.resume(Ping);
    await waitFor(() => handled.length === 1, 'the event handled after resume', 5_000);
    expect(Date.now() - resumedAt).toBeLessThan(2_000);
  }, 40_000);

  it('an instance that dies holding a lease: a quiet instance hands the event out again within pollIntervalMs + 5 s of its expiry', async () => {
    const prefix = redis.prefix();
    // Version 1 here: the version-2 event is left for the worker, which claims it without waking anyone.
    const survivor = redis.service({ prefix, pollIntervalMs: 200 });
    const metrics = recordMetrics(survivor);
    survivor.addHandler(OrderCheckV1, () => true);
    await survivor.enqueue(orderCheck(2, 'held-by-the-dead', 7), 0);
    await waitFor(async () => (await survivor.find(OrderCheckV1, 'held-by-the-dead'))?.state === 'ready', 'the event ready');
    await until(QUIET_AFTER_MS + 1_000);
    const worker = new Worker({ ...redis.workerEnv(), PREFIX: prefix, VERSION: '2', HANDLE: '1', HANG: '1', HANDLER_TIMEOUT_MS: '3000', LEASE_GRACE_MS: '300' }, 'versioned-process.ts');
    workers.push(worker);
    await worker.waitForLine((l) => l.started === 'held-by-the-dead');
    const startedAt = Date.now();
    // Its lease ends 3.3 s after the claim; it lives a beacon or two of it (BEACON_EVERY_MS), then dies.
    await until(BEACON_EVERY_MS + 500);
    await worker.kill();
    const leaseEndsBy = startedAt + 3_300;
    // Moved back to READY by the survivor's dispatcher (it cannot run it: version 1), which last looked before the claim.
    await waitFor(() => counter(metrics, METRIC.dispatched, { reason: 'lease-expired' }) >= 1, 'the expired lease handed out again', leaseEndsBy - Date.now() + 200 + 5_000);
  }, 60_000);

  it.runIf(redis.topology === 'single')(
    'while the wake-up subscription is refused, idle queues keep looking every pollIntervalMs',
    async () => {
      const admin = redis.client();
      await admin.call('ACL', 'SETUSER', 'deaf', 'on', 'nopass', '~*', '&*', '+@all', '-subscribe', '-psubscribe', '-ssubscribe');
      try {
        const url = new URL(redis.server.url);
        url.username = 'deaf';
        const prefix = redis.prefix();
        const service = redis.service({ prefix, redis: url.toString(), pollIntervalMs: 100, readerBlockMs: 200, logger: false });
        service.addHandler(Ping, () => true);
        await until(QUIET_AFTER_MS + 500);
        // A look every 100 ms, a claim every 200 ms: ~30 calls.
        expect(await scriptCallsOver(await redis.masters(), prefix, 2_000)).toBeGreaterThanOrEqual(10);
      } finally {
        await admin.call('ACL', 'DELUSER', 'deaf');
      }
    },
    40_000,
  );

  it.runIf(redis.topology === 'single')(
    'a quiet queue with a named group notices a data loss within 10 s and registers its group again',
    async () => {
      const prefix = redis.prefix();
      const service = redis.service({ prefix, pollIntervalMs: 100 });
      service.addHandler(Ping, () => true, 1, { group: 'audit' });
      const client = redis.client();
      const registry = `${prefix}:{test.quiet}:groups`;
      await waitFor(async () => (await client.hexists(registry, 'audit')) === 1, 'the group registered');
      await until(QUIET_AFTER_MS + 500);
      // As a failover to an empty replica would: the data goes, the connections stay.
      await client.flushall();
      const lostAt = Date.now();
      await waitFor(async () => (await client.hexists(registry, 'audit')) === 1, 'the group registered again', QUIET_LOOK_REGISTERED_MS + 2_000);
      expect(Date.now() - lostAt).toBeLessThanOrEqual(QUIET_LOOK_REGISTERED_MS + 1_000);
    },
    60_000,
  );
});
