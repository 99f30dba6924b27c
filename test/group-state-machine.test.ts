import fc from 'fast-check';
import { bodyWithExtras } from '../src/core/stored-body';
import { describe, expect, it } from 'vitest';
import { LuaScripts } from '../src/redis/lua-scripts';
import { cleanQueue, drainQueue, namedGroupsOf, obliterateQueue } from '../src/redis/housekeeping';
import { RedisLayout, type TypeKeys } from '../src/redis/redis-layout';
import { useRedis } from './support/harness';
import { leasedIds } from './support/leases';
import { ScheduleView } from './support/schedule';

// Few ids and attempts, so that random transitions keep meeting the same events and their last attempt.
const MAX_ATTEMPTS = 2;
const IDS = ['a', 'b', 'c'];
const GROUPS = ['default', 'audit'] as const;
type Group = (typeof GROUPS)[number];

/** What one group holds of an event: waiting in its ready list, running, waiting for its retry (due now), dead. */
interface Held {
  state: 'ready' | 'inFlight' | 'retry' | 'dead';
  /** The attempt in flight, or the last one spent in this group (0: none yet). */
  attempt: number;
  claim?: number;
}
interface Modelled {
  /** In the type's schedule, not yet delivered: the next dispatch hands it to every registered group. */
  scheduled: boolean;
  /** Handed to the named groups: the pending hash counts the groups that still hold it. */
  delivered: boolean;
  readonly groups: Map<Group, Held>;
  /** How many times a handler snoozed it, in any group (the shared body counts them). */
  snoozes: number;
  /** Its priority (since 0.6): above 0, READY in each group's priority set instead of its ready list. */
  priority: number;
}
/** Every claim made in a run, in either group: results may name any of them, late. */
interface Delivery {
  readonly group: Group;
  readonly id: string;
  readonly claim: number;
  readonly attempt: number;
}

const id = fc.constantFrom(...IDS);
const group = fc.constantFrom(...GROUPS);
/** Which delivery a result belongs to: an index into every claim made so far, from the newest (mostly recent ones, of events still about). */
const delivery = fc.oneof(fc.nat({ max: 4 }), fc.nat({ max: 30 }));
const operation = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('enqueue' as const), id, replace: fc.boolean(), priority: fc.constantFrom(0, 0, 0, 2, 5) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('dispatch' as const) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('claim' as const), group, count: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('complete' as const), delivery }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('fail' as const), delivery, then: fc.constantFrom('retry', 'dead letter') }) },
  // A handler snoozed (lua/snooze.lua): its group's delivery only, attempt unspent, the shared body's count one more;
  // with a new payload, refused while the type has more than one group.
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('snooze' as const), delivery, withEvent: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), id }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove group' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('register group' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('pause' as const), paused: fc.boolean() }) },
  // Redis loses the type's data (a flush, an empty restart): events, registry and marker. Results of claims made
  // before still arrive, and a plain dispatch (an instance that registers nothing) strands what falls due next.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('lose registrations' as const) }) },
  // A look by the type's dispatcher of an instance that handles 'audit' (and the default group, or not): while
  // the marker is missing it registers them first; with no default group then, it hands the default ready list's
  // undelivered events to 'audit' (lua/dispatch-due.lua).
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('dispatch as instance' as const), withDefault: fc.boolean() }) },
  // Since 0.6, the bulk clean-up (src/redis/housekeeping.ts): drain the type (no group) or one group, clean a
  // group's dead letters, and obliterate the type, whose tombstone keeps a restoring look from registering again.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('drain' as const), group: fc.constantFrom<Group | undefined>(undefined, 'default', 'audit') }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('clean' as const), group }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'obliterate' as const }) },
);

/**
 * Fan-out against a model: a type with the default group and a named group
 * ('audit') that is removed and registered again at random. Results name any
 * claim made so far in either group, so results of earlier claims arrive late:
 * after a replace, a cancel and an enqueue again, a pause, or the removal of
 * the group that made the claim. Only the claim in flight in its own group may
 * change anything; a removed group keeps no key; the body stays exactly while
 * some group (or the schedule) holds the event.
 */
describe('the event state machine with subscriber groups', () => {
  // Since 0.6 events carry priorities too: READY by priority in every group, cancelled, replaced and removed with it.
  const redis = useRedis();

  it('keeps each group’s states apart, fencing every result by its claim, through removeGroup (property)', async () => {
    const client = redis.client();
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 5, maxLength: 60, size: 'medium' }), async (operations) => {
        const layout = new RedisLayout(redis.prefix());
        const shared = layout.forType('test.fan');
        const keysOf: Record<Group, TypeKeys> = { default: shared, audit: layout.forGroup(shared, 'audit') };
        const base = shared.meta.slice(0, -':m'.length);
        const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 10_000, onStuck: () => {} }, 0);
        // The default group enters the registry once the type has a named group (lua/register-group.lua).
        await scripts.registerGroup(shared, 'audit');
        await scripts.registerGroup(shared, 'default');
        /** What the registry holds, and whether 'audit' was removed for good (removeGroup) since it last was registered. */
        const registry = new Set<Group>(['audit', 'default']);
        let auditRemoved = false;
        let markerSet = true;
        let markers = 0;
        let paused = false;
        /** obliterate() ran and no fresh registration came since: its tombstone stands. */
        let obliterated = false;
        const model = new Map<string, Modelled>();
        const order: Record<Group, string[]> = { default: [], audit: [] };
        /** READY events with a priority, per group, in the order claims take them (priority, then arrival). */
        const prio: Record<Group, string[]> = { default: [], audit: [] };
        /** The type's priority marker (enqueue sets it): until then a dispatch without named groups reads no priority. */
        let pqMarker = false;
        /** READY in group `g`: on its ready list, or by priority when the dispatch reads them. */
        const toReady = (eventId: string, g: Group, readsPriorities: boolean) => {
          if (readsPriorities && model.get(eventId)!.priority > 0) prio[g].push(eventId);
          else order[g].push(eventId);
        };
        const bodyOfModel = (m: Modelled, snoozes = m.snoozes) => bodyWithExtras('[0,{}]', { snoozes, ...(m.priority ? { priority: m.priority } : {}) }) ?? '[0,{}]';
        const deliveries: Delivery[] = [];
        const deliveryAt = (index: number): Delivery | undefined => deliveries[deliveries.length - 1 - (index % Math.max(1, deliveries.length))];
        const isCurrent = (d: Delivery) => {
          const held = model.get(d.id)?.groups.get(d.group);
          return held?.state === 'inFlight' && held.claim === d.claim;
        };
        /** A group let go of the event: once no group holds it and it is not scheduled, its body goes. */
        const release = (eventId: string, g: Group) => {
          const m = model.get(eventId)!;
          m.groups.delete(g);
          order[g] = order[g].filter((r) => r !== eventId);
          prio[g] = prio[g].filter((r) => r !== eventId);
          if (m.groups.size === 0 && !m.scheduled) model.delete(eventId);
        };
        const forget = (eventId: string) => {
          for (const g of GROUPS) {
            order[g] = order[g].filter((r) => r !== eventId);
            prio[g] = prio[g].filter((r) => r !== eventId);
          }
          model.delete(eventId);
        };

        /** Every key of the type is gone (a data loss, obliterate): no event, group, marker, pause or priority marker. */
        const forgetEverything = () => {
          model.clear();
          for (const g of GROUPS) {
            order[g] = [];
            prio[g] = [];
          }
          pqMarker = false;
          registry.clear();
          markerSet = false;
          auditRemoved = false;
          paused = false;
        };

        for (const op of operations) {
          if (op.kind === 'enqueue') {
            const stored = model.has(op.id);
            const body = bodyWithExtras('[0,{}]', op.priority ? { priority: op.priority } : {}) ?? '[0,{}]';
            const [status] = await scripts.enqueue(shared, [{ id: op.id, body, due: { atMs: 1 }, requestedAt: 0 }], op.replace);
            expect(status).toBe(stored ? (op.replace ? 'replaced' : 'duplicate') : 'scheduled');
            if (op.priority > 0) pqMarker = true;
            // A replace takes the event out of every group, whatever each holds of it, and schedules it afresh.
            if (!stored || op.replace) {
              forget(op.id);
              model.set(op.id, { scheduled: true, delivered: false, groups: new Map(), snoozes: 0, priority: op.priority });
            }
          } else if (op.kind === 'pause') {
            if (op.paused) await client.set(shared.paused, '1');
            else await client.del(shared.paused);
            paused = op.paused;
          } else if (op.kind === 'lose registrations') {
            // Everything of the type goes, the pause and the registry with it; claims made before may still report.
            const keys = await client.keys(`${base}*`);
            if (keys.length > 0) await client.del(...keys);
            forgetEverything();
            // The tombstone of an earlier obliterate goes with the rest.
            obliterated = false;
          } else if (op.kind === 'dispatch' || op.kind === 'dispatch as instance') {
            const before = { default: [...order.default], audit: [...order.audit] };
            const beforePrio = { default: [...prio.default], audit: [...prio.audit] };
            const groups: Group[] = op.kind === 'dispatch as instance' && op.withDefault ? ['default', 'audit'] : ['audit'];
            const registrations = op.kind === 'dispatch as instance' ? { newMarker: `m${++markers}`, markerSeenBefore: true, groups } : undefined;
            const result = await scripts.dispatchDue(shared, 16, false, registrations);
            let handed: string[] = [];
            if (registrations && !markerSet && !obliterated) {
              // Registered again before anything moves; with no default group, what waits in its ready list and
              // was never delivered goes to 'audit', as a fresh delivery.
              markerSet = true;
              for (const g of groups) registry.add(g);
              auditRemoved = false;
              if (!registry.has('default')) {
                handed = order.default.filter((eventId) => model.has(eventId) && !model.get(eventId)!.delivered);
                order.default = order.default.filter((eventId) => !handed.includes(eventId));
                for (const eventId of handed) {
                  const m = model.get(eventId)!;
                  m.groups.delete('default');
                  m.groups.set('audit', { state: 'ready', attempt: 0 });
                  m.delivered = true;
                  // Handed with their bodies: by priority, marker or not.
                  toReady(eventId, 'audit', true);
                }
                before.default = before.default.filter((eventId) => !handed.includes(eventId));
                before.audit.push(...handed.filter((eventId) => model.get(eventId)!.priority === 0));
              }
            }
            expect(result.handedToGroups).toBe(handed.length);
            const own = !auditRemoved ? await scripts.dispatchDue(keysOf.audit, 16) : undefined;
            if (paused) {
              expect([result.movedDue, own?.movedDue ?? 0]).toEqual([0, 0]);
            } else {
              // Fresh events, and the default group's retries of events never delivered, go to every registered group;
              // the default group's retries of delivered events to it alone; the named group's retries to it.
              // With no named group registered, everything due goes to the default group's list, registered or not.
              const toAudit = registry.has('audit');
              const toDefault = !toAudit || registry.has('default');
              // With a named group registered the type's dispatch reads every body it moves; else only once the
              // type's marker says it has priorities. A named group's own dispatch reads them by the marker.
              const typeReads = toAudit || pqMarker;
              for (const [eventId, m] of model) {
                const retrying = m.groups.get('default')?.state === 'retry';
                if (m.scheduled || (retrying && !m.delivered)) {
                  m.scheduled = false;
                  const held = m.groups.get('default');
                  if (toDefault) {
                    m.groups.set('default', { state: 'ready', attempt: held?.attempt ?? 0 });
                    toReady(eventId, 'default', typeReads);
                  } else {
                    m.groups.delete('default');
                  }
                  if (toAudit) {
                    m.groups.set('audit', { state: 'ready', attempt: 0 });
                    toReady(eventId, 'audit', true);
                    m.delivered = true;
                  }
                } else if (retrying) {
                  m.groups.get('default')!.state = 'ready';
                  toReady(eventId, 'default', typeReads);
                }
                if (!auditRemoved && m.groups.get('audit')?.state === 'retry') {
                  m.groups.get('audit')!.state = 'ready';
                  toReady(eventId, 'audit', pqMarker);
                }
              }
              // Within one call the order is Redis's: the model takes it, having checked what was added.
              for (const g of GROUPS) {
                const list = await client.lrange(keysOf[g].ready, 0, -1);
                expect(list.slice(0, before[g].length)).toEqual(before[g]);
                expect([...list.slice(before[g].length)].sort()).toEqual(order[g].slice(before[g].length).sort());
                order[g] = list;
                // The priority set: the same events, those there before in the order they had (newcomers rank after
                // those of their priority already there), then Redis's order.
                const ranked = await client.zrange(keysOf[g].readyByPriority, '0', '-1');
                expect([...ranked].sort()).toEqual([...prio[g]].sort());
                expect(ranked.filter((eventId) => beforePrio[g].includes(eventId))).toEqual(beforePrio[g].filter((eventId) => ranked.includes(eventId)));
                prio[g] = ranked;
              }
            }
          } else if (op.kind === 'claim') {
            // Strict priorities (aging 0): the ready list first, then the priority set in its order.
            const result = await scripts.completeAndClaim(keysOf[op.group], [], op.count, 60_000, MAX_ATTEMPTS, undefined, { agingMs: 0 });
            if (paused) {
              expect({ claimed: result.claimed, paused: result.paused }).toEqual({ claimed: [], paused: true });
              continue;
            }
            const fromList = order[op.group].slice(0, op.count);
            order[op.group] = order[op.group].slice(fromList.length);
            const fromSet = prio[op.group].slice(0, op.count - fromList.length);
            prio[op.group] = prio[op.group].slice(fromSet.length);
            const popped = [...fromList, ...fromSet];
            const claimed: Array<{ id: string; attempt: number }> = [];
            const dead: Array<{ id: string; attempt: number }> = [];
            for (const p of popped) {
              const held = model.get(p)!.groups.get(op.group)!;
              if (held.attempt >= MAX_ATTEMPTS) {
                held.state = 'dead';
                dead.push({ id: p, attempt: held.attempt });
              } else {
                claimed.push({ id: p, attempt: held.attempt + 1 });
              }
            }
            expect(result.claimed.map((c) => ({ id: c.id, attempt: c.attempt }))).toEqual(claimed);
            expect(result.deadLettered).toEqual(dead);
            for (const c of result.claimed) {
              expect(deliveries.filter((d) => d.id === c.id && d.claim === c.claim)).toEqual([]);
              Object.assign(model.get(c.id)!.groups.get(op.group)!, { state: 'inFlight', attempt: c.attempt, claim: c.claim });
              deliveries.push({ group: op.group, id: c.id, claim: c.claim, attempt: c.attempt });
            }
          } else if (op.kind === 'complete' || op.kind === 'fail') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const current = isCurrent(d);
            const keys = keysOf[d.group];
            let done: boolean;
            if (op.kind === 'complete') {
              done = (await scripts.completeAndClaim(keys, [d], 0, 60_000, MAX_ATTEMPTS)).stale.length === 0;
              if (current) release(d.id, d.group);
            } else if (op.then === 'dead letter') {
              done = await scripts.deadLetter(keys, d, 'failed');
              if (current) Object.assign(model.get(d.id)!.groups.get(d.group)!, { state: 'dead', claim: undefined });
            } else {
              done = (await scripts.retry(keys, d, 0, 'failed')) !== undefined;
              if (current) Object.assign(model.get(d.id)!.groups.get(d.group)!, { state: 'retry', claim: undefined });
            }
            // A result of a claim that is not the one in flight in its group changes nothing, in any group.
            expect(done).toBe(current);
          } else if (op.kind === 'snooze') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const current = isCurrent(d);
            const m = model.get(d.id);
            const body = m ? bodyOfModel(m, m.snoozes + 1) : bodyWithExtras('[0,{}]', { snoozes: 1 })!;
            const due = await scripts.snooze(keysOf[d.group], d, 0, body, op.withEvent);
            const refused = current && op.withEvent && registry.size > 1;
            expect(due === 'stale' ? 'stale' : due === 'refused' ? 'refused' : 'snoozed').toBe(!current ? 'stale' : refused ? 'refused' : 'snoozed');
            if (current && !refused) {
              const held = m!.groups.get(d.group)!;
              Object.assign(held, { state: 'retry', claim: undefined, attempt: held.attempt - 1 });
              m!.snoozes++;
            }
          } else if (op.kind === 'cancel') {
            expect(await scripts.cancel(shared, op.id, false)).toBe(model.has(op.id));
            forget(op.id);
          } else if (op.kind === 'remove group') {
            let first: boolean | undefined;
            for (;;) {
              const { existed, left } = await scripts.removeGroup(shared, 'audit', 2);
              first ??= existed;
              if (left === 0) break;
            }
            expect(first).toBe(registry.has('audit'));
            // A group the registry does not hold (lost with it) is not removed: nothing of it changes.
            if (registry.has('audit')) {
              for (const eventId of [...model.keys()]) if (model.get(eventId)!.groups.has('audit')) release(eventId, 'audit');
              registry.delete('audit');
              auditRemoved = true;
            }
          } else if (op.kind === 'drain') {
            // Without a group: the type's schedule (new events, the default group's retries) and every registered
            // group's READY deliveries; with one: its READY deliveries, and a named group's retries too.
            // The default group's keys are the type's own: drained whether registered or not; 'audit' while registered.
            const groups: Group[] = op.group ? [op.group] : registry.has('audit') ? ['default', 'audit'] : ['default'];
            let expected = 0;
            for (const [eventId, m] of [...model]) {
              if (op.group === undefined && m.scheduled) {
                expected += 1;
                m.scheduled = false;
                if (m.groups.size === 0) model.delete(eventId);
                continue;
              }
              for (const g of groups) {
                const held = m.groups.get(g);
                // Retries (and snoozed deliveries): every group's of the group named; without one, the default group's,
                // which are in the type's schedule.
                const takesRetry = op.group === undefined ? g === 'default' : true;
                if (held?.state === 'ready' || (held?.state === 'retry' && takesRetry)) {
                  expected += 1;
                  release(eventId, g);
                }
              }
            }
            const keys = op.group ? keysOf[op.group] : shared;
            let drained = await drainQueue(scripts, keys, op.group === 'default' ? 'retries' : 'schedule');
            if (op.group === undefined) for (const named of await namedGroupsOf(client, shared)) drained += await drainQueue(scripts, layout.forGroup(shared, named), 'ready');
            expect(drained).toBe(expected);
          } else if (op.kind === 'clean') {
            const dead = [...model].filter(([, m]) => m.groups.get(op.group)?.state === 'dead').map(([eventId]) => eventId);
            const cleaned = op.group === 'audit' && auditRemoved ? 0 : dead.length;
            expect(await cleanQueue(scripts, keysOf[op.group], 'dead', 0, 1_000)).toBe(cleaned);
            for (const eventId of dead) release(eventId, op.group);
          } else if (op.kind === 'obliterate') {
            await obliterateQueue(scripts, shared);
            expect((await client.keys(`${base}*`)).filter((k) => !k.endsWith(':gone') && !k.includes(':c:'))).toEqual([]);
            forgetEverything();
            obliterated = true;
          } else {
            // A fresh registration (addHandler) starts an obliterated type again.
            await scripts.registerGroup(shared, 'audit');
            registry.add('audit');
            auditRemoved = false;
            markerSet = true;
            obliterated = false;
          }
          await expectRedisToHold();
        }
        await client.del(shared.paused);

        async function expectRedisToHold(): Promise<void> {
          const idsOf = (g: Group, state: Held['state']) =>
            [...model]
              .filter(([, m]) => m.groups.get(g)?.state === state)
              .map(([eventId]) => eventId)
              .sort();
          // The body is stored once, while the schedule or some group holds the event.
          expect((await client.hkeys(shared.meta)).sort()).toEqual([...model.keys()].sort());
          // The shared body counts the snoozes of every group.
          for (const [eventId, m] of model) expect((await client.hget(shared.meta, eventId))?.endsWith(`|${bodyOfModel(m)}`), eventId).toBe(true);
          const scheduled = [...model].filter(([, m]) => m.scheduled || m.groups.get('default')?.state === 'retry').map(([eventId]) => eventId);
          expect([...(await new ScheduleView(client, base).entries()).keys()].sort()).toEqual(scheduled.sort());
          expect((await client.hkeys(shared.groups)).sort()).toEqual([...registry].sort());
          expect((await client.exists(shared.marker)) === 1).toBe(markerSet);
          for (const g of GROUPS) {
            if (g === 'audit' && auditRemoved) {
              // A removed group keeps nothing: no list, lease, dead letter or header of its own.
              expect(await client.keys(`${base}:g:audit:*`)).toEqual([]);
              continue;
            }
            const keys = keysOf[g];
            expect(await client.lrange(keys.ready, 0, -1)).toEqual(order[g]);
            expect(await client.zrange(keys.readyByPriority, '0', '-1')).toEqual(prio[g]);
            expect((await client.zrange(keys.readyAging, '0', '-1')).sort()).toEqual([...prio[g]].sort());
            expect(await client.hexists(keys.flow, 'rq')).toBe(prio[g].length > 0 ? 1 : 0);
            expect((await leasedIds(client, keys.inFlight)).sort()).toEqual(idsOf(g, 'inFlight'));
            expect((await client.zrange(keys.dead, '0', '-1')).sort()).toEqual(idsOf(g, 'dead'));
            if (g === 'audit') expect([...(await new ScheduleView(client, `${base}:g:audit`).entries()).keys()].sort()).toEqual(idsOf(g, 'retry'));
          }
          // The pending hash counts, for each delivered event, the groups that still hold it.
          const pending = await client.hgetall(shared.pending);
          const expected = Object.fromEntries([...model].filter(([, m]) => m.delivered).map(([eventId, m]) => [eventId, String(m.groups.size)]));
          expect(pending).toEqual(expected);
        }
      }),
      { numRuns: 400 },
    );
  }, 180_000);
});
