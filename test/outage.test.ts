import { lastValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { METRIC, RedisCallTimeoutError, RedisConnectionError } from '../src';
import { WorkItem } from './support/events';
import { counter, recordMetrics, useRedis } from './support/harness';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor } from './support/wait-for';

describe('Redis outages', () => {
  // AOF with fsync on every write: what was acknowledged before the crash is still there after it.
  const redis = useRedis(['--appendonly', 'yes', '--appendfsync', 'always']);

  it('a service keeps running through a Redis restart: events stored before and after are all handled', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const metrics = recordMetrics(service);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const handled = new Set<string>();
      service.addHandler(WorkItem, (e) => (handled.add(e.id), true), 4);
      for (let i = 0; i < 20; i++) await service.enqueue(new WorkItem(`before-${i}`), 1_500);
      await service.enqueue(new WorkItem('warm-up'), 0);
      await waitFor(() => handled.has('warm-up'), 'the service running');

      await redis.server.kill();
      // While Redis is down the loops fail and back off; give them a few failures.
      await waitFor(() => counter(metrics, METRIC.redisErrors) >= 3, 'the loops noticing the outage');
      await redis.server.restart();

      for (let i = 0; i < 20; i++) await service.enqueue(new WorkItem(`after-${i}`), 0);
      await waitFor(() => handled.size === 41, 'every event handled after the restart', 30_000);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('while Redis refuses connections an enqueue fails within about a second (refused), and is not stored when Redis is back', async () => {
    const prefix = redis.prefix();
    // A deadline far longer than the wait: only the connection's state can end it.
    const service = redis.service({ prefix, commandTimeoutMs: 60_000 });
    await service.enqueue(new WorkItem('warm-up'), 60_000);
    await redis.server.kill();
    // A call made while the client still takes the dead socket for open may have been written to it (and
    // fails as 'other': it may have run). Once the client knows, calls are refused, unsent.
    const refusal = async (id: string) =>
      service.enqueue(new WorkItem(id), 0).then(
        () => 'stored',
        (error: unknown) => (error instanceof RedisConnectionError ? error.reason : error),
      );
    await waitFor(async () => (await refusal('ghost-probe')) === 'refused', 'the service noticing the outage');
    const startedAt = performance.now();
    const single = await service.enqueue(new WorkItem('ghost'), 0).then(
      () => 'stored',
      (error: unknown) => error,
    );
    expect(single).toBeInstanceOf(RedisConnectionError);
    expect((single as RedisConnectionError).reason, String(single)).toBe('refused');
    // About a second (the ready wait, src/redis/ready-gate.ts), with room for a loaded machine's late timers.
    expect(performance.now() - startedAt).toBeLessThan(2_500);
    const batchStartedAt = performance.now();
    const batch = await lastValueFrom(service.enqueueBatch([{ event: new WorkItem('ghost-batch-1') }, { event: new WorkItem('ghost-batch-2') }])).then(
      () => 'stored',
      (error: unknown) => error,
    );
    expect(batch).toBeInstanceOf(RedisConnectionError);
    expect(performance.now() - batchStartedAt).toBeLessThan(2_500);

    await redis.server.restart();
    // The first enqueue that goes through is sent after anything a queue could have held back.
    await waitFor(async () => (await service.enqueue(new WorkItem('after'), 60_000).catch(() => 'down')) !== 'down', 'Redis taking enqueues again', 20_000);
    for (const id of ['ghost', 'ghost-batch-1', 'ghost-batch-2']) expect(await service.find(WorkItem, id)).toBeUndefined();
    // The probes refused as 'refused' were never sent either; only one made before the client noticed could have been.
    expect((await service.find(WorkItem, 'after'))?.state).toBe('scheduled');
  });

  it('a call in flight when Redis dies fails at once, not at its deadline, and handling resumes as soon as Redis is back', async () => {
    const prefix = redis.prefix();
    // A deadline longer than this test: only the closed connection can end the waits.
    const service = redis.service({ prefix, commandTimeoutMs: 120_000 });
    const handled = new Set<string>();
    service.addHandler(WorkItem, (e) => void handled.add(e.id), 4);
    await service.enqueue(new WorkItem('warm-up'), 0);
    await waitFor(() => handled.has('warm-up'), 'the service running');

    // Frozen, Redis takes the enqueue and the readers' calls and answers none; then it dies.
    process.kill(redis.server.pid!, 'SIGSTOP');
    const outcome = service.enqueue(new WorkItem('unanswered'), 0).then(
      () => 'stored',
      (error: unknown) => error,
    );
    await redis.server.kill();
    expect(await outcome).toBeInstanceOf(RedisConnectionError);

    await redis.server.restart();
    // Sent again, as the error says is safe; handled without waiting for any deadline.
    await waitFor(async () => (await service.enqueue(new WorkItem('unanswered'), 0).catch(() => 'down')) !== 'down', 'Redis taking the enqueue again', 20_000);
    await waitFor(() => handled.has('unanswered'), 'the event handled', 20_000);
  });

  it('a success that finishes while Redis is down is recorded once it is back, and the event is not handled again', async () => {
    const prefix = redis.prefix();
    // Calls queued while Redis is down fail at their deadline: a short one makes the retries come quickly.
    const service = redis.service({ prefix, commandTimeoutMs: 500 });
    const metrics = recordMetrics(service);
    const client = redis.client();
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    service.addHandler(
      WorkItem,
      async () => {
        calls++;
        await released;
        return true;
      },
      1,
    );
    await service.enqueue(new WorkItem('finishes-in-outage'), 0);
    await waitFor(() => calls === 1, 'the handler running');

    await redis.server.kill();
    release();
    await waitFor(() => counter(metrics, METRIC.redisErrors, { loop: 'result' }) >= 2, 'the result write failing and being retried');
    await redis.server.restart();

    await waitFor(async () => (await client.hexists(`${prefix}:{test.work}:m`, 'finishes-in-outage').catch(() => 1)) === 0, 'the success recorded after the restart', 30_000);
    expect(calls).toBe(1);
    expect(await client.exists(`${prefix}:{test.work}:f`)).toBe(0);
  });

  it('a call on a connection that went silent fails with RedisCallTimeoutError near its deadline, and the next call works', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      const service = redis.service({ redis: proxy.url, prefix: redis.prefix(), commandTimeoutMs: 400 });
      expect(await service.enqueue(new WorkItem('before'), 60_000)).toBe('scheduled');
      // The command connection has sent a script call; from now on nothing it sends is answered.
      expect(proxy.blackholeConnectionsThatSent('EVAL')).toBe(1);
      const started = Date.now();
      await expect(service.enqueue(new WorkItem('into-the-void'), 60_000)).rejects.toBeInstanceOf(RedisCallTimeoutError);
      // The deadline is checked every quarter of it: the call fails within 1.25 times the deadline, plus slack.
      expect(Date.now() - started).toBeLessThan(1_500);
      // The stuck connection was reset: the next call goes out on a fresh one.
      await waitFor(async () => (await service.enqueue(new WorkItem('after'), 60_000).catch(() => 'failed')) !== 'failed', 'an enqueue on a fresh connection', 10_000);
    } finally {
      await proxy.stop();
    }
  });

  it('an inspection call on a connection that went silent fails with RedisCallTimeoutError near its deadline too', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      const service = redis.service({ redis: proxy.url, prefix: redis.prefix(), commandTimeoutMs: 400 });
      expect(await service.enqueue(new WorkItem('seen'), 60_000)).toBe('scheduled');
      expect((await service.counts(WorkItem))?.scheduled).toBe(1);
      for (const call of [() => service.counts(WorkItem), () => service.find(WorkItem, 'seen'), () => service.list(WorkItem, 'scheduled'), () => service.dueTimeline(WorkItem)]) {
        // Every connection open now goes silent: the command connection among them.
        expect(proxy.blackholeConnectionsThatSent('')).toBeGreaterThan(0);
        const started = Date.now();
        await expect(call()).rejects.toBeInstanceOf(RedisCallTimeoutError);
        expect(Date.now() - started).toBeLessThan(1_500);
        // The stuck connection was reset: inspection works again on a fresh one.
        await waitFor(async () => (await service.counts(WorkItem).catch(() => undefined))?.scheduled === 1, 'counts on a fresh connection', 10_000);
      }
    } finally {
      await proxy.stop();
    }
  });
});
