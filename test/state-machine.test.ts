import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bodyWithExtras } from '../src/core/stored-body';
import { type EnqueueStatus, LuaScripts } from '../src/redis/lua-scripts';
import { type EnqueuePolicy, PLAIN_POLICY, REPLACE_POLICY } from '../src/redis/script-results';
import { type DrainScope, cleanQueue, drainQueue, obliterateQueue, purgeDead, replayDead } from '../src/redis/housekeeping';
import { LEASE_PIN, RedisLayout, type TypeKeys } from '../src/redis/redis-layout';
import { useRedis } from './support/harness';
import { leasedIds } from './support/leases';
import { ScheduleView } from './support/schedule';

// Few ids and attempts, so that random transitions keep meeting the same events and their last attempt.
const MAX_ATTEMPTS = 2;
/** How many handled events the history keeps in this model: few, so trimming is exercised. */
const KEPT = 3;
const IDS = ['a', 'b', 'c', 'd', 'e'];

type State = 'scheduled' | 'ready' | 'inFlight' | 'dead';
interface Modelled {
  state: State;
  /** The attempt in flight, or the last one spent (0: none yet). */
  attempt: number;
  /** Scheduled: due by the next dispatch. In flight: the lease has expired. */
  due: boolean;
  /** In flight: the claim that holds it, and whether its handler started. */
  claim?: number;
  started?: boolean;
  /** Its error is the note of a lease that ran out before its handler started (lua/dispatch-due.lua). */
  noted: boolean;
  /** The event class version its body was written at: 1 (no number in front) or 3 (`3|`). */
  version: 1 | 3;
  /** Its own attempts (enqueue's maxAttempts), when it has them; else MAX_ATTEMPTS. */
  most?: 1 | 3;
  /** How many times a handler snoozed it. */
  snoozes: number;
  /** Its priority: 0 waits READY on the ready list, above 0 in the priority set (lua/includes/priority-keys.lua). */
  priority: number;
  /** Due at ms 1 (enqueued or rescheduled as due): past any priorityAgingMs, so served first when the claim ages. */
  epoch: boolean;
  /** Its body's first element: 0 as enqueued here, or when its burst began, for one stored by a debounce (Redis's ms). */
  start: number;
  /** Stored by a debounce (since 0.6): its burst's maxWaitMs in the body (0 here: no bound). */
  wait?: number;
  /** Stored with a dedupe window (since 0.6): the window in the body. */
  dedupe?: number;
}

/** What a body carries beside its version (src/core/body-extras.ts). */
interface BodyParts {
  maxAttempts?: number;
  snoozes?: number;
  priority?: number;
  maxWaitMs?: number;
  dedupeWindowMs?: number;
}

/** A leading debounce's record of an id (lua/includes/enqueue-policy.lua): whether its quiet period runs, and the payload it holds. */
interface Burst {
  live: boolean;
  start: number;
  held?: { version: 1 | 3; most?: 1 | 3; priority: number; due: boolean; epoch: boolean };
}

/** A body as the codec writes it at each version; the scripts read only the number in front, and its own attempts at the end. */
const bodyAt = (version: 1 | 3, extras: BodyParts = {}, start = 0) => {
  const json = bodyWithExtras(`[${start},{}]`, extras) ?? `[${start},{}]`;
  return version === 1 ? json : `3|${json}`;
};
const bodyOf = (m: Modelled) =>
  bodyAt(
    m.version,
    {
      ...(m.most ? { maxAttempts: m.most } : {}),
      snoozes: m.snoozes,
      priority: m.priority,
      ...(m.wait !== undefined ? { maxWaitMs: m.wait } : {}),
      ...(m.dedupe !== undefined ? { dedupeWindowMs: m.dedupe } : {}),
    },
    m.start,
  );
/** Since 0.6, an enqueue call's window (lua/includes/enqueue-policy.lua): its policy, and what it adds to each body. */
const POLICIES = {
  plain: { policy: PLAIN_POLICY, extras: {} },
  replace: { policy: REPLACE_POLICY, extras: {} },
  debounce: { policy: { mode: 'd', ms: 0 }, extras: { maxWaitMs: 0 } },
  leading: { policy: { mode: 'l', ms: 0 }, extras: { maxWaitMs: 0 } },
  throttle: { policy: { mode: 't', ms: 3_600_000 }, extras: {} },
  keepLast: { policy: { mode: 'k', ms: 0 }, extras: { dedupeWindowMs: 0 } },
} as const satisfies Record<string, { policy: EnqueuePolicy; extras: BodyParts }>;
type PolicyName = keyof typeof POLICIES;
/** Every claim made in a run, current or long stale: results may name any of them, late. */
interface Delivery {
  readonly id: string;
  readonly claim: number;
  readonly attempt: number;
}

const id = fc.constantFrom(...IDS);
/** Which delivery a result belongs to: an index into every claim made so far, from the newest. */
const delivery = fc.nat({ max: 40 });
const operation = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('enqueue' as const),
      // With its own attempts or not: fewer (1) or more (3) than the handler's MAX_ATTEMPTS.
      // And a priority: 0 (the best, on the ready list) or above (in the priority set).
      entries: fc.array(fc.tuple(id, fc.boolean(), fc.constantFrom<1 | 3>(1, 3), fc.constantFrom<1 | 3 | undefined>(undefined, 1, 3), fc.constantFrom(0, 0, 2, 5)), { minLength: 1, maxLength: 6 }),
      // Since 0.6 with a window too: debounce (trailing, and leading with a trailing call), throttle, dedupe keepLast.
      policy: fc.constantFrom<PolicyName>('plain', 'plain', 'replace', 'replace', 'debounce', 'leading', 'leading', 'throttle', 'keepLast'),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('upgrade' as const) }) },
  // Fair sharing per key: a reader sorts the head of the ready list by key (a, b -> 'x'; c, d, e -> 'y');
  // while the queue is keyed, claims take from the keys in turn, and what was sorted drains once it is not.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('sort' as const), count: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('keyed' as const), on: fc.boolean() }) },
  // With keepDead (since 0.6), a look also drops the oldest dead letters over the count.
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('dispatch' as const), limit: fc.integer({ min: 1, max: 8 }), keepDead: fc.constantFrom(0, 0, 1, 1, 2) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('claim' as const),
      count: fc.integer({ min: 1, max: 5 }),
      startNow: fc.integer({ min: 0, max: 5 }),
      expired: fc.boolean(),
      // The reader's class version: a version-1 reader leaves version-3 events for a version-3 one.
      reads: fc.constantFrom<1 | 3>(1, 3),
      // Whether its handler sorts by key: while the queue is keyed, one that does not takes from the ready
      // list only once no reader that does has claimed for a minute (none here, once one has).
      sorts: fc.boolean(),
      // priorityAgingMs: never, or 11 days: then only events due at ms 1 are past it (no boundary to race).
      aging: fc.constantFrom(0, 1_000_000_000),
      // With heartbeats (since 0.6): each lease gets a heartbeat entry, alive for a minute.
      heartbeat: fc.boolean(),
    }),
  },
  // Heartbeats: an instance renews the leases of calls it runs, current or long stale; a renewal that lapses at
  // once stands for one whose instance then died. Abandoning (close() gave up) marks them not started instead.
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('renew' as const), deliveries: fc.uniqueArray(delivery, { minLength: 1, maxLength: 3 }), lapse: fc.boolean(), abandon: fc.boolean() }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('start' as const), deliveries: fc.uniqueArray(delivery, { minLength: 1, maxLength: 3 }) }) },
  // A reader about to start events it holds ahead asks Redis first: only a current claim of a type not paused is
  // confirmed; a cancel, replace, pause or expiry before it means the handler never starts. It changes nothing.
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('confirm' as const), deliveries: fc.uniqueArray(delivery, { minLength: 1, maxLength: 3 }), thenStart: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('complete' as const), delivery }) },
  // Successes recorded together, as a reader sends those of one tick: each is fenced on its own.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('complete batch' as const), deliveries: fc.uniqueArray(delivery, { minLength: 2, maxLength: 5 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('fail' as const), delivery, then: fc.constantFrom('retry now', 'retry later', 'dead letter', 'dead letter, keep 1') }) },
  // A handler snoozed (lua/snooze.lua): back to SCHEDULED, the attempt unspent, the snooze counted in the body.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('snooze' as const), delivery, due: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('give back' as const), deliveries: fc.uniqueArray(delivery, { minLength: 1, maxLength: 4 }) }) },
  // A handler said its provider rate-limited it (lua/rate-limited.lua): results of any claim so far, late ones included.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rate limited' as const), delivery }) },
  // A change of partitions moves the event out and in again (lua/migrate-out, migrate-in, migrate-done), the move sent twice.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('move' as const), id }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), id }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('reschedule' as const), id, due: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('replay' as const) }) },
  // Paused, nothing is dispatched or claimed; results of claims made before still arrive.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('pause' as const), paused: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('purge' as const), id }) },
  // Since 0.6: the bulk clean-up, in steps of `most` (src/redis/housekeeping.ts).
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('drain' as const), scope: fc.constantFrom<DrainScope>('ready', 'schedule', 'retries'), most: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('clean' as const), all: fc.boolean(), most: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'obliterate' as const }) },
);

/**
 * Since 0.6, the windows of enqueue (lua/includes/enqueue-policy.lua) on two ids, with the transitions that settle what
 * they store or hold: a leading debounce's held payload is stored when its event is handled or dead-lettered, and
 * dropped by a cancel; a lease run out on the last attempt leaves it held until the id's next enqueue.
 */
const hotId = fc.constantFrom('a', 'b');
const windowsOperation = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('enqueue' as const),
      entries: fc.array(fc.tuple(hotId, fc.boolean(), fc.constantFrom<1 | 3>(1, 3), fc.constantFrom<1 | 3 | undefined>(undefined, 1, 3), fc.constantFrom(0, 0, 2)), { minLength: 1, maxLength: 3 }),
      policy: fc.constantFrom<PolicyName>('debounce', 'leading', 'leading', 'leading', 'throttle', 'keepLast', 'plain', 'replace'),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('dispatch' as const), limit: fc.integer({ min: 1, max: 8 }), keepDead: fc.constant(0) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('claim' as const),
      count: fc.integer({ min: 1, max: 3 }),
      startNow: fc.integer({ min: 0, max: 3 }),
      expired: fc.boolean(),
      reads: fc.constant<1 | 3>(3),
      sorts: fc.constant(false),
      aging: fc.constant(0),
      heartbeat: fc.constant(false),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('complete' as const), delivery: fc.nat({ max: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('fail' as const), delivery: fc.nat({ max: 3 }), then: fc.constantFrom('retry now', 'dead letter', 'dead letter, keep 1') }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('snooze' as const), delivery: fc.nat({ max: 3 }), due: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), id: hotId }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('move' as const), id: hotId }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('purge' as const), id: hotId }) },
);

/**
 * The Lua transitions of docs/state-machine.md against a model, in random
 * order: every stored event is in exactly one state, with the attempt the
 * model expects, and nothing is left in a structure it does not belong to.
 * Results (success, retry, dead letter, give-back, start) name any claim made
 * so far, so results of earlier claims arrive late: after the event was
 * replaced, cancelled and enqueued again, replayed, its lease expired or it
 * was claimed again. Only the claim in flight may change the event.
 */
describe('the event state machine', () => {
  const redis = useRedis();

  it('keeps every event in exactly one state under random transitions, fencing every result by its claim (property)', async () => {
    const client = redis.client();
    const property = async (operations: Array<typeof operation extends fc.Arbitrary<infer O> ? O : never>) => {
      {
        const layout = new RedisLayout(redis.prefix());
        const keys = layout.forType('test.life');
        // A short history (keepHandled) and the error log ride along every transition.
        const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 10_000, onStuck: () => {} }, 0, undefined, undefined, { count: KEPT, ageMs: 0 });
        const model = new Map<string, Modelled>();
        /** Ids within a throttle window (an hour: all of a run), and each id's leading debounce record. */
        const throttled = new Set<string>();
        const bursts = new Map<string, Burst>();
        /** The id's event is gone for good here (handled in every group, or dead-lettered): a payload held for it is stored now. */
        const release = (eventId: string) => {
          const held = bursts.get(eventId)?.held;
          if (!held) return;
          bursts.get(eventId)!.held = undefined;
          model.set(eventId, {
            state: 'scheduled',
            attempt: 0,
            due: held.due,
            noted: false,
            version: held.version,
            snoozes: 0,
            priority: held.priority,
            epoch: held.epoch,
            start: bursts.get(eventId)!.start,
            wait: 0,
            ...(held.most ? { most: held.most } : {}),
          });
        };
        /** The burst's start as Redis recorded it, when it began with this call. */
        const burstStart = async (eventId: string) => Number((await client.hget(keys.bursts, eventId))?.split('|')[1]);
        /** Every id a current success completed: the history holds the last KEPT of them, never another. */
        const completed = new Set<string>();
        const deliveries: Delivery[] = [];
        /** Each claim's heartbeat entry, alive or lapsed (one per claim, lua/includes/lease-heartbeat.lua); none without heartbeats. */
        const beat = new Map<number, 'alive' | 'lapsed'>();
        let ready: string[] = [];
        /** READY events version-1 readers left for a version-3 one, oldest first (lua/includes/newer-key.lua). */
        let parked: string[] = [];
        /** Sorted by key: each key's ready ids, the keys in turn, and whether the queue is keyed. */
        const lists = new Map<string, string[]>();
        let ring: string[] = [];
        let keyed = false;
        /** A reader that sorts by key has claimed (lua/includes/limit-keys.lua, kseen): within this run, recently. */
        let sorterSeen = false;
        const keyOf = (eventId: string) => (eventId === 'a' || eventId === 'b' ? 'x' : 'y');
        const unsort = (eventId: string) => {
          const list = lists.get(keyOf(eventId));
          if (!list?.includes(eventId)) return false;
          list.splice(list.indexOf(eventId), 1);
          if (list.length === 0) ring = ring.filter((k) => k !== keyOf(eventId));
          return true;
        };
        /** READY events with a priority, with the sequence number each got: claimed by priority, then sequence. */
        let prioritized: Array<{ id: string; priority: number; seq: number }> = [];
        let seq = 0;
        const byPriority = () => [...prioritized].sort((x, y) => x.priority - y.priority || x.seq - y.seq).map((e) => e.id);
        /** Out of the priority set; the sequence starts again once it is empty. Returns whether it was there. */
        const unprioritize = (eventId: string) => {
          const was = prioritized.some((e) => e.id === eventId);
          prioritized = prioritized.filter((e) => e.id !== eventId);
          if (prioritized.length === 0) seq = 0;
          return was;
        };
        /** The dead letters a keepDead count of `keep` drops now: the oldest, in the dead set's order (0: none). */
        const overKept = async (keep: number): Promise<string[]> => {
          if (keep === 0) return [];
          const dead = await client.zrange(keys.dead, '0', '-1');
          return dead.slice(0, Math.max(0, dead.length - keep));
        };
        /** Nothing waits READY any more, anywhere (drain, obliterate). */
        const noneReady = () => {
          ready = [];
          parked = [];
          prioritized = [];
          seq = 0;
          lists.clear();
          ring = [];
        };
        const prioritize = (eventId: string) => prioritized.push({ id: eventId, priority: model.get(eventId)!.priority, seq: ++seq });
        let paused = false;
        const inState = (state: State) => [...model].filter(([, m]) => m.state === state);
        const deliveryAt = (index: number): Delivery | undefined => deliveries[deliveries.length - 1 - (index % Math.max(1, deliveries.length))];
        /** Whether a result of `d` is the one in flight's: only then may it change anything. */
        const isCurrent = (d: Delivery) => {
          const m = model.get(d.id);
          return m?.state === 'inFlight' && m.claim === d.claim;
        };
        const picked = (indexes: readonly number[]) => [...new Map(indexes.flatMap((i) => (deliveryAt(i) ? [[deliveryAt(i)!.id, deliveryAt(i)!] as const] : []))).values()];

        for (const op of operations) {
          if (op.kind === 'enqueue') {
            const later = Date.now() + 3_600_000;
            const { policy, extras } = POLICIES[op.policy];
            const statuses = await scripts.enqueue(
              keys,
              op.entries.map(([eventId, due, version, most, priority]) => ({
                id: eventId,
                body: bodyAt(version, { ...extras, ...(most ? { maxAttempts: most } : {}), priority }),
                due: { atMs: due ? 1 : later },
                requestedAt: 0,
              })),
              policy,
            );
            /** Out of wherever it waited READY (it is stored anew, or moved in the schedule). */
            const unready = (eventId: string) => {
              unprioritize(eventId);
              ready = ready.filter((r) => r !== eventId);
              parked = parked.filter((r) => r !== eventId);
              unsort(eventId);
            };
            const expected: EnqueueStatus[] = [];
            for (const [eventId, due, version, most, priority] of op.entries) {
              const stored = model.get(eventId);
              const fresh = (start: number, dueNow: boolean, fields: Partial<Modelled> = {}): Modelled => ({
                state: 'scheduled',
                attempt: 0,
                due: dueNow,
                noted: false,
                version,
                snoozes: 0,
                priority,
                epoch: dueNow,
                start,
                ...(most ? { most } : {}),
                ...fields,
              });
              // Not started: scheduled on its first attempt (what a window may still change in place).
              // A snoozed event ran before, though no attempt was spent: its snooze count stays (no fold).
              const waiting = stored?.state === 'scheduled' && stored.attempt === 0 && stored.snoozes === 0;
              const live = stored !== undefined && stored.state !== 'dead';
              if (op.policy === 'plain' || op.policy === 'replace') {
                if (stored && op.policy === 'plain') {
                  expected.push('duplicate');
                  continue;
                }
                model.set(eventId, fresh(0, due));
                unready(eventId);
                expected.push(stored ? 'replaced' : 'scheduled');
              } else if (op.policy === 'throttle') {
                if (throttled.has(eventId)) expected.push('throttled');
                else if (live) expected.push('duplicate');
                else {
                  throttled.add(eventId);
                  model.set(eventId, fresh(0, due));
                  unready(eventId);
                  expected.push('scheduled');
                }
              } else if (op.policy === 'keepLast') {
                // A duplicate; one not yet started takes the new body, its due time and attempts unchanged.
                if (stored && waiting) Object.assign(stored, { version, priority, snoozes: 0, start: 0, wait: undefined, dedupe: 0, most });
                if (!stored) {
                  model.set(eventId, fresh(0, due, { dedupe: 0 }));
                  unready(eventId);
                }
                expected.push(stored ? 'duplicate' : 'scheduled');
              } else if (op.policy === 'debounce') {
                if (stored && waiting) {
                  // Folded: the new body, moved to the new due time, the burst's start kept.
                  Object.assign(stored, { version, priority, snoozes: 0, most, wait: 0, dedupe: undefined, due, epoch: due });
                  expected.push('debounced');
                } else if (stored?.state === 'ready' && stored.attempt === 0 && stored.snoozes === 0 && stored.priority === priority && !keyed) {
                  // Due and never run: the new body takes its place where it waits READY.
                  Object.assign(stored, { version, priority, snoozes: 0, most, wait: 0, dedupe: undefined });
                  expected.push('debounced');
                } else {
                  model.set(eventId, fresh(Number.NaN, due, { wait: 0 }));
                  unready(eventId);
                  expected.push('scheduled');
                }
              } else {
                // Leading, with a trailing call. A due entry asks for a quiet period that has ended already.
                const burst = bursts.get(eventId);
                const entry = { version, priority, due, epoch: due, ...(most ? { most } : {}) };
                if (!burst || (!burst.live && !burst.held)) {
                  // Its first payload waits for the call running: due at once (Redis's now, not ms 1) once that ends.
                  if (live && !waiting) bursts.set(eventId, { live: !due, start: Number.NaN, held: { ...entry, due: true, epoch: false } });
                  else {
                    bursts.set(eventId, { live: !due, start: Number.NaN });
                    model.set(eventId, fresh(Number.NaN, true, { wait: 0, epoch: false }));
                    unready(eventId);
                  }
                  expected.push('scheduled');
                } else {
                  burst.live = !due;
                  if (live && (burst.held || !waiting || stored.due)) burst.held = entry;
                  else if (live) Object.assign(stored, { version, priority, snoozes: 0, most, wait: 0, dedupe: undefined, due, epoch: due, start: burst.start });
                  else {
                    burst.held = undefined;
                    model.set(eventId, fresh(burst.start, due, { wait: 0 }));
                    unready(eventId);
                  }
                  expected.push('debounced');
                }
              }
            }
            expect(statuses).toEqual(expected);
            // Where a burst began with this call, Redis's clock says when: the model takes it from there.
            for (const [eventId] of op.entries) {
              const m = model.get(eventId);
              const burst = bursts.get(eventId);
              if (m && Number.isNaN(m.start)) m.start = Number((await client.hget(keys.meta, eventId))!.match(/^\d+\|\d+\|(?:\d+\|)?\[(\d+)/)![1]);
              // A record whose quiet period ended and holds nothing may be gone already (dropped by the next call).
              if (burst && Number.isNaN(burst.start)) burst.start = (await burstStart(eventId)) || (m?.start ?? Number.NaN);
            }
          } else if (op.kind === 'pause') {
            if (op.paused) await client.set(keys.paused, '1');
            else await client.del(keys.paused);
            paused = op.paused;
          } else if (op.kind === 'dispatch' && paused) {
            // Retention runs paused too: a pause stops deliveries, not keepDead.
            const trimmed = await overKept(op.keepDead);
            expect(await scripts.dispatchDue(keys, op.limit, false, undefined, { count: op.keepDead, ageMs: 0 })).toMatchObject({ movedDue: 0, movedExpired: 0, readyWaiting: -1 });
            for (const eventId of trimmed) model.delete(eventId);
          } else if (op.kind === 'claim' && paused) {
            const result = await scripts.completeAndClaim(keys, [], op.count, 60_000, MAX_ATTEMPTS, undefined, { startNow: op.startNow, sortsByKey: op.sorts });
            sorterSeen ||= op.sorts;
            expect({ claimed: result.claimed, deadLettered: result.deadLettered, paused: result.paused }).toEqual({ claimed: [], deadLettered: [], paused: true });
          } else if (op.kind === 'dispatch') {
            const dueNow = new Set(
              inState('scheduled')
                .filter(([, m]) => m.due)
                .map(([eventId]) => eventId),
            );
            // Its lease expired, or its heartbeat lapsed (lua/includes/lease-heartbeat.lua).
            const expired = new Set(
              inState('inFlight')
                .filter(([, m]) => m.due || beat.get(m.claim!) === 'lapsed')
                .map(([eventId]) => eventId),
            );
            const trimmed = await overKept(op.keepDead);
            const result = await scripts.dispatchDue(keys, op.limit, false, undefined, { count: op.keepDead, ageMs: 0 });
            for (const eventId of trimmed) model.delete(eventId);
            expect(result.movedDue).toBe(Math.min(op.limit, dueNow.size));
            expect(result.movedExpired).toBe(Math.min(op.limit - result.movedDue, expired.size));
            const list = await client.lrange(keys.ready, 0, -1);
            // Those with a priority go to the priority set, each with the next number of its sequence.
            const before = new Set(prioritized.map((e) => e.id));
            const scored = await client.zrange(keys.readyByPriority, '0', '-1', 'WITHSCORES');
            const toSet: Array<{ id: string; seq: number }> = [];
            for (let i = 0; i < scored.length; i += 2) if (!before.has(scored[i]!)) toSet.push({ id: scored[i]!, seq: Number(scored[i + 1]) % 2 ** 33 });
            toSet.sort((x, y) => x.seq - y.seq);
            expect(toSet.map((e) => e.seq)).toEqual(toSet.map((_, i) => seq + i + 1));
            const moved = [...list.slice(ready.length), ...toSet.map((e) => e.id)];
            expect(list.slice(0, ready.length)).toEqual(ready);
            for (const eventId of list.slice(ready.length)) expect(model.get(eventId)?.priority, eventId).toBe(0);
            for (const { id: eventId } of toSet) {
              expect(model.get(eventId)?.priority, eventId).toBeGreaterThan(0);
              prioritize(eventId);
            }
            expect(moved.filter((m) => dueNow.has(m))).toHaveLength(result.movedDue);
            expect(moved.filter((m) => expired.has(m))).toHaveLength(result.movedExpired);
            for (const eventId of moved) {
              const m = model.get(eventId)!;
              if (m.state === 'inFlight') {
                // A lease that ran out before its handler started spends no attempt, unless the last one did the
                // same; one that ran out after its handler started ends such a series.
                if (!m.started && !m.noted) m.attempt -= 1;
                m.noted = !m.started;
              }
              Object.assign(m, { state: 'ready', claim: undefined, started: undefined });
            }
            ready = list;
            // A look that moved nothing says how many wait unclaimed (a quiet reader's nudge), and a look at a queue that
            // holds events scheduled or in flight says when to look next: a quiet queue's look (lua/dispatch-due.lua),
            // which reads no head when the keys are missing, must not miss one that is there.
            if (result.movedDue + result.movedExpired === 0) {
              expect(result.readyWaiting).toBe((await client.llen(keys.ready)) + (await client.zcard(keys.readyByPriority)));
            }
            if (inState('scheduled').length + inState('inFlight').length > 0) expect(result.nextDue).toBeGreaterThanOrEqual(0);
          } else if (op.kind === 'claim') {
            const result = await scripts.completeAndClaim(keys, [], op.count, op.expired ? -1_000 : 60_000, MAX_ATTEMPTS, undefined, {
              startNow: op.startNow,
              maxVersion: op.reads,
              sortsByKey: op.sorts,
              agingMs: op.aging,
              heartbeatLeaseMs: op.heartbeat ? 60_000 : 0,
            });
            // Those left for a reader of their version come first, then the ready list.
            const fromParked = op.reads === 3 ? parked.slice(0, op.count) : [];
            parked = parked.slice(fromParked.length);
            // Then the keys in turn, one id each per turn (lua/includes/keyed-take.lua), then, unless keyed, the ready list.
            const fromKeys: string[] = [];
            let turns = ring.length;
            let idle = 0;
            while (fromParked.length + fromKeys.length < op.count && turns > 0 && idle < turns) {
              const key = ring.shift()!;
              ring.push(key);
              const taken = lists.get(key)?.shift();
              if (taken === undefined) {
                idle++;
                continue;
              }
              fromKeys.push(taken);
              idle = 0;
              if (lists.get(key)!.length === 0) {
                ring = ring.filter((k) => k !== key);
                turns--;
              }
            }
            // Then READY: with aging, those of the priority set past it (due at ms 1, by id), each against the ready
            // list's head by due time; then the ready list; then the set by priority.
            const fromReady: string[] = [];
            if (!(keyed && (op.sorts || sorterSeen))) {
              const want = op.count - fromParked.length - fromKeys.length;
              if (op.aging > 0 && prioritized.length > 0) {
                const aged = prioritized
                  .filter((e) => model.get(e.id)!.epoch)
                  .map((e) => e.id)
                  .sort()
                  .slice(0, want);
                let i = 0;
                while (i < aged.length && fromReady.length < want) {
                  if (ready.length > 0 && model.get(ready[0]!)!.epoch) fromReady.push(ready.shift()!);
                  else {
                    unprioritize(aged[i]!);
                    fromReady.push(aged[i++]!);
                  }
                }
              }
              const plain = ready.slice(0, want - fromReady.length);
              ready = ready.slice(plain.length);
              fromReady.push(...plain);
              for (const eventId of byPriority().slice(0, want - fromReady.length)) {
                unprioritize(eventId);
                fromReady.push(eventId);
              }
            }
            sorterSeen ||= op.sorts;
            const popped = [...fromParked, ...fromKeys, ...fromReady];
            const claimed: Array<{ id: string; attempt: number; started: boolean }> = [];
            const deadLettered: Array<{ id: string; attempt: number }> = [];
            let left = 0;
            for (const p of popped) {
              const m = model.get(p)!;
              if (m.version > op.reads) {
                // Not claimed, no attempt spent: left, READY, for a reader of its version.
                parked.push(p);
                left++;
              } else if (m.attempt >= (m.most ?? MAX_ATTEMPTS)) {
                // An event back from an expired lease on its last attempt is dead-lettered, not run again.
                Object.assign(m, { state: 'dead', noted: false });
                deadLettered.push({ id: p, attempt: m.attempt });
              } else {
                claimed.push({ id: p, attempt: m.attempt + 1, started: claimed.length < op.startNow });
              }
            }
            expect(result.claimed.map((c) => ({ id: c.id, attempt: c.attempt, started: c.started }))).toEqual(claimed);
            expect(result.deadLettered).toEqual(deadLettered);
            expect(result.leftForNewerVersion).toBe(left);
            for (const c of result.claimed) {
              // A claim is a new delivery: no earlier claim of the same id shares its identity.
              expect(deliveries.filter((d) => d.id === c.id && d.claim === c.claim)).toEqual([]);
              Object.assign(model.get(c.id)!, { state: 'inFlight', attempt: c.attempt, due: op.expired, claim: c.claim, started: c.started });
              if (op.heartbeat) beat.set(c.claim, 'alive');
              deliveries.push({ id: c.id, claim: c.claim, attempt: c.attempt });
            }
          } else if (op.kind === 'confirm') {
            const asked = picked(op.deliveries);
            const result = await scripts.completeAndClaim(keys, [], 0, 60_000, MAX_ATTEMPTS, undefined, { confirm: asked });
            expect(result.paused).toBe(paused && asked.length > 0);
            expect(result.refused).toEqual(asked.flatMap((d, i) => (paused || !isCurrent(d) ? [i] : [])));
            if (op.thenStart) {
              // The reader invokes only what was confirmed, and marks it started with its next call.
              const confirmed = asked.filter((_, i) => !result.refused.includes(i));
              await scripts.completeAndClaim(keys, [], 0, 60_000, MAX_ATTEMPTS, undefined, { started: confirmed });
              for (const d of confirmed) {
                expect(isCurrent(d)).toBe(true);
                model.get(d.id)!.started = true;
              }
            }
          } else if (op.kind === 'renew') {
            const asked = picked(op.deliveries);
            const reply = await scripts.call('renew-leases', keys, { leaseMs: op.lapse ? -1_000 : 60_000, abandon: op.abandon, events: asked });
            // Only a current claim's lease is renewed (or abandoned): the others are lost to it.
            expect(reply.lost).toEqual(asked.flatMap((d, i) => (isCurrent(d) ? [] : [i + 1])));
            for (const d of asked) {
              if (!isCurrent(d)) continue;
              const m = model.get(d.id)!;
              if (op.abandon) m.started = false;
              else beat.set(d.claim, op.lapse ? 'lapsed' : 'alive');
            }
          } else if (op.kind === 'start') {
            const started = picked(op.deliveries);
            await scripts.completeAndClaim(keys, [], 0, 60_000, MAX_ATTEMPTS, undefined, { started });
            for (const d of started) if (isCurrent(d)) model.get(d.id)!.started = true;
          } else if (op.kind === 'complete batch') {
            const succeeded = picked(op.deliveries);
            const expectedStale = succeeded.flatMap((d, i) => (isCurrent(d) ? [] : [i]));
            const result = await scripts.completeAndClaim(keys, succeeded, 0, 60_000, MAX_ATTEMPTS);
            expect(result.stale).toEqual(expectedStale);
            succeeded.forEach((d, i) => {
              if (!expectedStale.includes(i)) {
                model.delete(d.id);
                completed.add(d.id);
                release(d.id);
              }
            });
          } else if (op.kind === 'complete' || op.kind === 'fail') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const current = isCurrent(d);
            const m = model.get(d.id);
            let done: boolean;
            if (op.kind === 'complete') {
              done = (await scripts.completeAndClaim(keys, [d], 0, 60_000, MAX_ATTEMPTS)).stale.length === 0;
              if (current) {
                model.delete(d.id);
                completed.add(d.id);
                release(d.id);
              }
            } else if (op.then === 'dead letter') {
              done = await scripts.deadLetter(keys, d, 'failed');
              if (current) Object.assign(m!, { state: 'dead', claim: undefined, started: undefined, noted: false });
              // A payload a leading debounce held for it takes its place.
              if (current) release(d.id);
            } else if (op.then === 'dead letter, keep 1') {
              // keepDead { count: 1 }: the set keeps its newest, the one dead-lettered now among them unless
              // it shares its millisecond with one that sorts after it. What goes, goes whole.
              const before = await client.zrange(keys.dead, '0', '-1', 'WITHSCORES');
              done = await scripts.deadLetter(keys, d, 'failed', { count: 1, ageMs: 0 });
              const releasing = current && bursts.get(d.id)?.held !== undefined;
              if (current) Object.assign(m!, { state: 'dead', claim: undefined, started: undefined, noted: false });
              if (current) release(d.id);
              const kept = await client.zrange(keys.dead, '0', '-1', 'WITHSCORES');
              const keptIds = kept.filter((_, i) => i % 2 === 0);
              const candidates = [...before.filter((_, i) => i % 2 === 0), ...(current && !releasing ? [d.id] : [])];
              expect(keptIds.length).toBe(current ? Math.min(candidates.length, 1) : keptIds.length);
              const lowestKept = Math.min(...kept.filter((_, i) => i % 2 === 1).map(Number));
              for (const eventId of candidates) {
                if (keptIds.includes(eventId)) continue;
                // Only older ones (or one of the same millisecond) went.
                const at = before.indexOf(eventId);
                if (at >= 0) expect(Number(before[at + 1])).toBeLessThanOrEqual(lowestKept);
                model.delete(eventId);
              }
            } else {
              done = (await scripts.retry(keys, d, op.then === 'retry now' ? 0 : 3_600_000, 'failed')) !== undefined;
              if (current) Object.assign(m!, { state: 'scheduled', due: op.then === 'retry now', epoch: false, claim: undefined, started: undefined, noted: false });
            }
            // A result of a claim that is not the one in flight changes nothing.
            expect(done).toBe(current);
          } else if (op.kind === 'snooze') {
            // Only the claim in flight snoozes: the body is stored again with one snooze more, the attempt unspent.
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const current = isCurrent(d);
            const m = model.get(d.id);
            const body = m ? bodyOf({ ...m, snoozes: m.snoozes + 1 }) : bodyAt(1, { snoozes: 1 });
            const due = await scripts.snooze(keys, d, op.due ? 0 : 3_600_000, body, false);
            expect(typeof due === 'number').toBe(current);
            if (current) Object.assign(m!, { state: 'scheduled', due: op.due, epoch: false, attempt: m!.attempt - 1, snoozes: m!.snoozes + 1, claim: undefined, started: undefined, noted: false });
          } else if (op.kind === 'give back') {
            // Events claimed ahead and never started: those still in flight for that claim go back to the head of READY, in order, their attempt unspent.
            const given = picked(op.deliveries);
            const back = given.filter(isCurrent).map((d) => d.id);
            expect(await scripts.releaseUnstarted(keys, given)).toBe(back.length);
            for (const b of back) Object.assign(model.get(b)!, { state: 'ready', attempt: model.get(b)!.attempt - 1, claim: undefined, started: undefined });
            ready = [...back, ...ready];
          } else if (op.kind === 'rate limited') {
            // The claim in flight goes back to the head of READY, its attempt unspent; the queue is held (for every claim) either way.
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const current = isCurrent(d);
            expect((await scripts.rateLimited(keys, d, 60_000)).givenBack).toBe(current);
            const flowKey = `${keys.meta.slice(0, -':m'.length)}:fc`;
            expect(Number(await client.hget(flowKey, 'hold'))).toBeGreaterThan(Date.now() + 50_000);
            const held = await scripts.completeAndClaim(keys, [], 1, 60_000, MAX_ATTEMPTS);
            // Paused, a claim says so first; else it says how long the hold lasts.
            expect({ claimed: held.claimed, held: paused ? held.paused : held.throttledMs > 50_000 }).toEqual({ claimed: [], held: true });
            // The hold ends (as its time passes).
            await client.hdel(flowKey, 'hold');
            if (current) {
              const m = model.get(d.id)!;
              Object.assign(m, { state: 'ready', attempt: m.attempt - 1, claim: undefined, started: undefined });
              ready = [d.id, ...ready];
            }
          } else if (op.kind === 'move') {
            // Out of its queue and in again: whatever its state but in flight, it keeps it (ready at the list's tail),
            // with its attempt and due time; sent twice, the move stores it once.
            const m = model.get(op.id);
            const movable = m !== undefined && m.state !== 'inFlight';
            const records = await scripts.migrateOut(keys, `move-${op.id}`, [op.id]);
            expect(records.map((r) => r.id)).toEqual(movable ? [op.id] : []);
            if (movable) {
              const token = `t${Math.random()}`;
              const out = await scripts.migrateOut(keys, token, [op.id]);
              expect(out).toEqual([]);
              expect(
                await scripts.migrateIn(
                  keys,
                  `move-${op.id}`,
                  records.map((r) => r.record),
                ),
              ).toBe(1);
              expect(
                await scripts.migrateIn(
                  keys,
                  `move-${op.id}`,
                  records.map((r) => r.record),
                ),
              ).toBe(0);
              expect(await scripts.migrateDone(keys, `move-${op.id}`, [op.id])).toBe(1);
              // A later move of the same id in this run reuses its token: the record of this one goes.
              await client.del(keys.moved);
              const wasWaiting = ready.includes(op.id) || parked.includes(op.id) || unsort(op.id) || unprioritize(op.id);
              ready = ready.filter((r) => r !== op.id);
              parked = parked.filter((r) => r !== op.id);
              // Back at the tail of its priority.
              if ((m.state === 'ready' || wasWaiting) && m.priority > 0) prioritize(op.id);
              else if (m.state === 'ready' || wasWaiting) ready = [...ready, op.id];
            }
          } else if (op.kind === 'cancel') {
            expect(await scripts.cancel(keys, op.id)).toBe(model.delete(op.id));
            // Its burst ends: a payload held never runs.
            bursts.delete(op.id);
            unprioritize(op.id);
            ready = ready.filter((r) => r !== op.id);
            parked = parked.filter((r) => r !== op.id);
            unsort(op.id);
          } else if (op.kind === 'keyed') {
            if (op.on) await client.hset(`${keys.meta.slice(0, -':m'.length)}:fc`, 'keyed', '1');
            else await client.hdel(`${keys.meta.slice(0, -':m'.length)}:fc`, 'keyed');
            keyed = op.on;
          } else if (op.kind === 'sort') {
            // The head of READY: the ready list, then the priority set in its order (lua/peek-ready.lua).
            const head = [...ready.slice(0, op.count), ...byPriority().slice(0, Math.max(0, op.count - ready.length))];
            expect((await scripts.peekReady(keys, op.count)).map((e) => e.id)).toEqual(head);
            expect(
              await scripts.classify(
                keys,
                head.map((eventId) => ({ id: eventId, key: keyOf(eventId) })),
              ),
            ).toBe(head.length);
            for (const eventId of head) {
              const key = keyOf(eventId);
              if (!lists.get(key)?.length) ring.push(key);
              lists.set(key, [...(lists.get(key) ?? []), eventId]);
            }
            ready = ready.filter((r) => !head.includes(r));
            for (const eventId of head) unprioritize(eventId);
          } else if (op.kind === 'upgrade') {
            // upgradeStored: every version-1 body rewritten at version 3, in whatever state, fenced by the body read.
            const old = [...model].filter(([, m]) => m.version === 1);
            const bodies = old.map(([eventId, m]) => ({ id: eventId, from: bodyOf(m), to: bodyOf({ ...m, version: 3 }) }));
            expect(bodies.length === 0 ? 0 : await scripts.call('upgrade-bodies', keys, { bodies })).toBe(old.length);
            for (const [, m] of old) m.version = 3;
          } else if (op.kind === 'reschedule') {
            const m = model.get(op.id);
            const movable = m?.state === 'scheduled' || m?.state === 'ready';
            const newDue = await scripts.reschedule(keys, op.id, { atMs: op.due ? 1 : Date.now() + 3_600_000 });
            expect(newDue !== undefined).toBe(movable);
            if (movable) Object.assign(m, { state: 'scheduled', due: op.due, epoch: op.due });
            if (movable) unprioritize(op.id);
            ready = ready.filter((r) => r !== op.id || !movable);
            parked = parked.filter((r) => r !== op.id || !movable);
            if (movable) unsort(op.id);
          } else if (op.kind === 'replay') {
            const dead = inState('dead');
            expect(await replayDead(scripts, keys, [], 100, layout.wakeChannel)).toEqual({ done: dead.length, taken: dead.length });
            for (const [, m] of dead) Object.assign(m, { state: 'scheduled', attempt: 0, due: true, noted: false, epoch: false });
          } else if (op.kind === 'drain') {
            // Every place a READY event waits, and the schedule: all of it, or what ran before (an attempt spent, or
            // snoozed: the default group's retries). In flight and dead stay.
            const ranBefore = (m: Modelled) => m.attempt > 0 || m.snoozes > 0;
            const gone = [...model]
              .filter(([, m]) => m.state === 'ready' || (m.state === 'scheduled' && (op.scope === 'schedule' || (op.scope === 'retries' && ranBefore(m)))))
              .map(([eventId]) => eventId);
            let drained = 0;
            let from = op.scope === 'retries' ? 0 : -1;
            for (;;) {
              const { removed, next } = await scripts.call('drain', keys, { most: op.most, withSchedule: op.scope === 'schedule', retriesFrom: from });
              drained += removed;
              from = next;
              if (removed < op.most && next < 0) break;
            }
            expect(drained).toBe(gone.length);
            expect(await drainQueue(scripts, keys, op.scope)).toBe(0);
            for (const eventId of gone) model.delete(eventId);
            noneReady();
          } else if (op.kind === 'clean') {
            const dead = inState('dead');
            expect(await cleanQueue(scripts, keys, 'dead', op.all ? 0 : 3_600_000, Number.MAX_SAFE_INTEGER)).toBe(op.all ? dead.length : 0);
            if (op.all) for (const [eventId] of dead) model.delete(eventId);
          } else if (op.kind === 'obliterate') {
            await obliterateQueue(scripts, keys);
            // Every key of the queue is gone but its tombstone; later results of claims made before are stale.
            expect((await redis.keys(`${keys.meta.slice(0, -':m'.length)}:*`)).filter((k) => !k.endsWith(':gone') && !k.includes(':c:'))).toEqual([]);
            model.clear();
            completed.clear();
            bursts.clear();
            throttled.clear();
            noneReady();
            keyed = false;
            sorterSeen = false;
            paused = false;
          } else {
            const isDead = model.get(op.id)?.state === 'dead';
            expect((await purgeDead(scripts, keys, [op.id], 100)).done).toBe(isDead ? 1 : 0);
            if (isDead) model.delete(op.id);
          }
          await expectRedisToHold(keys, model, ready, completed, beat);
          expect(await client.zrange(keys.readyByPriority, '0', '-1'), 'the priority set, in claim order').toEqual(byPriority());
          expect((await client.zrange(keys.readyAging, '0', '-1')).sort()).toEqual(byPriority().sort());
          expect(await client.exists(keys.readySeq)).toBe(prioritized.length > 0 ? 1 : 0);
          // A claim reads the flow hash alone to know whether any wait by priority.
          expect(await client.hexists(keys.flow, 'rq')).toBe(prioritized.length > 0 ? 1 : 0);
          expect(await client.lrange(`${keys.newer}:3`, 0, -1)).toEqual(parked);
          const base = keys.meta.slice(0, -':m'.length);
          expect(await client.lrange(`${base}:ring`, 0, -1)).toEqual(ring);
          for (const key of ['x', 'y']) expect(await client.lrange(`${base}:kq:${key}`, 0, -1)).toEqual(lists.get(key) ?? []);
          expect(await client.exists(keys.newer)).toBe(parked.length > 0 ? 1 : 0);
          // The claim reads the queue's flow hash alone to know whether any wait for a newer version.
          expect(await client.hexists(`${keys.meta.slice(0, -':m'.length)}:fc`, 'v')).toBe(parked.length > 0 ? 1 : 0);
        }
        await client.del(keys.paused);
      }
    };
    await fc.assert(fc.asyncProperty(fc.array(operation, { minLength: 5, maxLength: 40, size: 'medium' }), property), { numRuns: 150 });
    // Since 0.6, the windows: mostly enqueues with one, and the transitions that settle what they stored or held.
    await fc.assert(fc.asyncProperty(fc.array(windowsOperation, { minLength: 5, maxLength: 40, size: 'medium' }), property), { numRuns: 100 });

    async function expectRedisToHold(keys: TypeKeys, model: Map<string, Modelled>, ready: string[], completed: ReadonlySet<string>, beat: ReadonlyMap<number, string>): Promise<void> {
      const ids = (state: State) =>
        [...model]
          .filter(([, m]) => m.state === state)
          .map(([eventId]) => eventId)
          .sort();
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
        const body = bodyOf(m);
        expect({ id: eventId, body: envelopes[eventId]!.slice(-body.length - 1) }).toEqual({ id: eventId, body: `|${body}` });
      }
      for (const erred of await client.hkeys(keys.errors)) expect(model.has(erred)).toBe(true);
      // The error log goes with the event, and keeps ten failures at most.
      for (const [logged, log] of Object.entries(await client.hgetall(keys.errorLog))) {
        expect(model.has(logged)).toBe(true);
        expect((JSON.parse(log) as unknown[]).length).toBeLessThanOrEqual(10);
      }
      // The history: only ids a current success completed, at most KEPT, its index and records the same ids.
      const kept = await client.zrange(keys.handledIndex, '0', '-1');
      expect(kept.length).toBe(Math.min(KEPT, completed.size));
      for (const k of kept) expect(completed.has(k)).toBe(true);
      expect((await client.hkeys(keys.handled)).sort()).toEqual([...kept].sort());
      // Each lease is its claim's, started or not as the model says.
      for (const [eventId, m] of model) {
        if (m.state !== 'inFlight') continue;
        const score = Number(await client.zscore(keys.inFlight, eventId));
        expect({ id: eventId, claim: score - (score % 2), started: score % 2 === 1 }).toEqual({ id: eventId, claim: m.claim, started: m.started });
      }
      // A current claim's heartbeat entry is there as the model says; others may wait to lapse, ending nothing.
      const beats = new Map<string, number>();
      const entries = await client.zrange(keys.heartbeats, '0', '-1', 'WITHSCORES');
      for (let i = 0; i < entries.length; i += 2) beats.set(entries[i]!, Number(entries[i + 1]));
      const now = Date.now();
      for (const [eventId, m] of model) {
        if (m.state !== 'inFlight') continue;
        const lapses = beats.get(String(m.claim));
        const seen = lapses === undefined ? undefined : lapses <= now ? 'lapsed' : 'alive';
        expect({ id: eventId, heartbeat: seen }).toEqual({ id: eventId, heartbeat: beat.get(m.claim!) });
      }
    }
  }, 180_000);
});
