import { Redis } from 'ioredis';
import { loadLua } from '../src/redis/lua-scripts';
import { LUA_SOURCES } from '../src/redis/lua-sources.generated';
import { RedisLayout, type TypeKeys } from '../src/redis/redis-layout';
import { PAYLOAD_S } from './adapters/bench-queue';

/**
 * What one operation of a round-trip-bound row costs below the service, in
 * bare loops of awaited ioredis calls, measured next to our run like the bare
 * round trip (round-trip-floor.ts):
 * - `emptyScript`: a script that only returns, given the arguments our script
 *   gets: the least any script-based design costs per operation with ioredis;
 * - `ourScripts`: our own Lua script for the operation, with none of the
 *   service around it (no codec, batcher, call deadline, reader loop or
 *   handler): the least the service can take without changing its scripts or
 *   its client library.
 * A target below `ourScripts` cannot be met by work on the service's own code.
 */
export type ScriptFloorRow = 'one enqueue at a time' | 'claims at parallelism 1';

export interface ScriptFloor {
  readonly emptyScript: number;
  readonly ourScripts: number;
  /**
   * One enqueue at a time only: the trade the target would take. A flat
   * schedule, one sorted set as the peers keep theirs, instead of our small
   * buckets: µs per call of such a script (Redis's clock, the idempotency
   * check and the store as ours, then one ZADD), and bytes of Redis memory per
   * pending event stored by it and by our script in the same loops.
   */
  readonly flatSchedule?: { readonly micros: number; readonly bytes: number; readonly ourBytes: number };
}

/**
 * Our enqueue of one new event with the schedule as one sorted set: what the
 * bucket lookup and room check of lua/enqueue.lua cost, and what they save.
 * KEYS[1] meta hash, KEYS[2] schedule zset, KEYS[3] recent zset; ARGV as our
 * plain enqueue's (id, body and '+<delay>' in ARGV[5..7]). Not the service's:
 * a measurement of the design it did not take.
 */
const FLAT_SCHEDULE_ENQUEUE = `
local t = redis.call('TIME')
local due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(string.sub(ARGV[7], 2))
if redis.call('ZSCORE', KEYS[3], ARGV[5]) then return 0 end
local printed = string.format('%d', due)
if redis.call('HSETNX', KEYS[1], ARGV[5], '0|' .. printed .. '|' .. ARGV[6]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], printed, ARGV[5])
return 1`;

async function usedMemory(redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))![1]);
}

const body = (n: number) => JSON.stringify([Date.now(), { n, s: PAYLOAD_S }]);

async function microsPerCall(count: number, call: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < count; i++) await call();
  return ((performance.now() - started) * 1_000) / count;
}

export async function scriptFloorMicros(port: number, row: ScriptFloorRow, count: number): Promise<ScriptFloor> {
  const redis = new Redis(port, '127.0.0.1');
  // A prefix of its own: nothing the libraries' runs read or write.
  const prefix = `script-floor-${Date.now()}`;
  const keys = new RedisLayout(prefix).forType('bench.event');
  const sha = async (lua: string) => (await redis.script('LOAD', lua)) as string;
  const emptySha = await sha('return 1');
  const enqueueSha = await sha(loadLua('enqueue').lua);
  // The keys and arguments LuaScripts sends (src/redis/lua-scripts.ts): each script's keys as its header names them,
  // its arguments through the generated encoder, so the floor is measured on the scripts as run.
  const fields = keys as unknown as Record<string, string>;
  const keysOf = (name: 'enqueue' | 'dispatch-due' | 'complete-and-claim') => loadLua(name).keys.map((key) => (key === 'claimLog' ? `${keys.claimLogPrefix}floor` : fields[key]!));
  const enqueueKeys = keysOf('enqueue');
  const enqueueArgs = (ids: readonly number[], due: string) =>
    LUA_SOURCES.enqueue.encode({ mode: '', modeMs: 0, wakeChannel: `${keys.tag}:nobody-listens`, wakeTag: keys.tag, events: ids.map((n) => ({ id: `${n}`, body: body(n), due })) }, [...enqueueKeys]);
  // The four keys a plain enqueue names for one event at a time: its first four.
  const plainArgs = (layout: TypeKeys, n: number) =>
    LUA_SOURCES.enqueue.encode({ mode: '', modeMs: 0, wakeChannel: `${layout.tag}:nobody-listens`, wakeTag: layout.tag, events: [{ id: `${n}`, body: body(n), due: '+60000' }] }, [
      layout.meta,
      layout.schedule,
      layout.recent,
      layout.slotGuard,
    ]);
  const claimKeys = keysOf('complete-and-claim');
  // One event claimed at a time and started at once; no history kept; any class version; not sorted by key;
  // the success of the event claimed before completes in the same call.
  const claimArgs = (successes: ReadonlyArray<{ id: string; claim: number }>) =>
    LUA_SOURCES['complete-and-claim'].encode(
      {
        most: 1,
        leaseMs: 60_000,
        maxAttempts: 10,
        windowMs: 300_000,
        token: 'floor',
        startNow: 1,
        keepCount: 0,
        keepAge: 0,
        maxVersion: 1_000_000,
        sortsByKey: false,
        agingMs: 60_000,
        heartbeatLeaseMs: 0,
        outcomesMaxLen: 0,
        started: [],
        confirmations: [],
        successes,
        results: [],
      },
      [...claimKeys],
    );
  try {
    if (row === 'one enqueue at a time') {
      let n = 0;
      const emptyScript = await microsPerCall(count, () => redis.evalsha(emptySha, 4, ...plainArgs(keys, n++)));
      n = 0;
      const before = await usedMemory(redis);
      const ourScripts = await microsPerCall(count, () => redis.evalsha(enqueueSha, 4, ...plainArgs(keys, n++)));
      const ourBytes = ((await usedMemory(redis)) - before) / count;
      const flatKeys = new RedisLayout(`${prefix}-flat`).forType('bench.event');
      const flatSha = await sha(FLAT_SCHEDULE_ENQUEUE);
      n = 0;
      const flatBefore = await usedMemory(redis);
      const flat = await microsPerCall(count, () => redis.evalsha(flatSha, 4, ...plainArgs(flatKeys, n++)));
      const flatBytes = ((await usedMemory(redis)) - flatBefore) / count;
      return { emptyScript, ourScripts, flatSchedule: { micros: flat, bytes: flatBytes, ourBytes } };
    }
    // As the reader calls it with one slot: complete the event handled before, claim the next.
    const emptyScript = await microsPerCall(count, () => redis.evalsha(emptySha, claimKeys.length, ...claimArgs([{ id: 'some-id', claim: 1 }])));
    // Ready events, moved there by our own scripts: enqueued due now, then dispatched.
    for (let from = 0; from < count; from += 250) {
      await redis.evalsha(
        enqueueSha,
        enqueueKeys.length,
        ...enqueueArgs(
          Array.from({ length: Math.min(250, count - from) }, (_, i) => from + i),
          '+0',
        ),
      );
    }
    const dispatchSha = await sha(loadLua('dispatch-due').lua);
    for (let moved = 0; moved < count; ) {
      const dispatchKeys = keysOf('dispatch-due');
      const dispatchArgs = { limit: 1_000, defaultHere: false, newMarker: '', wakeChannel: '', queueTag: keys.tag, markerSeen: false, keepAgeMs: 0, keepDeadCount: 0, keepDeadAge: 0, groups: [] };
      const [due] = (await redis.evalsha(dispatchSha, dispatchKeys.length, ...LUA_SOURCES['dispatch-due'].encode(dispatchArgs, [...dispatchKeys]))) as number[];
      if (!due) throw new Error(`script floor: only ${moved} of ${count} events became ready`);
      moved += due;
    }
    const claimSha = await sha(loadLua('complete-and-claim').lua);
    let previous: Array<{ id: string; claim: number }> = [];
    let claimed = 0;
    const ourScripts = await microsPerCall(count + 1, async () => {
      const reply = LUA_SOURCES['complete-and-claim'].decode(await redis.evalsha(claimSha, claimKeys.length, ...claimArgs(previous)));
      previous = [];
      if (reply.claimed.length > 0) {
        // The next call completes it, named by its claim.
        previous = [{ id: reply.claimed[0]!, claim: Number(reply.claimScore) }];
        claimed++;
      }
    });
    if (claimed !== count) throw new Error(`script floor: claimed ${claimed} of ${count} events`);
    return { emptyScript, ourScripts };
  } finally {
    // The schedule's buckets are keys of their own: remove everything under the prefix.
    for (let cursor = '0'; ; ) {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1_000);
      if (found.length > 0) await redis.unlink(...found);
      cursor = next;
      if (cursor === '0') break;
    }
    redis.disconnect();
  }
}
