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

  it("three processes: 'buffer-one' keeps one waiting, a pause from outside stops them all, a backfill runs one after another across them", async () => {
    const prefix = redis.prefix();
    const schedule = { name: 'queued', every: 200, options: { overlap: 'buffer-one' } };
    for (let i = 0; i < 3; i++) {
      const worker = new Worker({ ...redis.workerEnv(), PREFIX: prefix, SCHEDULE: JSON.stringify(schedule), HOLD_MS: '500' }, 'schedule-process.ts');
      workers.push(worker);
    }
    await Promise.all(workers.map((w) => w.waitForLine((l) => l.ready === true)));
    const finished = () => workers.flatMap((w) => w.lines.filter((l) => typeof l.finished === 'string')) as unknown as Array<{ finished: string; start: number; end: number }>;
    await waitFor(() => finished().length >= 3, 'three runs done', 20_000);
    const inspector = redis.service({ prefix });
    expect(await inspector.pauseSchedule('test.work', 'queued')).toBe(true);
    const pausedAt = Date.now();
    const runs = () => [...new Map(finished().map((r) => [r.finished, r])).values()].sort((a, b) => a.start - b.start);
    // Never two at once across the processes; each waiting one ran right after the one before.
    const before = runs();
    for (let i = 1; i < before.length; i++) {
      expect(before[i]!.start).toBeGreaterThanOrEqual(before[i - 1]!.end);
      expect(before[i]!.start - before[i - 1]!.end).toBeLessThan(600);
    }
    // Paused: what was running ends, nothing starts after.
    await waitFor(() => Date.now() > pausedAt + 1_500, 'three intervals and a run paused');
    const started = () => workers.flatMap((w) => w.lines.filter((l) => typeof l.started === 'string')) as unknown as Array<{ started: string; start: number }>;
    expect(started().filter((l) => l.start > pausedAt + 50)).toEqual([]);
    // A backfill from this process, handled by the three: one after another.
    // Occurrences of an interval fall at its anchor plus whole intervals: the range starts on one.
    const phase = (await inspector.schedules(WorkItem))[0]!.next!.getTime() % 200;
    const from = Math.floor((Date.now() - 60_000) / 200) * 200 + phase;
    const to = from + 5 * 200;
    expect(await inspector.backfill(WorkItem, 'queued', { from: new Date(from), to: new Date(to) })).toBe(5);
    await waitFor(() => finished().filter((r) => Number(r.finished.split('@')[1]) < to).length === 5, 'five backfilled runs', 20_000);
    const filled = finished()
      .filter((r) => Number(r.finished.split('@')[1]) < to)
      .sort((a, b) => a.start - b.start);
    expect(filled.map((r) => Number(r.finished.split('@')[1]))).toEqual([0, 1, 2, 3, 4].map((k) => from + k * 200));
    for (let i = 1; i < filled.length; i++) expect(filled[i]!.start).toBeGreaterThanOrEqual(filled[i - 1]!.end);
    expect(await inspector.resumeSchedule('test.work', 'queued')).toBe(true);
    const resumedAt = Date.now();
    await waitFor(() => finished().some((r) => r.start > resumedAt), 'runs again after resume', 20_000);
  }, 90_000);
});
