import { describe, expect, it } from 'vitest';
import { DelayedEvent, HandlerAlreadyRegisteredError } from '../src';
import { PaymentCheck, WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

describe('close', () => {
  const redis = useRedis();

  it('under load, waits for running handlers, starts none after, and loses nothing', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const service = redis.service({ prefix });
    let running = 0;
    let startedAfterClose = 0;
    let closed = false;
    const completed = new Set<string>();
    service.addHandler(
      WorkItem,
      async (e) => {
        if (closed) startedAfterClose++;
        running++;
        await new Promise((resolve) => setTimeout(resolve, 50));
        running--;
        completed.add(e.id);
        return true;
      },
      8,
    );
    const total = 500;
    for (let i = 0; i < total; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, k) => service.enqueue(new WorkItem(`c${i + k}`), 0)));
    }
    await waitFor(() => completed.size >= 40, 'handling under way');

    await service.close();
    closed = true;
    expect(running).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(startedAfterClose).toBe(0);

    // Everything is either handled and gone from Redis, or still stored there for later.
    const stored = await client.hkeys(`${prefix}:{test.work}:m`);
    expect(stored.filter((id) => completed.has(id))).toEqual([]);
    expect(completed.size + stored.length).toBe(total);
    expect(await client.zcard(`${prefix}:{test.work}:f`)).toBe(0);

    // A new instance picks up the rest.
    const next = redis.service({ prefix });
    next.addHandler(WorkItem, (e) => (completed.add(e.id), true), 8);
    await waitFor(() => completed.size === total, 'the rest handled by a new instance', 20_000);
  });

  it('stores enqueues made just before close, even ones not yet sent when close was called', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const service = redis.service({ prefix });
    await service.enqueue(new WorkItem('warm-up'), 60_000);
    // After an await, inside a promise job: the enqueues wait for the end of the tick to be sent.
    const pending = Array.from({ length: 40 }, (_, i) => service.enqueue(new WorkItem(`last-${i}`), 60_000));
    await service.close();
    expect(await Promise.all(pending)).toEqual(pending.map(() => 'scheduled'));
    expect(await client.hlen(`${prefix}:{test.work}:m`)).toBe(41);
  });

  it('a handler that outlives the close timeout is given up: its signal aborts (shutdown), its event stays in Redis and comes back unspent', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, closeTimeoutMs: 200, handlerTimeoutMs: 1_000, leaseGraceMs: 200 });
    let started = false;
    let reason: unknown;
    service.addHandler(WorkItem, (_e, _c, d) => ((started = true), d.signal.addEventListener('abort', () => (reason = d.signal.reason)), new Promise<boolean>(() => undefined)), 1);
    await service.enqueue(new WorkItem('unfinished'), 0);
    await waitFor(() => started, 'the handler running');
    await service.close();
    expect((reason as { code?: string } | undefined)?.code).toBe('shutdown');
    expect(await redis.client().zscore(`${prefix}:{test.work}:f`, 'unfinished')).not.toBeNull();

    const next = redis.service({ prefix });
    const attempts: number[] = [];
    next.addHandler(WorkItem, (_e, _c, d) => (attempts.push(d.attempt), true), 1);
    await waitFor(() => attempts.length === 1, 'redelivery after the lease', 10_000);
    // Since 0.6 a call given up at close spends no attempt (docs/api.md, "Leases and heartbeats").
    expect(attempts).toEqual([1]);
  });

  // Counts clients on one server; on a cluster the connections spread over six.
  it.skipIf(redis.topology === 'cluster')('releases every connection it opened', async () => {
    const client = redis.client();
    const before = Number((/connected_clients:(\d+)/.exec(await client.info('clients')) ?? [])[1]);
    const service = redis.service();
    service.addHandler(WorkItem, () => true, 1);
    await service.enqueue(new WorkItem('x'), 0);
    await waitFor(async () => Number((/connected_clients:(\d+)/.exec(await client.info('clients')) ?? [])[1]) >= before + 3, "command, handlers' and subscriber connections");
    await service.close();
    await waitFor(async () => Number((/connected_clients:(\d+)/.exec(await client.info('clients')) ?? [])[1]) === before, 'all connections closed');
  });

  // Counts clients on one server; on a cluster the connections spread over six.
  it.skipIf(redis.topology === 'cluster')('opens the same three connections however many types it handles', async () => {
    const client = redis.client();
    const count = async () => Number((/connected_clients:(\d+)/.exec(await client.info('clients')) ?? [])[1]);
    const before = await count();
    const service = redis.service();
    const handled: string[] = [];
    const classes = Array.from({ length: 50 }, (_, t) => {
      class Many {
        constructor(readonly id: string = '') {}
      }
      DelayedEvent(`test.many${t}`)(Many);
      return Many;
    });
    for (const eventClass of classes) service.addHandler(eventClass, (e) => void handled.push(e.id), 1);
    for (const [t, eventClass] of classes.entries()) await service.enqueue(new eventClass(`e${t}`), 0);
    await waitFor(() => handled.length === 50, 'an event of every type handled');
    // Command, handlers' and wake-up connections: none per reader.
    expect((await count()) - before).toBeLessThanOrEqual(3);
    await service.close();
  });

  it('removeHandler waits for running calls, stops taking that type, and leaves other types running', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    let finish: () => void = () => undefined;
    const work: string[] = [];
    const payments: string[] = [];
    service.addHandler(WorkItem, (e) => (work.push(e.id), new Promise<boolean>((resolve) => (finish = () => resolve(true)))), 1);
    service.addHandler(PaymentCheck, (e) => (payments.push(e.id), true), 1);
    expect(() => service.addHandler(WorkItem, () => true, 1)).toThrow(HandlerAlreadyRegisteredError);
    await service.enqueue(new WorkItem('running'), 0);
    await waitFor(() => work.length === 1, 'the work handler running');

    let removed = false;
    const removing = service.removeHandler(WorkItem).then(() => (removed = true));
    await service.enqueue(new WorkItem('after-removal'), 0);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(removed).toBe(false);
    finish();
    await removing;
    expect(await redis.client().hexists(`${prefix}:{test.work}:m`, 'running')).toBe(0);

    await service.enqueue(new PaymentCheck('still-served'), 0);
    await waitFor(() => payments.length === 1, 'the other type still handled');
    expect(work).toEqual(['running']);
    expect(await redis.client().hexists(`${prefix}:{test.work}:m`, 'after-removal')).toBe(1);

    // Registering again resumes the type.
    service.addHandler(WorkItem, (e) => (work.push(e.id), true), 1);
    await waitFor(() => work.includes('after-removal'), 'the type handled again');
  });
});
