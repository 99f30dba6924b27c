import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ChildFailurePolicy, FlowStore, childResultsOf, edgeName, recordOf } from '../src/redis/flow-store';
import { replayDead } from '../src/redis/housekeeping';
import { LuaScripts } from '../src/redis/lua-scripts';
import { RedisLayout, type TypeKeys } from '../src/redis/redis-layout';
import { useRedis } from './support/harness';

// The flow protocol against a model (since 0.6; docs/state-machine.md, "Flows"):
// children settle in their own slots (handled, dead-lettered, cancelled,
// replayed and handled after all), and their notices reach the parent late,
// repeated, or a later one before an earlier one, as crashes and sweeps beside
// the sender deliver them. Whatever the order, each notice counts once and the
// parent ends as the notices applied say: waiting, dead (reason dependency),
// or due.

const CHILDREN = 3;
const POLICIES: readonly ChildFailurePolicy[] = ['fail', 'ignore', 'continue'];

type ChildState = 'stored' | 'dead' | 'gone';
type ParentState = 'waiting' | 'dead' | 'due';
interface Notice {
  readonly seq: number;
  readonly outcome: 'handled' | 'dead-lettered' | 'cancelled';
}
interface Child {
  state: ChildState;
  /** Notices the child's link numbered so far. */
  sent: number;
  /** The highest notice number applied to the parent, its edge's state then, and the outcome shown. */
  applied: number;
  edge: 'p' | 'd' | 'f';
  shown?: string;
}

type Op = { kind: 'handle' | 'dead-letter' | 'cancel' | 'replay'; child: number } | { kind: 'deliver'; child: number; how: 'in-order' | 'newest-first' | 'twice' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constantFrom('handle' as const, 'dead-letter' as const, 'cancel' as const, 'replay' as const), child: fc.nat(CHILDREN - 1) }),
  fc.record({ kind: fc.constant('deliver' as const), child: fc.nat(CHILDREN - 1), how: fc.constantFrom('in-order' as const, 'newest-first' as const, 'twice' as const) }),
);

describe('the flow protocol, against a model', () => {
  const redis = useRedis();

  it('each notice counts once, in any order and however often it comes, and the parent ends as the model says', async () => {
    const client = redis.client();
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom(...POLICIES), { minLength: CHILDREN, maxLength: CHILDREN }), fc.array(opArb, { minLength: 1, maxLength: 25 }), async (policies, ops) => {
        const layout = new RedisLayout(`fm${++run}`);
        const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 10_000, onStuck: () => undefined }, 0);
        const store = new FlowStore(client, layout, scripts, layout.wakeChannel);
        const parentKeys = layout.forType('flow.parent');
        // Each child its own type, one of them partitioned: every notice crosses slots.
        const childKeys: TypeKeys[] = [layout.forType('flow.a'), layout.forType('flow.b', 1), layout.forType('flow.c')];
        const refs = childKeys.map((k, i) => ({ type: k.type, id: `child-${i}` }));
        await store.park(
          parentKeys,
          'parent',
          { delayMs: 0 },
          '[0,{}]',
          refs.map((child, i) => ({ child, policy: policies[i]!, tag: childKeys[i]!.tag })),
        );
        for (const [i, keys] of childKeys.entries()) {
          expect(await store.link(keys, refs[i]!, parentKeys, 'parent', true)).toBe('ahead');
          await scripts.enqueue(keys, [{ id: refs[i]!.id, body: '[0,{}]', due: { atMs: 1 }, requestedAt: 0 }], false);
        }
        const children: Child[] = refs.map(() => ({ state: 'stored', sent: 0, applied: 0, edge: 'p' }));
        const outboxes: Notice[][] = refs.map(() => []);
        let parent = 'waiting' as ParentState;

        /** Claims child i (its queue holds it alone) as a handler would. */
        const claim = async (i: number) => {
          await scripts.dispatchDue(childKeys[i]!, 10, true);
          const [claimed] = (await scripts.completeAndClaim(childKeys[i]!, [], 1, 60_000, 5)).claimed;
          expect(claimed?.id).toBe(refs[i]!.id);
          return claimed!;
        };
        /** The model's side of applying one notice of child i (lua/flow-notice.lua). */
        const apply = (i: number, notice: Notice) => {
          const c = children[i]!;
          if (notice.seq <= c.applied) return;
          c.applied = notice.seq;
          const failed = notice.outcome !== 'handled' && policies[i] === 'fail';
          c.shown = notice.outcome !== 'handled' && policies[i] === 'ignore' ? 'ignored' : notice.outcome;
          c.edge = failed ? 'f' : 'd';
          const left = children.filter((x) => x.edge !== 'd').length;
          if (parent === 'waiting' && failed) parent = 'dead';
          else if (parent === 'waiting' && left === 0) parent = 'due';
          else if (parent === 'dead' && left === 0) parent = 'due';
        };
        /** Applies one raw outbox entry of child i to the parent, as a delivery does, without taking it. */
        const send = async (raw: string) => {
          const n = JSON.parse(raw) as { k: string; s: number; o: string; r?: string; e?: string };
          await store.notify(parentKeys, 'parent', n.k, n.s, n.o, n.r ?? '', n.e ?? '');
        };

        for (const op of ops) {
          const i = op.child;
          const c = children[i]!;
          const keys = childKeys[i]!;
          const id = refs[i]!.id;
          const settle = (outcome: Notice['outcome']) => outboxes[i]!.push({ seq: ++c.sent, outcome });
          if (op.kind === 'handle' && c.state === 'stored') {
            const claimed = await claim(i);
            await scripts.completeAndClaim(keys, [{ id, claim: claimed.claim, result: JSON.stringify({ by: id }) }], 0, 60_000, 5);
            c.state = 'gone';
            settle('handled');
          } else if (op.kind === 'dead-letter' && c.state === 'stored') {
            const claimed = await claim(i);
            expect(await scripts.deadLetter(keys, { id, claim: claimed.claim, attempt: 1 }, 'boom')).toBe(true);
            c.state = 'dead';
            settle('dead-lettered');
          } else if (op.kind === 'cancel' && c.state !== 'gone') {
            expect(await scripts.cancel(keys, id)).toBe(true);
            c.state = 'gone';
            settle('cancelled');
          } else if (op.kind === 'replay' && c.state === 'dead') {
            await replayDead(scripts, keys, [id], 1, layout.wakeChannel);
            c.state = 'stored';
          } else if (op.kind === 'deliver') {
            const raws = await client.lrange(keys.notices, 0, -1);
            expect(raws.length).toBe(outboxes[i]!.length);
            if (op.how === 'in-order') {
              await store.deliver(keys);
              for (const n of outboxes[i]!) apply(i, n);
              outboxes[i] = [];
            } else if (op.how === 'newest-first') {
              // The newest notice first (its sender was quicker), the older ones later: those change nothing.
              for (const raw of [...raws].reverse()) await send(raw);
              for (const n of [...outboxes[i]!].reverse()) apply(i, n);
            } else {
              // Sent twice over (a sweep beside the sender), left in the outbox for a later delivery too.
              for (const raw of [...raws, ...raws]) await send(raw);
              for (const n of outboxes[i]!) apply(i, n);
            }
          }

          // Redis agrees with the model: the parent's state, its record, and each child's link.
          const [waiting, dead, error, due] = await Promise.all([
            client.zscore(parentKeys.waiting, 'parent'),
            client.zscore(parentKeys.dead, 'parent'),
            client.hget(parentKeys.errors, 'parent'),
            client.zscore(parentKeys.legacySchedule, 'parent'),
          ]);
          const seen: ParentState | 'none' = waiting !== null ? 'waiting' : dead !== null ? 'dead' : due !== null ? 'due' : 'none';
          expect(seen, JSON.stringify({ op, children, policies })).toBe(parent);
          if (parent === 'dead') expect(error).toMatch(/^dependency: flow\.[abc]\|child-\d (dead-lettered|cancelled)$/);
          const record = recordOf(await client.hget(parentKeys.flows, 'parent'));
          const results = childResultsOf(Object.entries(await client.hgetall(`${parentKeys.flowResultsPrefix}parent`)).flat());
          expect(record?.left).toBe(children.filter((x) => x.edge !== 'd').length);
          for (const [k, child] of children.entries()) {
            const edge = record?.edges.find((e) => edgeName(e.child) === edgeName(refs[k]!));
            expect(edge?.state).toBe({ p: 'pending', d: 'done', f: 'failed' }[child.edge]);
            expect(results[edgeName(refs[k]!)]?.outcome).toBe(child.shown);
            if (child.shown === 'handled') expect(results[edgeName(refs[k]!)]?.result).toEqual({ by: refs[k]!.id });
            expect((await client.hexists(childKeys[k]!.parents, refs[k]!.id)) === 1).toBe(child.state === 'stored' || child.state === 'dead');
          }
        }
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
