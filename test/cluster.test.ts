import 'reflect-metadata';
import type { Cluster } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayedEvent, DelayedEventService, type EventContext, fixedBackoff } from '../src';
import { LuaScripts } from '../src/redis/lua-scripts';
import { purgeDead, replayDead } from '../src/redis/housekeeping';
import { RedisLayout } from '../src/redis/redis-layout';
import { RedisCluster } from './support/redis-cluster';
import { SlotMigration } from './support/slot-migration';
import { waitFor } from './support/wait-for';

@DelayedEvent('cluster.alpha')
class Alpha {
  constructor(readonly id: string = '') {}
}

@DelayedEvent('cluster.beta')
class Beta {
  constructor(readonly id: string = '') {}
}

@DelayedEvent('cluster.delta')
class Delta {
  constructor(readonly id: string = '') {}
}

@DelayedEvent('cluster.moving')
class Moving {
  constructor(readonly id: string = '') {}
}

describe('on a real Redis Cluster (3 masters, 3 replicas)', () => {
  let cluster: RedisCluster;
  const clients: Cluster[] = [];
  const client = () => {
    const c = cluster.client();
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    cluster = await RedisCluster.start();
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await cluster?.stop();
  });

  it('keeps every key of a type in one slot, and spreads types over different masters', async () => {
    const admin = client();
    const slotOf = async (key: string) => Number(await admin.cluster('KEYSLOT', key));
    const owners = new Map<number, string>();
    for (const [from, to, master] of await admin.cluster('SLOTS')) {
      if (!master) continue;
      for (let slot = from; slot <= to; slot++) owners.set(slot, `${master[0]}:${master[1]}`);
    }
    const masters = new Set<string>();
    for (const type of ['cluster.alpha', 'cluster.beta', 'cluster.delta']) {
      // Every key name, those a queue's keys object makes when asked (its prototype's getters) among them.
      const queue = new RedisLayout('dq').forType(type) as unknown as Record<string, unknown>;
      const keys: string[] = [];
      for (const field in queue) if (typeof queue[field] === 'string' && (queue[field] as string).includes('{')) keys.push(queue[field] as string);
      expect(keys.length).toBeGreaterThan(6);
      const slots = new Set(await Promise.all(keys.map(slotOf)));
      expect(slots.size).toBe(1);
      masters.add(owners.get([...slots][0]!)!);
    }
    expect(masters.size).toBe(3);
  });

  it('enqueues, dispatches, handles with context, retries, dead-letters, replays and cancels across masters', async () => {
    const service = new DelayedEventService({ redis: client(), prefix: 'c1', pollIntervalMs: 200, retry: fixedBackoff(2, 10) });
    try {
      const handled: Array<{ type: string; id: string; context: EventContext }> = [];
      let deltaHealthy = false;
      service.addHandler(Alpha, (e, context) => (handled.push({ type: 'alpha', id: e.id, context }), true), 4);
      service.addHandler(Beta, (e, context) => (handled.push({ type: 'beta', id: e.id, context }), true), 4);
      service.addHandler(Delta, (e, context) => deltaHealthy && (handled.push({ type: 'delta', id: e.id, context }), true), 4);

      await service.enqueue(new Alpha('a1'), 50, { context: { tenant: 'acme' } });
      await firstValueFrom(service.enqueueBatch([{ event: new Beta('b1'), delay: 20 }, { event: new Alpha('a2') }, { event: new Delta('d1') }]));
      await service.enqueue(new Beta('cancelled'), 60_000);
      expect(await service.cancel(Beta, 'cancelled')).toBe(true);

      const [letter] = await waitFor(async () => {
        const letters = await service.deadLetters(Delta);
        return letters.length === 1 && letters;
      }, 'the delta dead letter');
      expect(letter!.error).toMatch(/returned false/);
      deltaHealthy = true;
      expect(await service.replayDeadLetters(Delta)).toBe(1);

      await waitFor(() => handled.length === 4, 'all four events handled');
      expect(handled.map((h) => `${h.type}:${h.id}`).sort()).toEqual(['alpha:a1', 'alpha:a2', 'beta:b1', 'delta:d1']);
      expect(handled.find((h) => h.id === 'a1')!.context).toEqual({ tenant: 'acme' });
    } finally {
      await service.close();
    }
  });

  it('two instances share one type on a cluster and handle each event exactly once', async () => {
    const instances = [1, 2].map(() => new DelayedEventService({ redis: client(), prefix: 'c2', pollIntervalMs: 200 }));
    try {
      const counts = new Map<string, number>();
      for (const service of instances) service.addHandler(Alpha, (e) => (counts.set(e.id, (counts.get(e.id) ?? 0) + 1), true), 8);
      await firstValueFrom(instances[0]!.enqueueBatch(Array.from({ length: 1_000 }, (_, i) => ({ event: new Alpha(`e${i}`), delay: i % 300 }))));
      await waitFor(() => counts.size === 1_000, 'all events handled', 30_000);
      await waitFor(async () => (await client().hlen('c2:{cluster.alpha}:m')) === 0, 'every event completed');
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await Promise.all(instances.map((s) => s.close()));
    }
  });

  it('while its slot moves to another master, a script is refused whole (TRYAGAIN), never run against half the keys', async () => {
    const layout = new RedisLayout('c4');
    const keys = layout.forType('cluster.moving-scripts');
    const scripts = new LuaScripts(client(), layout.wakeChannel, { ms: 10_000, onStuck: () => {} }, 0);
    // Far-future events fill buckets, keys no script names; x and y are claimed, and y's failure creates
    // the errors hash, so every key the retry script names exists on the source.
    const later = Date.now() + 3_600_000;
    const far = Array.from({ length: 300 }, (_, i) => ({ id: `far${i}`, body: '[0,{}]', due: { atMs: later + i * 60_000 }, requestedAt: 0 }));
    await scripts.enqueue(keys, [...far, ...['x', 'y'].map((id) => ({ id, body: '[0,{}]', due: { atMs: 1 }, requestedAt: 0 }))], false);
    expect((await scripts.dispatchDue(keys, 10)).movedDue).toBe(2);
    const [x, y] = (await scripts.completeAndClaim(keys, [], 2, 60_000, 5)).claimed;
    expect([x?.id, y?.id]).toEqual(['x', 'y']);
    expect(await scripts.retry(keys, y!, 3_600_000, 'first failure')).toBeDefined();

    const migration = await SlotMigration.begin(cluster, keys.meta);
    const buckets = (await migration.keysLeft()).filter((key) => key.startsWith(`${keys.schedule}:`));
    expect(buckets.length).toBeGreaterThan(1);
    await migration.move(buckets);
    const source = migration.source;
    const snapshot = () =>
      Promise.all([source.hgetall(keys.meta), source.zrange(keys.inFlight, '0', '-1', 'WITHSCORES'), source.hgetall(keys.errors), source.zrange(keys.schedule, '0', '-1', 'WITHSCORES')]);
    const before = await snapshot();

    // Run against the source alone, the retry would take x's lease and rewrite its envelope, then fail at a moved bucket: x lost.
    // ioredis gives up after its redirections (to the target and back) with Redis's TRYAGAIN or the redirection last followed.
    const refused = /TRYAGAIN|Too many Cluster redirections/;
    await expect(scripts.retry(keys, x!, 0, 'second failure')).rejects.toThrow(refused);
    // Every other transition waits too.
    const now = { id: 'z', body: '[0,{}]', due: { atMs: 1 }, requestedAt: 0 };
    for (const transition of [
      () => scripts.enqueue(keys, [now], false),
      () => scripts.dispatchDue(keys, 10),
      () => scripts.completeAndClaim(keys, [x!], 1, 60_000, 5),
      () => scripts.deadLetter(keys, x!, 'gave up'),
      () => scripts.cancel(keys, 'far1'),
      () => replayDead(scripts, keys, [], 10, 'wake'),
      () => purgeDead(scripts, keys, ['x'], 10),
    ]) {
      await expect(transition()).rejects.toThrow(refused);
    }
    expect(await snapshot()).toEqual(before);

    await migration.finish();
    expect(await scripts.retry(keys, x!, 0, 'second failure')).toBeDefined();
    expect((await scripts.dispatchDue(keys, 10)).movedDue).toBe(1);
    expect((await scripts.completeAndClaim(keys, [], 1, 60_000, 5)).claimed.map((c) => [c.id, c.attempt])).toEqual([['x', 2]]);
  }, 60_000);

  it("a type's slot moved to another master key by key while events are enqueued, retried and handled: nothing lost, nothing left behind", async () => {
    const service = new DelayedEventService({ redis: client(), prefix: 'c5', pollIntervalMs: 200, retry: fixedBackoff(5, 50) });
    const inspect = client();
    try {
      const handled = new Map<string, number>();
      // Every other event fails its first attempt, so retries are scheduled while the slot moves.
      service.addHandler(
        Moving,
        (e, _context, delivery) => {
          if (delivery.attempt === 1 && Number(e.id.slice(1)) % 2 === 0) return false;
          handled.set(e.id, (handled.get(e.id) ?? 0) + 1);
          return true;
        },
        4,
      );
      await firstValueFrom(service.enqueueBatch(Array.from({ length: 500 }, (_, i) => ({ event: new Moving(`f${i}`), delay: 3_600_000 + i * 60_000 }))));
      const accepted: string[] = [];
      let producing = true;
      const producer = (async () => {
        for (let i = 0; producing; i++) {
          // Refused while the slot is split between masters (TRYAGAIN): the caller sees the error, nothing is stored.
          if (
            await service.enqueue(new Moving(`e${i}`), i % 400).then(
              () => true,
              () => false,
            )
          )
            accepted.push(`e${i}`);
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      })();
      await waitFor(() => handled.size >= 50, 'events handled before the move', 20_000);
      const migration = await SlotMigration.begin(cluster, 'c5:{cluster.moving}:m');
      await migration.finish(20);
      const acceptedBeforeEnd = accepted.length;
      await waitFor(() => accepted.length > acceptedBeforeEnd + 50, 'enqueues accepted by the new master', 20_000);
      producing = false;
      await producer;

      await waitFor(() => accepted.every((id) => handled.has(id)), 'every accepted event handled', 30_000);
      expect([...handled.values()].every((n) => n === 1)).toBe(true);
      // Every stored event is in exactly one state: the far-future ones still scheduled, none stranded outside.
      await waitFor(async () => (await inspect.hlen('c5:{cluster.moving}:m')) === 500, 'only the far-future events stored');
      const index = await inspect.zrange('c5:{cluster.moving}:b', '0', '-1');
      const scheduled = (await Promise.all(index.map((bucket) => inspect.zrange(`c5:{cluster.moving}:b:${bucket}`, '0', '-1')))).flat();
      expect(scheduled.sort()).toEqual((await inspect.hkeys('c5:{cluster.moving}:m')).sort());
    } finally {
      await service.close();
    }
  }, 90_000);

  it('a producer that only enqueues durably carries on while a slot moves to another master: nothing acknowledged lost', async () => {
    const service = new DelayedEventService({ redis: client(), prefix: 'c6', pollIntervalMs: 200 });
    const durable = new DelayedEventService({ redis: client(), prefix: 'c6', durableEnqueue: { replicas: 1, timeoutMs: 1_000 } });
    try {
      const handled = new Map<string, number>();
      service.addHandler(Moving, (e) => void handled.set(e.id, (handled.get(e.id) ?? 0) + 1), 4);
      const acknowledged: string[] = [];
      let producing = true;
      const producer = (async () => {
        for (let i = 0; producing; i++) {
          if (
            await durable.enqueue(new Moving(`d${i}`), 50).then(
              () => true,
              () => false,
            )
          )
            acknowledged.push(`d${i}`);
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      })();
      await waitFor(() => acknowledged.length >= 20, 'durable enqueues before the move', 20_000);
      const migration = await SlotMigration.begin(cluster, 'c6:{cluster.moving}:m');
      await migration.finish(20);
      // The new master answers MOVED to the old route: the producer must follow it, not fail for good.
      const before = acknowledged.length;
      await waitFor(() => acknowledged.length >= before + 20, 'durable enqueues acknowledged by the new master', 20_000);
      producing = false;
      await producer;
      await waitFor(() => acknowledged.every((id) => handled.has(id)), 'every acknowledged event handled', 30_000);
      expect([...handled.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await Promise.all([service.close(), durable.close()]);
    }
  }, 90_000);

  it('a producer that only enqueues durably carries on after its master dies, a replica takes over and the old master returns as its replica', async () => {
    const admin = client();
    if (admin.status !== 'ready') await new Promise((resolve) => admin.once('ready', resolve));
    const slot = Number(await admin.cluster('KEYSLOT', 'c7:{cluster.delta}:m'));
    const ownerPort = async () => {
      const slots = await admin.cluster('SLOTS').catch(() => []);
      return slots.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1];
    };
    const victimPort = await ownerPort();
    const master = cluster.nodes.find((node) => node.port === victimPort)!;

    const service = new DelayedEventService({ redis: client(), prefix: 'c7', pollIntervalMs: 200 });
    const durable = new DelayedEventService({ redis: client(), prefix: 'c7', durableEnqueue: { replicas: 1, timeoutMs: 500 } });
    try {
      const handled = new Set<string>();
      service.addHandler(Delta, (e) => void handled.add(e.id), 8);
      const acknowledged: string[] = [];
      let producing = true;
      const producer = (async () => {
        for (let i = 0; producing; i++) {
          if (
            await durable.enqueue(new Delta(`d${i}`), 100).then(
              () => true,
              () => false,
            )
          )
            acknowledged.push(`d${i}`);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      })();
      await waitFor(() => acknowledged.length >= 20, 'durable enqueues before the failover', 20_000);
      await master.kill();
      await waitFor(async () => (await ownerPort()) !== undefined && (await ownerPort()) !== victimPort, 'a replica promoted', 30_000, 200);
      // Back as the new master's replica: durable enqueues can be confirmed again.
      await master.restart();
      const before = acknowledged.length;
      await waitFor(() => acknowledged.length >= before + 20, 'durable enqueues acknowledged after the failover', 30_000);
      producing = false;
      await producer;
      await waitFor(() => acknowledged.every((id) => handled.has(id)), 'every acknowledged event handled', 30_000);
    } finally {
      await Promise.all([service.close(), durable.close()]);
    }
  }, 120_000);

  it('carries on without a restart when a master dies and its replica takes over; durable enqueues survive it', async () => {
    const admin = client();
    if (admin.status !== 'ready') await new Promise((resolve) => admin.once('ready', resolve));
    const slot = Number(await admin.cluster('KEYSLOT', 'c3:{cluster.alpha}:m'));
    const owner = (await admin.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to)![2]!;
    const victim = cluster.nodes.find((node) => node.port === owner[1])!;

    // One service handles and enqueues plainly; the other enqueues durably (WAIT for one replica).
    const service = new DelayedEventService({ redis: client(), prefix: 'c3', pollIntervalMs: 200 });
    const durable = new DelayedEventService({ redis: client(), prefix: 'c3', durableEnqueue: { replicas: 1, timeoutMs: 1_000 } });
    try {
      const handled = new Set<string>();
      service.addHandler(Alpha, (e) => (handled.add(e.id), true), 8);
      const acknowledgedDurably: string[] = [];
      const acceptedAfterTakeover: string[] = [];
      let killedAt = 0;
      const started = Date.now();
      for (let i = 0; Date.now() - started < 9_000; i++) {
        if (!killedAt) {
          // Acknowledged only once a replica has it: the replica that takes over.
          if (
            await durable.enqueue(new Alpha(`d${i}`), 300).then(
              () => true,
              () => false,
            )
          )
            acknowledgedDurably.push(`d${i}`);
          if (Date.now() - started > 1_500) {
            await victim.kill();
            killedAt = Date.now();
          }
        } else if (
          await service.enqueue(new Alpha(`p${i}`), 100).then(
            () => true,
            () => false,
          )
        ) {
          // Failing while the slot has no master (CLUSTERDOWN), then accepted by the promoted replica.
          acceptedAfterTakeover.push(`p${i}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(acknowledgedDurably.length).toBeGreaterThan(0);
      expect(acceptedAfterTakeover.length).toBeGreaterThan(0);
      await waitFor(() => [...acknowledgedDurably, ...acceptedAfterTakeover].every((id) => handled.has(id)), 'every acknowledged event handled', 30_000);
    } finally {
      await Promise.all([service.close(), durable.close()]);
    }
  }, 90_000);
});
