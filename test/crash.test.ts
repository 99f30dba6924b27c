import { lastValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { useRedis, waitForDeadLetters } from './support/harness';
import { leaseScore } from './support/leases';
import { ScheduleView } from './support/schedule';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

describe('at least once across crashes', () => {
  const redis = useRedis();

  it('an event whose process is killed (SIGKILL) mid-handler is redelivered to another instance', async () => {
    const prefix = redis.prefix();
    const doomed = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'hang', HANDLER_TIMEOUT_MS: '1000', LEASE_GRACE_MS: '300' });
    try {
      await doomed.waitForLine((l) => l.ready === true);
      const producer = redis.service({ prefix });
      await producer.enqueue(new WorkItem('survivor', 7), 0);
      await doomed.waitForLine((l) => l.started === 'survivor');
      await doomed.kill('SIGKILL');

      const rescuer = redis.service({ prefix });
      const handled: Array<{ id: string; n: number; attempt: number }> = [];
      rescuer.addHandler(WorkItem, (e, _c, d) => (handled.push({ id: e.id, n: e.n, attempt: d.attempt }), true), 1);
      await waitFor(() => handled.length === 1, 'redelivery after the lease expired', 10_000);
      expect(handled).toEqual([{ id: 'survivor', n: 7, attempt: 2 }]);
      await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.work}:m`)) === 0, 'the event completed');
    } finally {
      await doomed.kill();
    }
  });

  it('a process killed (SIGKILL) right after its handler snoozed an event loses nothing: another instance handles it after the snooze, attempt unspent', async () => {
    const prefix = redis.prefix();
    const doomed = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'snooze', SNOOZE_MS: '1500' });
    try {
      await doomed.waitForLine((l) => l.ready === true);
      const producer = redis.service({ prefix });
      await producer.enqueue(new WorkItem('sleeper', 3), 0);
      // Counted once the snooze is written.
      await doomed.waitForLine((l) => l.metric === 'delayed.queue.handled' && (l.tags as { outcome?: string } | undefined)?.outcome === 'snoozed');
      await doomed.kill('SIGKILL');
      const killedAt = Date.now();

      const rescuer = redis.service({ prefix, pollIntervalMs: 50 });
      const handled: Array<{ id: string; n: number; attempt: number; snoozes: number; at: number }> = [];
      rescuer.addHandler(WorkItem, (e, _c, d) => (handled.push({ id: e.id, n: e.n, attempt: d.attempt, snoozes: d.snoozes, at: Date.now() }), true), 1);
      await waitFor(() => handled.length === 1, 'handled after the snooze', 10_000);
      expect(handled.map(({ at: _at, ...h }) => h)).toEqual([{ id: 'sleeper', n: 3, attempt: 1, snoozes: 1 }]);
      // Not before the snooze ended: it was written before the kill, counted from then.
      expect(handled[0]!.at - killedAt).toBeGreaterThan(500);
    } finally {
      await doomed.kill();
    }
  });

  it('events claimed ahead and never started spend no attempt when their process is killed (SIGKILL); those running do', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    // A long grace: events wait claimed ahead for up to half of it before they would be given back.
    const doomed = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'hang', HANDLER_TIMEOUT_MS: '1000', LEASE_GRACE_MS: '4000', MAX_ATTEMPTS: '1' });
    try {
      await doomed.waitForLine((l) => l.ready === true);
      const producer = redis.service({ prefix });
      // Quick calls teach the worker its handler's pace, so it claims ahead of its 4 slots.
      for (let i = 0; i < 20; i++) await producer.enqueue(new WorkItem(`warm${i}`), 0);
      await waitFor(async () => (await client.hlen(`${prefix}:{test.work}:m`)) === 0, 'the warm-up handled');
      for (let i = 0; i < 4; i++) await producer.enqueue(new WorkItem(`running${i}`), 0);
      await waitFor(() => doomed.lines.filter((l) => l.started?.startsWith('running')).length === 4, 'four calls running');
      await lastValueFrom(producer.enqueueBatch(Array.from({ length: 20 }, (_, i) => ({ event: new WorkItem(`held${i}`), delay: 0 }))));
      // 4 leases running, 20 held ahead, and the pin.
      await waitFor(async () => (await client.zcard(`${prefix}:{test.work}:f`)) === 25, 'twenty events claimed ahead');
      await doomed.kill('SIGKILL');

      const rescuer = redis.service({ prefix, retry: fixedBackoff(1, 0) });
      const handled: Array<{ id: string; attempt: number }> = [];
      rescuer.addHandler(WorkItem, (e, _c, d) => (handled.push({ id: e.id, attempt: d.attempt }), true), 8);
      await waitFor(() => handled.length === 20, 'the events held ahead handled after their leases expired', 20_000);
      expect(handled.every((h) => h.id.startsWith('held') && h.attempt === 1)).toBe(true);
      // The four that ran spent their only attempt.
      const letters = await waitForDeadLetters(rescuer, WorkItem, 4);
      expect(letters.map((l) => l.id).sort()).toEqual(['running0', 'running1', 'running2', 'running3']);
    } finally {
      await doomed.kill();
    }
  }, 40_000);

  it('a crash on the last allowed attempt dead-letters the event with the reason', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const service = redis.service({ prefix, handlerTimeoutMs: 100, leaseGraceMs: 100 });
    // As a process would leave it after dying on attempt 10 of 10: in flight, lease expired
    // (the envelope keeps the 9 attempts before; the lease holds expiry and attempt).
    await service.enqueue(new WorkItem('last', 1), 60_000);
    const keys = `${prefix}:{test.work}`;
    const envelope = (await client.hget(`${keys}:m`, 'last'))!;
    await client.hset(`${keys}:m`, 'last', envelope.replace(/^\d+\|/, '9|'));
    await new ScheduleView(client, keys).remove('last');
    await client.zadd(`${keys}:f`, leaseScore(Date.now() - 1), 'last');
    let called = false;
    service.addHandler(WorkItem, () => (called = true), 1);
    const [letter] = await waitForDeadLetters(service, WorkItem);
    expect(letter!.error).toMatch(/lease expired on attempt 10 of 10/);
    expect(called).toBe(false);
  });
});
