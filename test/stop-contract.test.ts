import 'reflect-metadata';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { DelayedEvent } from '../src';
import { RedisConnections } from '../src/redis/redis-connections';
import { RedisLayout } from '../src/redis/redis-layout';
import { ActivityRecorder } from '../src/runtime/activity-log';
import { WakeListener } from '../src/runtime/wake-listener';
import { useRedis } from './support/harness';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor } from './support/wait-for';

/**
 * The parts close() stops besides the loops (src/runtime/background-service.ts):
 * once stop() resolved, Redis hears nothing more from them, though they had a
 * call waiting for its answer. Redis's replies are held in a proxy; MONITOR
 * on the server says what it ran, and when.
 */
@DelayedEvent('test.sixteen', { partitions: 16 })
class Sixteen {
  constructor(readonly id: string = '') {}
}

describe('the stop contract', () => {
  const redis = useRedis();

  async function watched(): Promise<{ proxy: TcpProxy; monitor: Redis; seen: Array<{ at: number; command: string }> }> {
    const proxy = await TcpProxy.start(redis.server.port);
    const monitor = await new Redis(redis.server.url).monitor();
    const seen: Array<{ at: number; command: string }> = [];
    monitor.on('monitor', (time: string, args: string[]) => seen.push({ at: Number(time) * 1_000, command: args.join(' ').slice(0, 80) }));
    return { proxy, monitor, seen };
  }

  it('a wake-up listener stopped while its PING waits for an answer opens no new connection when the answer is late', async () => {
    const { proxy, monitor, seen } = await watched();
    const connections = new RedisConnections(proxy.url, () => undefined);
    let resets = 0;
    const listener = new WakeListener(connections, 'stop-contract:wake', { pingEveryMs: 50, pingTimeoutMs: 400, onReset: () => resets++ });
    let ended = false;
    const subscription = listener.wakes$.subscribe({ complete: () => (ended = true) });
    try {
      await waitFor(() => seen.some((s) => /^subscribe /i.test(s.command)), 'subscribed');
      proxy.holdReplies();
      const heldAt = Date.now();
      await waitFor(() => seen.some((s) => s.at > heldAt && /^ping/i.test(s.command)), 'a PING sent, its answer held');
      await listener.stop();
      const stoppedAt = Date.now() + 1;
      expect(ended).toBe(true);
      // Past the PING's deadline: a replaced connection would subscribe again.
      await waitFor(() => Date.now() > stoppedAt + 600, 'past the deadline of the PING under way');
      expect(seen.filter((s) => s.at > stoppedAt).map((s) => s.command)).toEqual([]);
      expect(resets).toBe(0);
      // And it stays stopped: a late subscriber is ended at once, with no connection.
      let lateEnded = false;
      listener.wakes$.subscribe({ complete: () => (lateEnded = true) });
      expect(lateEnded).toBe(true);
    } finally {
      subscription.unsubscribe();
      proxy.releaseReplies();
      await connections.close();
      monitor.disconnect();
      await proxy.stop();
    }
  });

  it('the activity recorder stopped while a periodic write waits writes nothing after stop() resolved, however late the answer', async () => {
    const { proxy, monitor, seen } = await watched();
    const client = new Redis(proxy.url);
    const layout = new RedisLayout(redis.prefix());
    // commandTimeoutMs 5 s: a write waits that long; stop() waits a second at most.
    const recorder = new ActivityRecorder(client, layout, 5_000);
    try {
      await client.ping();
      recorder.of('stop.contract').enqueued(1);
      proxy.holdReplies();
      const heldAt = Date.now();
      // A periodic write, as the timer makes every 10 s: its answer is held.
      const periodic = recorder.flush();
      await waitFor(() => seen.some((s) => s.at > heldAt && /^hincrby/i.test(s.command)), 'the periodic write sent');
      // Counted after it took its slots: what stop() would write last.
      recorder.of('stop.contract').enqueued(1);
      const before = Date.now();
      await recorder.stop();
      const stoppedAt = Date.now() + 1;
      expect(stoppedAt - before).toBeLessThan(2_000);
      const sentBefore = seen.length;
      proxy.releaseReplies();
      await periodic;
      await waitFor(() => Date.now() > stoppedAt + 300, 'the late answer handled');
      expect(seen.slice(sentBefore).map((s) => s.command)).toEqual([]);
    } finally {
      client.disconnect();
      monitor.disconnect();
      await proxy.stop();
    }
  });

  it('a limited handler of a type of 16 partitions stores its limits without piling listeners on the stop signal', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const service = redis.service();
      service.addHandler(Sixteen, () => true, 4, { globalConcurrency: 32 });
      await waitFor(async () => (await service.limits(Sixteen))?.default?.concurrency !== undefined, 'the limits stored');
      // Warnings are emitted on the next turn: give them one.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });
});
