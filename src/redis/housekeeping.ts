import type { DeadLetterStep, LuaScripts } from './lua-scripts';
import type { RedisClient } from './redis-client';
import { DEFAULT_GROUP, type RedisLayout, type TypeKeys } from './redis-layout';

// The bulk calls on a queue (docs/api.md, "Clean-up"): each script takes a
// bounded step, so that none holds Redis for long however much is stored
// (benchmarks/housekeeping.ts measures them over 1,000,000 events), and is
// called again until it reports that nothing is left.

/** Most events (or schedule buckets) one step takes: 250 holds Redis about half a millisecond with a million stored (benchmarks/README.md). */
export const STEP = 250;

/** Moves dead letters back to scheduled: how many were replayed, and how many were taken (those without an envelope are dropped). */
export function replayDead(scripts: LuaScripts, keys: TypeKeys, ids: readonly string[], limit: number, wakeChannel: string): Promise<DeadLetterStep> {
  return scripts.call('replay-dead', keys, { wakeChannel, wakeTag: keys.tag, most: limit, ids });
}

/** Deletes dead letters (the given ids, or the oldest `limit`). */
export async function purgeDead(scripts: LuaScripts, keys: TypeKeys, ids: readonly string[], limit: number): Promise<DeadLetterStep> {
  const purged = await scripts.call('purge-dead', keys, { most: limit, ids });
  return { done: purged, taken: purged };
}

/** Calls `step` until it takes fewer than STEP (or `limit` is reached); the total. */
async function inSteps(step: (most: number) => Promise<number>, limit = Number.POSITIVE_INFINITY): Promise<number> {
  let total = 0;
  while (total < limit) {
    const most = Math.min(STEP, limit - total);
    const done = await step(most);
    total += done;
    if (done < most) break;
  }
  return total;
}

/** What drainQueue takes besides READY events: a queue's whole schedule, the default group's retries in it, or nothing more. */
export type DrainScope = 'schedule' | 'retries' | 'ready';

/**
 * Removes one group's waiting deliveries of a queue: READY, and what its
 * schedule holds (`schedule`: for the default group the type's own schedule,
 * new events and its retries; for a named group its retries), or only the
 * default group's retries in the type's schedule (`retries`: those that ran
 * before, read a bucket at a time from a rank the script hands back).
 */
export async function drainQueue(scripts: LuaScripts, keys: TypeKeys, scope: DrainScope): Promise<number> {
  let total = 0;
  let from = scope === 'retries' ? 0 : -1;
  for (;;) {
    const { removed, next } = await scripts.call('drain', keys, { most: STEP, withSchedule: scope === 'schedule', retriesFrom: from });
    total += removed;
    from = next;
    if (removed < STEP && next < 0) return total;
  }
}

/** Drops a group's dead letters (or history records) older than `olderThanMs`, oldest first, at most `limit`. */
export function cleanQueue(scripts: LuaScripts, keys: TypeKeys, kind: 'dead' | 'handled', olderThanMs: number, limit: number): Promise<number> {
  return inSteps((most) => scripts.call('clean', keys, { kind, olderThanMs, most }), limit);
}

/** The named groups registered on a queue (its registry; 'default' left out). */
export async function namedGroupsOf(client: RedisClient, keys: TypeKeys): Promise<string[]> {
  return (await client.hkeys(keys.sharedGroups)).filter((group) => group !== DEFAULT_GROUP);
}

/** Whether a queue holds events, groups, a pause, a history or recurring schedules. */
export async function queueHoldsAnything(client: RedisClient, keys: TypeKeys): Promise<boolean> {
  return (await client.exists(keys.meta, keys.groups, keys.paused, keys.handledIndex, keys.recurring, keys.schedule, keys.dead)) > 0;
}

/** Removes every key of a queue, its groups' among them, leaving its tombstone (lua/obliterate.lua). */
export async function obliterateQueue(scripts: LuaScripts, keys: TypeKeys): Promise<void> {
  while ((await scripts.call('obliterate', keys, { most: STEP })) === 1) {
    // One more step: a huge schedule or many keys sorted by key go a thousand at a time.
  }
}

/**
 * What a type keeps outside its queues' slots: its entry in the index of
 * recurring schedules, its partitions setting and its activity counts of the
 * last hour (ten-second slots, named by their start: runtime/activity-log.ts).
 */
export async function obliterateTypeKeys(client: RedisClient, layout: RedisLayout, type: string, activityRetentionMs: number): Promise<void> {
  await client.hdel(layout.recurringIndex, type);
  const now = Math.floor(Date.now() / 10_000) * 10_000;
  const activity: string[] = [];
  // A minute either side of the hour: clocks of other instances may differ a little.
  for (let at = now + 60_000; at >= now - activityRetentionMs - 60_000; at -= 10_000) activity.push(layout.activityKey(type, at));
  await client.unlink(layout.layoutOf(type), ...activity);
}
