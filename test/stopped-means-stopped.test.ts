import 'reflect-metadata';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { DelayedEvent } from '../src';
import { RedisLayout } from '../src/redis/redis-layout';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor } from './support/wait-for';

/**
 * close() resolves only once no loop of the service will send Redis anything
 * (src/runtime/background-service.ts). Seen from Redis itself: MONITOR lists
 * every command it runs, with its time. With the application's own client,
 * which close() leaves open, a loop still finishing a tick after close()
 * resolved would be seen there.
 */
@DelayedEvent('test.stop-limited')
class LimitedItem {
  constructor(readonly id: string = '') {}
}

describe('stopped means stopped', () => {
  const redis = useRedis();

  /** Records what Redis runs from now on, with its time (ms), through MONITOR. */
  function watch(monitor: Redis): Array<{ at: number; command: string }> {
    const seen: Array<{ at: number; command: string }> = [];
    monitor.on('monitor', (time: string, args: string[], source: string) => seen.push({ at: Number(time) * 1_000, command: `${source} ${args.join(' ').slice(0, 100)}` }));
    return seen;
  }

  it('nothing reaches Redis after close() resolves, though dispatch, claim, schedule and gauge ticks were in flight', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    // MONITOR first, on a quiet server: ioredis takes a command it sees in the chunk that answers MONITOR for a reply.
    const monitor = await new Redis(redis.server.url).monitor();
    const app = new Redis(proxy.url);
    try {
      // Gauges sampled often, and listened to: their samples are calls of the service too.
      const service = redis.service({ redis: app, pollIntervalMs: 20, gaugeIntervalMs: 50 });
      const gauges: string[] = [];
      service.metrics$.subscribe((m) => {
        if (m.kind === 'gauge') gauges.push(m.name);
      });
      const handled: string[] = [];
      service.addHandler(WorkItem, (e) => {
        handled.push(e.id);
      });
      await service.schedule('pulse', new WorkItem('', 1), { every: 100 });
      await waitFor(() => handled.length >= 2 && gauges.length > 0, 'two occurrences handled and gauges sampled');

      const seen: Array<{ at: number; command: string }> = [];
      monitor.on('monitor', (time: string, args: string[], source: string) => seen.push({ at: Number(time) * 1_000, command: `${source} ${args.join(' ').slice(0, 100)}` }));
      // Replies wait in the proxy: within a poll interval, every loop has a call in flight, mid-tick.
      proxy.holdReplies();
      const heldAt = Date.now();
      await waitFor(() => Date.now() > heldAt + 100, 'every loop waiting for a reply');
      const closing = service.close();
      await waitFor(() => Date.now() > heldAt + 200, 'close() under way');
      proxy.releaseReplies();
      await closing;
      // Date.now() is whole milliseconds; MONITOR's times have microseconds.
      const closedAt = Date.now() + 1;
      await waitFor(() => Date.now() > closedAt + 500, 'half a second after close resolved');
      expect(
        seen.filter((s) => s.at > closedAt),
        'commands Redis ran after close() resolved',
      ).toEqual([]);
      expect(seen.length).toBeGreaterThan(0);
      expect(app.status).toBe('ready');
    } finally {
      monitor.disconnect();
      app.disconnect();
      await proxy.stop();
    }
  });

  it('nor after a handler starting under limits, or a hold asked by a call that ended while close() waited for it', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    // MONITOR first, on a quiet server: ioredis takes a command it sees in the chunk that answers MONITOR for a reply.
    const monitor = await new Redis(redis.server.url).monitor();
    const app = new Redis(proxy.url);
    try {
      const service = redis.service({ redis: app, pollIntervalMs: 20 });
      let endCall: (() => void) | undefined;
      const callEnds = new Promise<void>((resolve) => (endCall = resolve));
      let started = false;
      service.addHandler(WorkItem, async (_event, _context, delivery) => {
        started = true;
        await callEnds;
        // Its hold ends 300 ms later: a wake-up for every instance's readers, were one still said.
        delivery.rateLimited(300);
      });
      await service.enqueue(new WorkItem('held', 1), 0);
      await waitFor(() => started, 'the call that will ask for a hold is running');

      const seen = watch(monitor);
      proxy.holdReplies();
      const heldAt = Date.now();
      // Its limits are being stored (the reply held), and its claims wait for them.
      service.addHandler(LimitedItem, () => true, 1, { globalConcurrency: 1 });
      await waitFor(() => Date.now() > heldAt + 100, 'the limits on their way');
      const closing = service.close();
      await waitFor(() => Date.now() > heldAt + 200, 'close() under way');
      proxy.releaseReplies();
      // By now close() waits for the running call (closeTimeoutMs): it ends, and its result asks for the hold.
      await waitFor(() => Date.now() > heldAt + 500, 'close() waiting for the running call');
      endCall?.();
      await closing;
      const closedAt = Date.now() + 1;
      await waitFor(() => Date.now() > closedAt + 700, 'past the end of the hold');
      expect(
        seen.filter((s) => s.at > closedAt),
        'commands Redis ran after close() resolved',
      ).toEqual([]);
      // The call's result was written during close(): the hold was set in Redis.
      expect(await redis.client().hget(new RedisLayout(service.prefix).forType('test.work').flow, 'hold')).not.toBeNull();
      expect(app.status).toBe('ready');
    } finally {
      monitor.disconnect();
      app.disconnect();
      await proxy.stop();
    }
  });
});
