import { lastValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, type OutcomeEvent, RateLimited, WaitTimeoutError, fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';
import { TcpProxy } from './support/tcp-proxy';
import { Worker } from './support/worker';

// Outcome events across processes (since 0.6): outcomes$() and waitFor() over the outcome streams.
describe('outcome events', () => {
  const redis = useRedis();

  it('outcomes$ in a third process sees every outcome of 10,000 events exactly once, across a resubscription from its last position', async () => {
    const prefix = redis.prefix();
    const env = { ...redis.workerEnv(), PREFIX: prefix, MODE: 'succeed', OUTCOMES: '100000' };
    const workers = [new Worker(env), new Worker(env)];
    try {
      await Promise.all(workers.map((w) => w.waitForLine((l) => l.ready === true)));
      const observer = redis.service({ prefix, outcomes: {} });
      const seen: OutcomeEvent[] = [];
      let subscription = observer.outcomes$(WorkItem).subscribe((o) => seen.push(o));
      // The subscription reads from its first look on: once it saw a warm-up event's outcome, it is reading.
      await observer.enqueue(new WorkItem('warm-up'), 0);
      await waitFor(() => seen.some((o) => o.id === 'warm-up'), 'the warm-up outcome');
      seen.length = 0;
      const events = Array.from({ length: 10_000 }, (_, i) => ({ event: new WorkItem(i % 100 === 0 ? `flaky${i}` : `e${i}`, i) }));
      for (let i = 0; i < events.length; i += 1_000) await observer.enqueueMany(events.slice(i, i + 1_000));
      // Halfway, the observer goes away and comes back from the last position it saw.
      await waitFor(() => seen.filter((o) => o.outcome === 'handled').length >= 5_000, 'half handled', 60_000);
      subscription.unsubscribe();
      const last = seen.at(-1)!.position;
      subscription = observer.outcomes$(WorkItem, { from: last }).subscribe((o) => seen.push(o));
      await waitFor(() => seen.filter((o) => o.outcome === 'handled').length >= 10_000, 'all handled', 60_000);
      const handled = seen.filter((o) => o.outcome === 'handled').map((o) => o.id);
      expect(handled).toHaveLength(10_000);
      expect(new Set(handled).size).toBe(10_000);
      const retried = seen.filter((o) => o.outcome === 'retried');
      expect(retried.map((o) => o.id).sort()).toEqual(
        events
          .filter((e) => e.event.id.startsWith('flaky'))
          .map((e) => e.event.id)
          .sort(),
      );
      expect(retried.every((o) => o.attempt === 1 && o.error === 'handler returned false')).toBe(true);
      expect(seen.filter((o) => o.id.startsWith('flaky') && o.outcome === 'handled').every((o) => o.attempt === 2)).toBe(true);
      expect(seen.every((o) => o.type === 'test.work' && o.group === 'default' && o.at instanceof Date)).toBe(true);
      subscription.unsubscribe();
    } finally {
      await Promise.all(workers.map((w) => w.kill()));
    }
  }, 120_000);

  // A TCP proxy stands in front of one server (test/support/tcp-proxy.ts).
  it.skipIf(redis.topology === 'cluster')(
    'outcomes$ sees every outcome of 10,000 events exactly once across a reconnect of its connection',
    async () => {
      const prefix = redis.prefix();
      const proxy = await TcpProxy.start(redis.server.port);
      try {
        const worker = redis.service({ prefix, outcomes: {} });
        worker.addHandler(WorkItem, () => true, 8);
        const observer = redis.service({ redis: proxy.url, prefix, commandTimeoutMs: 1_000 });
        const seen: OutcomeEvent[] = [];
        const subscription = observer.outcomes$(WorkItem).subscribe((o) => seen.push(o));
        // Enqueued by the observer: after its subscription's first look, on the same connection.
        await observer.enqueue(new WorkItem('warm-up'), 0);
        await waitFor(() => seen.some((o) => o.id === 'warm-up'), 'the warm-up outcome');
        for (let i = 0; i < 10; i++) await worker.enqueueMany(Array.from({ length: 1_000 }, (_, j) => ({ event: new WorkItem(`e${i * 1_000 + j}`) })));
        await waitFor(() => seen.length > 2_500, 'a quarter seen', 30_000);
        // The connection is cut while outcomes keep coming: ioredis connects again, and the reads go on from their positions.
        expect(proxy.dropAll()).toBeGreaterThan(0);
        await waitFor(() => seen.length >= 10_001, `every outcome (${seen.length} seen)`, 60_000).catch(async (e) => {
          throw new Error(`${String(e)}; seen ${seen.length}; stream ${await redis.client().xlen(`${prefix}:{test.work}:o`)}`);
        });
        const ids = seen.map((o) => o.id);
        expect(ids).toHaveLength(10_001);
        expect(new Set(ids).size).toBe(10_001);
        subscription.unsubscribe();
      } finally {
        await proxy.stop();
      }
    },
    120_000,
  );

  it('names every outcome: handled (with its result), retried, dead-lettered, snoozed, rate-limited and cancelled; a group filter keeps its own and cancels', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, outcomes: { maxLen: 1_000 }, retry: fixedBackoff(2, 0) });
    const seen: OutcomeEvent[] = [];
    const billingOnly: OutcomeEvent[] = [];
    const subscriptions = [service.outcomes$('test.work').subscribe((o) => seen.push(o)), service.outcomes$(WorkItem, { group: 'billing' }).subscribe((o) => billingOnly.push(o))];
    // Both read once they saw a cancel (every group's outcome) made after they were subscribed.
    await service.enqueue(new WorkItem('warm-up'), 3_600_000);
    await service.cancel(WorkItem, 'warm-up');
    await waitFor(() => seen.length === 1 && billingOnly.length === 1, 'the warm-up cancel seen by both');
    seen.length = 0;
    billingOnly.length = 0;
    service.addHandler(WorkItem, (e, _c, d) => {
      if (e.id === 'ok') d.result({ sum: 3 });
      if (e.id === 'bad') return false;
      if (e.id === 'nap' && d.snoozes === 0) return d.snooze(1);
      if (e.id === 'busy' && d.attempt === 1 && !busyHeld++) throw new RateLimited(1);
      return true;
    });
    let busyHeld = 0;
    await service.enqueueMany(['ok', 'bad', 'nap', 'busy'].map((id) => ({ event: new WorkItem(id) })));
    await service.enqueue(new WorkItem('never'), 3_600_000);
    await service.cancel(WorkItem, 'never');
    await waitFor(
      () => ['ok', 'nap', 'busy'].every((id) => seen.some((o) => o.id === id && o.outcome === 'handled')) && seen.some((o) => o.outcome === 'dead-lettered') && billingOnly.length > 0,
      'every outcome, and the cancel read by the billing filter too',
    );
    const kinds = (id: string) => seen.filter((o) => o.id === id).map((o) => o.outcome);
    expect(kinds('ok')).toEqual(['handled']);
    expect(seen.find((o) => o.id === 'ok')?.result).toEqual({ sum: 3 });
    expect(kinds('bad')).toEqual(['retried', 'dead-lettered']);
    expect(seen.find((o) => o.id === 'bad' && o.outcome === 'dead-lettered')?.error).toMatch(/handler returned false/);
    expect(kinds('nap')).toEqual(['snoozed', 'handled']);
    expect(kinds('busy')).toEqual(['rate-limited', 'handled']);
    expect(seen.filter((o) => o.id === 'never')).toMatchObject([{ outcome: 'cancelled', group: '*', attempt: 0 }]);
    // The billing filter: no default-group outcome, but the cancel (every group's).
    expect(billingOnly.map((o) => o.outcome)).toEqual(['cancelled']);
    for (const s of subscriptions) s.unsubscribe();
  });

  it("outcomes$ begins where the type's streams end when subscribed, not at a clock: what was written before is not seen, whatever its stamp", async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, outcomes: {} });
    const stream = `${prefix}:{test.work}:o`;
    await service.enqueue(new WorkItem('before'), 3_600_000);
    await service.cancel(WorkItem, 'before');
    const entries = await waitFor(async () => {
      const written = (await redis.client().xrange(stream, '-', '+')) as Array<[string, string[]]>;
      return written.length === 1 && written;
    }, 'the first outcome written');
    const fields = entries[0]![1];
    // Stamped a minute ahead of Redis's clock, as a master whose clock ran ahead writes it (stream ids keep
    // rising across a failover): still written before the subscription, so not part of it.
    await redis.client().xadd(stream, `${Date.now() + 60_000}-0`, ...fields);
    const byClass: OutcomeEvent[] = [];
    const byName: OutcomeEvent[] = [];
    const subscriptions = [service.outcomes$(WorkItem).subscribe((o) => byClass.push(o)), service.outcomes$('test.work').subscribe((o) => byName.push(o))];
    // Right after subscribing: seen by both, however late their first read comes.
    await service.enqueue(new WorkItem('after'), 3_600_000);
    await service.cancel(WorkItem, 'after');
    await waitFor(() => byClass.length > 0 && byName.length > 0, 'the outcome after subscribing, seen by both');
    expect(byClass.map((o) => o.id)).toEqual(['after']);
    expect(byName.map((o) => o.id)).toEqual(['after']);
    for (const s of subscriptions) s.unsubscribe();
  });

  it('waitFor resolves with the final outcome, at once when the stream holds it, racing the handler, from another service; WaitTimeoutError after its timeout', async () => {
    const prefix = redis.prefix();
    const worker = redis.service({ prefix, outcomes: {}, retry: fixedBackoff(1, 0) });
    worker.addHandler(WorkItem, (e, _c, d) => {
      d.result(e.n);
      return e.id !== 'doomed';
    });
    const caller = redis.service({ prefix, outcomes: {} });
    // Racing: enqueued, and waited for at once.
    const raced = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        await caller.enqueue(new WorkItem(`r${i}`, i), 0);
        return caller.waitFor(WorkItem, `r${i}`, { timeoutMs: 10_000 });
      }),
    );
    expect(raced.map((o) => [o.outcome, o.result])).toEqual(Array.from({ length: 20 }, (_, i) => ['handled', i]));
    // Already over: from the stream, at once.
    const again = await caller.waitFor(WorkItem, 'r3', { timeoutMs: 1 });
    expect(again).toMatchObject({ id: 'r3', outcome: 'handled', attempt: 1, result: 3 });
    await caller.enqueue(new WorkItem('doomed'), 0);
    expect(await caller.waitFor('test.work', 'doomed', { timeoutMs: 10_000 })).toMatchObject({ outcome: 'dead-lettered', attempt: 1 });
    await caller.enqueue(new WorkItem('later'), 3_600_000);
    const waiting = caller.waitFor(WorkItem, 'later', { timeoutMs: 10_000 });
    await caller.cancel(WorkItem, 'later');
    expect(await waiting).toMatchObject({ outcome: 'cancelled' });
    // An id used again: the outcome of its earlier event is not taken for the new one's.
    await caller.enqueue(new WorkItem('r5', 50), 3_600_000, { replace: true });
    await expect(caller.waitFor(WorkItem, 'r5', { timeoutMs: 300 })).rejects.toBeInstanceOf(WaitTimeoutError);
    await caller.runNow(WorkItem, 'r5');
    expect(await caller.waitFor(WorkItem, 'r5', { timeoutMs: 10_000 })).toMatchObject({ outcome: 'handled', result: 50 });
    // Obliterated, the type's outcome stream goes too.
    await caller.enqueue(new WorkItem('slow'), 3_600_000);
    const timedOut = await caller.waitFor(WorkItem, 'slow', { timeoutMs: 200 }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(WaitTimeoutError);
    expect(timedOut).toMatchObject({ code: 'WAIT_TIMEOUT', id: 'slow' });
    expect(await redis.client().exists(`${prefix}:{test.work}:o`)).toBe(1);
    await caller.obliterate(WorkItem, { force: true });
    expect(await redis.client().exists(`${prefix}:{test.work}:o`)).toBe(0);
  });

  it('refuses, typed and before anything is read: waitFor without outcomes, bad options, an unknown key, a position it did not write', async () => {
    const prefix = redis.prefix();
    const off = redis.service({ prefix });
    await expect(off.waitFor(WorkItem, 'x', { timeoutMs: 100 })).rejects.toThrow(/outcomes option/);
    const on = redis.service({ prefix, outcomes: {} });
    for (const bad of [0, -1, Number.NaN, 2 ** 31]) await expect(on.waitFor(WorkItem, 'x', { timeoutMs: bad })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(on.waitFor(WorkItem, 'x', { timeoutMs: 100, grop: 'a' } as never)).rejects.toThrow(/did you mean group/);
    await expect(on.waitFor(WorkItem, 'x', undefined as never)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(lastValueFrom(on.outcomes$(WorkItem, { from: 'not a position' }))).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(lastValueFrom(on.outcomes$(WorkItem, { form: 'x' } as never))).rejects.toThrow(/did you mean from/);
    expect(() => redis.service({ prefix, outcomes: { maxLen: 99 } })).toThrow(/outcomes.maxLen: must be an integer from 100 to 10000000/);
    expect(() => redis.service({ prefix, outcomes: { maxlen: 1 } as never })).toThrow(/did you mean maxLen/);
  });
});
