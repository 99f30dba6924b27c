import { describe, expect, it } from 'vitest';
import { RedisConnectionError } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { RedisServer, freePort } from './support/redis-server';
import { waitFor } from './support/wait-for';

/** Awaits `promise`'s rejection and how long it took. */
async function rejection(promise: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  try {
    await promise;
  } catch (error) {
    return { error, ms: Date.now() - started };
  }
  throw new Error('expected a rejection');
}

describe('readiness', () => {
  const redis = useRedis();

  it('waitUntilReady resolves once Redis answers and holds the scripts', async () => {
    const service = redis.service();
    await service.waitUntilReady({ timeoutMs: 5_000 });
    const [master] = await redis.masters();
    const sha = (await master!.script('LOAD', 'return 1')) as string;
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
    // SCRIPT LOAD gave Redis every script: the cache holds more than the one loaded here.
    expect(Number(/number_of_cached_scripts:(\d+)/.exec(await master!.info('memory'))?.[1] ?? 0)).toBeGreaterThan(10);
  });

  it('rejects with RedisConnectionError (refused) when nothing listens, within the bound', async () => {
    const port = await freePort();
    const service = redis.service({ redis: `redis://127.0.0.1:${port}`, logger: false });
    const { error, ms } = await rejection(service.waitUntilReady({ timeoutMs: 1_000 }));
    expect(error).toBeInstanceOf(RedisConnectionError);
    expect(error).toMatchObject({ code: 'REDIS_CONNECTION', reason: 'refused', cause: expect.objectContaining({ code: 'ECONNREFUSED' }) });
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(ms).toBeLessThan(3_000);
  });

  it('rejects with RedisConnectionError (auth) at once for a wrong password, and so does enqueue', async () => {
    const secured = await RedisServer.start(['--requirepass', 'right-password']);
    try {
      const service = redis.service({ redis: `redis://:wrong-password@127.0.0.1:${secured.port}`, logger: false });
      const { error, ms } = await rejection(service.waitUntilReady({ timeoutMs: 5_000 }));
      expect(error).toBeInstanceOf(RedisConnectionError);
      expect(error).toMatchObject({ reason: 'auth', cause: expect.objectContaining({ message: expect.stringMatching(/^WRONGPASS/) }) });
      expect(ms).toBeLessThan(2_000);
      const enqueued = await rejection(service.enqueue(new WorkItem('x'), 0));
      expect(enqueued.error).toBeInstanceOf(RedisConnectionError);
      expect(enqueued.error).toMatchObject({ reason: 'auth' });

      const noPassword = redis.service({ redis: `redis://127.0.0.1:${secured.port}`, logger: false });
      expect((await rejection(noPassword.waitUntilReady({ timeoutMs: 5_000 }))).error).toMatchObject({ reason: 'auth', cause: expect.objectContaining({ message: expect.stringMatching(/^NOAUTH/) }) });
      await redis.service({ redis: `redis://:right-password@127.0.0.1:${secured.port}` }).waitUntilReady({ timeoutMs: 5_000 });
    } finally {
      await secured.stop();
    }
  });

  it('rejects with RedisConnectionError (tls) for a rediss:// URL to a plain port, within the bound', async () => {
    const service = redis.service({ redis: `rediss://127.0.0.1:${redis.server.port}`, logger: false });
    const { error, ms } = await rejection(service.waitUntilReady({ timeoutMs: 1_500 }));
    expect(error).toBeInstanceOf(RedisConnectionError);
    expect(error).toMatchObject({ reason: 'tls' });
    expect(ms).toBeLessThan(4_000);
  });

  it('health() reports Redis, the loops and the last error, before, during and after an outage', async () => {
    const service = redis.service({ logger: false, commandTimeoutMs: 500 });
    service.addHandler(WorkItem, () => true, 1);
    service.addHandler(WorkItem, () => true, 1, { group: 'audit' });
    await service.waitUntilReady();
    const before = await service.health();
    // Default group: its dispatcher and reader; 'audit': the type's dispatcher, its own, and its reader.
    expect(before).toEqual({ ready: true, redis: 'up', loops: { dispatchers: 3, readers: 2, parked: 0 } });

    await redis.server.kill();
    const during = await waitFor(async () => {
      const health = await service.health({ timeoutMs: 200 });
      return health.lastError && health;
    }, 'an error seen during the outage');
    expect(during).toMatchObject({ ready: false, redis: 'down', loops: { dispatchers: 3, readers: 2, parked: 0 } });
    expect(during.lastError).toMatchObject({ message: expect.any(String), at: expect.any(Date) });

    await redis.server.restart();
    const after = await waitFor(
      async () => {
        const health = await service.health();
        return health.ready && health;
      },
      'ready again after the restart',
      20_000,
    );
    expect(after.redis).toBe('up');
    await service.close();
    expect(await service.health()).toMatchObject({ ready: false, loops: { dispatchers: 0, readers: 0 } });
  });
});
