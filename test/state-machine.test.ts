import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type EnqueueStatus, LuaScripts } from '../src/redis/lua-scripts';
import { LEASE_PIN, RedisLayout, type TypeKeys } from '../src/redis/redis-layout';
import { useRedis } from './support/harness';
import { leasedIds } from './support/leases';
import { ScheduleView } from './support/schedule';

// Few ids and attempts, so that random transitions keep meeting the same events and their last attempt.
const MAX_ATTEMPTS = 2;
const IDS = ['a', 'b', 'c', 'd', 'e'];

type State = 'scheduled' | 'ready' | 'inFlight' | 'dead';
interface Modelled {
  state: State;
  /** The attempt in flight, or the last one started (0: none yet). */
  attempt: number;
  /** Scheduled: due by the next dispatch. In flight: the lease has expired. */
  due: boolean;
}

const id = fc.constantFrom(...IDS);
const operation = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('enqueue' as const), entries: fc.array(fc.tuple(id, fc.boolean()), { minLength: 1, maxLength: 6 }), replace: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('dispatch' as const), limit: fc.integer({ min: 1, max: 8 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('claim' as const), count: fc.integer({ min: 1, max: 5 }), expired: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('complete' as const), id, stale: fc.boolean() }) },
  // Successes recorded together, as a reader sends those of one tick: each is fenced on its own.
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('complete batch' as const), entries: fc.uniqueArray(fc.record({ id, stale: fc.boolean() }), { selector: (e) => e.id, minLength: 2, maxLength: 5 }) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('fail' as const), id, stale: fc.boolean(), then: fc.constantFrom('retry now', 'retry later', 'dead letter') }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('give back' as const), entries: fc.uniqueArray(fc.record({ id, stale: fc.boolean() }), { selector: (e) => e.id, minLength: 1, maxLength: 4 }) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), id }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('replay' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('purge' as const), id }) },
);

/**
 * The Lua transitions of docs/state-machine.md against a model, in random
 * order: every stored event is in exactly one state, with the attempt the
 * model expects, and nothing is left in a structure it does not belong to.
 */
describe('the event state machine', () => {
  const redis = useRedis();

  it('keeps every event in exactly one state under random transitions (property)', async () => {
    const client = redis.client();
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 5, maxLength: 40, size: 'medium' }), async (operations) => {
        const layout = new RedisLayout(redis.prefix());
        const keys = layout.forType('test.life');
        const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 10_000, onStuck: () => {} }, 0);
        const model = new Map<string, Modelled>();
        let ready: string[] = [];
        const inState = (state: State) => [...model].filter(([, m]) => m.state === state);

        for (const op of operations) {
          if (op.kind === 'enqueue') {
            const later = Date.now() + 3_600_000;
            const statuses = await scripts.enqueue(keys, op.entries.map(([eventId, due]) => ({ id: eventId, body: '[0,{}]', due: { atMs: due ? 1 : later }, requestedAt: 0 })), op.replace);
            const expected: EnqueueStatus[] = op.entries.map(([eventId, due]) => {
              const stored = model.has(eventId);
              if (stored && !op.replace) return 'duplicate';
              model.set(eventId, { state: 'scheduled', attempt: 0, due });
              ready = ready.filter((r) => r !== eventId);
              return stored ? 'replaced' : 'scheduled';
            });
            expect(statuses).toEqual(expected);
          } else if (op.kind === 'dispatch') {
            const dueNow = new Set(inState('scheduled').filter(([, m]) => m.due).map(([eventId]) => eventId));
            const expired = new Set(inState('inFlight').filter(([, m]) => m.due).map(([eventId]) => eventId));
            const result = await scripts.dispatchDue(keys, op.limit);
            expect(result.movedDue).toBe(Math.min(op.limit, dueNow.size));
            expect(result.movedExpired).toBe(Math.min(op.limit - result.movedDue, expired.size));
            const list = await client.lrange(keys.ready, 0, -1);
            const moved = list.slice(ready.length);
            expect(list.slice(0, ready.length)).toEqual(ready);
            expect(moved.filter((m) => dueNow.has(m))).toHaveLength(result.movedDue);
            expect(moved.filter((m) => expired.has(m))).toHaveLength(result.movedExpired);
            for (const m of moved) model.get(m)!.state = 'ready';
            ready = list;
          } else if (op.kind === 'claim') {
            const result = await scripts.completeAndClaim(keys, [], op.count, op.expired ? -1_000 : 60_000, MAX_ATTEMPTS);
            const popped = ready.slice(0, op.count);
            ready = ready.slice(op.count);
            const claimed: Array<{ id: string; attempt: number }> = [];
            const deadLettered: Array<{ id: string; attempt: number }> = [];
            for (const p of popped) {
              const m = model.get(p)!;
              // An event back from an expired lease on its last attempt is dead-lettered, not run again.
              if (m.attempt >= MAX_ATTEMPTS) {
                m.state = 'dead';
                deadLettered.push({ id: p, attempt: m.attempt });
              } else {
                Object.assign(m, { state: 'inFlight', attempt: m.attempt + 1, due: op.expired });
                claimed.push({ id: p, attempt: m.attempt });
              }
            }
            expect(result.claimed.map((c) => ({ id: c.id, attempt: c.attempt }))).toEqual(claimed);
            expect(result.deadLettered).toEqual(deadLettered);
          } else if (op.kind === 'complete batch') {
            const succeeded = op.entries.map((e) => ({ id: e.id, attempt: (model.get(e.id)?.attempt ?? 1) - (e.stale ? 1 : 0) }));
            const expectedStale = op.entries.flatMap((e, i) => (model.get(e.id)?.state === 'inFlight' && !e.stale ? [] : [i]));
            const result = await scripts.completeAndClaim(keys, succeeded, 0, 60_000, MAX_ATTEMPTS);
            expect(result.stale).toEqual(expectedStale);
            op.entries.forEach((e, i) => {
              if (!expectedStale.includes(i)) model.delete(e.id);
            });
          } else if (op.kind === 'complete' || op.kind === 'fail') {
            const m = model.get(op.id);
            const attempt = (m?.attempt ?? 1) - (op.stale ? 1 : 0);
            const current = m?.state === 'inFlight' && !op.stale;
            let done: boolean;
            if (op.kind === 'complete') {
              done = (await scripts.completeAndClaim(keys, [{ id: op.id, attempt }], 0, 60_000, MAX_ATTEMPTS)).stale.length === 0;
              if (current) model.delete(op.id);
            } else if (op.then === 'dead letter') {
              done = await scripts.deadLetter(keys, op.id, attempt, 'failed');
              if (current) m.state = 'dead';
            } else {
              done = (await scripts.retry(keys, op.id, attempt, op.then === 'retry now' ? 0 : 3_600_000, 'failed')) !== undefined;
              if (current) Object.assign(m, { state: 'scheduled', due: op.then === 'retry now' });
            }
            // A result of an attempt that is not the one in flight changes nothing.
            expect(done).toBe(current);
          } else if (op.kind === 'give back') {
            // Events claimed ahead and never started: those still in flight at that attempt go back to the head of READY, in order, their attempt unspent.
            const back = op.entries.filter((e) => model.get(e.id)?.state === 'inFlight' && !e.stale).map((e) => e.id);
            // A stale one names a lease this claim did not write: another attempt's.
            const given = await Promise.all(
              op.entries.map(async (e) => {
                const score = Number((await client.zscore(keys.inFlight, e.id)) ?? 1_000);
                return { id: e.id, leaseScore: String(e.stale ? score - 1 : score) };
              }),
            );
            expect(await scripts.releaseUnstarted(keys, given)).toBe(back.length);
            for (const b of back) Object.assign(model.get(b)!, { state: 'ready', attempt: model.get(b)!.attempt - 1 });
            ready = [...back, ...ready];
          } else if (op.kind === 'cancel') {
            expect(await scripts.cancel(keys, op.id)).toBe(model.delete(op.id));
            ready = ready.filter((r) => r !== op.id);
          } else if (op.kind === 'replay') {
            const dead = inState('dead');
            expect(await scripts.replayDead(keys, [], 100)).toEqual({ done: dead.length, taken: dead.length });
            for (const [, m] of dead) Object.assign(m, { state: 'scheduled', attempt: 0, due: true });
          } else {
            const isDead = model.get(op.id)?.state === 'dead';
            expect((await scripts.purgeDead(keys, [op.id], 100)).done).toBe(isDead ? 1 : 0);
            if (isDead) model.delete(op.id);
          }
          await expectRedisToHold(keys, model, ready);
        }
      }),
      { numRuns: 100 },
    );

    async function expectRedisToHold(keys: TypeKeys, model: Map<string, Modelled>, ready: string[]): Promise<void> {
      const ids = (state: State) => [...model].filter(([, m]) => m.state === state).map(([eventId]) => eventId).sort();
      const schedule = new ScheduleView(client, keys.meta.slice(0, -':m'.length));
      expect(await schedule.violations()).toEqual([]);
      expect([...(await schedule.entries()).keys()].sort()).toEqual(ids('scheduled'));
      expect(await client.lrange(keys.ready, 0, -1)).toEqual(ready);
      expect((await leasedIds(client, keys.inFlight)).sort()).toEqual(ids('inFlight'));
      // The pin is there exactly while a lease is.
      expect(await client.zscore(keys.inFlight, LEASE_PIN)).toBe(ids('inFlight').length > 0 ? '9007199254740992' : null);
      expect((await client.zrange(keys.dead, '0', '-1')).sort()).toEqual(ids('dead'));
      const envelopes = await client.hgetall(keys.meta);
      expect(Object.keys(envelopes).sort()).toEqual([...model.keys()].sort());
      for (const [eventId, m] of model) {
        // In flight, the envelope keeps the attempt before the claim; the lease carries the one running.
        const attempt = Number(envelopes[eventId]!.split('|')[0]);
        expect({ id: eventId, attempt }).toEqual({ id: eventId, attempt: m.state === 'inFlight' ? m.attempt - 1 : m.attempt });
      }
      for (const erred of await client.hkeys(keys.errors)) expect(model.has(erred)).toBe(true);
    }
  }, 180_000);
});
