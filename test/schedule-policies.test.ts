import { describe, expect, it } from 'vitest';
import { DelayedEventError, InvalidArgumentError, fixedBackoff } from '../src';
import { jitterOf } from '../src/core/schedule-policy';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/**
 * Recurring schedules with a policy (since 0.6): overlap, catchUpWindowMs,
 * backfill, limit, immediately, jitterMs, pauseSchedule/resumeSchedule and
 * pauseOnFailure, each with several instances sharing one Redis.
 */
const POLL_MS = 200;

interface Run {
  readonly name: string;
  readonly at: number;
  readonly dueAt: number;
  readonly start: number;
  end?: number;
}

/** Every occurrence handled, with when it ran, from ids `<name>@<ms>`; `hold` ms per call. */
function recorder(hold = 0) {
  const runs: Run[] = [];
  let running = 0;
  let mostRunning = 0;
  const handler = async (event: WorkItem, _context: unknown, delivery: { dueAt: number }) => {
    const [name, at] = event.id.split('@');
    const run: Run = { name: name!, at: Number(at), dueAt: delivery.dueAt, start: Date.now() };
    runs.push(run);
    running++;
    mostRunning = Math.max(mostRunning, running);
    // The handler's own work: a call slower than the schedule's interval.
    if (hold > 0) await new Promise((resolve) => setTimeout(resolve, hold));
    running--;
    run.end = Date.now();
    return true;
  };
  return { runs, handler, of: (name: string) => runs.filter((r) => r.name === name), mostRunning: () => mostRunning };
}

const untilClock = (at: number, what: string) => waitFor(() => Date.now() >= at, what, Math.max(0, at - Date.now()) + 5_000);

describe('recurring schedules with a policy', () => {
  const redis = useRedis();

  it('refuses a bad or misspelt policy option, a bad name or range, storing nothing', async () => {
    const service = redis.service();
    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ overlapp: 'skip' }, /did you mean overlap/],
      [{ overlap: 'sometimes' }, /'allow', 'skip' or 'buffer-one'/],
      [{ catchUpWindowMs: 1_000 }, /catchUp: 'all'/],
      [{ catchUp: 'all', catchUpWindowMs: 0 }, /catchUpWindowMs/],
      [{ limit: 0 }, /limit/],
      [{ limit: 2.5 }, /limit/],
      [{ jitterMs: -1 }, /jitterMs/],
      [{ immediately: 'yes' }, /immediately/],
      [{ pauseOnFailure: 1 }, /pauseOnFailure/],
    ];
    for (const [options, message] of bad) {
      const call = service.schedule('bad', new WorkItem(''), { every: 1_000 }, options as never);
      await expect(call, JSON.stringify(options)).rejects.toThrow(InvalidArgumentError);
      await expect(service.schedule('bad', new WorkItem(''), { every: 1_000 }, options as never)).rejects.toThrow(message);
    }
    expect(await service.schedules(WorkItem)).toEqual([]);
    await expect(service.pauseSchedule(WorkItem, 'a@b')).rejects.toThrow(InvalidArgumentError);
    await expect(service.resumeSchedule(WorkItem, '')).rejects.toThrow(InvalidArgumentError);
    expect(await service.pauseSchedule(WorkItem, 'missing')).toBe(false);
    const now = Date.now();
    await service.schedule('every-second', new WorkItem(''), { every: 1_000 });
    const ranges: Array<[unknown, RegExp]> = [
      [{ from: new Date(now - 5_000), to: new Date(now + 60_000) }, /in the future/],
      [{ from: new Date(now - 5_000), to: new Date(now - 6_000) }, /after from/],
      [{ from: new Date(now - 30 * 86_400_000), to: new Date(now - 1_000) }, /more than 10,000/],
      [{ from: new Date(now - 5_000), to: new Date(now - 1_000), step: 1 }, /no option "step"/],
      [{ from: 'yesterday', to: new Date(now) }, /valid Date/],
    ];
    for (const [range, message] of ranges) await expect(service.backfill(WorkItem, 'every-second', range as never)).rejects.toThrow(message);
    await expect(service.backfill(WorkItem, 'no-such', { from: new Date(now - 5_000), to: new Date(now - 1_000) })).rejects.toThrow(/no recurring schedule/);
    expect(await service.counts(WorkItem)).toMatchObject({ scheduled: 0, ready: 0, inFlight: 0 });
  });

  it("overlap 'skip': with a handler slower than the interval, never two at once across instances, and what was skipped is counted", async () => {
    const prefix = redis.prefix();
    const seen = recorder(700);
    const instances = [0, 1].map(() => redis.service({ prefix, pollIntervalMs: POLL_MS }));
    for (const instance of instances) instance.addHandler(WorkItem, seen.handler, 4);
    for (const instance of instances) await instance.schedule('slow', new WorkItem(''), { every: 200 }, { overlap: 'skip' });
    await waitFor(() => seen.of('slow').filter((r) => r.end).length >= 3, 'three runs done', 15_000);
    const [schedule] = await instances[0]!.schedules(WorkItem);
    await instances[0]!.unschedule(WorkItem, 'slow');
    expect(seen.mostRunning()).toBe(1);
    const runs = seen.of('slow');
    // Each ran after the one before it ended: the ones due meanwhile were skipped.
    for (let i = 1; i < runs.length; i++) expect(runs[i]!.start).toBeGreaterThanOrEqual(runs[i - 1]!.end ?? Number.POSITIVE_INFINITY);
    expect(schedule!.overlap).toBe('skip');
    expect(schedule!.skipped).toBeGreaterThanOrEqual(runs.length - 1);
  }, 30_000);

  it("overlap 'buffer-one': the one that fell due while another ran waits, then runs at once, due at its nominal time", async () => {
    const prefix = redis.prefix();
    const seen = recorder(700);
    const instances = [0, 1].map(() => redis.service({ prefix, pollIntervalMs: POLL_MS }));
    for (const instance of instances) instance.addHandler(WorkItem, seen.handler, 4);
    for (const instance of instances) await instance.schedule('queued', new WorkItem(''), { every: 300 }, { overlap: 'buffer-one' });
    await waitFor(() => seen.of('queued').filter((r) => r.end).length >= 3, 'three runs done', 15_000);
    const [schedule] = await instances[0]!.schedules(WorkItem);
    await instances[0]!.unschedule(WorkItem, 'queued');
    expect(seen.mostRunning()).toBe(1);
    const runs = seen.of('queued');
    for (let i = 1; i < runs.length; i++) {
      const before = runs[i - 1]!;
      // It waited behind the one before: due (its nominal time) before that one ended, run after.
      expect(runs[i]!.dueAt).toBe(runs[i]!.at);
      expect(runs[i]!.dueAt).toBeLessThan(before.end!);
      expect(runs[i]!.start).toBeGreaterThanOrEqual(before.end!);
      // Promptly: within a poll interval or so of the one before leaving.
      expect(runs[i]!.start - before.end!).toBeLessThan(POLL_MS * 3 + 200);
    }
    expect(schedule!.skipped).toBeGreaterThan(0);
  }, 30_000);

  it("overlap 'allow' (the default) runs occurrences side by side", async () => {
    const prefix = redis.prefix();
    const seen = recorder(700);
    const service = redis.service({ prefix, pollIntervalMs: POLL_MS });
    service.addHandler(WorkItem, seen.handler, 8);
    await service.schedule('free', new WorkItem(''), { every: 200 });
    await waitFor(() => seen.mostRunning() >= 2, 'two at once');
    expect((await service.schedules(WorkItem))[0]!.overlap).toBe('allow');
    await service.unschedule(WorkItem, 'free');
  });

  it('a fleet stopped and restarted: catchUp all runs every missed occurrence, with catchUpWindowMs only those within the window', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const first = redis.service({ prefix, pollIntervalMs: POLL_MS });
    first.addHandler(WorkItem, seen.handler, 4);
    const anchor = Math.ceil((Date.now() + 500) / 1_000) * 1_000;
    await first.schedule('all', new WorkItem(''), { every: 1_000 }, { startAt: new Date(anchor), catchUp: 'all' });
    await first.schedule('window', new WorkItem(''), { every: 1_000 }, { startAt: new Date(anchor), catchUp: 'all', catchUpWindowMs: 2_300 });
    await waitFor(() => seen.of('all').length >= 1 && seen.of('window').length >= 1, 'one occurrence of each', 10_000);
    await first.close();
    const nextAtStop = Math.max(...(await redis.service({ prefix }).schedules(WorkItem)).map((s) => s.next!.getTime()));
    // Back half-way between two occurrences, five intervals later.
    const restartAt = nextAtStop + 5_500;
    await untilClock(restartAt, 'the outage to last');
    const second = redis.service({ prefix, pollIntervalMs: POLL_MS });
    second.addHandler(WorkItem, seen.handler, 4);
    const firstAfter = restartAt + 500;
    await waitFor(() => seen.of('all').some((r) => r.at === firstAfter) && seen.of('window').some((r) => r.at === firstAfter), 'the first occurrence after the restart', 10_000);
    const missed = (name: string) =>
      seen
        .of(name)
        .map((r) => r.at)
        .filter((at) => at >= nextAtStop && at < restartAt)
        .sort((a, b) => a - b);
    const gap = Array.from({ length: 6 }, (_, k) => nextAtStop + k * 1_000);
    expect(missed('all')).toEqual(gap);
    // The window reaches 2.3 s back from the restart's first look: the last two missed ones.
    expect(missed('window')).toEqual(gap.slice(-2));
    const window = (await second.schedules(WorkItem)).find((s) => s.name === 'window')!;
    expect(window.catchUpWindowMs).toBe(2_300);
    expect(window.skipped).toBe(4);
    expect((await second.schedules(WorkItem)).find((s) => s.name === 'all')!.skipped).toBe(0);
  }, 40_000);

  it('backfill runs a past range once each, one after another, and again over the same range stores nothing', async () => {
    const prefix = redis.prefix();
    const seen = recorder(100);
    const service = redis.service({ prefix, pollIntervalMs: POLL_MS });
    service.addHandler(WorkItem, seen.handler, 8);
    const other = redis.service({ prefix, pollIntervalMs: POLL_MS });
    other.addHandler(WorkItem, seen.handler, 8);
    // Starting tomorrow: no regular occurrence runs during the test.
    const tomorrow = Math.ceil(Date.now() / 1_000) * 1_000 + 86_400_000;
    await service.schedule('report', new WorkItem('', 3), { every: 1_000 }, { startAt: new Date(tomorrow), overlap: 'skip' });
    const to = Math.floor(Date.now() / 1_000) * 1_000 - 2_000;
    const range = { from: new Date(to - 6_000), to: new Date(to) };
    expect(await service.backfill(WorkItem, 'report', range)).toBe(6);
    await waitFor(() => seen.of('report').filter((r) => r.end).length === 6, 'six backfilled occurrences handled', 15_000);
    const runs = [...seen.of('report')].sort((a, b) => a.at - b.at);
    expect(runs.map((r) => r.at)).toEqual(Array.from({ length: 6 }, (_, k) => to - 6_000 + k * 1_000));
    // One after another, oldest first, even across two instances with room for eight.
    for (let i = 1; i < runs.length; i++) expect(runs[i]!.start).toBeGreaterThanOrEqual(runs[i - 1]!.end!);
    expect(await other.backfill('test.work', 'report', range)).toBe(0);
    // Over a wider range, only what was not backfilled yet.
    expect(await other.backfill(WorkItem, 'report', { from: new Date(to - 8_000), to: new Date(to) })).toBe(2);
    await waitFor(() => seen.of('report').filter((r) => r.end).length === 8, 'two more handled', 10_000);
    expect(new Set(seen.of('report').map((r) => r.at)).size).toBe(8);
    // The record of what was backfilled goes with the schedule, and with the type.
    const client = redis.client();
    const record = `${prefix}:{test.work}:sched:bf:report`;
    expect(await client.zcard(record)).toBe(8);
    await service.schedule('other', new WorkItem(''), { every: 1_000 }, { startAt: new Date(tomorrow) });
    expect(await service.backfill(WorkItem, 'other', { from: new Date(to - 2_000), to: new Date(to) })).toBe(2);
    expect(await service.unschedule(WorkItem, 'report')).toBe(true);
    expect(await client.exists(record)).toBe(0);
    await waitFor(async () => (await service.counts(WorkItem))?.scheduled === 0 && (await service.counts(WorkItem))?.ready === 0, 'the other backfill handled');
    expect(await service.obliterate(WorkItem, { force: true })).toBe(true);
    expect(await client.exists(`${prefix}:{test.work}:sched:bf:other`)).toBe(0);
  }, 40_000);

  it('limit runs N occurrences across instances, then the schedule ends; re-declaring it identically keeps the count', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const instances = [0, 1].map(() => redis.service({ prefix, pollIntervalMs: POLL_MS }));
    for (const instance of instances) instance.addHandler(WorkItem, seen.handler, 4);
    await instances[0]!.schedule('thrice', new WorkItem(''), { every: 300 }, { limit: 3 });
    await waitFor(() => seen.of('thrice').length >= 1, 'the first run');
    // Another replica boots and declares the same schedule: nothing starts over.
    await instances[1]!.schedule('thrice', new WorkItem(''), { every: 300 }, { limit: 3 });
    await waitFor(async () => (await instances[0]!.schedules(WorkItem))[0]?.remaining === 0, 'no occurrence left', 10_000);
    const [schedule] = await instances[0]!.schedules(WorkItem);
    expect(schedule!.next).toBeUndefined();
    expect(schedule!.limit).toBe(3);
    // Nothing more is enqueued: the count of stored and handled ones stays three.
    await untilClock(Date.now() + 4 * 300, 'four more intervals');
    await waitFor(async () => (await instances[0]!.counts(WorkItem))?.scheduled === 0 && (await instances[0]!.counts(WorkItem))?.inFlight === 0, 'all handled');
    expect(seen.of('thrice')).toHaveLength(3);
  }, 30_000);

  it('immediately runs one occurrence when the schedule is created or changed, not when re-declared, and skips no regular one', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const instances = [0, 1, 2].map(() => redis.service({ prefix, pollIntervalMs: POLL_MS }));
    for (const instance of instances) instance.addHandler(WorkItem, seen.handler, 4);
    const startAt = Math.ceil((Date.now() + 3_000) / 1_000) * 1_000;
    // Three replicas boot at once with the same new schedule: one immediate occurrence, not three.
    await Promise.all(instances.map((i) => i.schedule('hourly', new WorkItem('', 1), { every: { hours: 1 } }, { immediately: true, startAt: new Date(startAt) })));
    await waitFor(() => seen.of('hourly').length >= 1, 'the immediate occurrence');
    await instances[0]!.schedule('hourly', new WorkItem('', 1), { every: { hours: 1 } }, { immediately: true, startAt: new Date(startAt) });
    // The definition changes (a new payload): one more at once.
    await instances[1]!.schedule('hourly', new WorkItem('', 2), { every: { hours: 1 } }, { immediately: true, startAt: new Date(startAt) });
    await untilClock(startAt + 500, 'the first regular occurrence');
    await waitFor(() => seen.of('hourly').some((r) => r.at === startAt), 'the regular occurrence handled', 10_000);
    const immediate = seen.of('hourly').filter((r) => r.at !== startAt);
    expect(immediate).toHaveLength(2);
    expect(seen.of('hourly').filter((r) => r.at === startAt)).toHaveLength(1);
    const [schedule] = await instances[2]!.schedules(WorkItem);
    expect(schedule!.immediately).toBe(true);
    expect(schedule!.next!.getTime()).toBe(startAt + 3_600_000);
  }, 30_000);

  it('jitterMs moves each occurrence by the same amount in every instance; the id keeps the nominal time', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const instances = [0, 1].map(() => redis.service({ prefix, pollIntervalMs: POLL_MS }));
    for (const instance of instances) instance.addHandler(WorkItem, seen.handler, 4);
    const startAt = Math.ceil((Date.now() + 500) / 1_000) * 1_000;
    for (const instance of instances) await instance.schedule('spread', new WorkItem(''), { every: 500 }, { startAt: new Date(startAt), jitterMs: 400 });
    await waitFor(() => seen.of('spread').length >= 5, 'five occurrences', 15_000);
    await instances[0]!.unschedule(WorkItem, 'spread');
    const runs = seen.of('spread').slice(0, 5);
    expect(new Set(runs.map((r) => r.at)).size).toBe(runs.length);
    for (const run of runs) {
      expect(run.dueAt - run.at).toBe(jitterOf(`spread@${run.at}`, 400));
      expect(run.dueAt - run.at).toBeLessThan(400);
    }
    // Not all moved by the same amount.
    expect(new Set(runs.map((r) => r.dueAt - r.at)).size).toBeGreaterThan(1);
  }, 30_000);

  it('pauseSchedule stops one schedule in every instance, not its type; resumeSchedule goes on from now', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const instances = [0, 1].map(() => redis.service({ prefix, pollIntervalMs: POLL_MS }));
    for (const instance of instances) instance.addHandler(WorkItem, seen.handler, 4);
    await instances[0]!.schedule('beat', new WorkItem(''), { every: 200 });
    await waitFor(() => seen.of('beat').length >= 2, 'two beats');
    expect(await instances[1]!.pauseSchedule(WorkItem, 'beat')).toBe(true);
    const pausedAt = Date.now();
    expect(await instances[1]!.pauseSchedule('test.work', 'beat')).toBe(true);
    const [paused] = await instances[0]!.schedules(WorkItem);
    expect(paused!.paused).toBe(true);
    expect(paused!.pausedReason).toBe('paused');
    // The type is not paused: another event of it is handled.
    await instances[0]!.enqueue(new WorkItem('plain'), 0);
    await waitFor(() => seen.runs.some((r) => r.name === 'plain'), 'a plain event handled');
    expect(await instances[0]!.isPaused(WorkItem)).toBe(false);
    await untilClock(pausedAt + 1_500, 'seven intervals paused');
    expect(seen.of('beat').filter((r) => r.at > pausedAt + POLL_MS)).toEqual([]);
    // Declared again by a replica booting meanwhile: still paused.
    await instances[0]!.schedule('beat', new WorkItem(''), { every: 200 });
    expect((await instances[0]!.schedules(WorkItem))[0]!.paused).toBe(true);
    const resumedAt = Date.now();
    expect(await instances[0]!.resumeSchedule(WorkItem, 'beat')).toBe(true);
    await waitFor(() => seen.of('beat').filter((r) => r.at >= resumedAt).length >= 2, 'beats again');
    const [resumed] = await instances[0]!.schedules(WorkItem);
    expect(resumed!.paused).toBe(false);
    // What fell while it was paused did not run, and counts as skipped.
    expect(seen.of('beat').filter((r) => r.at > pausedAt + POLL_MS && r.at < resumedAt)).toEqual([]);
    expect(resumed!.skipped).toBeGreaterThanOrEqual(5);
    await instances[0]!.unschedule(WorkItem, 'beat');
  }, 30_000);

  it('pauseOnFailure: a dead-lettered occurrence pauses its schedule, health() names it, resumeSchedule runs it again', async () => {
    const prefix = redis.prefix();
    let failing = true;
    const runs: number[] = [];
    const service = redis.service({ prefix, pollIntervalMs: POLL_MS });
    service.addHandler(
      WorkItem,
      (event) => {
        runs.push(Number(event.id.split('@')[1]));
        if (failing) throw new Error('the report failed');
        return true;
      },
      4,
      { retry: fixedBackoff(1, 0) },
    );
    await service.schedule('fragile', new WorkItem(''), { every: 300 }, { pauseOnFailure: true, overlap: 'skip' });
    await waitFor(async () => (await service.schedules(WorkItem))[0]?.paused === true, 'the schedule paused by its dead letter', 10_000);
    const [schedule] = await service.schedules(WorkItem);
    expect(schedule!.pausedReason).toMatch(/^occurrence fragile@\d+ was dead-lettered$/);
    const health = await service.health();
    expect(health.pausedSchedules).toEqual([{ type: 'test.work', name: 'fragile', reason: schedule!.pausedReason }]);
    expect(health.ready).toBe(true);
    const ranWhenPaused = runs.length;
    await untilClock(Date.now() + 1_200, 'four intervals paused');
    expect(runs.length).toBe(ranWhenPaused);
    failing = false;
    expect(await service.resumeSchedule(WorkItem, 'fragile')).toBe(true);
    await waitFor(() => runs.length >= ranWhenPaused + 2, 'runs again');
    expect((await service.health()).pausedSchedules).toBeUndefined();
    await service.unschedule(WorkItem, 'fragile');
  }, 30_000);

  it('a jitter longer than the interval: pause and unschedule cancel every occurrence enqueued ahead, the immediate one too', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const service = redis.service({ prefix, pollIntervalMs: POLL_MS });
    service.addHandler(WorkItem, seen.handler, 8);
    await service.schedule('scattered', new WorkItem(''), { every: 100 }, { jitterMs: 3_000, immediately: true });
    // Several looks: many occurrences wait ahead, each up to 3 s after its nominal time.
    await waitFor(async () => ((await service.counts(WorkItem))?.scheduled ?? 0) >= 8, 'occurrences waiting ahead');
    expect(await service.pauseSchedule(WorkItem, 'scattered')).toBe(true);
    const pausedAt = Date.now();
    await waitFor(async () => (await service.counts(WorkItem))?.scheduled === 0, 'every occurrence ahead cancelled');
    await untilClock(pausedAt + 3_500, 'the longest jitter to pass');
    expect(seen.of('scattered').filter((r) => r.start > pausedAt + 100)).toEqual([]);
    expect(await service.resumeSchedule(WorkItem, 'scattered')).toBe(true);
    await waitFor(async () => ((await service.counts(WorkItem))?.scheduled ?? 0) >= 4, 'waiting ahead again');
    expect(await service.unschedule(WorkItem, 'scattered')).toBe(true);
    const removedAt = Date.now();
    await waitFor(async () => (await service.counts(WorkItem))?.scheduled === 0, 'every occurrence ahead cancelled by unschedule');
    await untilClock(removedAt + 3_500, 'the longest jitter to pass');
    expect(seen.of('scattered').filter((r) => r.start > removedAt + 100)).toEqual([]);
  }, 30_000);

  it('after a data loss the instance that declared it stores it again as it was: the limit count goes on, immediately does not run again', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const service = redis.service({ prefix, pollIntervalMs: POLL_MS });
    service.addHandler(WorkItem, seen.handler, 4);
    // 'skip': nothing is enqueued ahead, so the loss takes no occurrence decided and not yet run.
    await service.schedule('counted', new WorkItem(''), { every: 400 }, { limit: 5, immediately: true, overlap: 'skip' });
    await waitFor(() => seen.of('counted').length >= 3, 'three runs');
    const [before] = await service.schedules(WorkItem);
    // Redis loses everything (a restart without persistence, a failover to an empty replica).
    await Promise.all((await redis.masters()).map((master) => master.flushall()));
    await waitFor(async () => (await service.schedules(WorkItem)).length === 1, 'the schedule stored again');
    await waitFor(async () => (await service.schedules(WorkItem))[0]?.remaining === 0, 'the limit reached', 15_000);
    await waitFor(async () => {
      const counts = await service.counts(WorkItem);
      return counts === undefined || counts.scheduled + counts.ready + counts.inFlight === 0;
    }, 'all handled');
    // Five in all (what ran before the loss counts), one of them the immediate one.
    expect(new Set(seen.of('counted').map((r) => r.at)).size).toBe(5);
    expect(before!.remaining).toBeLessThanOrEqual(2);
  }, 30_000);

  it('an Inspector pauses and resumes, and refuses a backfill with a typed error', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, pollIntervalMs: POLL_MS });
    await service.schedule('inspected', new WorkItem(''), { every: 60_000 });
    const { createInspector } = await import('../src');
    const inspector = createInspector({ redis: redis.connection(), prefix });
    try {
      expect(await inspector.pauseSchedule('test.work', 'inspected')).toBe(true);
      expect((await service.schedules(WorkItem))[0]!.paused).toBe(true);
      expect(await inspector.resumeSchedule('test.work', 'inspected')).toBe(true);
      const call = inspector.backfill('test.work', 'inspected', { from: new Date(Date.now() - 120_000), to: new Date(Date.now() - 1_000) });
      await expect(call).rejects.toThrow(DelayedEventError);
      await expect(inspector.backfill('test.work', 'inspected', { from: new Date(Date.now() - 120_000), to: new Date(Date.now() - 1_000) })).rejects.toThrow(/DelayedEventService/);
    } finally {
      await inspector.close();
    }
  });
});
