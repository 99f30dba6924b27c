import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './redis-client';
import type { RedisLayout } from './redis-layout';
import { type EventTypeInfo, MAX_PARTITIONS } from './stored-types';

const SCAN_COUNT = 1_000;

/**
 * Every type with stored events, registered groups, recurring schedules or a
 * pause under the prefix: SCAN over every master (never KEYS), for the keys
 * only a type in use has (`:m`, `:groups`, `:p`), parsing their hash tag; and
 * the index of the types with recurring schedules, with how many each has.
 */
export async function scanTypes(client: RedisClient, layout: RedisLayout): Promise<EventTypeInfo[]> {
  const tags = new Map<string, Set<string>>(); // tag -> which of m, groups, p, hi it has
  for (const master of await masters(client)) {
    let cursor = '0';
    do {
      const [next, keys] = await master.scan(cursor, 'MATCH', layout.typeKeysPattern, 'COUNT', SCAN_COUNT);
      cursor = next;
      for (const key of keys) {
        const found = layout.typeKeyOf(key);
        if (!found) continue;
        const seen = tags.get(found.tag) ?? new Set<string>();
        seen.add(found.kind);
        tags.set(found.tag, seen);
      }
    } while (cursor !== '0');
  }
  const byType = new Map<string, { partitions: Set<number>; unpartitioned: boolean; groupTags: string[]; pausedTags: Set<string>; declared?: number }>();
  for (const [tag, kinds] of tags) {
    const hash = tag.lastIndexOf('#');
    const type = hash < 0 ? tag : tag.slice(0, hash);
    const partition = hash < 0 ? undefined : Number(tag.slice(hash + 1));
    if (type.length === 0 || (partition !== undefined && !(Number.isInteger(partition) && partition >= 0 && partition < MAX_PARTITIONS))) continue;
    const info = byType.get(type) ?? { partitions: new Set<number>(), unpartitioned: false, groupTags: [], pausedTags: new Set<string>() };
    if (partition === undefined) info.unpartitioned = true;
    else info.partitions.add(partition);
    if (kinds.has('groups')) info.groupTags.push(tag);
    if (kinds.has('p')) info.pausedTags.add(tag);
    byType.set(type, info);
  }
  // Types with recurring schedules, by the index every schedule() writes: one with nothing stored yet is a type in use too.
  const withSchedules = new Map<string, number>();
  for (const [type, partitions] of Object.entries(await client.hgetall(layout.recurringIndex))) {
    const route = { type, partitions: Number(partitions) };
    if (!Number.isInteger(route.partitions) || route.partitions < 1 || route.partitions > MAX_PARTITIONS) continue;
    const count = await client.hlen(layout.recurringOf(route).recurring);
    if (count === 0) continue;
    withSchedules.set(type, count);
    if (!byType.has(type)) {
      const partitionSet = new Set<number>(route.partitions === 1 ? [] : [0]);
      byType.set(type, { partitions: partitionSet, unpartitioned: route.partitions === 1, groupTags: [], pausedTags: new Set<string>(), declared: route.partitions });
    }
  }
  const found = await Promise.all(
    [...byType].map(async ([type, info]): Promise<EventTypeInfo> => {
      const partitions = info.declared ?? (info.unpartitioned || info.partitions.size === 0 ? 1 : Math.max(...info.partitions) + 1);
      const queueTags = partitions === 1 && info.unpartitioned ? [type] : [...info.partitions].map((p) => `${type}#${p}`);
      const groups = new Set<string>();
      const registries = await Promise.all(info.groupTags.map((tag) => client.hkeys(`${layout.prefix}:{${tag}}:groups`)));
      for (const names of registries) for (const name of names) groups.add(name);
      const paused = info.pausedTags.size > 0 && queueTags.length > 0 && queueTags.every((tag) => info.pausedTags.has(tag));
      const schedules = withSchedules.get(type);
      return { type, partitions, groups: [...groups].sort(), paused, ...(schedules ? { schedules } : {}) };
    }),
  );
  return found.sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}

/** The single server, or every master of a Cluster. */
async function masters(client: RedisClient): Promise<Array<Redis | Cluster>> {
  if (!client.isCluster) return [client];
  const cluster = client as Cluster;
  // Before 'ready' the node list still holds startup connections the slot refresh replaces.
  if (cluster.status !== 'ready')
    await new Promise<void>((resolve, reject) => {
      cluster.once('ready', () => resolve());
      cluster.once('end', () => reject(new Error('the cluster connection ended')));
    });
  return cluster.nodes('master');
}
