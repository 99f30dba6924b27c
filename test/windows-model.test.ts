import { describe, expect, it } from 'vitest';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

interface Call {
  readonly n: number;
  readonly dueAt: number;
  readonly burstStartedAt: number;
  readonly startedAt: number;
  endedAt: number;
}

const DELAY_MS = 100;
const MAX_WAIT_MS = 300;
const SENTINEL = 999_999;
/** In how many states an id is, read in one script: the ready list, the leases, the schedule's buckets, the side schedule. */
const PLACES = `
local n = 0
if redis.call('LPOS', KEYS[1], ARGV[1]) then n = n + 1 end
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then n = n + 1 end
for _, bucket in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if redis.call('ZSCORE', KEYS[3] .. ':' .. bucket, ARGV[1]) then n = n + 1 end
end
if redis.call('ZSCORE', KEYS[4], ARGV[1]) then n = n + 1 end
return n`;

/**
 * Debounce on one id, from producers in three processes at once (since 0.6):
 * the calls that result, against what the producers were told. Handlers run
 * in two services, each call taking 0 to 40 ms, so bursts straddle calls.
 */
describe('debounce under concurrent producers', () => {
  const redis = useRedis();

  async function run(mode: 'trailing' | 'leading') {
    const prefix = redis.prefix();
    const calls: Call[] = [];
    const handler = async (e: WorkItem, _c: unknown, d: { readonly dueAt: number; readonly enqueuedAt: number }) => {
      const call: Call = { n: e.n, dueAt: d.dueAt, burstStartedAt: d.enqueuedAt, startedAt: Date.now(), endedAt: 0 };
      calls.push(call);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 40));
      call.endedAt = Date.now();
      return true;
    };
    const services = [redis.service({ prefix, pollIntervalMs: 100 }), redis.service({ prefix, pollIntervalMs: 100 })];
    for (const s of services) s.addHandler(WorkItem, handler, 4);
    const env = { ...redis.workerEnv(), PREFIX: prefix, MODE: mode, COUNT: '60', DELAY_MS: String(DELAY_MS), MAX_WAIT_MS: String(MAX_WAIT_MS), GAP_MS: '20' };
    const producers = [0, 1, 2].map((p) => new Worker({ ...env, PRODUCER: String(p) }, 'burst-producer.ts'));
    const sentAt = new Map<number, number>();
    // While they run, the id is in one state at most: scheduled (a bucket or the side schedule), ready or in flight.
    const base = `${prefix}:{test.work}`;
    const client = redis.client();
    const places: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) places.push(Number(await client.eval(PLACES, 4, `${base}:r`, `${base}:f`, `${base}:b`, `${base}:s`, 'hot')));
    })();
    try {
      await Promise.all(producers.map((w) => w.waitForLine((l) => l.ready === true)));
      const started = Date.now();
      await Promise.all(producers.map((w) => w.waitForLine((l) => l.done === true, 60_000)));
      sampling = false;
      await sampler;
      expect(places.length).toBeGreaterThan(10);
      expect(Math.max(...places)).toBeLessThanOrEqual(1);
      // The producers report after each reply: a call may only be relied on from the first send of the run on.
      for (const w of producers) for (const l of w.lines) if (typeof l.enqueued === 'number') sentAt.set(l.enqueued, started);
      // The last enqueue of all, made once every producer is done: the final call carries it.
      const last = await services[0]!.enqueue(new WorkItem('hot', SENTINEL), DELAY_MS, { debounce: { maxWaitMs: MAX_WAIT_MS, ...(mode === 'leading' ? { leading: true } : {}) } });
      const lastSent = Date.now();
      await waitFor(() => calls.some((c) => c.n === SENTINEL && c.endedAt > 0), 'the last payload handled', 20_000);
      await waitFor(async () => (await services[0]!.find(WorkItem, 'hot')) === undefined && calls.every((c) => c.endedAt > 0), 'nothing left stored or running', 20_000);
      const statuses = producers.flatMap((w) => w.lines.filter((l) => typeof l.enqueued === 'number').map((l) => String(l.status)));
      statuses.push(last);
      expect(statuses).toHaveLength(181);
      expect(new Set(statuses)).toEqual(new Set(['scheduled', 'debounced']));

      // Every call ran a payload someone enqueued, once, and no call was due later than its burst's bound.
      const enqueued = new Set([...sentAt.keys(), SENTINEL]);
      expect(calls.every((c) => enqueued.has(c.n))).toBe(true);
      expect(new Set(calls.map((c) => c.n)).size).toBe(calls.length);
      for (const c of calls) expect(c.dueAt - c.burstStartedAt, `call of ${c.n}`).toBeLessThanOrEqual(MAX_WAIT_MS);
      // The last payload of the last burst ran, last, after its enqueue: no burst lost.
      const byStart = [...calls].sort((a, b) => a.startedAt - b.startedAt);
      expect(byStart.at(-1)!.n).toBe(SENTINEL);
      expect(byStart.at(-1)!.startedAt).toBeGreaterThanOrEqual(lastSent - 5);
      if (mode === 'trailing') {
        // Each 'scheduled' stored one event, run once (one waiting, scheduled or READY, takes a later payload in its
        // place); each 'debounced' folded into a waiting one: no more calls, no fewer.
        expect(calls).toHaveLength(statuses.filter((s) => s === 'scheduled').length);
      } else {
        // Leading: never two calls of the id at once, and at least one call per burst's first enqueue.
        for (let i = 1; i < byStart.length; i++) expect(byStart[i]!.startedAt, `call ${i} started before call ${i - 1} ended`).toBeGreaterThanOrEqual(byStart[i - 1]!.endedAt);
        expect(calls.length).toBeGreaterThanOrEqual(statuses.filter((s) => s === 'scheduled').length);
      }
      // Bursts were bounded: with producers busy for far longer than maxWaitMs, several calls ran while they went on.
      expect(calls.length).toBeGreaterThan(2);
    } finally {
      sampling = false;
      await Promise.all(producers.map((w) => w.kill()));
    }
  }

  it('trailing: one call per event stored, each with the burst last payload, none due past maxWaitMs, the last enqueue handled last', async () => {
    await run('trailing');
  }, 90_000);

  it('leading + trailing: never two calls at once, none due past maxWaitMs, the last enqueue handled last', async () => {
    await run('leading');
  }, 90_000);
});
