import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
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
describe('stopped means stopped', () => {
  const redis = useRedis();

  it('nothing reaches Redis after close() resolves, though dispatch, claim, schedule and gauge ticks were in flight', async () => {
    const proxy = await TcpProxy.start(redis.server.port);
    const app = new Redis(proxy.url);
    const monitor = await new Redis(redis.server.url).monitor();
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
});
