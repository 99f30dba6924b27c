import { parseEnvelope } from '../core/envelope';
import type { RedisClient } from './redis-client';
import { DEFAULT_GROUP, keyedListKey, newerListKey, type RedisLayout, type TypeKeys } from './redis-layout';
import type { NewerVersionWait } from './stored-types';

/**
 * READY events that wait somewhere other than the ready list: left by
 * readers of an older class version for a newer one (lua/includes/newer-key.lua),
 * or sorted into their key's list (lua/includes/keyed-keys.lua).
 */

function pipelineValues(replies: Array<[Error | null, unknown]> | null): unknown[] {
  return (replies ?? []).map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}

/** The events a queue's readers left for a newer class version, by version. */
export async function newerVersions(client: RedisClient, keys: TypeKeys): Promise<NewerVersionWait[]> {
  const since = await client.hgetall(keys.newer);
  const versions = Object.keys(since);
  if (versions.length === 0) return [];
  const pipeline = client.pipeline();
  for (const version of versions) pipeline.llen(newerListKey(keys, version));
  const lengths = pipelineValues(await pipeline.exec()) as number[];
  return versions.map((version, i) => ({ version: Number(version), events: lengths[i]!, since: Number(since[version]) })).filter((w) => w.events > 0);
}

/** What waits for a newer class version in each group of `queues` (a type's partitions), summed by group and version; `since` the oldest. */
export async function newerVersionWaits(client: RedisClient, layout: RedisLayout, queues: readonly TypeKeys[]): Promise<Array<NewerVersionWait & { readonly group: string }>> {
  const found = new Map<string, NewerVersionWait & { group: string }>();
  for (const queue of queues) {
    const groups = [DEFAULT_GROUP, ...(await client.hkeys(queue.groups)).filter((g) => g !== DEFAULT_GROUP)];
    for (const group of groups) {
      for (const wait of await newerVersions(client, layout.forGroup(queue, group))) {
        const key = `${group}|${wait.version}`;
        const seen = found.get(key);
        found.set(key, seen ? { ...seen, events: seen.events + wait.events, since: Math.min(seen.since, wait.since) } : { ...wait, group });
      }
    }
  }
  return [...found.values()];
}

/**
 * Whether an event, in none of its queue's listed states, waits READY
 * elsewhere: by priority, in its key's list, or in any version's list (upgradeStored may
 * have rewritten its body since it was left there).
 */
export async function waitsForReader(client: RedisClient, keys: TypeKeys, id: string): Promise<boolean> {
  // With a priority (since 0.6): in the priority set beside the ready list (lua/includes/priority.lua).
  if ((await client.zscore(keys.readyByPriority, id)) !== null) return true;
  const key = await client.hget(keys.keyedIds, id);
  if (key !== null && (await client.lpos(keyedListKey(keys, key), id)) !== null) return true;
  const versions = await client.hkeys(keys.newer);
  for (const version of versions) if ((await client.lpos(newerListKey(keys, version), id)) !== null) return true;
  return false;
}

/** How many keys' lists of ready events (HandlerOptions.key) oldestReadyDue looks at. */
const OLDEST_KEYS_READ = 100;

/**
 * When the READY event that has waited longest fell due (ms), or undefined
 * when none waits. The head of the ready list has waited longest of the events
 * in it; events sorted by key left that head earlier, so the heads of their
 * keys' lists (up to OLDEST_KEYS_READ of them) may have waited longer still.
 */
export async function oldestReadyDue(client: RedisClient, keys: TypeKeys, readyHead: string | undefined, waitingKeys: readonly string[]): Promise<number | undefined> {
  const heads = readyHead === undefined ? [] : [readyHead];
  if (waitingKeys.length > 0) {
    const pipeline = client.pipeline();
    for (const key of waitingKeys.slice(0, OLDEST_KEYS_READ)) pipeline.lindex(keyedListKey(keys, key), 0);
    for (const id of pipelineValues(await pipeline.exec())) if (typeof id === 'string') heads.push(id);
  }
  if (heads.length === 0) return undefined;
  const dues = (await client.hmget(keys.meta, ...heads)).filter((h): h is string => h !== null).map((h) => parseEnvelope(h).dueAt);
  return dues.length > 0 ? Math.min(...dues) : undefined;
}
