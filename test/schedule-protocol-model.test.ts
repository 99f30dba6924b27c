import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { EventRoute } from '../src/core/delayed-event.decorator';
import type { StoredPolicy } from '../src/core/schedule-policy';
import { LuaScripts } from '../src/redis/lua-scripts';
import { RecurringStore, type ScheduleDefinition } from '../src/redis/recurring-store';
import { RedisLayout } from '../src/redis/redis-layout';
import { type PolicyParts, advanceWithPolicy } from '../src/service/policy-advance';
import { ScheduleControls } from '../src/service/schedule-controls';
import { useRedis } from './support/harness';

/**
 * The protocol of a schedule with a policy (src/service/policy-advance.ts,
 * lua/advance-schedule.lua) against a model, on a real Redis: instances
 * advancing it, an instance's advance that read the definition earlier
 * arriving late (its compare-and-set must change nothing), a pause landing
 * between a decision and the store of its occurrences, resumes, occurrences
 * finishing. The occurrences themselves are kept by the model (stored once per
 * id, as an enqueue is); the definitions and every compare-and-set are Redis's.
 */
type Op = { readonly kind: 'advance' | 'snapshot' | 'late' | 'pause' | 'pause-during-store' | 'resume' | 'finish' } | { readonly kind: 'wait'; readonly ms: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'advance' as const }) },
  fc.constantFrom(
    { kind: 'snapshot' as const },
    { kind: 'late' as const },
    { kind: 'pause' as const },
    { kind: 'pause-during-store' as const },
    { kind: 'resume' as const },
    { kind: 'finish' as const },
  ),
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 10, max: 120 }) }) },
);

const POLICIES: Record<string, StoredPolicy> = {
  'skip, limit 6': { overlap: 'skip', limit: 6 },
  'buffer-one, jitter 30 ms': { overlap: 'buffer-one', jitterMs: 30 },
  'allow, jitter longer than the interval': { jitterMs: 300 },
};

describe('a schedule with a policy, against a model', () => {
  const redis = useRedis();

  for (const [label, policy] of Object.entries(POLICIES)) {
    it(`${label}: one decision per look whatever arrives late, nothing ahead survives a pause, the limit holds`, async () => {
      const client = redis.client();
      await fc.assert(
        fc.asyncProperty(fc.array(opArb, { minLength: 5, maxLength: 25 }), async (ops) => {
          const layout = new RedisLayout(redis.prefix());
          const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 10_000, onStuck: () => undefined }, 0);
          const store = new RecurringStore(client, layout);
          const route: EventRoute = { type: 'model.schedule', partitions: 1 };
          const now = Date.now();
          await store.write({
            name: 'm',
            type: route.type,
            partitions: 1,
            spec: { every: 40 },
            window: {},
            catchUp: 'latest',
            anchor: now + 40,
            payload: {},
            next: now + 40,
            ahead: [],
            version: 'v1',
            policy,
          });
          // The model's occurrences: id -> due and whether it still runs; an id is stored once (an enqueue of it again is a duplicate).
          const queue = new Map<string, { at: number; live: boolean }>();
          const everStored = new Set<string>();
          let duringStore: (() => Promise<unknown>) | undefined;
          const parts: PolicyParts = {
            pollIntervalMs: 50,
            store: async (occurrences) => {
              const hook = duringStore;
              duringStore = undefined;
              await hook?.();
              for (const o of occurrences) {
                if (queue.has(o.id)) continue;
                queue.set(o.id, { at: o.at, live: true });
                everStored.add(o.id);
              }
            },
            cancel: async (_route, id) => {
              const held = queue.get(id);
              if (!held?.live) return false;
              queue.delete(id);
              return true;
            },
            stateOf: async (_route, id) => ({ live: queue.get(id)?.live === true, dead: false }),
            read: async (d) => (await store.read(route, d.name))?.definition,
            replace: (d, read, next) => scripts.advanceSchedule(layout.recurringOf(route), d.name, read, JSON.stringify(next)),
          };
          const controls = new ScheduleControls({ store, replace: parts.replace, cancel: parts.cancel, chain: async () => 'scheduled', wake: () => undefined });
          const snapshots: Array<{ json: string; definition: ScheduleDefinition }> = [];
          const current = async () => (await store.read(route, 'm'))!;

          for (const op of ops) {
            if (op.kind === 'advance' || op.kind === 'pause-during-store') {
              if (op.kind === 'pause-during-store') duringStore = () => controls.pause(route, 'm');
              const read = await current();
              await advanceWithPolicy(parts, read.json, read.definition);
              duringStore = undefined;
            } else if (op.kind === 'snapshot') {
              snapshots.push(await current());
            } else if (op.kind === 'late') {
              // An instance that read the definition earlier finishes its advance now.
              const stale = snapshots.shift();
              if (stale) {
                const before = (await current()).json;
                await advanceWithPolicy(parts, stale.json, stale.definition);
                if (stale.json !== before) expect((await current()).json).toBe(before);
              }
            } else if (op.kind === 'pause') {
              expect(await controls.pause(route, 'm')).toBe(true);
            } else if (op.kind === 'resume') {
              expect(await controls.resume(route, 'm')).toBe(true);
            } else if (op.kind === 'finish') {
              for (const held of queue.values()) held.live = false;
            } else if (op.kind === 'wait') {
              // Time passing in the model: occurrences fall due, some are missed.
              await new Promise((resolve) => setTimeout(resolve, op.ms));
            }

            const d = (await current()).definition;
            const live = [...queue.values()].filter((q) => q.live);
            // An overlap policy: never two of its occurrences at once.
            if (policy.overlap) expect(live.length).toBeLessThanOrEqual(1);
            // Paused: nothing waits ahead of the pause (what was due before it may still run).
            if (d.paused) expect(live.filter((q) => q.at > d.paused!.at)).toEqual([]);
            // Every occurrence stored was decided once, and counted; the limit holds.
            expect(everStored.size).toBeLessThanOrEqual(d.runs ?? 0);
            if (policy.limit !== undefined) expect(d.runs ?? 0).toBeLessThanOrEqual(policy.limit);
            // 'buffer-one' keeps one waiting at most, never a stored one.
            if (d.buffered !== undefined && d.buffered !== null) expect(queue.has(`m@${d.buffered}`)).toBe(false);
          }
        }),
        { numRuns: 12 },
      );
    }, 120_000);
  }
});
