import { describe, expect, it } from 'vitest';
import { fixedBackoff } from '../src';
import { LuaScripts } from '../src/redis/lua-scripts';
import { RedisLayout } from '../src/redis/redis-layout';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/**
 * Redis at its memory limit with `noeviction` refuses a script's first write
 * that could grow memory, and lets a script go on once it has written:
 * scripts that free memory first still run, and nothing is left half done.
 * Runs on a single server: the limit is set on it with CONFIG SET.
 */
describe('at the Redis memory limit (noeviction)', () => {
  const redis = useRedis(['--maxmemory-policy', 'noeviction']);

  it('refuses new enqueues, and still recovers, retries, handles and completes an event whose worker died', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const layout = new RedisLayout(prefix);
    const keys = layout.forType('test.work');
    // A worker claimed the event and died: its lease has expired.
    const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 10_000, onStuck: () => {} }, 0);
    await scripts.enqueue(keys, [{ id: 'orphan', body: '[0,{"n":7}]', due: { atMs: 1 }, requestedAt: 0 }], false);
    expect((await scripts.dispatchDue(keys, 10)).movedDue).toBe(1);
    expect((await scripts.completeAndClaim(keys, [], 1, -1_000, 5)).claimed.map((c) => c.id)).toEqual(['orphan']);

    // Any limit below what Redis holds: every command that could grow memory is refused from now on.
    await client.config('SET', 'maxmemory', '1');
    try {
      const service = redis.service({ prefix, retry: fixedBackoff(5, 10) });
      const handled: Array<{ id: string; n: number; attempt: number }> = [];
      // Its first delivery here fails, so the retry too must be scheduled and dispatched at the limit.
      service.addHandler(WorkItem, (e, _context, delivery) => (handled.push({ id: e.id, n: e.n, attempt: delivery.attempt }), delivery.attempt > 2), 4);

      await expect(service.enqueue(new WorkItem('new'), 0)).rejects.toThrow(/OOM/);
      await waitFor(() => handled.length === 2, 'the orphaned event handled twice');
      expect(handled).toEqual([
        { id: 'orphan', n: 7, attempt: 2 },
        { id: 'orphan', n: 7, attempt: 3 },
      ]);
      await waitFor(async () => (await client.hlen(keys.meta)) === 0, 'the event completed');
      expect(await client.exists(keys.inFlight, keys.ready)).toBe(0);
    } finally {
      await client.config('SET', 'maxmemory', '0');
    }
  });
});
