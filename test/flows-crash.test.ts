import { describe, expect, it } from 'vitest';
import { DelayedEvent, type DelayedEventService } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

// A flow's notice across slots (since 0.6; docs/state-machine.md, "Flows")
// survives a crash between a child's settling and the notice reaching its
// parent: the notice waits in the child's queue's outbox, persisted like any
// write, and the next dispatcher applies it, once, however often it is sent.

@DelayedEvent('test.flow-summary')
class Summary {
  constructor(readonly id: string = '') {}
}

describe('flow notices through crashes', () => {
  const redis = useRedis(['--appendonly', 'yes', '--appendfsync', 'always']);

  function summaries(service: DelayedEventService, runs: string[]): void {
    service.addHandler(Summary, (e) => {
      runs.push(e.id);
    });
  }

  it('a process killed after its child settled but before the notice: the parent runs once, after a Redis restart from the AOF', async () => {
    const prefix = redis.prefix();
    const producer = redis.service({ prefix });
    await producer.enqueueFlow({ event: new Summary('summary-1'), children: [{ event: new WorkItem('work-1') }, { event: new WorkItem('work-2') }] });
    const client = redis.client();
    const outbox = `${prefix}:{test.work}:fo`;

    // The worker reaches Redis through a proxy, which silences a connection once it names the outbox (the dispatcher's sweep):
    // Redis still runs what it sends, but it hears nothing more. Its readers claim, run and write results on
    // their own connections; the notices of what they settled never get further than the outbox. Then it is killed.
    const proxy = await TcpProxy.start(redis.server.port);
    proxy.silenceConnectionsAfter(outbox);
    const worker = new Worker({ REDIS_URL: proxy.url, PREFIX: prefix, MODE: 'succeed' });
    try {
      await waitFor(async () => (await client.llen(outbox)) === 2, 'both children settled, their notices left in the outbox');
      await worker.kill();
    } finally {
      await worker.kill();
      await proxy.stop();
    }
    expect(await client.hlen(`${prefix}:{test.work}:m`)).toBe(0);
    const record = await client.hget(`${prefix}:{test.flow-summary}:fl`, 'summary-1');
    expect(JSON.parse(record!).n).toBe(2);

    // Redis restarts from its AOF: the outbox and the records are still there.
    await redis.server.kill();
    await redis.server.restart();
    const after = redis.client();
    await waitFor(async () => (await after.ping().catch(() => '')) === 'PONG', 'Redis back');
    expect(await after.llen(outbox)).toBe(2);

    // Two services pick up: each dispatcher of test.work sweeps the outbox, each notice counts once, and the
    // parent runs exactly once; no child runs again.
    const runs: string[] = [];
    const handled: string[] = [];
    for (const service of [redis.service({ prefix }), redis.service({ prefix })]) {
      summaries(service, runs);
      service.addHandler(WorkItem, (e) => {
        handled.push(e.id);
      });
    }
    await waitFor(() => runs.length === 1, 'the parent ran');
    expect(handled).toEqual([]);
    expect(await after.llen(outbox)).toBe(0);
    // Sent again by hand (a sweep beside the sender): nothing more happens.
    await after.rpush(outbox, JSON.stringify({ k: 'test.work|work-1', s: 1, p: [['test.flow-summary', 'summary-1']], o: 'handled' }));
    await waitFor(async () => (await after.llen(outbox)) === 0, 'the repeated notice taken');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(runs).toEqual(['summary-1']);
  });

  it('enqueueFlow cut short by a killed process leaves its parent waiting; the same call sent again completes it, and each event runs once', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const proxy = await TcpProxy.start(redis.server.port);
    const producer = redis.service({ prefix, redis: proxy.url });
    const flow = { event: new Summary('summary-2'), children: Array.from({ length: 20 }, (_, i) => ({ event: new WorkItem(`part-${i}`) })) };
    // A first flow through the same connection: every script it sends is loaded and allowed.
    await producer.enqueueFlow({ event: new Summary('warm'), children: [{ event: new WorkItem('warm'), delay: 3_600_000 }] });
    // The parent is stored first, and no reply reaches the producer from then on: it sends nothing more, and is let go.
    proxy.holdReplies();
    const cut = producer.enqueueFlow(flow).catch(() => undefined);
    await waitFor(async () => (await client.zscore(`${prefix}:{test.flow-summary}:wt`, 'summary-2')) !== null, 'the parent stored waiting');
    await proxy.stop();
    await producer.close().catch(() => undefined);
    await cut;
    expect(await client.hexists(`${prefix}:{test.work}:m`, 'part-0')).toBe(0);
    const looker = redis.service({ prefix });
    expect((await looker.find(Summary, 'summary-2'))?.waitingFor).toHaveLength(20);
    // Its children were never linked: health() names the parent, and each of them.
    await looker.enqueue(new Summary('known'), 60_000);
    expect((await looker.health()).orphanedParents).toEqual([{ type: 'test.flow-summary', id: 'summary-2', missing: expect.arrayContaining([{ type: 'test.work', id: 'part-0' }]) }]);
    expect((await looker.health()).orphanedParents?.[0]?.missing).toHaveLength(20);

    const service = redis.service({ prefix });
    const runs: string[] = [];
    const handled: string[] = [];
    summaries(service, runs);
    service.addHandler(WorkItem, (e) => {
      handled.push(e.id);
    });
    const again = await service.enqueueFlow(flow);
    expect(again.status).toBe('duplicate');
    await waitFor(() => runs.length === 1, 'the parent ran once its children did');
    expect(handled.filter((id) => id !== 'warm').sort()).toEqual(flow.children.map((c) => c.event.id).sort());
  });

  it("a parent's write lost after its notice left the outbox (a failover to a replica it had not reached) is made good by the notice's second application", async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const service = redis.service({ prefix });
    const runs: string[] = [];
    await service.enqueueFlow({ event: new Summary('summary-3'), children: [{ event: new WorkItem('work-3') }] });
    // The parent's keys as a replica would hold them had it missed what the notice wrote.
    const parentKeys = [`${prefix}:{test.flow-summary}:fl`, `${prefix}:{test.flow-summary}:wt`, `${prefix}:{test.flow-summary}:m`];
    const before = await Promise.all(parentKeys.map((key) => client.dumpBuffer(key)));
    const handled: string[] = [];
    service.addHandler(WorkItem, (e) => void handled.push(e.id));
    await waitFor(async () => (await client.zcard(`${prefix}:{test.work}:fa`)) === 1, 'the notice applied, and kept to be applied once more');
    // The failover: the parent's keys go back to before the notice; the outbox entry is gone already.
    // (Nothing handles the parent yet: released, it stayed in its side schedule.)
    for (const [i, key] of parentKeys.entries()) await client.restore(key, 0, before[i]!, 'REPLACE');
    await client.zrem(`${prefix}:{test.flow-summary}:s`, 'summary-3');
    expect((await service.find(Summary, 'summary-3'))?.state).toBe('waiting');
    summaries(service, runs);
    await waitFor(() => runs.length >= 1, 'the parent ran after the second application', 20_000);
    expect(runs).toEqual(['summary-3']);
    expect(handled).toEqual(['work-3']);
    await waitFor(async () => (await client.zcard(`${prefix}:{test.work}:fa`)) === 0, 'the applied notice dropped after its second application');
  });
});
