import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ClaimedRef, LuaScripts } from '../src/redis/lua-scripts';
import { RedisLayout } from '../src/redis/redis-layout';
import { useRedis } from './support/harness';
import { leasedIds } from './support/leases';

const IDS = ['a', 'b', 'c', 'd', 'e', 'f'];
type State = 'scheduled' | 'ready' | 'inFlight' | 'dead';

const delivery = fc.nat({ max: 12 });
// The dead-lettering keeps all or two, mostly all, so the set grows past what the looks keep.
const keepAtDeadLetter = fc.constantFrom(0, 0, 2);
const keepAtLook = fc.constantFrom(0, 1, 1);
const operation = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('enqueue' as const), id: fc.constantFrom(...IDS) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('dispatch' as const), keepDead: keepAtLook }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('claim' as const), count: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('dead letter' as const), delivery, keepDead: keepAtDeadLetter }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('complete' as const), delivery }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), id: fc.constantFrom(...IDS) }) },
);

/**
 * Dead-letter retention (keepDead, since 0.6) against a model: events are
 * dead-lettered often here, by results that may be late (of a claim no longer
 * the one in flight, which changes nothing), with a count kept by the
 * dead-lettering script and by the dispatcher's looks. What a trim drops goes
 * whole (envelope, error, error log); nothing in another state is touched.
 * Which dead letters are oldest is Redis's order of the dead set (by time,
 * then id), read before each call.
 */
describe('dead-letter retention (keepDead)', () => {
  const redis = useRedis();

  it('keeps the newest dead letters, drops the others whole, and leaves every other state alone (property)', async () => {
    const client = redis.client();
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 10, maxLength: 60, size: 'large' }), async (operations) => {
        const layout = new RedisLayout(redis.prefix());
        const keys = layout.forType('test.retention');
        const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 10_000, onStuck: () => {} }, 0);
        const model = new Map<string, { state: State; claim?: number }>();
        let ready: string[] = [];
        const deliveries: ClaimedRef[] = [];
        const deliveryAt = (i: number) => deliveries[deliveries.length - 1 - (i % Math.max(1, deliveries.length))];
        const dead = () => client.zrange(keys.dead, '0', '-1');

        for (const op of operations) {
          if (op.kind === 'enqueue') {
            const [status] = await scripts.enqueue(keys, [{ id: op.id, body: '[0,{}]', due: { atMs: 1 }, requestedAt: 0 }], false);
            expect(status).toBe(model.has(op.id) ? 'duplicate' : 'scheduled');
            if (!model.has(op.id)) model.set(op.id, { state: 'scheduled' });
          } else if (op.kind === 'dispatch') {
            const before = await dead();
            const trimmed = op.keepDead === 0 ? [] : before.slice(0, Math.max(0, before.length - op.keepDead));
            await scripts.dispatchDue(keys, 100, false, undefined, { count: op.keepDead, ageMs: 0 });
            for (const eventId of trimmed) model.delete(eventId);
            const scheduled = [...model].filter(([, m]) => m.state === 'scheduled').map(([eventId]) => eventId);
            for (const eventId of scheduled) model.get(eventId)!.state = 'ready';
            // Within one call the order is Redis's.
            const list = await client.lrange(keys.ready, 0, -1);
            expect(list.slice(0, ready.length)).toEqual(ready);
            expect(list.slice(ready.length).sort()).toEqual(scheduled.sort());
            ready = list;
          } else if (op.kind === 'claim') {
            const result = await scripts.completeAndClaim(keys, [], op.count, 60_000, 5);
            const taken = ready.slice(0, op.count);
            ready = ready.slice(taken.length);
            expect(result.claimed.map((c) => c.id)).toEqual(taken);
            for (const c of result.claimed) {
              Object.assign(model.get(c.id)!, { state: 'inFlight', claim: c.claim });
              deliveries.push({ id: c.id, claim: c.claim });
            }
          } else if (op.kind === 'dead letter') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const m = model.get(d.id);
            const current = m?.state === 'inFlight' && m.claim === d.claim;
            const before = await client.zrange(keys.dead, '0', '-1', 'WITHSCORES');
            const done = await scripts.deadLetter(keys, { ...d, attempt: 1 }, 'failed', { count: op.keepDead, ageMs: 0 });
            expect(done).toBe(current);
            if (!current) continue;
            m!.state = 'dead';
            const kept = await client.zrange(keys.dead, '0', '-1', 'WITHSCORES');
            const keptIds = kept.filter((_, i) => i % 2 === 0);
            const candidates = [...before.filter((_, i) => i % 2 === 0), d.id];
            // The newest `keepDead` stay (all of them without a count); the one dead-lettered now is the newest,
            // but for one of its millisecond that sorts after it.
            expect(keptIds.length).toBe(op.keepDead === 0 ? candidates.length : Math.min(candidates.length, op.keepDead));
            const lowestKept = Math.min(...kept.filter((_, i) => i % 2 === 1).map(Number));
            for (const eventId of candidates) {
              if (keptIds.includes(eventId)) continue;
              const at = before.indexOf(eventId);
              if (at >= 0) expect(Number(before[at + 1])).toBeLessThanOrEqual(lowestKept);
              model.delete(eventId);
            }
          } else if (op.kind === 'complete') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const m = model.get(d.id);
            const current = m?.state === 'inFlight' && m.claim === d.claim;
            expect((await scripts.completeAndClaim(keys, [d], 0, 60_000, 5)).stale.length === 0).toBe(current);
            if (current) model.delete(d.id);
          } else {
            expect(await scripts.cancel(keys, op.id, false)).toBe(model.has(op.id));
            model.delete(op.id);
            ready = ready.filter((r) => r !== op.id);
          }

          const ids = (state: State) =>
            [...model]
              .filter(([, m]) => m.state === state)
              .map(([eventId]) => eventId)
              .sort();
          expect((await dead()).sort()).toEqual(ids('dead'));
          expect(await client.lrange(keys.ready, 0, -1)).toEqual(ready);
          expect((await leasedIds(client, keys.inFlight)).sort()).toEqual(ids('inFlight'));
          // What a trim dropped went whole: no envelope, error or error log is left without its event.
          expect((await client.hkeys(keys.meta)).sort()).toEqual([...model.keys()].sort());
          for (const erred of await client.hkeys(keys.errors)) expect(model.has(erred)).toBe(true);
          for (const logged of await client.hkeys(keys.errorLog)) expect(model.has(logged)).toBe(true);
        }
      }),
      { numRuns: 100 },
    );
  }, 180_000);
});
