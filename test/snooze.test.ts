import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { type Delivery, InvalidArgumentError, fixedBackoff, InvalidDelayError, METRIC, type Metric, Snoozed } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/** The outcome of every handled call, as metrics$ counts them. */
function outcomes(service: { metrics$: { subscribe(next: (m: Metric) => void): unknown } }): string[] {
  const seen: string[] = [];
  service.metrics$.subscribe((m) => {
    if (m.name === METRIC.handled) seen.push(String(m.tags.outcome));
  });
  return seen;
}

/**
 * A handler snoozes an event (docs/api.md, "Snooze"): it comes again after the
 * delay, with the same attempt, its snooze counted; a new payload replaces the
 * stored one; past maxSnoozes it is dead-lettered; a snooze of a delivery that
 * no longer holds its event changes nothing.
 */
describe('snooze', () => {
  const redis = useRedis();

  it('returned or thrown, the event comes again after the delay with the same attempt, counted, and a new payload when given', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    const seen = outcomes(service);
    const calls: Array<{ n: number; attempt: number; snoozes: number; at: number }> = [];
    service.addHandler(WorkItem, (event, _context, delivery: Delivery) => {
      calls.push({ n: event.n, attempt: delivery.attempt, snoozes: delivery.snoozes, at: Date.now() });
      if (calls.length === 1) return delivery.snooze(150);
      if (calls.length === 2) throw new Snoozed({ milliseconds: 150 }, { event: new WorkItem(event.id, 2) });
      return true;
    });
    await service.enqueue(new WorkItem('poll', 1), 0);
    await waitFor(() => calls.length === 3, 'three deliveries');
    expect(calls.map((c) => [c.n, c.attempt, c.snoozes])).toEqual([
      [1, 1, 0],
      [1, 1, 1],
      [2, 1, 2],
    ]);
    // Not before the delay (the Redis clock and this one agree within a few ms here).
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(140);
    expect(calls[2]!.at - calls[1]!.at).toBeGreaterThanOrEqual(140);
    await waitFor(() => seen.length === 3, 'three outcomes counted');
    expect(seen).toEqual(['snoozed', 'snoozed', 'success']);
  });

  it('shows the count in find(), and past maxSnoozes dead-letters the event with reason snoozes-exhausted', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    const reasons: string[] = [];
    service.metrics$.subscribe((m) => {
      if (m.name === METRIC.deadLettered) reasons.push(String(m.tags.reason));
    });
    let calls = 0;
    let snoozesSeen = -1;
    service.addHandler(
      WorkItem,
      async (event, _context, delivery) => {
        calls++;
        if (calls === 2) snoozesSeen = (await service.find(WorkItem, event.id))?.snoozes ?? 0;
        return delivery.snooze(20);
      },
      1,
      { maxSnoozes: 2 },
    );
    await service.enqueue(new WorkItem('forever', 1), 0);
    const dead = await waitFor(async () => (await service.deadLetters(WorkItem))[0], 'dead-lettered');
    expect(calls).toBe(3);
    expect(snoozesSeen).toBe(1);
    expect(dead.error).toMatch(/snoozed 2 times, as many as maxSnoozes allows/);
    expect(reasons).toEqual(['snoozes-exhausted']);
    // The snoozes spent no attempt: it is dead on its first.
    expect(dead.attempts).toBe(1);
  });

  it('with maxSnoozes 0, the first snooze dead-letters the event', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    service.addHandler(WorkItem, (_event, _context, delivery) => delivery.snooze(10), 1, { maxSnoozes: 0 });
    await service.enqueue(new WorkItem('never-snoozed', 1), 0);
    const dead = await waitFor(async () => (await service.deadLetters(WorkItem))[0], 'dead-lettered');
    expect(dead.error).toMatch(/snoozed 0 times, as many as maxSnoozes allows/);
  });

  it('a snooze of a delivery whose event was replaced meanwhile changes nothing, and counts as stale', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    const seen = outcomes(service);
    let release: (() => void) | undefined;
    const running = new Promise<void>((resolve) => (release = resolve));
    const ns: number[] = [];
    service.addHandler(WorkItem, async (event, _context, delivery) => {
      ns.push(event.n);
      if (event.n === 1) {
        await running;
        return delivery.snooze(60_000, { event: new WorkItem(event.id, 99) });
      }
      return true;
    });
    await service.enqueue(new WorkItem('raced', 1), 0);
    await waitFor(() => ns.length === 1, 'the first delivery running');
    await service.enqueue(new WorkItem('raced', 2), 0, { replace: true });
    release?.();
    await waitFor(() => ns.includes(2), 'the replacement handled');
    await waitFor(() => seen.length === 2, 'both outcomes counted');
    expect(seen.sort()).toEqual(['stale', 'success']);
    expect(ns).toEqual([1, 2]);
    expect(await service.find(WorkItem, 'raced')).toBeUndefined();
  });

  it('with groups, snoozes only its own group’s delivery, and refuses a new payload while the type has more than one group', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    const calls: Record<string, Array<{ id: string; n: number; snoozes: number }>> = { billing: [], audit: [] };
    service.addHandler(
      WorkItem,
      (event, _context, delivery) => {
        calls.billing!.push({ id: event.id, n: event.n, snoozes: delivery.snoozes });
        if (event.id === 'plain' && calls.billing!.length === 1) return delivery.snooze(50);
        if (event.id === 'new-payload') return delivery.snooze(50, { event: new WorkItem(event.id, 7) });
        return true;
      },
      1,
      { group: 'billing', retry: fixedBackoff(2, 20) },
    );
    service.addHandler(
      WorkItem,
      (event) => {
        calls.audit!.push({ id: event.id, n: event.n, snoozes: 0 });
      },
      1,
      { group: 'audit' },
    );
    await service.enqueue(new WorkItem('plain', 1), 0);
    await waitFor(() => calls.billing!.length === 2 && calls.audit!.length === 1, 'billing twice, audit once');
    expect(calls.billing!.map((c) => c.snoozes)).toEqual([0, 1]);
    await waitFor(async () => (await service.find(WorkItem, 'plain')) === undefined, 'done in both groups');

    await service.enqueue(new WorkItem('new-payload', 1), 0);
    // Refused: a failure each time, retried once, then dead-lettered in billing; the payload as it was.
    const dead = await waitFor(async () => (await service.deadLetters(WorkItem, { group: 'billing' }))[0], 'dead-lettered in billing');
    expect(dead.error).toMatch(/more than one subscriber group/);
    expect(calls.billing!.filter((c) => c.id === 'new-payload').map((c) => c.n)).toEqual([1, 1]);
    await waitFor(() => calls.audit!.some((c) => c.id === 'new-payload'), 'audit handled it');
    expect(calls.audit!.filter((c) => c.id === 'new-payload').map((c) => c.n)).toEqual([1]);
  });

  it('refuses what it cannot honour: a bad delay or option fails the call, with a typed error that says what to fix', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    const thrown: unknown[] = [];
    service.addHandler(
      WorkItem,
      (event, _context, delivery) => {
        try {
          if (event.id === 'negative') return delivery.snooze(-5);
          if (event.id === 'unknown-option') return delivery.snooze(10, { evnt: event } as never);
          if (event.id === 'other-id') return delivery.snooze(10, { event: new WorkItem('someone-else', 1) });
        } catch (error) {
          thrown.push(error);
          throw error;
        }
        return true;
      },
      1,
      { retry: fixedBackoff(1, 1) },
    );
    for (const id of ['negative', 'unknown-option', 'other-id']) await service.enqueue(new WorkItem(id, 1), 0);
    const dead = await waitFor(async () => {
      const letters = await service.deadLetters(WorkItem);
      return letters.length === 3 ? letters : undefined;
    }, 'all three failed for good');
    expect(thrown[0]).toBeInstanceOf(InvalidDelayError);
    expect(thrown[1]).toBeInstanceOf(InvalidArgumentError);
    expect(String((thrown[1] as Error).message)).toMatch(/evnt/);
    const byId = Object.fromEntries(dead.map((d) => [d.id, d.error]));
    expect(byId['other-id']).toMatch(/snooze's event must be a WorkItem with id "other-id"/);
    expect(() => new Snoozed(Number.NaN)).toThrow(InvalidDelayError);
  });

  it('a batch handler snoozes one event of a batch: the others complete', async () => {
    const service = redis.service({ pollIntervalMs: 20 });
    const seen = outcomes(service);
    const calls: Array<Array<[string, number]>> = [];
    service.addBatchHandler(
      WorkItem,
      (events, _contexts, deliveries) => {
        calls.push(events.map((e, i) => [e.id, deliveries[i]!.snoozes]));
        return events.map((e, i) => (e.id === 'later' && deliveries[i]!.snoozes === 0 ? deliveries[i]!.snooze(50) : true));
      },
      { maxBatch: 10, maxWaitMs: 100 },
    );
    await firstValueFrom(service.enqueueBatch([{ event: new WorkItem('now', 1) }, { event: new WorkItem('later', 1) }]));
    await waitFor(() => calls.flat().filter(([id]) => id === 'later').length === 2, 'the snoozed one again');
    expect(
      calls
        .flat()
        .map(([id, snoozes]) => `${id}/${snoozes}`)
        .sort(),
    ).toEqual(['later/0', 'later/1', 'now/0']);
    expect(calls.at(-1)).toEqual([['later', 1]]);
    await waitFor(() => seen.length === 3, 'three outcomes');
    expect([...seen].sort()).toEqual(['snoozed', 'success', 'success']);
  });
});
