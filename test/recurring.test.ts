import { describe, expect, it } from 'vitest';
import { InvalidDelayError, InvalidOptionError } from '../src';
import { occurrenceAtOrAfter } from '../src/core/recurrence';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

const POLL_MS = 200;

/** Occurrence times handled, per schedule name, from ids `<name>@<ms>`. */
function recorder() {
  const handled: Array<{ name: string; at: number; n: number }> = [];
  const handler = (event: WorkItem) => {
    const [name, at] = event.id.split('@');
    handled.push({ name: name!, at: Number(at), n: event.n });
  };
  const of = (name: string) => handled.filter((h) => h.name === name).map((h) => h.at);
  return { handled, handler, of };
}

const untilClock = (at: number, what: string) => waitFor(() => Date.now() >= at, what, at - Date.now() + 5_000);

describe('recurring schedules', () => {
  const redis = useRedis();

  it('every 200 ms with three instances: each occurrence handled exactly once, none missing, ids in sequence', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const instances = [0, 1, 2].map(() => redis.service({ prefix, pollIntervalMs: POLL_MS }));
    for (const instance of instances) instance.addHandler(WorkItem, seen.handler, 4);
    const startAt = Math.ceil((Date.now() + 500) / 100) * 100;
    // Every instance schedules it (as every replica of an app would at boot): the same schedule, stored once.
    for (const instance of instances) await instance.schedule('tick', new WorkItem('', 7), { every: 200 }, { startAt: new Date(startAt) });
    await waitFor(() => seen.of('tick').length >= 15, '15 occurrences', 15_000);
    await instances[0]!.unschedule(WorkItem, 'tick');

    const times = seen.of('tick').slice(0, 15);
    expect(new Set(times).size).toBe(times.length);
    const sorted = [...times].sort((a, b) => a - b);
    expect(sorted[0]).toBe(startAt);
    sorted.forEach((at, k) => expect(at).toBe(startAt + k * 200));
    expect(seen.handled.every((h) => h.n === 7)).toBe(true);
  });

  it('after every instance stopped across several occurrences, catchUp none, latest and all do what they say', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const first = redis.service({ prefix, pollIntervalMs: POLL_MS });
    first.addHandler(WorkItem, seen.handler, 4);
    const anchor = Math.ceil((Date.now() + 500) / 1_000) * 1_000;
    for (const catchUp of ['none', 'latest', 'all'] as const) {
      await first.schedule(catchUp, new WorkItem(''), { every: 1_000 }, { startAt: new Date(anchor), catchUp });
    }
    await waitFor(() => ['none', 'latest', 'all'].every((name) => seen.of(name).length >= 2), 'two occurrences of each', 10_000);
    await first.close();
    const nextAtStop = Math.max(...(await redis.service({ prefix }).schedules(WorkItem)).map((s) => s.next!.getTime()));

    // Back half-way between two occurrences, more than two intervals later: what lies before was missed.
    const restartAt = anchor + Math.ceil((nextAtStop + 3_000 - anchor) / 1_000) * 1_000 + 500;
    await untilClock(restartAt, 'the outage to last');
    const second = redis.service({ prefix, pollIntervalMs: POLL_MS });
    second.addHandler(WorkItem, seen.handler, 4);
    const nextAfterRestart = restartAt + 500;
    await waitFor(() => ['none', 'latest', 'all'].every((name) => seen.of(name).includes(nextAfterRestart)), 'the first occurrence after the restart', 10_000);

    const missed = (name: string) => seen.of(name).filter((at) => at >= nextAtStop && at < restartAt);
    const gap = Array.from({ length: (restartAt - 500 - nextAtStop) / 1_000 + 1 }, (_, k) => nextAtStop + k * 1_000);
    expect(gap.length).toBeGreaterThanOrEqual(3);
    expect(missed('none')).toEqual([]);
    expect(missed('latest')).toEqual([gap.at(-1)]);
    expect(missed('all').sort((a, b) => a - b)).toEqual(gap);
  }, 30_000);

  it('replacing a schedule while it runs takes effect from the next occurrence; unschedule stops it', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const service = redis.service({ prefix, pollIntervalMs: POLL_MS });
    service.addHandler(WorkItem, seen.handler, 4);
    await service.schedule('pulse', new WorkItem('', 1), { every: 200 });
    await waitFor(() => seen.of('pulse').length >= 2, 'two pulses');
    const replacedAt = Date.now();
    await service.schedule('pulse', new WorkItem('', 2), { every: 300 });
    await waitFor(() => seen.handled.filter((h) => h.n === 2).length >= 3, 'three pulses of the new definition');
    // Nothing of the old definition after the replacement (one it had enqueued ahead was cancelled).
    expect(seen.handled.filter((h) => h.n === 1 && h.at > replacedAt)).toEqual([]);
    const newTimes = seen.handled.filter((h) => h.n === 2).map((h) => h.at);
    expect(newTimes[1]! - newTimes[0]!).toBe(300);

    expect(await service.unschedule(WorkItem, 'pulse')).toBe(true);
    expect(await service.unschedule(WorkItem, 'pulse')).toBe(false);
    expect(await service.schedules(WorkItem)).toEqual([]);
    const count = seen.of('pulse').length;
    // Two intervals and a poll more: a pulse enqueued ahead was cancelled, none is added.
    await untilClock(Date.now() + 800, 'two more intervals');
    expect(seen.of('pulse').length).toBe(count);
  });

  it('an occurrence enqueued ahead by a definition that is then replaced still happens, with the new payload', async () => {
    const prefix = redis.prefix();
    const seen = recorder();
    const service = redis.service({ prefix, pollIntervalMs: 3_000 });
    // An occurrence is enqueued ahead at a look, up to a poll interval before it
    // is due; where in that interval depends on the looks' phase. The promise is
    // about a replacement that lands while the occurrence is still ahead, so a
    // try whose look came too close to the due time (a loaded machine) is tried
    // again under another name. The handler comes after the replacement, so
    // nothing is claimed before it lands.
    let name = '';
    let startAt = 0;
    for (let attempt = 0; attempt < 5; attempt++) {
      name = `job${attempt}`;
      startAt = Math.ceil((Date.now() + 4_000) / 1_000) * 1_000;
      await service.schedule(name, new WorkItem('', 1), { every: 1_000 }, { startAt: new Date(startAt) });
      await waitFor(async () => (await service.find(WorkItem, `${name}@${startAt}`)) !== undefined, 'the first occurrence enqueued ahead', 8_000);
      if (startAt - Date.now() < 500) continue;
      await service.schedule(name, new WorkItem('', 2), { every: 1_000 }, { startAt: new Date(startAt) });
      if (Date.now() < startAt) break;
    }
    expect(Date.now()).toBeLessThan(startAt);
    service.addHandler(WorkItem, seen.handler, 2);
    await waitFor(() => seen.of(name).includes(startAt), 'the first occurrence handled', 10_000);
    expect(seen.handled.find((h) => h.name === name && h.at === startAt)?.n).toBe(2);
    // The same definition again (as every replica does at boot) changes nothing.
    const before = (await service.schedules(WorkItem)).find((s) => s.name === name);
    await service.schedule(name, new WorkItem('', 2), { every: 1_000 }, { startAt: new Date(startAt) });
    expect((await service.schedules(WorkItem)).find((s) => s.name === name)).toEqual(before);
  });

  it('lists schedules with their spec and next occurrence; a cron schedule in a time zone', async () => {
    const service = redis.service();
    const startAt = new Date('2099-03-28T12:00:00Z');
    await service.schedule('morning', new WorkItem(''), { cron: '30 2 * * *', tz: 'Europe/Paris' }, { startAt, catchUp: 'none', context: { tenant: 'acme' } });
    const [listed] = await service.schedules(WorkItem);
    expect(listed).toMatchObject({ name: 'morning', spec: { cron: '30 2 * * *', tz: 'Europe/Paris' }, catchUp: 'none', context: { tenant: 'acme' }, startAt });
    // 2099-03-29 is the spring-forward day in Paris: 02:30 does not exist, so it runs once, at 03:00 CEST.
    expect(listed!.next!.toISOString()).toBe('2099-03-29T01:00:00.000Z');
  });

  it('occurrences that fall in a daylight-saving change are computed once, in two time zones', () => {
    const next = (cron: string, tz: string, from: string) => new Date(occurrenceAtOrAfter({ cron, tz }, {}, 0, Date.parse(from))!).toISOString();
    // Paris, spring forward (02:00 -> 03:00): 02:30 is skipped, the run happens at the shifted instant, once.
    expect(next('30 2 * * *', 'Europe/Paris', '2026-03-28T12:00:00Z')).toBe('2026-03-29T01:00:00.000Z');
    expect(next('30 2 * * *', 'Europe/Paris', '2026-03-29T01:00:00.001Z')).toBe('2026-03-30T00:30:00.000Z');
    // Paris, fall back (03:00 -> 02:00): 02:30 happens twice; it runs at the first, once.
    expect(next('30 2 * * *', 'Europe/Paris', '2026-10-24T12:00:00Z')).toBe('2026-10-25T00:30:00.000Z');
    expect(next('30 2 * * *', 'Europe/Paris', '2026-10-25T00:30:00.001Z')).toBe('2026-10-26T01:30:00.000Z');
    // New York, fall back (02:00 EDT -> 01:00 EST): 01:30 happens twice; it runs at the first (EDT), once.
    expect(next('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z')).toBe('2026-11-01T05:30:00.000Z');
    expect(next('30 1 * * *', 'America/New_York', '2026-11-01T05:30:00.001Z')).toBe('2026-11-02T06:30:00.000Z');
    // New York, spring forward (02:00 -> 03:00): 02:30 on 2026-03-08 does not exist.
    expect(next('30 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z')).toBe('2026-03-08T07:00:00.000Z');
    // Weekdays at 9:00 in Paris, from a Saturday: Monday.
    expect(next('0 9 * * 1-5', 'Europe/Paris', '2026-11-28T12:00:00Z')).toBe('2026-11-30T08:00:00.000Z');
  });

  it('refuses a bad cron expression, time zone, interval, window or name with a typed error, and stores nothing', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const template = new WorkItem('');
    await expect(service.schedule('x', template, { cron: 'every day' })).rejects.toThrow(InvalidOptionError);
    await expect(service.schedule('x', template, { cron: '0 9 * * *', tz: 'Mars/Olympus' })).rejects.toThrow(/IANA time zone/);
    await expect(service.schedule('x', template, { every: 0 })).rejects.toThrow(InvalidOptionError);
    await expect(service.schedule('x', template, { every: -5 })).rejects.toThrow(InvalidDelayError);
    await expect(service.schedule('x', template, { every: 1_000 }, { startAt: new Date(2_000_000_000_000), endAt: new Date(1_000_000_000_000) })).rejects.toThrow(/endAt/);
    await expect(service.schedule('a@b', template, { every: 1_000 })).rejects.toThrow(InvalidOptionError);
    await expect(service.schedule('x', template, { every: 1_000 }, { endAt: new Date(Date.now() - 1_000) })).rejects.toThrow(/endAt: is in the past/);
    await expect(service.schedule('x', template, { every: '15m' as unknown as number })).rejects.toThrow(/every/);
    await expect(service.schedule('x', template, { every: 1_000, cron: '* * * * *' } as unknown as { every: number })).rejects.toThrow(/either every or cron/);
    await expect(service.schedule('x', template, { every: 1_000 }, { catchUp: 'some' as 'all' })).rejects.toThrow(/catchUp/);
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
  });

  it('occurrences reach every subscriber group, and a schedule that ended stops', async () => {
    const prefix = redis.prefix();
    const seen = { a: recorder(), b: recorder() };
    const service = redis.service({ prefix, pollIntervalMs: POLL_MS });
    service.addHandler(WorkItem, seen.a.handler, 2, { group: 'a' });
    service.addHandler(WorkItem, seen.b.handler, 2, { group: 'b' });
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.work}:groups`)) === 2, 'groups registered');
    const startAt = Date.now() + 300;
    await service.schedule('three', new WorkItem(''), { every: 200 }, { startAt: new Date(startAt), endAt: new Date(startAt + 400) });
    await waitFor(() => seen.a.of('three').length === 3 && seen.b.of('three').length === 3, 'three occurrences in both groups');
    await waitFor(async () => (await service.schedules(WorkItem))[0]?.next === undefined, 'the schedule ended');
  });
});
