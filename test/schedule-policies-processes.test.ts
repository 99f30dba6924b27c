import { afterEach, describe, expect, it } from 'vitest';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

/**
 * A schedule's policy held by several processes that each declare it at boot,
 * one of them killed mid-way: overlap, limit, immediately and jitter agree
 * across them (the decisions are stored before the occurrences, by compare-and-set).
 */
describe('recurring schedule policies across processes', () => {
  const redis = useRedis();
  const workers: Worker[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.kill()));
  });

  it("three processes, one killed: overlap 'skip', limit, immediately and jitterMs hold as for one", async () => {
    const prefix = redis.prefix();
    const startAt = Date.now() + 1_500;
    const schedule = { name: 'job', every: 250, options: { overlap: 'skip', limit: 8, immediately: true, jitterMs: 100, startAt } };
    const start = () => {
      const worker = new Worker({ ...redis.workerEnv(), PREFIX: prefix, SCHEDULE: JSON.stringify(schedule), HOLD_MS: '600' }, 'schedule-process.ts');
      workers.push(worker);
      return worker;
    };
    const processes = [start(), start(), start()];
    await Promise.all(processes.map((w) => w.waitForLine((l) => l.ready === true)));
    const finished = () => workers.flatMap((w) => w.lines.filter((l) => typeof l.finished === 'string')) as unknown as Array<{ finished: string; start: number; end: number }>;
    await waitFor(() => finished().length >= 2, 'two runs done', 20_000);
    // One process dies with whatever it was doing: its occurrence's lease lapses and another takes it.
    await processes[0]!.kill();
    const inspector = redis.service({ prefix });
    await waitFor(async () => (await inspector.schedules(WorkItem))[0]?.remaining === 0, 'the limit reached', 40_000);
    await waitFor(
      async () => {
        const counts = await inspector.counts(WorkItem);
        return counts !== undefined && counts.scheduled + counts.ready + counts.inFlight === 0;
      },
      'every occurrence handled',
      30_000,
    );
    const byId = new Map<string, { start: number; end: number }>();
    for (const run of finished()) byId.set(run.finished, run);
    // Exactly the limit: one immediate occurrence (created once, though three processes declared it) and seven regular ones.
    expect(byId.size).toBe(8);
    const nominal = [...byId.keys()].map((id) => Number(id.split('@')[1]));
    const regular = (at: number) => at >= startAt && (at - startAt) % 250 === 0;
    expect(nominal.filter((at) => !regular(at))).toHaveLength(1);
    const [described] = await inspector.schedules(WorkItem);
    expect(described!.next).toBeUndefined();
    expect(described!.skipped).toBeGreaterThan(0);
    // Never two at once, across processes: each run started after the one before it ended (a run cut short by the kill ran again whole).
    const runs = [...byId.values()].sort((a, b) => a.start - b.start);
    for (let i = 1; i < runs.length; i++) expect(runs[i]!.start).toBeGreaterThanOrEqual(runs[i - 1]!.end);
    // Each due at its nominal time plus the same jitter whichever process enqueued it.
    const started = workers.flatMap((w) => w.lines.filter((l) => typeof l.started === 'string')) as unknown as Array<{ started: string; dueAt: number }>;
    for (const line of started) {
      const at = Number(line.started.split('@')[1]);
      expect(line.dueAt - at).toBeLessThan(100);
      expect(line.dueAt).toBeGreaterThanOrEqual(at);
    }
  }, 90_000);
});
