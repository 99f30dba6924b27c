import 'reflect-metadata';
import type { Cluster } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayedEvent, DelayedEventService, type EventContext, fixedBackoff } from '../src';
import { RedisCluster } from './support/redis-cluster';
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
      const slots = new Set(await Promise.all(['m', 's', 'r', 'f', 'd', 'e'].map((k) => slotOf(`dq:{${type}}:${k}`))));
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
          if (await durable.enqueue(new Alpha(`d${i}`), 300).then(() => true, () => false)) acknowledgedDurably.push(`d${i}`);
          if (Date.now() - started > 1_500) {
            await victim.kill();
            killedAt = Date.now();
          }
        } else if (await service.enqueue(new Alpha(`p${i}`), 100).then(() => true, () => false)) {
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
