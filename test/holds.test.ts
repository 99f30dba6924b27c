import { describe, expect, it } from 'vitest';
import { type Delivery, type Logger, RateLimited } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/** Records what the service logs at warn. */
function recordingLogger(): Logger & { readonly warnings: Array<{ fields: Record<string, unknown>; message: string }> } {
  const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
  return { warnings, warn: (fields, message) => warnings.push({ fields: fields as Record<string, unknown>, message }), error: () => undefined };
}

const percentile = (values: readonly number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)]!;

/**
 * A handler that says its provider rate-limited it holds its queue
 * (docs/api.md, "delivery.rateLimited"): for the time it gives when that is a
 * number of ms from 1 to a day, else for one second, and the readers of
 * every instance look again when the hold ends, not at their next
 * readerBlockMs.
 */
describe('holds a handler asks for (rateLimited)', () => {
  const redis = useRedis();

  it('a hold out of range holds for one second, is never thrown into the handler, and is said once a minute per type and group', async () => {
    const prefix = redis.prefix();
    const logger = recordingLogger();
    const service = redis.service({ prefix, logger });
    const asked: unknown[] = [1e15, 86_400_001, 2 ** 31, Number.NaN, 0.5, -1, '3000', Number.POSITIVE_INFINITY];
    const starts: Array<{ id: string; at: number }> = [];
    service.addHandler(WorkItem, (event, _context, delivery: Delivery) => {
      starts.push({ id: event.id, at: performance.now() });
      const i = Number(event.id);
      if (starts.filter((s) => s.id === event.id).length === 1) delivery.rateLimited(asked[i] as number);
    });
    for (let i = 0; i < asked.length; i++) {
      await service.enqueue(new WorkItem(String(i)), 0);
      await waitFor(async () => (await service.limits(WorkItem))?.default?.heldForMs !== undefined, `the hold for ${String(asked[i])} recorded`);
      // Never more than the second it stands for.
      expect((await service.limits(WorkItem))?.default?.heldForMs).toBeLessThanOrEqual(1_000);
      await waitFor(() => starts.filter((s) => s.id === String(i)).length === 2, `the event run again after the hold for ${String(asked[i])}`, 5_000);
      const [first, second] = starts.filter((s) => s.id === String(i));
      expect(second!.at - first!.at).toBeGreaterThanOrEqual(900);
    }
    // One record within the minute, naming the first value.
    const said = logger.warnings.filter((w) => w.message.includes('asked to hold the queue'));
    expect(said).toHaveLength(1);
    expect(said[0]!.fields).toMatchObject({ type: 'test.work', group: 'default', asked: '1000000000000000', heldForMs: 1_000 });
    expect(RateLimited.holdOf(new RateLimited(10 * 86_400_000))).toBe(1_000);
    expect(RateLimited.holdOf(new RateLimited(86_400_000))).toBe(86_400_000);
    expect(RateLimited.holdOf(new RateLimited(1.2))).toBe(2);
  });

  it('a hold wakes the readers of every instance when it ends, not at their next readerBlockMs, single and batch handlers', async () => {
    const prefix = redis.prefix();
    // Idle readers look by themselves every 5 s (the default): only the hold's end can bring the event back sooner.
    const services = Array.from({ length: 2 }, () => redis.service({ prefix, readerBlockMs: 5_000 }));
    const HOLD_MS = 100;
    const client = redis.client();
    const redisNow = async () => {
      const [seconds, micros] = await client.time();
      return Number(seconds) * 1_000 + Number(micros) / 1_000;
    };
    // Each second run's start on Redis's clock (read at once by the handler: a little late, never early).
    const secondStart = new Map<string, Promise<number>>();
    const runs = new Map<string, number>();
    for (const service of services) {
      service.addHandler(
        WorkItem,
        (event, _context, delivery: Delivery) => {
          const seen = runs.get(event.id) ?? 0;
          runs.set(event.id, seen + 1);
          if (seen === 0) delivery.rateLimited(HOLD_MS);
          else if (seen === 1) secondStart.set(event.id, redisNow());
        },
        2,
      );
    }
    const flow = `${prefix}:{test.work}:fc`;
    const late: number[] = [];
    for (let i = 0; i < 30; i++) {
      await services[i % 2]!.enqueue(new WorkItem(`h${i}`), 0);
      // The hold's end, as rate-limited.lua wrote it (Redis's clock); read before it ends.
      const holdEnd = Number(await waitFor(async () => await client.hget(flow, 'hold'), `h${i}'s hold recorded`));
      await waitFor(() => secondStart.has(`h${i}`), `h${i} run again after its hold`, 4_000);
      late.push((await secondStart.get(`h${i}`)!) - holdEnd);
    }
    expect(Math.min(...late)).toBeGreaterThanOrEqual(0);
    // Woken by the hold's end, not by readerBlockMs (5 s): how soon exactly is measured by npm run bench:holds
    // (benchmarks/HOLDS-RESULTS.md), on a quiet machine; a loaded CI stretches single runs.
    expect(percentile(late, 99)).toBeLessThan(250);

    // A batch handler's hold wakes its reader too.
    const batchPrefix = redis.prefix();
    const batch = redis.service({ prefix: batchPrefix, readerBlockMs: 5_000 });
    const calls: number[] = [];
    batch.addBatchHandler(
      WorkItem,
      (events) => {
        calls.push(performance.now());
        if (calls.length === 1) return events.map(() => new RateLimited(HOLD_MS));
      },
      { maxWaitMs: 1 },
    );
    await batch.enqueue(new WorkItem('b'), 0);
    await waitFor(() => calls.length === 2, 'the batch called again after the hold', 4_000);
    expect(calls[1]! - calls[0]!).toBeLessThan(HOLD_MS + 250);
  });

  it('if the instance that set the hold is gone, another handles the event once the hold ends, within readerBlockMs', async () => {
    const prefix = redis.prefix();
    const setter = redis.service({ prefix });
    setter.addHandler(WorkItem, (_event, _context, delivery: Delivery) => delivery.rateLimited(300));
    await setter.enqueue(new WorkItem('orphaned-hold'), 0);
    await waitFor(async () => (await setter.limits(WorkItem))?.default?.heldForMs !== undefined, 'the hold recorded');
    const heldFrom = performance.now();
    await setter.close();
    const other = redis.service({ prefix, readerBlockMs: 1_000 });
    const handled: number[] = [];
    other.addHandler(WorkItem, () => void handled.push(performance.now()));
    await waitFor(() => handled.length > 0, 'the other instance handling it', 3_000);
    // Not before the hold ended, and no later than readerBlockMs after.
    expect(handled[0]! - heldFrom).toBeGreaterThanOrEqual(250);
    expect(handled[0]! - heldFrom).toBeLessThan(300 + 1_000 + 250);
  });
});
