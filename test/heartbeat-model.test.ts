import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LuaScripts } from '../src/redis/lua-scripts';
import { RedisLayout } from '../src/redis/redis-layout';
import { useRedis } from './support/harness';
import { leasedIds } from './support/leases';

// Heartbeat leases against a model (since 0.6; docs/state-machine.md, "Heartbeats"): few ids, so random
// sequences keep renewing, completing and retrying claims that are current and claims long stale.
const IDS = ['a', 'b', 'c'];
const MAX_ATTEMPTS = 3;

interface Modelled {
  state: 'scheduled' | 'ready' | 'inFlight' | 'dead';
  /** The attempt in flight, or the last one spent. */
  attempt: number;
  /** Scheduled: due now. */
  due: boolean;
  claim?: number;
  started?: boolean;
  /** In flight: its hard lease expired (claimed with a lease already past). */
  expired?: boolean;
  /** Its last expiry was unstarted (the next unstarted one spends the attempt). */
  noted: boolean;
}
interface Delivery {
  readonly id: string;
  readonly claim: number;
}

const id = fc.constantFrom(...IDS);
// Mostly the newest claims (often current), sometimes any earlier one (often stale).
const delivery = fc.oneof(fc.constant(0), fc.constant(1), fc.nat({ max: 20 }));
const operation = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('enqueue' as const), id, replace: fc.boolean(), due: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('dispatch' as const), limit: fc.integer({ min: 1, max: 4 }) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('claim' as const),
      count: fc.integer({ min: 1, max: 3 }),
      startNow: fc.integer({ min: 0, max: 3 }),
      heartbeat: fc.boolean(),
      expired: fc.constantFrom(false, false, false, true),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('renew' as const), deliveries: fc.uniqueArray(delivery, { minLength: 1, maxLength: 3 }), lapse: fc.boolean(), abandon: fc.boolean() }) },
  // A lapsed heartbeat entry of any claim, as a claim ended by a retry, a cancel or a 0.5 instance's script leaves
  // it: it must end only the lease of the claim it names.
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('leftover' as const), delivery }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('start' as const), delivery }) },
  // A call's progress and log line (lua/report-calls.lua, since 0.6): written only for the claim in flight.
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('report' as const), delivery }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('complete' as const), delivery }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('retry' as const), delivery }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), id }) },
);

describe('heartbeat leases (model)', () => {
  const redis = useRedis();

  it('renewals, lapses and shutdown give-ups of current and stale claims change only the claim in flight (property)', async () => {
    const client = redis.client();
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 10, maxLength: 60, size: 'max' }), async (operations) => {
        const layout = new RedisLayout(redis.prefix());
        const keys = layout.forType('test.beat');
        // With outcomes (since 0.6): each settled call's outcome is appended, a stale one's never.
        const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 10_000, onStuck: () => {} }, 0, undefined, undefined, undefined, 1_000);
        const outcomes: string[] = [];
        let streamRead = '0-0';
        const model = new Map<string, Modelled>();
        const deliveries: Delivery[] = [];
        let ready: string[] = [];
        /** Events a current call reported on: their progress and log stay until the event goes. */
        const reported = new Set<string>();
        const deliveryAt = (index: number): Delivery | undefined => deliveries[deliveries.length - 1 - (index % Math.max(1, deliveries.length))];
        const isCurrent = (d: Delivery) => model.get(d.id)?.state === 'inFlight' && model.get(d.id)!.claim === d.claim;
        const leave = (m: Modelled) => Object.assign(m, { claim: undefined, started: undefined, expired: undefined });
        /** Each claim's heartbeat entry, alive or lapsed (one per claim, lua/includes/lease-heartbeat.lua); none without heartbeats. */
        const beat = new Map<number, 'alive' | 'lapsed'>();

        for (const op of operations) {
          if (op.kind === 'enqueue') {
            const stored = model.has(op.id);
            const [status] = await scripts.enqueue(keys, [{ id: op.id, body: '[0,{}]', due: { atMs: op.due ? 1 : Date.now() + 3_600_000 }, requestedAt: 0 }], op.replace);
            expect(status).toBe(stored && !op.replace ? 'duplicate' : stored ? 'replaced' : 'scheduled');
            if (!stored || op.replace) {
              model.set(op.id, { state: 'scheduled', attempt: 0, due: op.due, noted: false });
              // A replace removes the old event whole, its calls' reports too.
              reported.delete(op.id);
              ready = ready.filter((r) => r !== op.id);
            }
          } else if (op.kind === 'dispatch') {
            const dueNow = [...model].filter(([, m]) => m.state === 'scheduled' && m.due).map(([k]) => k);
            // A lease ends when it expires or its heartbeat lapsed.
            const ending = new Set([...model].filter(([, m]) => m.state === 'inFlight' && (m.expired || beat.get(m.claim!) === 'lapsed')).map(([k]) => k));
            const result = await scripts.dispatchDue(keys, op.limit);
            expect(result.movedDue).toBe(Math.min(op.limit, dueNow.length));
            expect(result.movedExpired).toBe(Math.min(op.limit - result.movedDue, ending.size));
            const list = await client.lrange(keys.ready, 0, -1);
            expect(list.slice(0, ready.length)).toEqual(ready);
            for (const moved of list.slice(ready.length)) {
              const m = model.get(moved)!;
              if (m.state === 'inFlight') {
                expect(ending.has(moved)).toBe(true);
                // Unstarted, the attempt is not spent, unless the last expiry was unstarted too.
                if (!m.started && !m.noted) m.attempt -= 1;
                m.noted = !m.started;
              }
              leave(m).state = 'ready';
            }
            ready = list;
          } else if (op.kind === 'claim') {
            const result = await scripts.completeAndClaim(keys, [], op.count, op.expired ? -1_000 : 60_000, MAX_ATTEMPTS, undefined, {
              startNow: op.startNow,
              heartbeatLeaseMs: op.heartbeat ? 60_000 : 0,
            });
            const popped = ready.slice(0, op.count);
            ready = ready.slice(popped.length);
            const expected: Array<{ id: string; attempt: number; started: boolean }> = [];
            for (const p of popped) {
              const m = model.get(p)!;
              if (m.attempt >= MAX_ATTEMPTS) {
                leave(m);
                Object.assign(m, { state: 'dead', noted: false });
                outcomes.push(`dead-lettered:${p}:${m.attempt}`);
              } else expected.push({ id: p, attempt: m.attempt + 1, started: expected.length < op.startNow });
            }
            expect(result.claimed.map((c) => ({ id: c.id, attempt: c.attempt, started: c.started }))).toEqual(expected);
            for (const c of result.claimed) {
              Object.assign(model.get(c.id)!, { state: 'inFlight', attempt: c.attempt, claim: c.claim, started: c.started, expired: op.expired });
              if (op.heartbeat) beat.set(c.claim, 'alive');
              deliveries.push({ id: c.id, claim: c.claim });
            }
          } else if (op.kind === 'renew') {
            const asked = [...new Map(op.deliveries.flatMap((i) => (deliveryAt(i) ? [[deliveryAt(i)!.id, deliveryAt(i)!] as const] : []))).values()];
            if (asked.length === 0) continue;
            const reply = await scripts.call('renew-leases', keys, { leaseMs: op.lapse ? -1_000 : 60_000, abandon: op.abandon, events: asked });
            // A stale delivery's renewal (or give-up) changes nothing, and says the lease is lost to it.
            expect(reply.lost).toEqual(asked.flatMap((d, i) => (isCurrent(d) ? [] : [i + 1])));
            for (const d of asked.filter(isCurrent)) {
              const m = model.get(d.id)!;
              if (op.abandon) m.started = false;
              else beat.set(d.claim, op.lapse ? 'lapsed' : 'alive');
            }
          } else if (op.kind === 'leftover') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            await client.zadd(keys.heartbeats, Date.now() - 1_000, String(d.claim));
            // It ends the leases still of that claim; one whose leases all ended is only dropped.
            beat.set(d.claim, 'lapsed');
          } else if (op.kind === 'report') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const m = model.get(d.id);
            const reply = await scripts.call('report-calls', keys, { reports: [{ id: d.id, claim: d.claim, attempt: m?.attempt ?? 0, progress: '1', lines: '["x"]' }] });
            expect(reply.lost).toEqual(isCurrent(d) ? [] : [1]);
            if (isCurrent(d)) {
              expect((await client.hget(keys.progress, d.id))?.split('|')[0]).toBe(String(m!.attempt));
              reported.add(d.id);
            }
          } else if (op.kind === 'start') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            await scripts.completeAndClaim(keys, [], 0, 60_000, MAX_ATTEMPTS, undefined, { started: [d] });
            if (isCurrent(d)) model.get(d.id)!.started = true;
          } else if (op.kind === 'complete') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const current = isCurrent(d);
            const result = await scripts.completeAndClaim(keys, [d], 0, 60_000, MAX_ATTEMPTS, undefined, { heartbeatLeaseMs: 60_000 });
            expect(result.stale).toEqual(current ? [] : [0]);
            if (current) outcomes.push(`handled:${d.id}:${model.get(d.id)!.attempt}`);
            if (current) model.delete(d.id);
            if (current) reported.delete(d.id);
          } else if (op.kind === 'retry') {
            const d = deliveryAt(op.delivery);
            if (!d) continue;
            const current = isCurrent(d);
            expect((await scripts.retry(keys, { ...d, attempt: model.get(d.id)?.attempt ?? 1 }, 0, 'failed')) !== undefined).toBe(current);
            if (current) outcomes.push(`retried:${d.id}:${model.get(d.id)!.attempt}`);
            if (current) Object.assign(leave(model.get(d.id)!), { state: 'scheduled', due: true, noted: false });
          } else {
            const attempt = model.get(op.id)?.attempt;
            expect(await scripts.cancel(keys, op.id)).toBe(model.delete(op.id));
            // A cancel ends the event in every group; its attempt is the last one spent (in flight: the one before).
            if (attempt !== undefined) outcomes.push(`cancelled:${op.id}:*`);
            reported.delete(op.id);
            ready = ready.filter((r) => r !== op.id);
          }

          // Every lease is its claim's, started as the model says; a current claim's heartbeat entry as the model says.
          const inFlight = [...model].filter(([, m]) => m.state === 'inFlight');
          expect((await leasedIds(client, keys.inFlight)).sort()).toEqual(inFlight.map(([k]) => k).sort());
          const beats = new Map<string, number>();
          const entries = await client.zrange(keys.heartbeats, '0', '-1', 'WITHSCORES');
          for (let i = 0; i < entries.length; i += 2) beats.set(entries[i]!, Number(entries[i + 1]));
          const now = Date.now();
          for (const [eventId, m] of inFlight) {
            const score = Number(await client.zscore(keys.inFlight, eventId));
            expect({ id: eventId, claim: score - (score % 2), started: score % 2 === 1 }).toEqual({ id: eventId, claim: m.claim, started: m.started });
            const lapses = beats.get(String(m.claim));
            expect({ id: eventId, heartbeat: lapses === undefined ? undefined : lapses <= now ? 'lapsed' : 'alive' }).toEqual({ id: eventId, heartbeat: beat.get(m.claim!) });
          }
          expect(await client.lrange(keys.ready, 0, -1)).toEqual(ready);
          // The outcomes appended by this step, in order.
          const appended = (await client.xrange(keys.outcomes, `(${streamRead}`, '+')) as Array<[string, string[]]>;
          if (appended.length > 0) streamRead = appended.at(-1)![0];
          expect(appended.map(([, f]) => `${f[5]}:${f[1]}:${f[5] === 'cancelled' ? f[3] : f[7]}`)).toEqual(outcomes.splice(0));
          // Reports stay exactly while their event does.
          expect((await client.hkeys(keys.logs)).sort()).toEqual([...reported].sort());
          expect((await client.hkeys(keys.progress)).sort()).toEqual([...reported].sort());
          // The envelope keeps the attempt before the claim: the lease carries the one running.
          for (const [eventId, m] of model) {
            const envelope = await client.hget(keys.meta, eventId);
            expect({ id: eventId, attempt: Number(envelope?.split('|')[0]) }).toEqual({ id: eventId, attempt: m.state === 'inFlight' ? m.attempt - 1 : m.attempt });
          }
        }
      }),
      { numRuns: 300 },
    );
  }, 180_000);
});
