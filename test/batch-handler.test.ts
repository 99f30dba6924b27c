import 'reflect-metadata';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidOptionError, METRIC, PermanentFailure, fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

describe('batch handlers', () => {
  const redis = useRedis();
  const workers: Worker[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.kill()));
  });

  it('hands due events over in batches of at most maxBatch, each event once, with its context and delivery', async () => {
    const service = redis.service();
    const metrics = recordMetrics(service);
    const batches: string[][] = [];
    service.addBatchHandler(
      WorkItem,
      (events, contexts, deliveries) => {
        expect(contexts).toHaveLength(events.length);
        expect(deliveries.map((d) => d.id)).toEqual(events.map((e) => e.id));
        expect(deliveries.every((d) => d.attempt === 1)).toBe(true);
        batches.push(events.map((e) => e.id));
      },
      { maxBatch: 25, maxWaitMs: 20 },
    );
    await firstValueFrom(service.enqueueBatch(Array.from({ length: 200 }, (_, i) => ({ event: new WorkItem(`b${i}`), delay: 0, context: { n: String(i) } }))));
    await waitFor(() => batches.flat().length === 200, 'every event handed over');
    expect(new Set(batches.flat()).size).toBe(200);
    expect(batches.every((b) => b.length <= 25)).toBe(true);
    // Due together, they go in full batches.
    expect(batches.filter((b) => b.length === 25).length).toBeGreaterThanOrEqual(6);
    await waitFor(async () => (await service.counts(WorkItem))?.inFlight === 0, 'all completed');
    expect(await service.counts(WorkItem)).toEqual({ scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 });
    expect(counter(metrics, METRIC.batchedEvents)).toBe(200);
    expect(counter(metrics, METRIC.batches)).toBe(batches.length);
  });

  it('a lone event does not wait past maxWaitMs for company', async () => {
    const service = redis.service();
    const handedAt: number[] = [];
    service.addBatchHandler(WorkItem, () => void handedAt.push(performance.now()), { maxBatch: 100, maxWaitMs: 100 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const sent = performance.now();
    await service.enqueue(new WorkItem('alone'), 0);
    await waitFor(() => handedAt.length === 1, 'the lone event handed over');
    expect(handedAt[0]! - sent).toBeLessThan(1_000);
  });

  it('per-event results: an outcome each in order, or the ids that failed; each event keeps its own attempts, retries and dead letter', async () => {
    const service = redis.service({ retry: fixedBackoff(2, 50) });
    const seen = new Map<string, number[]>();
    service.addBatchHandler(
      WorkItem,
      (events, _contexts, deliveries) => {
        events.forEach((e, i) => seen.set(e.id, [...(seen.get(e.id) ?? []), deliveries[i]!.attempt]));
        if (events.some((e) => e.id.startsWith('ids-'))) return events.filter((e) => e.id === 'ids-fail').map((e) => e.id);
        return events.map((e) =>
          e.id === 'flaky' && deliveries[events.indexOf(e)]!.attempt === 1 ? false : e.id === 'never' ? new Error('nope') : e.id === 'poison' ? new PermanentFailure('bad') : true,
        );
      },
      { maxBatch: 10, maxWaitMs: 30 },
    );
    for (const id of ['ok', 'flaky', 'never', 'poison']) await service.enqueue(new WorkItem(id), 0);
    const dead = await waitForDeadLetters(service, WorkItem, 2);
    expect(dead.map((d) => d.id).sort()).toEqual(['never', 'poison']);
    expect(dead.find((d) => d.id === 'poison')).toMatchObject({ attempts: 1, error: expect.stringMatching(/permanent failure: bad/) });
    expect(dead.find((d) => d.id === 'never')).toMatchObject({ attempts: 2, error: expect.stringMatching(/nope/) });
    expect(seen.get('ok')).toEqual([1]);
    expect(seen.get('flaky')).toEqual([1, 2]);
    for (const id of ['ids-ok', 'ids-fail']) await service.enqueue(new WorkItem(id), 0);
    await waitFor(() => (seen.get('ids-fail') ?? []).length === 2, 'the failed id retried');
    expect(seen.get('ids-ok')).toEqual([1]);
  });

  it('a throw fails every event of the call, each retried on its own; an answer that fits no shape fails them with the reason', async () => {
    const service = redis.service({ retry: fixedBackoff(3, 20) });
    let calls = 0;
    const attempts: number[] = [];
    service.addBatchHandler(
      WorkItem,
      (_events, _c, deliveries) => {
        calls++;
        attempts.push(...deliveries.map((d) => d.attempt));
        if (calls === 1) throw new Error('bulk API down');
        if (calls === 2) return [true] as boolean[];
        return undefined;
      },
      { maxBatch: 10, maxWaitMs: 50 },
    );
    await firstValueFrom(service.enqueueBatch(['x', 'y', 'z'].map((id) => ({ event: new WorkItem(id), delay: 0 }))));
    await waitFor(async () => (await service.counts(WorkItem))?.scheduled === 0 && (await service.counts(WorkItem))?.inFlight === 0 && attempts.length >= 9, 'handled after two failed calls', 10_000);
    expect(attempts.filter((a) => a === 3)).toHaveLength(3);
    expect(await service.deadLetters(WorkItem)).toEqual([]);
  });

  it('refuses options that cannot work, saying what to fix', () => {
    const service = redis.service();
    expect(() => service.addBatchHandler(WorkItem, () => undefined, { maxBatch: 0 })).toThrow(InvalidOptionError);
    expect(() => service.addBatchHandler(WorkItem, () => undefined, { maxWaitMs: -1 })).toThrow(/maxWaitMs/);
    expect(() => service.addBatchHandler(WorkItem, 'nope' as never)).toThrow(/must be a function/);
  });

  it('a process killed (SIGKILL) mid-batch loses nothing: its events are handed out again', async () => {
    const prefix = redis.prefix();
    const doomed = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'hang', BATCH: '10', HANDLER_TIMEOUT_MS: '1000', LEASE_GRACE_MS: '300' });
    workers.push(doomed);
    await doomed.waitForLine((l) => l.ready === true);
    const producer = redis.service({ prefix });
    await firstValueFrom(producer.enqueueBatch(Array.from({ length: 10 }, (_, i) => ({ event: new WorkItem(`k${i}`), delay: 0 }))));
    await waitFor(() => doomed.lines.filter((l) => typeof l.started === 'string').length === 10, 'the batch running in the doomed process');
    await doomed.kill('SIGKILL');
    const handled = new Set<string>();
    const survivor = redis.service({ prefix, handlerTimeoutMs: 1_000, leaseGraceMs: 300 });
    survivor.addBatchHandler(WorkItem, (events) => void events.forEach((e) => handled.add(e.id)), { maxBatch: 10, maxWaitMs: 20 });
    await waitFor(() => handled.size === 10, 'every event of the killed batch handled', 20_000);
    await waitFor(async () => (await survivor.counts(WorkItem))?.inFlight === 0, 'completed');
    expect(await survivor.deadLetters(WorkItem)).toEqual([]);
  });
});
