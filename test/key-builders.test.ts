import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, expandLua } from '../scripts/embed-lua.mjs';
import { RedisLayout, type TypeKeys, bucketKey, keyedListKey, newerListKey } from '../src/redis/redis-layout';
import { useRedis } from './support/harness';

/**
 * Every key name comes from src/redis/redis-layout.ts. The scripts derive some
 * from the keys they are given (a queue's flow, keyed and newer-version state,
 * a group's keys, a schedule's buckets), with the key builders of lua/includes/:
 * each is run here, in Redis, and must name what RedisLayout names.
 */
describe('the Lua key builders', () => {
  const redis = useRedis();

  const builders = expandLua(
    join(ROOT, 'lua'),
    `-- @include limit-keys
-- @include keyed-keys
-- @include newer-key
-- @include group-keys
-- @include bucket-key
-- @include priority-keys
-- @include priority-marker
-- @include burst-keys
-- @include flow-keys
-- @include flow-results-key
local meta, group, schedule, shared = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local flow, rate_window = limit_keys(meta)
local bursts, burst_ends, throttles = burst_keys(shared)
local waiting, flows, parents, notices = flow_keys(shared)
return cjson.encode({
  waiting = waiting, flows = flows, parents = parents, notices = notices, flow_results = flow_results_key(shared, 'order-7'),
  bursts = bursts, burst_ends = burst_ends, throttles = throttles,
  flow = flow, rate_window = rate_window, newer = newer_key(meta), keyed = keyed_keys(meta),
  group = group_keys(meta, group), bucket = bucket_key(schedule, '1700000000000'),
  priority = priority_keys(meta), marker = priority_marker(shared),
})`,
  );

  async function built(keys: TypeKeys, group: string) {
    const json = (await redis.client().eval(builders, 0, keys.meta, group, keys.schedule, keys.sharedMeta)) as string;
    return JSON.parse(json) as {
      flow: string;
      rate_window: string;
      newer: string;
      keyed: Record<string, string>;
      group: Record<string, string>;
      bucket: string;
      priority: Record<string, string>;
      marker: string;
      bursts: string;
      burst_ends: string;
      throttles: string;
      waiting: string;
      flows: string;
      parents: string;
      notices: string;
      flow_results: string;
    };
  }

  it('name the keys RedisLayout names, for a type, a partition and a named group', async () => {
    const layout = new RedisLayout('app');
    const queues = [layout.forType('orders.created'), layout.forType('orders.created', 3)];
    for (const queue of [...queues, ...queues.map((q) => layout.forGroup(q, 'billing'))]) {
      const lua = await built(queue, 'audit');
      expect(lua.flow, queue.tag).toBe(queue.flow);
      expect(lua.rate_window, queue.tag).toBe(queue.rateWindow);
      expect(lua.newer, queue.tag).toBe(queue.newer);
      expect(lua.bucket, queue.tag).toBe(bucketKey(queue, '1700000000000'));
      expect(lua.keyed, queue.tag).toEqual({
        id_key: queue.keyedIds,
        list: queue.keyedList,
        ring: queue.keyRing,
        waiting: queue.keysWaiting,
        running: queue.keyRunning,
        rate: queue.keyRate,
      });
      expect(lua.priority, queue.tag).toEqual({ queue: queue.readyByPriority, aging: queue.readyAging, seq: queue.readySeq, flow: queue.flow });
      expect(lua.marker, queue.tag).toBe(queue.priorityMarker);
      // The windows' keys (since 0.6) are the queue's, named after the type's meta hash.
      expect([lua.bursts, lua.burst_ends, lua.throttles], queue.tag).toEqual([queue.bursts, queue.burstEnds, queue.throttles]);
      // So are the flows' (since 0.6).
      expect([lua.waiting, lua.flows, lua.parents, lua.notices], queue.tag).toEqual([queue.waiting, queue.flows, queue.parents, queue.notices]);
      expect(lua.flow_results, queue.tag).toBe(`${queue.flowResultsPrefix}order-7`);
      // The scripts append a version or a key to these: the helpers of RedisLayout do the same.
      expect(`${lua.newer}:2`).toBe(newerListKey(queue, 2));
      expect(`${lua.keyed.list}customer-7`).toBe(keyedListKey(queue, 'customer-7'));
    }
    for (const queue of queues) {
      const group = layout.forGroup(queue, 'audit');
      const lua = await built(queue, 'audit');
      expect(lua.group).toEqual({
        meta: group.meta,
        schedule: group.schedule,
        legacy: group.legacySchedule,
        ready: group.ready,
        in_flight: group.inFlight,
        dead: group.dead,
        errors: group.errors,
        error_log: group.errorLog,
        handled: group.handled,
        handled_index: group.handledIndex,
        heartbeats: group.heartbeats,
        progress: group.progress,
        logs: group.logs,
      });
    }
  });
});
