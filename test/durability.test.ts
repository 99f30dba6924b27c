import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotReplicatedError } from '../src';
import { PaymentCheck } from './support/events';
import { useRedis } from './support/harness';
import { RedisServer } from './support/redis-server';
import { waitFor } from './support/wait-for';

describe('durable enqueue (Redis WAIT)', () => {
  const redis = useRedis();
  let replica: RedisServer;
  let replicaClient: Redis;

  beforeAll(async () => {
    replica = await RedisServer.start(['--replicaof', '127.0.0.1', String(redis.server.port)]);
    replicaClient = new Redis(replica.port, '127.0.0.1');
    await waitFor(async () => /master_link_status:up/.test(await replicaClient.info('replication')), 'the replica in sync');
  });
  afterAll(async () => {
    replicaClient?.disconnect();
    await replica?.stop();
  });

  it('completes only once a replica holds the event', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, durableEnqueue: { replicas: 1, timeoutMs: 2_000 } });
    for (let i = 0; i < 20; i++) {
      await service.enqueue(new PaymentCheck(`d${i}`), 60_000);
      // No waiting here: WAIT already made sure the replica has it.
      expect(await replicaClient.hexists(`${prefix}:{test.payment-check}:m`, `d${i}`)).toBe(1);
    }
  });

  it("a debounce resolves once a replica holds its burst: the replica, promoted, keeps the burst's start and bound", async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, durableEnqueue: { replicas: 1, timeoutMs: 2_000 } });
    const options = { debounce: { maxWaitMs: 60_000 } };
    expect(await service.enqueue(new PaymentCheck('burst'), 30_000, options)).toBe('scheduled');
    for (let i = 0; i < 5; i++) {
      expect(await service.enqueue(new PaymentCheck('burst', i), 30_000, options)).toBe('debounced');
      // No waiting: the replica holds what the primary does, the burst's start and maxWaitMs in the body.
      const key = `${prefix}:{test.payment-check}:m`;
      expect(await replicaClient.hget(key, 'burst')).toBe(await redis.client().hget(key, 'burst'));
    }
    // A leading debounce's record too.
    await service.enqueue(new PaymentCheck('lead'), 30_000, { debounce: { leading: true } });
    expect(await replicaClient.hget(`${prefix}:{test.payment-check}:dq`, 'lead')).toBe(await redis.client().hget(`${prefix}:{test.payment-check}:dq`, 'lead'));
  });

  it('stores and waits again after Redis lost its scripts', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, durableEnqueue: { replicas: 1, timeoutMs: 2_000 } });
    await service.enqueue(new PaymentCheck('first'), 60_000);
    await redis.flushScripts();
    expect(await service.enqueue(new PaymentCheck('after-flush'), 60_000)).toBe('scheduled');
    expect(await replicaClient.hexists(`${prefix}:{test.payment-check}:m`, 'after-flush')).toBe(1);
  });

  it('fails with NotReplicatedError when too few replicas confirm, and says the event is stored', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, durableEnqueue: { replicas: 2, timeoutMs: 200 } });
    const error = await service.enqueue(new PaymentCheck('lonely'), 60_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotReplicatedError);
    expect((error as NotReplicatedError).acknowledged).toBe(1);
    expect((error as Error).message).toMatch(/stored on the master, but only 1 of 2 replicas/);
    expect(await redis.client().hexists(`${prefix}:{test.payment-check}:m`, 'lonely')).toBe(1);
  });
});
