import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, SerializationError, fixedBackoff } from '../src';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

// Progress, log lines and results from a handler (since 0.6; docs/api.md, "Delivery").
describe('what a call reports', () => {
  const redis = useRedis();
  const queue = (prefix: string) => `${prefix}:{test.work}`;

  it("a running call's progress and log lines are seen from another process, coalesced into a few writes", async () => {
    const prefix = redis.prefix();
    const worker = new Worker({ ...redis.workerEnv(), PREFIX: prefix, MODE: 'report', HANDLER_TIMEOUT_MS: '60000' });
    try {
      await worker.waitForLine((l) => l.ready === true);
      const viewer = redis.service({ prefix });
      await viewer.enqueue(new WorkItem('busy'), 0);
      await worker.waitForLine((l) => l.reported === 'busy');
      const seen = await waitFor(async () => {
        const found = await viewer.find(WorkItem, 'busy');
        return found?.logs?.at(-1)?.line === 'line 149' && found;
      }, 'the last line');
      expect(seen.state).toBe('in-flight');
      expect(seen.progress).toEqual({ done: 149, of: 150 });
      expect(seen.logs?.map((l) => l.line)).toEqual(Array.from({ length: 100 }, (_, i) => `line ${i + 50}`));
      expect(new Set(seen.logs?.map((l) => l.attempt))).toEqual(new Set([1]));
      expect(seen.logs?.[0]?.at).toBeInstanceOf(Date);
      // 150 progress reports and 150 lines in one tick: one write, every line in one log.
      const lines = await redis.client().hget(`${queue(prefix)}:lg`, 'busy');
      expect(JSON.parse(lines!)).toHaveLength(100);
      // A write a quarter of a second, not one per report: the lines carry the Redis time of the script call that wrote them.
      const writes = new Set(seen.logs?.map((l) => l.at.getTime())).size;
      expect(writes).toBeLessThanOrEqual(6);
      const progress = await redis.client().hget(`${queue(prefix)}:pg`, 'busy');
      expect(progress?.split('|').slice(0, 2)).toEqual(['1', String(seen.logs?.[99]?.at.getTime())]);
    } finally {
      await worker.kill();
    }
  }, 30_000);

  it('progress starts afresh at each attempt; log lines stay across attempts and go with the event', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(3, 0) });
    let release: () => void = () => undefined;
    const second = new Promise<void>((resolve) => (release = resolve));
    service.addHandler(WorkItem, async (_e, _c, d) => {
      d.log(`attempt ${d.attempt} starts`);
      if (d.attempt === 1) {
        d.progress(50);
        // Cut to 1 KiB, never inside a character.
        d.log('é'.repeat(1_000));
        throw new Error('first try fails');
      }
      await second;
      d.result('done');
    });
    await service.enqueue(new WorkItem('twice'), 0);
    const running = await waitFor(async () => {
      const found = await service.find(WorkItem, 'twice');
      return found?.state === 'in-flight' && found.attempt === 2 && found.logs?.length === 3 && found;
    }, 'the second attempt with both lines');
    expect(running.progress).toBeUndefined();
    expect(running.logs?.map((l) => [l.attempt, l.line])).toEqual([
      [1, 'attempt 1 starts'],
      [1, `${'é'.repeat(510)}…`],
      [2, 'attempt 2 starts'],
    ]);
    release();
    await waitFor(async () => (await service.find(WorkItem, 'twice')) === undefined, 'handled');
    expect(await redis.client().exists(`${queue(prefix)}:lg`, `${queue(prefix)}:pg`)).toBe(0);
  });

  it('a result is kept with the handled event (keepHandled); a failed attempt drops its result', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(3, 0), keepHandled: { count: 10 } });
    service.addHandler(WorkItem, (e, _c, d) => {
      if (e.id === 'flaky' && d.attempt === 1) {
        d.result({ from: 'attempt 1' });
        return false;
      }
      // The last call wins; numbers come back exact.
      d.result('overwritten');
      d.result(e.id === 'counted' ? { total: e.n, big: 2 ** 53 - 1 } : null);
      return true;
    });
    await service.enqueueMany([{ event: new WorkItem('counted', 3) }, { event: new WorkItem('flaky') }]);
    const counted = await waitFor(async () => {
      const found = await service.find(WorkItem, 'counted');
      return found?.state === 'handled' && found;
    }, 'handled');
    expect(counted.result).toEqual({ total: 3, big: 2 ** 53 - 1 });
    const flaky = await waitFor(async () => {
      const found = await service.find(WorkItem, 'flaky');
      return found?.state === 'handled' && found;
    }, 'handled on attempt 2');
    expect(flaky.attempt).toBe(2);
    expect(flaky.result).toBeNull();
  });

  it('bad reports throw at once, typed: a result or progress that is not JSON or too large, a log line that is no string', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, keepHandled: { count: 10 } });
    const thrown: Record<string, unknown> = {};
    const attempt = (name: string, f: () => void) => {
      try {
        f();
      } catch (error) {
        thrown[name] = error;
      }
    };
    service.addHandler(WorkItem, (_e, _c, d) => {
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      attempt('bigint', () => d.result(10n));
      attempt('function', () => d.result(() => 1));
      attempt('circular', () => d.progress(circular));
      attempt('huge result', () => d.result('x'.repeat(64 * 1024)));
      attempt('huge progress', () => d.progress('x'.repeat(4 * 1024)));
      attempt('no string', () => d.log(42 as unknown as string));
      d.result('x'.repeat(64 * 1024 - 2));
    });
    await service.enqueue(new WorkItem('bad'), 0);
    const found = await waitFor(async () => {
      const f = await service.find(WorkItem, 'bad');
      return f?.state === 'handled' && f;
    }, 'handled');
    for (const name of ['bigint', 'function', 'circular']) expect(thrown[name], name).toBeInstanceOf(SerializationError);
    for (const name of ['huge result', 'huge progress', 'no string']) expect(thrown[name], name).toBeInstanceOf(InvalidArgumentError);
    expect((thrown['huge result'] as Error).message).toMatch(/65538 bytes as JSON; at most 65536/);
    // The largest result is kept whole.
    expect(found.result).toBe('x'.repeat(64 * 1024 - 2));
    expect(await redis.client().hexists(`${queue(prefix)}:hr`, 'bad')).toBe(1);
  });
});
