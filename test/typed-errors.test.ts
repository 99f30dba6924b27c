import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { DelayedEventError, type DelayedEventService, type Inspector, RedisCallTimeoutError, RedisConnectionError, createInspector } from '../src';
import { typedConnectionError } from '../src/redis/ready-gate';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';

/** Every public call of the service that talks to Redis, by name. */
function serviceCalls(service: DelayedEventService): Record<string, () => Promise<unknown>> {
  return {
    enqueue: () => service.enqueue(new WorkItem('e1'), 1_000),
    enqueueAt: () => firstValueFrom(service.enqueueAt(new WorkItem('e2'), new Date(Date.now() + 60_000))),
    enqueueBatch: () => firstValueFrom(service.enqueueBatch([{ event: new WorkItem('e3'), delay: 1_000 }])),
    enqueueWithDelay: () => firstValueFrom(service.enqueueWithDelay(new WorkItem('e4'), 1_000)),
    schedule: () => service.schedule('tick', new WorkItem(''), { every: 60_000 }),
    unschedule: () => service.unschedule(WorkItem, 'tick'),
    schedules: () => service.schedules(WorkItem),
    types: () => service.types(),
    instances: () => service.instances(),
    counts: () => service.counts(WorkItem),
    find: () => service.find(WorkItem, 'x'),
    list: () => service.list(WorkItem, 'scheduled'),
    cancel: () => service.cancel(WorkItem, 'x'),
    reschedule: () => service.reschedule(WorkItem, 'x', 1_000),
    runNow: () => service.runNow(WorkItem, 'x'),
    pause: () => service.pause(WorkItem),
    resume: () => service.resume(WorkItem),
    isPaused: () => service.isPaused(WorkItem),
    dueTimeline: () => service.dueTimeline(WorkItem),
    activity: () => service.activity(WorkItem),
    deadLetters: () => service.deadLetters(WorkItem),
    replayDeadLetters: () => service.replayDeadLetters(WorkItem),
    purgeDeadLetters: () => service.purgeDeadLetters(WorkItem),
    enqueueMany: () => service.enqueueMany([{ event: new WorkItem('e5'), delay: 1_000 }]),
    drain: () => service.drain(WorkItem),
    clean: () => service.clean(WorkItem, 'dead', { olderThanMs: 0 }),
    obliterate: () => service.obliterate(WorkItem),
    limits: () => service.limits(WorkItem),
    verifyStored: () => service.verifyStored(WorkItem),
    upgradeStored: () => service.upgradeStored(WorkItem),
    versions: () => service.versions(WorkItem),
    removeGroup: () => service.removeGroup(WorkItem, 'audit'),
    waitUntilReady: () => service.waitUntilReady({ timeoutMs: 500 }),
  };
}

/** Every call of an Inspector that talks to Redis, by name. */
function inspectorCalls(inspector: Inspector): Record<string, () => Promise<unknown>> {
  return {
    types: () => inspector.types(),
    instances: () => inspector.instances(),
    counts: () => inspector.counts('test.work'),
    find: () => inspector.find('test.work', 'x'),
    list: () => inspector.list('test.work', 'scheduled'),
    cancel: () => inspector.cancel('test.work', 'x'),
    reschedule: () => inspector.reschedule('test.work', 'x', 1_000),
    runNow: () => inspector.runNow('test.work', 'x'),
    pause: () => inspector.pause('test.work'),
    resume: () => inspector.resume('test.work'),
    isPaused: () => inspector.isPaused('test.work'),
    dueTimeline: () => inspector.dueTimeline('test.work'),
    activity: () => inspector.activity('test.work'),
    deadLetters: () => inspector.deadLetters('test.work'),
    replayDeadLetters: () => inspector.replayDeadLetters('test.work'),
    purgeDeadLetters: () => inspector.purgeDeadLetters('test.work'),
    drain: () => inspector.drain('test.work'),
    clean: () => inspector.clean('test.work', 'handled', { olderThanMs: 0 }),
    obliterate: () => inspector.obliterate('test.work', { force: true }),
    schedules: () => inspector.schedules('test.work'),
    unschedule: () => inspector.unschedule('test.work', 'tick'),
    limits: () => inspector.limits('test.work'),
    versions: () => inspector.versions('test.work'),
  };
}

/** What each call ended with: 'ok', or the name of what it rejected with when that is no DelayedEventError. */
async function untyped(calls: Record<string, () => Promise<unknown>>): Promise<Record<string, string>> {
  const outcomes = await Promise.all(
    Object.entries(calls).map(async ([name, call]) => {
      try {
        await call();
        return [name, 'ok'] as const;
      } catch (error) {
        return [name, error instanceof DelayedEventError ? 'typed' : `${(error as Error)?.name}: ${(error as Error)?.message}`] as const;
      }
    }),
  );
  return Object.fromEntries(outcomes.filter(([, outcome]) => outcome !== 'ok' && outcome !== 'typed'));
}

/**
 * A failure of the connection (not writeable, closed, reconnecting, timed
 * out) reaches the caller of every public call as a DelayedEventError
 * subclass (docs/api.md, "Errors"), whatever state the connection is in.
 */
describe('every call fails typed whatever the state of the connection', () => {
  const redis = useRedis();

  it.skipIf(redis.topology === 'cluster')('after a call timed out and forced a reconnect, and while Redis stays frozen', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, commandTimeoutMs: 300 });
    const inspector = createInspector({ redis: `redis://127.0.0.1:${redis.server.port}`, prefix, commandTimeoutMs: 300 });
    try {
      await service.enqueue(new WorkItem('warm-up'), 60_000);
      await inspector.counts('test.work');
      process.kill(redis.server.pid!, 'SIGSTOP');
      try {
        // The first calls outlive their deadline, which replaces the connections.
        await expect(service.counts(WorkItem)).rejects.toBeInstanceOf(RedisCallTimeoutError);
        await expect(inspector.counts('test.work')).rejects.toBeInstanceOf(RedisCallTimeoutError);
        // At once after the forced reconnect, and again while it goes on.
        expect(await untyped(serviceCalls(service))).toEqual({});
        expect(await untyped(inspectorCalls(inspector))).toEqual({});
        expect(await untyped(serviceCalls(service))).toEqual({});
        expect(await untyped(inspectorCalls(inspector))).toEqual({});
      } finally {
        process.kill(redis.server.pid!, 'SIGCONT');
      }
    } finally {
      await inspector.close();
    }
  });

  it.skipIf(redis.topology === 'cluster')('while Redis is down', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, commandTimeoutMs: 300 });
    const inspector = createInspector({ redis: `redis://127.0.0.1:${redis.server.port}`, prefix, commandTimeoutMs: 300 });
    try {
      await service.enqueue(new WorkItem('warm-up'), 60_000);
      await inspector.counts('test.work');
      await redis.server.kill();
      try {
        expect(await untyped(serviceCalls(service))).toEqual({});
        expect(await untyped(inspectorCalls(inspector))).toEqual({});
      } finally {
        await redis.server.restart();
      }
    } finally {
      await inspector.close();
    }
  });
});

describe('a failure of a Cluster connection is typed too', () => {
  it("ioredis Cluster's own refusals become RedisConnectionError", () => {
    for (const message of ["Cluster isn't ready and enableOfflineQueue options is false", 'Cluster is disconnected.', 'Connection is closed.']) {
      expect(typedConnectionError(new Error(message), 'a call'), message).toBeInstanceOf(RedisConnectionError);
    }
    // Redis's own refusals stay as they are.
    const oom = Object.assign(new Error('OOM command not allowed when used memory > maxmemory'), { name: 'ReplyError' });
    expect(typedConnectionError(oom, 'a call')).toBe(oom);
  });
});
